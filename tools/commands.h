// Registry of CLI subcommands. Each cmd_<name>.cpp defines `Command make_<name>_command()` and is listed
// in commands.cpp; attach() adds the subcommand and its options, and runs it from a parse callback.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "deepinfer/engine.h"
#include <vector>

namespace deepinfer::cli {

struct Command {
    std::function<void(CLI::App& app, int* exit_code)> attach;
};

std::vector<Command> all_commands();

// The engine options shared by generate, serve and bench (defined in cmd_generate.cpp).
void add_engine_options(CLI::App* sub, EngineConfig* config);

// The long names ("--name") of those of `options` given on the command line, comma-separated ("" if none): for a
// mode of a subcommand that refuses options it would not read rather than ignore them.
std::string given_option_names(const std::vector<const CLI::Option*>& options);


}  // namespace deepinfer::cli
