#include "aspen/pipeline/training_state_swap.h"

#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {
namespace {

void append(NamedTensors& out, const std::string& prefix, const NamedTensors& tensors) {
  for (const auto& [name, tensor] : tensors) out.emplace_back(prefix + name, tensor);
}

}  // namespace

TrainingStateSwap::TrainingStateSwap(bool enabled) {
  if (enabled) space_ = std::make_unique<SwapSpace>();
}

int64_t TrainingStateSwap::swap_out(RlWorkers& workers) {
  if (!space_) return 0;
  NamedTensors state;
  append(state, "actor.", workers.actor->optimizer().state_tensors());
  append(state, "actor.grad.", workers.actor->optimizer().grad_tensors());
  if (workers.critic) {
    append(state, "critic.", workers.critic->optimizer().state_tensors());
    append(state, "critic.grad.", workers.critic->optimizer().grad_tensors());
  }
  space_->swap_out(state);
  return space_->swapped_bytes();
}

void TrainingStateSwap::swap_in() {
  if (space_) space_->swap_in();
}

}  // namespace aspen::pipeline
