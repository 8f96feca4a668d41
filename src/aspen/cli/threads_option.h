// The --threads option shared by every command that runs a model (generate, serve,
// eval, logprobs, sft and the benches): torch's and the BLAS library's pools together
// (parallel/compute_threads.h); 0 leaves them as they are.
#pragma once

#include <CLI/CLI.hpp>

#include "aspen/cli/imports.h"

namespace aspen::cli {

inline CLI::Option* add_threads_option(CLI::App* command, int& threads) {
  return command
      ->add_option("--threads", threads, "torch and BLAS threads (0: as they are)")
      ->capture_default_str();
}

}  // namespace aspen::cli
