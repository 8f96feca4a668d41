// LoRA in an RL run (train.lora; the adapters themselves: model/lora.h). Where the
// actor's adapters come from and where they go:
//   - attach_policy_lora: the policy (setup.model) gets train.lora's adapters, after
//     the SFT warm-up of a fresh run (the warm-up trains the whole model; RL trains the
//     adapters on the warmed-up base) or before a resumed run's checkpoint loads (the
//     checkpoint holds base and adapters). Every copy made from the policy afterwards -
//     the actor's compute copy, rollout instances, TP/EP shards - carries the same
//     adapters (train/model_copy.h), the reference is the base with the adapters off
//     (train/reference.h), and the weight board carries the adapters only
//     (policy_weights, rl_stages.h).
//   - export_lora_policy: `final/` of a LoRA run is a PEFT adapter directory
//     (adapter_config.json, adapter_model.safetensors: io/peft_adapter.h) with the
//     tokenizer files, and `final/base/` the HF model the adapter applies to (the
//     warmed-up base: the model directory's own weights only without an SFT warm-up, so
//     it is always written); with train.lora.export_merged, `final/merged/` the base with
//     the adapters merged in, a plain HF model.
// Thread safety: call from the run's thread, before the engine starts / after it stops.
#pragma once

#include <string>

#include "aspen/config/train_config.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_setup.h"

namespace aspen::pipeline {

// Attaches train.lora's adapters to setup.model (a no-op for train.lora.rank 0). The
// adapters' A matrices are drawn from torch's CPU generator seeded with train.seed, so
// every rank of a launch draws the same adapter; the generator's previous state is
// restored afterwards, so attaching changes no later draw of the run.
void attach_policy_lora(const TrainConfig& config, RlSetup& setup);

// Writes `dir` as described above. setup.model must have adapters.
void export_lora_policy(const TrainConfig& config, const RlSetup& setup, const std::string& dir);

}  // namespace aspen::pipeline
