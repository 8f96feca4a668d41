#include "aspen/train/pipeline_routing.h"

#include <string>

#include "aspen/parallel/pipeline_p2p.h"
#include "aspen/train/imports.h"
#include "aspen/util/error.h"

namespace aspen::train {

std::vector<PendingWork> send_routing(ProcessGroupHandle& group, const MoeRoutingLog& log,
                                      int64_t experts, int64_t top_k, int64_t tokens, int dst) {
  std::vector<torch::Tensor> probs, counts, chosen;
  for (const LayerRouting& layer : log.layers) {
    probs.push_back(layer.prob_sum.detach().to(torch::kFloat));
    counts.push_back(layer.assignments.detach().to(torch::kFloat));
    chosen.push_back(layer.experts.to(torch::kLong));
  }
  const auto device = torch::TensorOptions().device(
      log.layers.empty() ? torch::kCPU : log.layers.front().prob_sum.device());
  auto stacked = [](const std::vector<torch::Tensor>& parts, torch::Tensor empty) {
    return parts.empty() ? empty : torch::stack(parts);
  };
  return {send_tensor(group, stacked(probs, torch::zeros({0, experts}, device)), dst, kActivationTag),
          send_tensor(group, stacked(counts, torch::zeros({0, experts}, device)), dst,
                      kActivationTag),
          send_tensor(group, stacked(chosen, torch::zeros({0, tokens, top_k}, device.dtype(torch::kLong))),
                      dst, kActivationTag)};
}

MoeRoutingLog recv_routing(ProcessGroupHandle& group, int src, int64_t tokens,
                           torch::Device device) {
  const torch::Tensor probs = recv_tensor(group, src, kActivationTag, device);
  const torch::Tensor counts = recv_tensor(group, src, kActivationTag, device);
  const torch::Tensor chosen = recv_tensor(group, src, kActivationTag, device);
  check_input(probs.dim() == 2 && counts.sizes() == probs.sizes() && chosen.dim() == 3 &&
                  chosen.size(0) == probs.size(0) && chosen.size(1) == tokens,
              "routing of shapes " + c10::str(probs.sizes()) + ", " + c10::str(chosen.sizes()) +
                  " for a micro-batch of " + std::to_string(tokens) + " tokens",
              "pipeline receive from rank " + std::to_string(src));
  MoeRoutingLog log;
  for (int64_t l = 0; l < probs.size(0); ++l) {
    LayerRouting layer;
    layer.prob_sum = probs[l];
    layer.assignments = counts[l];
    layer.tokens = tokens;
    layer.experts = chosen[l];
    log.layers.push_back(layer);
  }
  return log;
}

torch::Tensor routing_feedback(const MoeRoutingLog& log, double scale) {
  check_input(!log.layers.empty(), "a MoE forward without routing", "pipeline routing feedback");
  torch::Tensor assignments = torch::zeros_like(log.layers.front().assignments, torch::kDouble);
  int64_t rows = 0;
  for (const LayerRouting& layer : log.layers) {
    assignments += layer.assignments.detach().to(torch::kDouble);
    rows += layer.tokens;
  }
  const torch::Tensor tail = torch::tensor({static_cast<double>(rows), scale}, torch::kDouble);
  return torch::cat({assignments.cpu(), tail});
}

torch::Tensor stage_aux_loss(const MoeRoutingLog& own, const torch::Tensor& feedback) {
  const int64_t experts = feedback.size(0) - 2;
  const double rows = feedback[experts].item<double>();
  const double scale = feedback[experts + 1].item<double>();
  if (own.layers.empty() || scale == 0.0) return torch::Tensor();
  torch::Tensor prob_sum = own.layers.front().prob_sum;
  for (size_t i = 1; i < own.layers.size(); ++i) prob_sum = prob_sum + own.layers[i].prob_sum;
  const torch::Tensor assignments =
      feedback.narrow(0, 0, experts).to(prob_sum.device(), prob_sum.scalar_type());
  return (assignments / rows * (prob_sum / rows)).sum() * (static_cast<double>(experts) * scale);
}

}  // namespace aspen::train
