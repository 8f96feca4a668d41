#include "aspen/model/moe_routing.h"

#include "aspen/util/error.h"

namespace aspen {

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

LayerRouting layer_routing(const RouterChoice& choice) {
  LayerRouting out;
  const int64_t experts = choice.probs.size(-1);
  out.prob_sum = choice.probs.sum(0);
  torch::NoGradGuard no_grad;
  out.assignments = torch::zeros({experts}, choice.probs.options().requires_grad(false));
  out.assignments.index_add_(0, choice.experts.reshape(-1),
                             torch::ones({choice.experts.numel()}, out.assignments.options()));
  out.tokens = choice.probs.size(0);
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

}  // namespace aspen
