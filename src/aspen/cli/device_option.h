// The --device option shared by the model commands (generate, logprobs) and the benches:
// cpu | cuda | cuda:N, resolved through parallel/device.h (a missing GPU is an error
// naming --device).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "aspen/cli/imports.h"

namespace aspen::cli {

inline CLI::Option* add_device_option(CLI::App* command, std::string& device) {
  return command->add_option("--device", device, "where the model runs: cpu, cuda or cuda:N")
      ->capture_default_str();
}

}  // namespace aspen::cli
