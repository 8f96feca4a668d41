// Top-k expert routing of a mixture-of-experts layer, and the load-balancing loss
// over the routing of a whole forward pass.
//
// route_top_k is transformers' Qwen3MoeTopKRouter: probabilities = softmax(logits) in
// fp32 (fp64 for an fp64 model); the k largest per token; with norm_topk_prob those k are renormalised to sum
// to 1; the weights are then cast to the logits' dtype.
//
// route_grouped_sigmoid is transformers' DeepseekV3TopkRouter (noaux_tc): scores
// s = sigmoid(logits) in fp32 (fp64 stays fp64); the choice ranks s + bias (the
// e_score_correction_bias, which only steers selection) restricted to the topk_group of
// n_group equal expert groups whose two best biased scores sum highest; the weights are
// the chosen unbiased s, renormalised (plus 1e-20) with norm_topk_prob, times
// routed_scaling_factor. Its `probs`, used only by the load-balancing statistics, are
// DeepSeek-V3's normalised affinities s / sum(s) (its sequence-wise balance loss).
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

#include "aspen/model/imports.h"

namespace aspen::model {

struct RouterChoice {
  torch::Tensor weights;  // [T, k] in the logits' dtype: the combine weights
  torch::Tensor experts;  // [T, k] int64: chosen expert ids, most probable first
  torch::Tensor probs;    // [T, E] fp32 softmax (part of the autograd graph)
};

RouterChoice route_top_k(const torch::Tensor& logits, int64_t k, bool norm_topk_prob);

// Routing replay for route_top_k's router: `own` (route_top_k of the same logits) with
// the rows of `experts` [T, k] that are >= 0 routed to those experts instead. Their
// combine weights are the router's softmax probabilities of the replayed experts,
// renormalised with norm_topk_prob exactly as route_top_k does, so the gradient reaches
// the gate through the replayed experts' probabilities. Replaying a row's own top-k
// gives `own` exactly. Expert ids outside [0, E): aspen::Error.
RouterChoice replay_top_k(const RouterChoice& own, const torch::Tensor& experts,
                          bool norm_topk_prob);

struct GroupLimitedRouting {
  int64_t k = 1;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
};
// logits [T, E] (computed in fp32 or fp64), bias [E]: see above.
RouterChoice route_grouped_sigmoid(const torch::Tensor& logits, const torch::Tensor& bias,
                                   const GroupLimitedRouting& options);

// What one sparse layer's forward contributes to the load-balancing loss.
struct LayerRouting {
  torch::Tensor prob_sum;     // [E] fp32: sum over tokens of probs (differentiable)
  torch::Tensor assignments;  // [E] fp32: how many top-k slots chose each expert (no grad)
  int64_t tokens = 0;
  torch::Tensor experts;  // [T, k] int64: each token's chosen experts, most probable first
};

// Filled by the sparse layers of one forward, in layer order (the model's forward
// takes a pointer to it; null means "do not record").
//
// Routing replay (R3): with `replay` defined ([T, S, k] int64 over the forward's T
// rows and S sparse layers), sparse layer s (its index = layers.size() when it runs)
// routes each row r whose replay[r, s, 0] >= 0 to the experts replay[r, s, :] instead
// of its own top-k (rows of -1 keep their own), with replay_top_k's weights. The
// recorded LayerRouting then holds the routing actually used, so the load-balancing
// loss counts the replayed assignments (its P_e stays the router's own softmax).
struct MoeRoutingLog {
  std::vector<LayerRouting> layers;
  torch::Tensor replay;
  // The replay of sparse layer `layer` as [T, k] (undefined without replay).
  torch::Tensor replay_of(int64_t layer) const;
};

LayerRouting layer_routing(const RouterChoice& choice);

// E * sum_e f_e * P_e as above: a 0-dim fp32 tensor, differentiable through the
// recorded prob_sums. An empty log (a dense model) gives 0.
torch::Tensor load_balancing_loss(const MoeRoutingLog& log);

}  // namespace aspen::model
