// The `deepinfer` command line: one binary, one subcommand per cmd_<name>.cpp (see tools/commands.h).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "tools/commands.h"

int main(int argc, char** argv) {
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
