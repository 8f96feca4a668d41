// How much memory a rollout engine's KV cache gets: a fixed budget in MiB, or, as
// vLLM's gpu_memory_utilization does it, a fraction of the memory still free once the
// model is loaded, so one setting fits a 0.6B and a 7B model on the same machine.
//   cpu:  MemAvailable of /proc/meminfo (what the kernel can hand out without swapping)
//   cuda: the device's free memory (cudaMemGetInfo)
// Exactly one of the two is set. Errors: aspen::Error naming `where` (the option) for
// a fraction outside (0, 0.95], both or neither given, a budget in MiB above the
// device's free memory, or a budget too small for one KV block.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>

#include "aspen/rollout/imports.h"

namespace aspen::rollout {

struct KvCacheBudget {
  int64_t mb = 0;         // > 0: this many MiB
  double fraction = 0.0;  // > 0: this share of the free memory
};

// Memory free for new allocations on `device`, in bytes.
int64_t free_memory_bytes(const torch::Device& device);

// The KV cache's size in bytes for `budget` on `device`.
int64_t kv_cache_bytes(const KvCacheBudget& budget, const torch::Device& device,
                       const std::string& where);

}  // namespace aspen::rollout
