// Copies of a policy model in another dtype/device: the bf16 compute copy of an fp32
// master, and the frozen reference policy.
// Thread safety: reads `source` only; must not overlap with a write to it.
#pragma once

#include <torch/torch.h>

#include "aspen/model/qwen_model.h"
#include "aspen/train/imports.h"
#include "aspen/train/trainer_options.h"

namespace aspen::train {

// A new model with the same config and weights, cast to `dtype` and placed on `device`.
// requires_grad = `trainable` on every parameter but the frozen ones
// (is_frozen_parameter: never trainable). A source with LoRA adapters gives a copy with
// the same adapters, of which only the adapters are trainable.
QwenForCausalLM copy_model(const QwenForCausalLM& source, torch::ScalarType dtype,
                           torch::Device device, bool trainable);

// The model to run forward/backward on: `master` itself when it already has
// options.compute_dtype (validated), else a trainable copy in that dtype (precision.h).
QwenForCausalLM compute_copy(const QwenForCausalLM& master, const TrainerOptions& options);

// The dtype of a module's parameters (TORCH_CHECK that they agree).
torch::ScalarType param_dtype(const torch::nn::Module& module);
// The device of a module's (first) parameter: where a pipeline stage without a head
// (model->lm_head_weight() refuses there) computes.
torch::Device param_device(const torch::nn::Module& module);

}  // namespace aspen::train
