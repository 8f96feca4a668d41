#include "aspen/model/moe_routing.h"

#include <limits>

#include "aspen/model/imports.h"
#include "aspen/util/error.h"

namespace aspen::model {

RouterChoice route_top_k(const torch::Tensor& logits, int64_t k, bool norm_topk_prob) {
  RouterChoice out;
  // fp32 at least (an fp64 model, in tests, stays fp64).
  const bool fp64 = logits.scalar_type() == torch::kDouble;
  out.probs = torch::softmax(fp64 ? logits : logits.to(torch::kFloat), /*dim=*/-1);
  auto [top, experts] = out.probs.topk(k, /*dim=*/-1);
  if (norm_topk_prob) top = top / top.sum(-1, /*keepdim=*/true);
  out.weights = top.to(logits.scalar_type());
  out.experts = experts;
  return out;
}

RouterChoice replay_top_k(const RouterChoice& own, const torch::Tensor& experts,
                          bool norm_topk_prob) {
  const int64_t num_experts = own.probs.size(1);
  check_input(experts.dim() == 2 && experts.sizes() == own.experts.sizes(),
              "needs [tokens, k] expert ids like the router's own choice", "routing replay");
  const torch::Tensor ids = experts.to(own.experts.device(), torch::kLong);
  check_input(ids.numel() == 0 || ids.max().item<int64_t>() < num_experts,
              "an expert id is >= the layer's " + std::to_string(num_experts) + " experts",
              "routing replay");
  const torch::Tensor replayed = (ids.select(1, 0) >= 0).unsqueeze(1);  // [T, 1]
  RouterChoice out = own;
  out.experts = torch::where(replayed, ids, own.experts);
  torch::Tensor top = own.probs.gather(1, out.experts);
  if (norm_topk_prob) top = top / top.sum(-1, /*keepdim=*/true);
  out.weights = top.to(own.weights.scalar_type());
  return out;
}

torch::Tensor MoeRoutingLog::replay_of(int64_t layer) const {
  if (!replay.defined()) return {};
  check_input(layer < replay.size(1),
              "replays " + std::to_string(replay.size(1)) + " sparse layers, the model has more",
              "routing replay");
  return replay.select(1, layer);
}

RouterChoice route_grouped_sigmoid(const torch::Tensor& logits, const torch::Tensor& bias,
                                   const GroupLimitedRouting& options) {
  const int64_t tokens = logits.size(0);
  const int64_t experts = logits.size(1);
  check_input(options.n_group > 0 && experts % options.n_group == 0 &&
                  options.topk_group <= options.n_group,
              "needs n_group dividing the experts and topk_group <= n_group",
              "group-limited MoE routing");
  RouterChoice out;
  const torch::Tensor scores = torch::sigmoid(logits);
  torch::Tensor choice_scores;
  {
    // The choice is a selection: no gradient goes through it (as in transformers,
    // where only the gathered weights are differentiable).
    torch::NoGradGuard no_grad;
    choice_scores = scores.detach() + bias.to(scores.scalar_type());
    const torch::Tensor group_scores = std::get<0>(
        choice_scores.view({tokens, options.n_group, experts / options.n_group}).topk(2, -1))
                                           .sum(-1);
    const torch::Tensor groups = std::get<1>(group_scores.topk(options.topk_group, -1));
    const torch::Tensor group_mask =
        torch::zeros_like(group_scores, torch::kBool).scatter_(1, groups, true);
    const torch::Tensor expert_mask = group_mask.unsqueeze(-1)
                                          .expand({tokens, options.n_group, experts / options.n_group})
                                          .reshape({tokens, experts});
    choice_scores = choice_scores.masked_fill(~expert_mask, -std::numeric_limits<double>::infinity());
  }
  out.experts = std::get<1>(choice_scores.topk(options.k, -1));
  torch::Tensor weights = scores.gather(1, out.experts);
  if (options.norm_topk_prob) weights = weights / (weights.sum(-1, /*keepdim=*/true) + 1e-20);
  out.weights = weights * options.routed_scaling_factor;
  out.probs = scores / scores.sum(-1, /*keepdim=*/true);
  return out;
}

LayerRouting layer_routing(const RouterChoice& choice) {
  LayerRouting out;
  const int64_t experts = choice.probs.size(-1);
  out.prob_sum = choice.probs.sum(0);
  torch::NoGradGuard no_grad;
  out.assignments = torch::zeros({experts}, choice.probs.options().requires_grad(false));
  out.assignments.index_add_(0, choice.experts.reshape(-1),
                             torch::ones({choice.experts.numel()}, out.assignments.options()));
  out.tokens = choice.probs.size(0);
  out.experts = choice.experts;
  return out;
}

torch::Tensor load_balancing_loss(const MoeRoutingLog& log) {
  if (log.layers.empty()) return torch::zeros({}, torch::kFloat);
  torch::Tensor assignments = log.layers.front().assignments;
  torch::Tensor prob_sum = log.layers.front().prob_sum;
  int64_t rows = log.layers.front().tokens;
  for (size_t i = 1; i < log.layers.size(); ++i) {
    assignments = assignments + log.layers[i].assignments;
    prob_sum = prob_sum + log.layers[i].prob_sum;
    rows += log.layers[i].tokens;
  }
  check_input(rows > 0, "no tokens were routed", "load-balancing loss");
  const double experts = static_cast<double>(prob_sum.size(0));
  const double total = static_cast<double>(rows);
  return (assignments / total * (prob_sum / total)).sum() * experts;
}

}  // namespace aspen::model
