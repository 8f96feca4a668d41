// Top-k expert routing of a mixture-of-experts layer, and the load-balancing loss
// over the routing of a whole forward pass.
//
// route_top_k is transformers' Qwen3MoeTopKRouter: probabilities = softmax(logits) in
// fp32 (fp64 for an fp64 model); the k largest per token; with norm_topk_prob those k are renormalised to sum
// to 1; the weights are then cast to the logits' dtype.
//
// Load-balancing loss (Switch Transformer eq. 4-6, exactly transformers'
// load_balancing_loss_func without an attention mask: packed batches have no padding).
// Over the sparse layers l = 1..L of one forward, each over the same T tokens:
//   f_e = (number of top-k slots choosing expert e, summed over layers) / (L * T)
//   P_e = (sum of softmax probabilities of e, over layers and tokens) / (L * T)
//   loss = E * sum_e f_e * P_e
// f is a count (no gradient); the gradient flows through P only. A perfectly
// balanced router scores k (f_e = k/E, P_e = 1/E).
//
// Shapes: T = tokens, E = experts, k = experts per token.
// Thread safety: pure functions; a MoeRoutingLog is filled by one forward at a time.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace aspen {

struct RouterChoice {
  torch::Tensor weights;  // [T, k] in the logits' dtype: the combine weights
  torch::Tensor experts;  // [T, k] int64: chosen expert ids, most probable first
  torch::Tensor probs;    // [T, E] fp32 softmax (part of the autograd graph)
};

RouterChoice route_top_k(const torch::Tensor& logits, int64_t k, bool norm_topk_prob);

// What one sparse layer's forward contributes to the load-balancing loss.
struct LayerRouting {
  torch::Tensor prob_sum;     // [E] fp32: sum over tokens of probs (differentiable)
  torch::Tensor assignments;  // [E] fp32: how many top-k slots chose each expert (no grad)
  int64_t tokens = 0;
};

// Filled by the sparse layers of one forward, in layer order (the model's forward
// takes a pointer to it; null means "do not record").
struct MoeRoutingLog {
  std::vector<LayerRouting> layers;
};

LayerRouting layer_routing(const RouterChoice& choice);

// E * sum_e f_e * P_e as above: a 0-dim fp32 tensor, differentiable through the
// recorded prob_sums. An empty log (a dense model) gives 0.
torch::Tensor load_balancing_loss(const MoeRoutingLog& log);

}  // namespace aspen
