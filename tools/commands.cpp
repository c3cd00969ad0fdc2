// The list of subcommands, in `--help` order.
#include "tools/commands.h"

namespace deepinfer::cli {

Command make_version_command();
Command make_bench_ops_command();

std::vector<Command> all_commands() { return {make_version_command(), make_bench_ops_command()}; }

}  // namespace deepinfer::cli
