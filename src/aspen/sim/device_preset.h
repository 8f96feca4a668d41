// DevicePreset: one accelerator (or this machine's CPU) as the simulator's roofline
// sees it. The numbers of each preset and their sources are in docs/simulate.md; the
// efficiency factors are assumptions stated there, overridable per run (simulate.*).
//
//   peak_flops              dense bf16 FLOP/s (no sparsity)
//   memory_bandwidth        bytes/s of device memory
//   memory_bytes            device memory
//   link_bandwidth          bytes/s per device inside a node (NVLink, HCCS), one way
//   network_bandwidth       bytes/s per device across nodes (InfiniBand, RoCE), one way
//   devices_per_node
//   train_mfu               achieved fraction of peak_flops in training and in the
//                           trainer's forward passes (log-probs)
//   prefill_mfu             achieved fraction of peak_flops in rollout prefill
//   decode_bandwidth_efficiency  achieved fraction of memory_bandwidth in decode
//   step_overhead_s         fixed seconds per rollout engine step (scheduling,
//                           sampling, kernel launches)
//   token_overhead_s        seconds per scheduled token of an engine step beyond the
//                           roofline (per-sequence bookkeeping; calibrated on CPU)
//   collective_latency_s    fixed seconds per collective (all-reduce, gather)
// Thread safety: pure. Errors: aspen::Error naming simulate.device for an unknown name.
#pragma once

#include <string>
#include <vector>

#include "aspen/sim/imports.h"

namespace aspen::sim {

struct DevicePreset {
  std::string name;
  double peak_flops = 0;
  double memory_bandwidth = 0;
  double memory_bytes = 0;
  double link_bandwidth = 0;
  double network_bandwidth = 0;
  int devices_per_node = 8;
  double train_mfu = 0.4;
  double prefill_mfu = 0.5;
  double decode_bandwidth_efficiency = 0.7;
  double step_overhead_s = 0;
  double token_overhead_s = 0;
  double collective_latency_s = 20e-6;
  // false: a calibrated device whose step and token costs ARE the measured ones (no
  // FLOP or byte term; simulation_spec.h's calibration).
  bool roofline = true;
};

// "h100" | "h200" | "ascend_910b" | "cpu" (this 2-core machine; its step costs come
// from aspen bench figures, see docs/simulate.md).
DevicePreset device_preset(const std::string& name);
const std::vector<std::string>& device_preset_names();

}  // namespace aspen::sim
