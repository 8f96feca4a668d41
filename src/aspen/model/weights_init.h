// Random initialisation of a Qwen model, as HF's _init_weights does:
// every Linear weight and the embedding ~ normal(0, initializer_range), biases 0,
// RMSNorm weights 1.
//
// Deterministic for a seed on any device and dtype: values are drawn on the CPU
// in fp32 from a private generator (the global RNG is untouched), parameter by
// parameter in HF order, then copied into place. Under tensor parallelism each
// FULL tensor is drawn and this rank's shard of it kept, so a seed gives the same
// model at every TP size (each rank holds the shards of the TP size 1 model).
// A pipeline stage draws (and drops) the values of the parameters other stages hold,
// one tensor or one decoder layer at a time, so a seed gives the same model at every
// PP size too, and the tied embedding's two copies are equal.
// Thread safety: init_weights mutates the model; do not run it concurrently with
// anything else using that model.
#pragma once

#include <torch/types.h>

#include <cstdint>

#include "aspen/io/hf_config.h"
#include "aspen/model/imports.h"
#include "aspen/model/qwen_model.h"

namespace aspen::model {

void init_weights(QwenForCausalLM& model, uint64_t seed, double initializer_range = 0.02);

// Builds, initialises and places a model: the demo's and benchmarks' tiny models.
QwenForCausalLM make_random_model(const ModelConfig& config, uint64_t seed,
                                  torch::ScalarType dtype = torch::kFloat,
                                  torch::Device device = torch::kCPU,
                                  const TensorParallel& tp = {});

}  // namespace aspen::model
