#include "aspen/rollout/kv_budget.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <fstream>
#include <sstream>

#include "aspen/rollout/imports.h"
#include "aspen/util/error.h"

namespace aspen::rollout {

int64_t free_memory_bytes(const torch::Device& device) {
  if (device.is_cuda()) {
    const c10::cuda::CUDAGuard guard(device.index() < 0 ? 0 : device.index());
    size_t free = 0, total = 0;
    check_input(cudaMemGetInfo(&free, &total) == cudaSuccess, "cannot read free memory",
                device.str());
    return static_cast<int64_t>(free);
  }
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  throw Error("no MemAvailable line", "/proc/meminfo");
}

int64_t kv_cache_bytes(const KvCacheBudget& budget, const torch::Device& device,
                       const std::string& where) {
  check_input((budget.mb > 0) != (budget.fraction > 0.0),
              "give the KV cache either in MiB or as a fraction of free memory, one of them",
              where);
  if (budget.mb > 0) {
    // More than is free could never be allocated (and 2^43 MiB or more overflows the
    // byte count): refused, as vLLM refuses a KV cache that does not fit.
    const int64_t free_mb = free_memory_bytes(device) >> 20;
    check_input(budget.mb <= free_mb,
                std::to_string(budget.mb) + " MiB is more than the " + std::to_string(free_mb) +
                    " MiB free on " + device.str(),
                where, "give a smaller budget, or a fraction of the free memory");
    return budget.mb << 20;
  }
  check_input(budget.fraction <= 0.95, "must be in (0, 0.95]: the rest of the process needs memory too",
              where);
  const int64_t bytes = static_cast<int64_t>(budget.fraction * free_memory_bytes(device));
  check_input(bytes >= (1 << 20), "leaves less than 1 MiB for the KV cache", where,
              "free memory first, or give the budget in MiB");
  return bytes;
}

}  // namespace aspen::rollout
