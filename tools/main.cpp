// The `deepinfer` command line: one binary, one subcommand per cmd_<name>.cpp (see tools/commands.h).
#include <CLI/CLI.hpp>

#include <malloc.h>

#include <cstdio>

#include "tools/commands.h"

int main(int argc, char** argv) {
    // Keep large allocations in the heap: a prefill chunk allocates activation buffers of tens of MB per layer
    // (q alone is 512 rows x 32768 bf16 = 32 MB at the released dims). Above glibc's mmap threshold each would
    // be a fresh mapping, page-faulted and zeroed by the kernel on first touch (clear_page was 8.5% of a
    // prefill profile). Measured (`bench-decode --model <released dims> --context 2048 --steps 1`, alternating
    // with the build before, first run of each batch left out): minor page faults 486k -> 195k, system time
    // 1.33-1.48 -> 0.79-0.91 s, wall 14.4-14.7 -> 13.7-14.3 s, peak RSS unchanged. Up to 1 GiB of freed heap is
    // kept for reuse rather than returned. (Weights and packed copies are mmap'd directly.)
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    CLI::App app{"deepinfer: inference engine for DeepSeek-V4.1-Flash"};
    app.require_subcommand(1);
    app.set_help_all_flag("--help-all", "Help for every subcommand");
    std::vector<deepinfer::cli::Command> commands = deepinfer::cli::all_commands();
    int exit_code = 0;
    for (auto& command : commands) command.attach(app, &exit_code);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    return exit_code;
}
