// The KV cache options of the commands that generate (generate, serve): --kv-cache-mb
// or --kv-cache-fraction (rollout/kv_budget.h), never both.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>

#include "aspen/cli/imports.h"
#include "aspen/rollout/kv_budget.h"

namespace aspen::cli {

inline void add_kv_cache_options(CLI::App* command, int64_t& mb, std::optional<double>& fraction) {
  command->add_option("--kv-cache-mb", mb, "KV cache budget in MiB, at most the free memory")
      ->capture_default_str();
  command
      ->add_option("--kv-cache-fraction", fraction,
                   "KV cache as a share of the memory free after loading the model (0, 0.95]")
      ->excludes("--kv-cache-mb");
}

// The bytes the options give, measured on `device` after the model is loaded.
inline int64_t kv_cache_bytes_of(int64_t mb, const std::optional<double>& fraction,
                                 const torch::Device& device) {
  return fraction ? kv_cache_bytes({0, *fraction}, device, "--kv-cache-fraction")
                  : kv_cache_bytes({mb, 0.0}, device, "--kv-cache-mb");
}

}  // namespace aspen::cli
