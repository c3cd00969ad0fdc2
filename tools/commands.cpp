// The list of subcommands, in `--help` order.
#include "tools/commands.h"

namespace deepinfer::cli {

Command make_generate_command();
Command make_serve_command();
Command make_bench_command();
Command make_make_tiny_command();
Command make_inspect_command();
Command make_draft_command();
Command make_bench_decode_command();
Command make_tokenize_command();
Command make_detokenize_command();
Command make_render_prompt_command();
Command make_make_tokenizer_command();
Command make_engram_map_command();
Command make_bench_comm_command();
Command make_version_command();
Command make_bench_ops_command();

std::string given_option_names(const std::vector<const CLI::Option*>& options) {
    std::string names;
    for (const CLI::Option* opt : options)
        if (opt->count() > 0 && !opt->get_lnames().empty())
            names += (names.empty() ? "--" : ", --") + opt->get_lnames().front();
    return names;
}

std::vector<Command> all_commands() {
    return {make_generate_command(),     make_serve_command(),        make_bench_command(),
            make_make_tiny_command(),    make_inspect_command(),      make_draft_command(),
            make_tokenize_command(),     make_detokenize_command(),   make_render_prompt_command(),
            make_make_tokenizer_command(), make_engram_map_command(), make_bench_ops_command(),
            make_bench_decode_command(), make_bench_comm_command(),   make_version_command()};
}

}  // namespace deepinfer::cli
