// The `aspen` command. Each subcommand lives in its own file and registers itself
// through cli/command.h; main only parses, dispatches, and turns errors into one
// clear line on stderr and a non-zero exit status.
#include <c10/util/Exception.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/util/allocator_tuning.h"
#include "aspen/util/denormals.h"
#include "aspen/util/error.h"

int main(int argc, char** argv) {
  aspen::keep_freed_memory_for_reuse();  // before the first tensor: see the header
  aspen::set_flush_denormals(true);      // before the first thread: see the header
  CLI::App app{"aspen: reinforcement-learning post-training of LLMs on libtorch", "aspen"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  aspen::cli::register_all_commands(app);
  try {
    app.parse(argc, argv);
    return aspen::cli::run_selected_command(app);
  } catch (const CLI::ParseError& e) {
    // --help, --help-all and --version arrive as ParseErrors that exit 0: CLI11 prints them.
    if (e.get_exit_code() == 0) return app.exit(e);
    // A bad flag is bad input like any other: one line naming it, CLI11's exit code.
    std::string what = e.what();
    for (char& c : what) {
      if (c == '\n') c = ' ';
    }
    const auto selected = app.get_subcommands();
    const std::string command = selected.empty() ? "aspen" : "aspen " + selected.front()->get_name();
    std::fprintf(stderr, "aspen: error: command line: %s (hint: %s --help)\n", what.c_str(),
                 command.c_str());
    return e.get_exit_code();
  } catch (const aspen::Error& e) {
    std::fprintf(stderr, "aspen: error: %s\n", e.what());
    return 1;
  } catch (const c10::Error& e) {
    // A libtorch check that no input validation caught: its message without the C++
    // backtrace, on one line.
    std::string what = e.what_without_backtrace();
    what = what.substr(0, what.find('\n'));
    std::fprintf(stderr, "aspen: error: libtorch: %s\n", what.c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "aspen: error: out of memory: a size in the input (model config, dataset, "
                 "rollout.kv_cache_mb, batch sizes) is larger than this machine can hold\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aspen: error: %s\n", e.what());
    return 1;
  }
}
