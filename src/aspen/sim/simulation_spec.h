// From a training config to simulations: the model, device, cluster and workload of
// `aspen simulate` (sim/simulator.h), and the calibration of the cpu device on a
// recorded `aspen bench pipeline` run.
//
// The simulated model: simulate.model (a preset: qwen2.5-7b, qwen2.5-32b,
// qwen3-30b-a3b; a config.json; a model directory), else model.path's config.json, else
// the built-in model's shape.
// The cluster, one device per rank: the placement's training grid and rollout
// instances; a one-process config (world size 1) is its threads: one trainer device
// and pipeline.instances rollout devices. simulate.devices > 0 (disaggregated) gives the
// rollout every device the trainers do not use. The sync side runs on the same devices
// colocated (simulate.baseline: colocated) or on this placement (same); the async side
// needs a disaggregated placement or one process (rollout and training overlap, which
// colocated devices cannot).
// Calibration (simulate.calibration or simulate_bench_pipeline): on the bench's sync
// side, per iteration, a least-squares fit of the instances' busy seconds to
// a steps + b scheduled_tokens and of the trainer's stage seconds to
// c + d packed_tokens; the cpu device then costs a per engine step, b per scheduled
// token, d per trained token and c per update, with no roofline term (those fits ARE
// the measured step costs). The prompt length and the short responses' mean come from
// the same record. Thread safety: pure functions of their arguments.
// Errors: aspen::Error naming the simulate.* key or the bench record's field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "aspen/config/train_config.h"
#include "aspen/io/hf_config.h"
#include "aspen/sim/imports.h"
#include "aspen/sim/simulator.h"

namespace aspen::sim {

ModelConfig simulated_model(const TrainConfig& config);
// The names of the model presets.
const std::vector<std::string>& simulated_model_presets();

// The spec of one side (async: pipeline.mode async; else sync on simulate.baseline).
// aspen::Error naming the key of a size above its bound (simulate_sync_and_async).
SimulationSpec simulation_spec(const TrainConfig& config, bool async);

// Both sides: {"sync": ..., "async": ..., "ratio": async/sync effective_tps, "model",
// "device", "cluster"}. `trace_path`: the async side's Chrome trace (the sync side's
// goes beside it, sync_trace_path); empty: none. Both trace paths are checked
// (util/file.h's check_output_file, naming --trace) and every simulated size is bounded
// (the bound and its reason in the error: train.iterations, rollout.prompts_per_iteration,
// rollout.n, rollout.max_tokens, the instances, the devices, simulate.memory_gb, and
// iterations x prompts x n x instances) before anything is simulated. With simulate.devices
// the instance count is derived (a different placement.rollout.instances is warned about).
nlohmann::json simulate_sync_and_async(const TrainConfig& config, const std::string& trace_path);
// The sync side's trace beside `trace_path`: ".sync" before the extension.
std::string sync_trace_path(const std::string& trace_path);

struct BenchCalibration {
  double step_s = 0;        // per engine step
  double token_s = 0;       // per scheduled token of a step
  double update_fixed_s = 0;  // per update
  double train_token_s = 0;   // per packed trained token
  double prompt_tokens = 0;
  double short_response_mean = 0;  // responses outside the long tail
  int iterations = 0;
};
// Fits the costs of a bench side ({"iterations": [...]}, as aspen bench pipeline
// records them) whose workload is `config`.
BenchCalibration calibrate_on_bench_side(const nlohmann::json& side, const TrainConfig& config);
// `config` simulated on the calibrated cpu device: its workload (prompt length, short
// responses' lengths) from the record and the sync side on the same placement.
TrainConfig calibrated_config(const BenchCalibration& calibration, TrainConfig config);
// The recorded step and token costs, in place of the roofline, in a spec of that config.
void apply_calibration(const BenchCalibration& calibration, SimulationSpec& spec);

// Simulates a recorded `aspen bench pipeline` result (its "workload", calibrated on its
// sync side) and compares: {"sync": {"measured_tps", "simulated_tps", "error"}, "async":
// ..., "ratio": {"measured", "simulated", "error"}, "calibration": {...}}; error =
// simulated / measured - 1.
nlohmann::json simulate_bench_pipeline(const nlohmann::json& bench);

}  // namespace aspen::sim
