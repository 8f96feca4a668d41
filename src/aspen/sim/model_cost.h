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
// Thread safety: pure. Errors: aspen::Error for an invalid config (ModelConfig::validate).
#pragma once

#include <cstdint>

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

  // Forward FLOPs of `tokens` tokens whose queries attend to `pairs` (query, key)
  // pairs in all: 2 N tokens + attention.
  double forward_flops(double tokens, double pairs) const {
    return 2.0 * matmul_parameters * tokens + attention_flops_per_pair * pairs;
  }
};

ModelCost model_cost(const ModelConfig& config);

// The (query, key) pairs of causal attention over one sequence of `length` tokens
// attending to `context` earlier tokens (prefill of a prompt: context 0; the pairs of
// a training row: length (length + 1) / 2).
double causal_pairs(double length, double context = 0);

}  // namespace aspen::sim
