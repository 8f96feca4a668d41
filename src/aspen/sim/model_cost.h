// ModelCost: what the simulator needs to know of a model, computed from its HF config
// alone (no weights are built, so a 671B config costs nothing).
//
//   parameters          every weight (embedding, layers, norms, router, head unless tied)
//   matmul_parameters   the weights of every matrix multiply a token passes — the N of
//                       "2 N FLOPs per token forward" — with a MoE layer's routed experts
//                       counted k / E (the ones a token is routed to: "active"), shared
//                       experts and the router in full, the head once even when tied and
//                       the embedding lookup not (aspen bench train's convention)
//   attention_flops_per_pair   forward FLOPs of one (query, key) pair summed over layers:
//                       2 x heads x (qk width + v width) per layer (QK^T and AV)
//   kv_bytes_per_token  the paged KV cache per token, all layers, at `kv_bytes` per
//                       element: 2 x kv_heads x head_dim per layer, or for multi-head
//                       latent attention the latent plus the rope key
//                       (kv_lora_rank + qk_rope_head_dim) per layer
//   adapter_parameters  LoRA (train.lora.rank > 0): every adapter's A [r, in] and B
//                       [out, r] on the targeted projections (model/lora.h), r (in + out)
//                       each; a MoE layer's routed experts only with lora.experts, its
//                       shared experts (one MLP of n_shared x moe_intermediate) with the
//                       MLP targets. 0 without LoRA.
//   adapter_matmul_parameters   those a token passes (routed experts' adapters k / E)
// Training FLOPs of T tokens with Q causal pairs (N = matmul_parameters, N_a =
// adapter_matmul_parameters, A = attention_flops_per_pair), the backward pass split in
// its two halves:
//   forward                 2 (N + N_a) T + A Q
//   activation gradients    2 (N + N_a) T + 2 A Q   (needed through the frozen base too)
//   weight gradients        2 N T full fine-tuning; 2 N_a T with LoRA (the base has none)
//   full: 6 N T + 3 A Q (3 x forward); LoRA: 4 N T + 6 N_a T + 3 A Q, ~2/3 of full's.
// The forward-only passes (rollout, old log-probs, reference) are costed without the
// adapters' 2 N_a T (rank 16 on Qwen3-0.6B: 1.7% of N; the reference has none).
// Thread safety: pure. Errors: aspen::Error for an invalid config (ModelConfig::validate),
// and for LoRA attention targets on multi-head latent attention (no LoRA layout, as the
// model says).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aspen/io/hf_config.h"
#include "aspen/sim/imports.h"

namespace aspen::sim {

struct ModelCost {
  int64_t layers = 0;
  int64_t hidden = 0;
  double parameters = 0;
  double matmul_parameters = 0;
  double attention_flops_per_pair = 0;
  double kv_elements_per_token = 0;  // multiply by the element size for bytes
  double adapter_parameters = 0;         // LoRA's adapters; 0: full fine-tuning
  double adapter_matmul_parameters = 0;

  bool lora() const { return adapter_parameters > 0; }
  // What the optimizer updates, holds state for and the trainers publish.
  double trainable_parameters() const { return lora() ? adapter_parameters : parameters; }

  // Forward FLOPs of `tokens` tokens whose queries attend to `pairs` (query, key)
  // pairs in all: 2 N tokens + attention.
  double forward_flops(double tokens, double pairs) const {
    return 2.0 * matmul_parameters * tokens + attention_flops_per_pair * pairs;
  }
  // Forward and backward FLOPs of a training pass (see above).
  double train_flops(double tokens, double pairs) const {
    const double passed = matmul_parameters + adapter_matmul_parameters;
    const double weight_gradients = lora() ? adapter_matmul_parameters : matmul_parameters;
    return 4.0 * passed * tokens + 3.0 * attention_flops_per_pair * pairs +
           2.0 * weight_gradients * tokens;
  }
};

// LoRA's adapters as the simulator counts them (train.lora: model/lora.h's LoraOptions).
struct LoraShape {
  int64_t rank = 0;  // 0: full fine-tuning
  std::vector<std::string> targets;  // projection leaf names (q_proj ... down_proj)
  bool experts = false;              // a MoE layer's routed experts get adapters too
};

ModelCost model_cost(const ModelConfig& config, const LoraShape& lora = {});

// The (query, key) pairs of causal attention over one sequence of `length` tokens
// attending to `context` earlier tokens (prefill of a prompt: context 0; the pairs of
// a training row: length (length + 1) / 2).
double causal_pairs(double length, double context = 0);

}  // namespace aspen::sim
