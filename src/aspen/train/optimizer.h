// Optimizer: AdamW (decoupled weight decay) over named parameters, with a
// learning-rate schedule, gradient clipping by global norm, skip-on-non-finite and
// exact save/resume.
//
// Parameter groups: weight decay applies to matrices only; 1-D parameters (RMSNorm
// weights, biases) and anything named "*.bias" are not decayed (as HF/Megatron do:
// decaying a norm's gain towards 0 fights the normalisation).
//
// step():
//   1. norm = sqrt(sum over parameters of ||grad||^2), computed in fp64 (the pre-clip
//      norm, returned). Parameters without a grad count as zero.
//   2. non-finite norm: gradients are cleared, nothing is updated, the step counter
//      does not advance (the schedule does not move), skipped = true.
//   3. max_grad_norm > 0 and norm > max_grad_norm: grads *= max_grad_norm / (norm + 1e-6).
//   4. lr = options.lr * lr_factor(schedule, step_count) set on every group, AdamW step,
//      step_count += 1, gradients cleared
//      (set to none). The AdamW step is torch's fused one-pass kernel
//      (at::_fused_adamw_) for fp32/fp64 dense parameters on CPU or CUDA, and
//      torch::optim::AdamW's composed step otherwise: the same math and state.
//
// checkpoint_state()/restore_state(): the AdamW state by parameter NAME - per parameter
// "<name>.exp_avg", "<name>.exp_avg_sq" (and ".max_exp_avg_sq" with amsgrad) in the
// parameter's dtype and "<name>.step" (int64 scalar), plus "optimizer.step_count" - so
// that state written by one set of parameters restores into another holding some of
// the same names: an expert-parallel rank writes its own experts' state and a rank of
// another EP size takes the experts it holds from every rank's file. Restoring makes
// the following steps bit-identical to an uninterrupted run. The group options are not
// state: they come from OptimizerOptions, and step() sets the learning rate.
// save()/load(): checkpoint_state() as one safetensors file. load() also reads the torch
// archive (a path ending in ".pt") that Aspen wrote before, into an Optimizer built over
// the same parameters in the same order.
// Errors: aspen::Error naming the file or source for a missing/corrupt file, a missing
// step counter, a parameter whose state is partial or of another shape.
//
// state_tensors()/grad_tensors(): the training-only tensors, by name, for swapping
// them off the device while a colocated rollout runs (parallel/swap_space.h). They
// are the optimizer's own tensor objects, not copies: changing their storage in
// place (Tensor::set_) is seen by the next step().
// Thread safety: not thread-safe; one trainer thread owns it.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aspen/train/imports.h"
#include "aspen/train/lr_schedule.h"

namespace aspen::train {

struct OptimizerOptions {
  double lr = 1e-6;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  double max_grad_norm = 1.0;  // <= 0 disables clipping (the norm is still reported)
  LrScheduleOptions schedule;

  void validate() const;  // aspen::Error naming the option
};

struct StepResult {
  double grad_norm = 0.0;  // pre-clip global norm (may be inf/nan when skipped)
  double lr = 0.0;         // learning rate used (0 when skipped)
  bool skipped = false;
};

using NamedParams = std::vector<std::pair<std::string, torch::Tensor>>;

// The global norm of a model split over ranks (tensor parallelism): each parameter's
// squared gradient norm is divided by the number of ranks holding the same elements
// (1 for a shard, the TP size for a replicated norm weight, TP / kv heads for a
// replicated kv head), and the sum is summed over the model-parallel group, so every
// element of the full model counts exactly once and every rank gets the same norm —
// hence the same clipping and skip decisions (Megatron's model-parallel grad norm).
struct ShardedNorm {
  std::vector<double> copies;                          // parallel to the parameter list; each >= 1
  std::function<void(torch::Tensor&)> sum_over_ranks;  // in place on an fp64 [1] tensor
};

// Pre-clip global L2 norm of the grads of `params` (fp64 accumulation), as a double;
// with `sharded`, the norm of the full model (above).
double global_grad_norm(const std::vector<torch::Tensor>& params,
                        const ShardedNorm* sharded = nullptr);
// Scales the grads by max_norm / (norm + 1e-6) when the global norm exceeds max_norm
// (> 0) and is finite; returns the pre-clip norm.
double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm,
                      const ShardedNorm* sharded = nullptr);

// The parameter a checkpoint_state() entry belongs to: "<name>" of "<name>.exp_avg",
// ".exp_avg_sq" and ".max_exp_avg_sq" (shaped = true: the parameter's shape, so a
// sharded parameter's moments shard like it) and of "<name>.step" (an int64 scalar);
// nullopt for "optimizer.step_count" and any name checkpoint_state() does not write.
struct StateEntryOwner {
  std::string parameter;
  bool shaped = false;
};
std::optional<StateEntryOwner> state_entry_owner(const std::string& state_name);

class Optimizer {
 public:
  Optimizer(const NamedParams& params, const OptimizerOptions& options);

  StepResult step();
  void zero_grad();
  // Makes step() clip by the norm of the full model split over ranks (a collective
  // then: every rank of the group must step together): copies_of(name) says how many
  // ranks hold that parameter's elements. aspen::Error for a count < 1 or no reduction.
  void set_sharded_norm(const std::function<double(const std::string& name)>& copies_of,
                        std::function<void(torch::Tensor&)> sum_over_ranks);
  int64_t step_count() const { return step_count_; }
  // Learning rate the next step will use.
  double next_lr() const;
  const std::vector<torch::Tensor>& params() const { return params_; }

  // AdamW per-parameter state as "<param name>.exp_avg", ".exp_avg_sq" (and
  // ".max_exp_avg_sq" with amsgrad), in params() order. Empty before the first step:
  // AdamW creates its state lazily.
  NamedParams state_tensors() const;
  // "<param name>.grad" for every parameter that has a gradient now (none after step()
  // or zero_grad(): they set grads to none).
  NamedParams grad_tensors() const;

  // `include` (default: every parameter) picks the parameters whose state is written;
  // "optimizer.step_count" is always there.
  NamedParams checkpoint_state(
      const std::function<bool(const std::string& name)>& include = {}) const;
  // Every parameter named in `state` gets that state; the others get none (AdamW then
  // starts them afresh, as it does a parameter that never had a gradient). Names that
  // are not this optimizer's parameters are ignored (another rank's experts).
  void restore_state(const std::map<std::string, torch::Tensor>& state,
                     const std::string& source);
  void save(const std::string& path) const;
  void load(const std::string& path);

 private:
  OptimizerOptions options_;
  std::vector<torch::Tensor> params_;
  std::vector<std::string> names_;  // names_[i] is the name of params_[i]
  std::unique_ptr<torch::optim::AdamW> adamw_;
  std::unique_ptr<ShardedNorm> sharded_norm_;  // copies in params_ order; null: one rank
  int64_t step_count_ = 0;
};

}  // namespace aspen::train
