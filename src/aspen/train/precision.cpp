#include "aspen/train/precision.h"
#include "aspen/train/imports.h"

namespace aspen::train {

MasterWeights::MasterWeights(NamedParams master, NamedParams compute)
    : master_(std::move(master)), compute_(std::move(compute)) {
  TORCH_CHECK(master_.size() == compute_.size(), "master/compute parameter counts differ: ",
              master_.size(), " vs ", compute_.size());
  for (size_t i = 0; i < master_.size(); ++i) {
    TORCH_CHECK(master_[i].first == compute_[i].first, "master/compute parameter ", i,
                " names differ: ", master_[i].first, " vs ", compute_[i].first);
    TORCH_CHECK(master_[i].second.sizes() == compute_[i].second.sizes(), "parameter ",
                master_[i].first, " shapes differ");
    if (!master_[i].second.is_same(compute_[i].second)) separate_ = true;
  }
  publish();
}

void MasterWeights::accumulate_grads() {
  if (!separate_) return;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < master_.size(); ++i) {
    torch::Tensor& compute = compute_[i].second;
    if (!compute.grad().defined()) continue;
    torch::Tensor& master = master_[i].second;
    if (master.grad().defined()) {
      master.mutable_grad().add_(compute.grad());  // add_ casts to the master's dtype
    } else {
      // The cast is a fresh tensor (or, at the same dtype, the compute grad itself, which
      // is dropped below), so the master owns it without a copy: a clone here cost a
      // second full pass over the vocabulary-sized head gradient every step.
      master.mutable_grad() = compute.grad().to(master.scalar_type());
    }
    compute.mutable_grad() = torch::Tensor();
  }
}

void MasterWeights::publish() {
  if (!separate_) return;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < master_.size(); ++i) compute_[i].second.copy_(master_[i].second);
}

StepResult MasterWeights::step(Optimizer& optimizer) {
  accumulate_grads();
  StepResult result = optimizer.step();
  if (!result.skipped) publish();
  return result;
}

NamedParams trainable_params(const torch::nn::Module& module) {
  NamedParams params;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (item.value().requires_grad()) params.emplace_back(item.key(), item.value());
  }
  return params;
}

}  // namespace aspen::train
