#include "aspen/sim/device_preset.h"

#include "aspen/sim/imports.h"
#include "aspen/util/error.h"

namespace aspen::sim {
namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;

DevicePreset hopper(const std::string& name, double memory_gb, double bandwidth_tbs) {
  DevicePreset d;
  d.name = name;
  d.peak_flops = 989.4 * kTera;  // dense BF16 tensor core, SXM
  d.memory_bandwidth = bandwidth_tbs * kTera;
  d.memory_bytes = memory_gb * kGiga;
  d.link_bandwidth = 450 * kGiga;    // NVLink 4: 900 GB/s both ways
  d.network_bandwidth = 50 * kGiga;  // one 400 Gb/s NDR InfiniBand NIC per GPU
  d.devices_per_node = 8;
  d.train_mfu = 0.4;
  d.prefill_mfu = 0.5;
  d.decode_bandwidth_efficiency = 0.7;
  d.step_overhead_s = 2e-3;  // scheduling, sampling, launches of one vLLM-style step
  return d;
}

}  // namespace

DevicePreset device_preset(const std::string& name) {
  if (name == "h100") return hopper("h100", 80, 3.35);
  if (name == "h200") return hopper("h200", 141, 4.8);
  if (name == "ascend_910b") {
    DevicePreset d;
    d.name = name;
    d.peak_flops = 313 * kTera;  // 910B3 FP16/BF16 cube
    d.memory_bandwidth = 1.6 * kTera;
    d.memory_bytes = 64 * kGiga;
    d.link_bandwidth = 196 * kGiga;   // HCCS full mesh, 392 GB/s both ways
    d.network_bandwidth = 25 * kGiga;  // one 200 GbE RoCE port per NPU
    d.devices_per_node = 8;
    d.train_mfu = 0.35;
    d.prefill_mfu = 0.4;
    d.decode_bandwidth_efficiency = 0.55;
    d.step_overhead_s = 4e-3;
    return d;
  }
  if (name == "cpu") {
    // This machine, one core per device (a rollout instance or trainer thread), from
    // docs/benchmarks.md: the bf16 GEMM peak of one core (992.8 GFLOP/s, AMX) and the
    // MFU the bf16 actor update reaches on it (10.2%, aspen bench train --threads 1);
    // half of the ~30 GB/s machine bandwidth of issue 15's decode roofline. A recorded
    // bench (simulate.calibration) replaces the step and token costs with its own fit.
    DevicePreset d;
    d.name = name;
    d.peak_flops = 992.8e9;
    d.memory_bandwidth = 15 * kGiga;
    d.memory_bytes = 12 * kGiga;
    d.link_bandwidth = 5 * kGiga;
    d.network_bandwidth = 5 * kGiga;
    d.devices_per_node = 2;
    d.train_mfu = 0.10;
    d.prefill_mfu = 0.10;
    d.decode_bandwidth_efficiency = 0.5;
    d.step_overhead_s = 4.2e-4;  // the calibrated per-step cost of docs/simulate.md
    d.token_overhead_s = 1.5e-4;
    d.collective_latency_s = 50e-6;
    return d;
  }
  std::string known;
  for (const std::string& preset : device_preset_names()) known += (known.empty() ? "" : ", ") + preset;
  throw Error("unknown device preset '" + name + "'", "simulate.device", "one of " + known);
}

const std::vector<std::string>& device_preset_names() {
  static const std::vector<std::string> names = {"h100", "h200", "ascend_910b", "cpu"};
  return names;
}

}  // namespace aspen::sim
