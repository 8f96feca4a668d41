// Subcommand registry. A command file defines a setup function that adds its
// CLI11 subcommand to the root app and attaches an action with on_run(), and
// registers the setup with ASPEN_REGISTER_COMMAND at namespace scope (its own namespace,
// aspen::cli::<file>: the CLI is a unity build). CLI sources
// are compiled straight into the executable (not an archive), so every
// registration is linked. Benchmarks hang under `aspen bench` via bench_group().
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

#include "aspen/cli/imports.h"

namespace aspen::cli {

// Returns the process exit status.
using CommandAction = std::function<int()>;
using CommandSetup = std::function<void(CLI::App& root)>;

// `order` sorts commands in --help; ties keep registration order.
bool register_command(int order, CommandSetup setup);
// Runs `action` when `command` is the deepest selected subcommand.
void on_run(CLI::App* command, CommandAction action);
// The `aspen bench` group (created on first use).
CLI::App& bench_group(CLI::App& root);

void register_all_commands(CLI::App& root);
// Runs the action of the deepest selected subcommand; returns the exit status.
int run_selected_command(CLI::App& root);

}  // namespace aspen::cli

#define ASPEN_CONCAT_INNER(a, b) a##b
#define ASPEN_CONCAT(a, b) ASPEN_CONCAT_INNER(a, b)
#define ASPEN_REGISTER_COMMAND(order, setup)                                  \
  static const bool ASPEN_CONCAT(aspen_registered_command_, __LINE__) = \
      ::aspen::cli::register_command(order, setup)
