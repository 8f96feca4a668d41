// When does pipeline parallelism beat more tensor parallelism? The trainer's optimizer
// step at every split of a data-parallel replica's D devices into tp x pp = D, on the
// cost model's formulas (cost_model.h: TP's collectives per layer against PP's 1F1B
// bubble (pp-1)/(m+pp-1) and its p2p messages), for the config's model, device and
// workload (`aspen simulate --compare-pp D`, docs/simulate.md).
//
// The workload: one optimizer step's rows (train.mini_batch_size, else the iteration's
// prompts x n) with the simulated response lengths of the first iteration's groups
// (the simulator's own draws: sim/workload.h), each trained as prompt + response
// tokens (observations too, multi-turn); its tokens and causal pairs are spread over
// the config's train.dp ranks. m, per (tp, pp), is simulate.micro_batches, else
// ceil(tokens per DP rank / train.micro_batch_tokens).
//
// Output: {"devices_per_replica", "dp", "tokens_per_step", "micro_batch_tokens",
//   "layouts": [{"tp", "pp", "micro_batches", "bubble", "step_s" (forward and backward
//   of the step), "compute_s", "tp_comm_s", "bubble_s", "p2p_s", "optimizer_s",
//   "state_gb_per_device", "fits" (that state within memory x memory_utilization;
//   activations are not modelled)}],
//   "skipped": [{"tp", "pp", "reason"}] (splits the model cannot take: TP must divide
//   the attention heads, the KV heads (or be a multiple of them) and the MLP width, as
//   model/tp_layout.h requires; pp <= the layers),
//   "best": the fitting layout of the least step_s + optimizer_s}.
// Thread safety: pure. Errors: aspen::Error naming --compare-pp for D < 1 or above the
// simulator's device bound, or the config's key for a bad config.
#pragma once

#include <nlohmann/json.hpp>

#include "aspen/config/train_config.h"
#include "aspen/sim/imports.h"

namespace aspen::sim {

nlohmann::json compare_trainer_layouts(const TrainConfig& config, int devices_per_replica);

}  // namespace aspen::sim
