// LoRA (Hu et al., 2021) as PEFT implements it, on the linear projections of a Qwen
// model. For a target Linear y = x W^T (+ b):
//
//   y += scaling * B(A(dropout(x)))     A = lora_A.weight [r, in], B = lora_B.weight [out, r]
//   scaling = alpha / r                 (alpha / sqrt(r) with use_rslora, as PEFT)
//
// Initialisation is PEFT's default (init_lora_weights = true): A Kaiming-uniform with
// a = sqrt(5) - which is exactly torch::nn::Linear's default init - and B zero, so a
// fresh adapter leaves the model's outputs unchanged. Draws come from torch's global
// generator: seed it for a reproducible adapter.
//
// Names: the adapter's two matrices are registered INSIDE the target Linear as the
// submodules "lora_A" and "lora_B" (bias-free Linears), so the model's
// named_parameters() carry PEFT's own names without its "base_model.model." prefix and
// adapter name: "model.layers.0.self_attn.q_proj.lora_A.weight". The base parameters
// keep their HF names; io/peft_adapter.h maps to and from PEFT's files.
//
// Dropout applies only to forwards that record autograd (the actor's update): the
// rollout, the reference and the old-policy log-probs run without gradient and see
// the adapter deterministically, so a policy's log-probs do not depend on who computes
// them.
//
// Tensor parallelism (model/tp_layout.h names the layouts): for a column-parallel
// target (q/k/v, gate/up) A is whole on every rank (the input is replicated) and B is
// split like the target's output rows; for a row-parallel target (o_proj, down_proj) A
// is split like the target's input columns and B is whole, and the adapter's partial
// output joins the target's partial sum before the row-parallel reduction. Replicated
// copies (A of a column-parallel target, B of a row-parallel one, B of a replicated kv
// head) have their gradients summed over their holders (tp_collectives.h), so every
// rank's gradient is its share of the single-process one - as Megatron/verl do.
//
// Off switches: a model's LoraSwitch turns its adapters off for every caller (a rollout
// instance that merged them into its weights); a LoraDisabled scope turns every
// adapter off on the calling thread only (the reference policy: the base model, computed
// by the trainer's thread while another thread may evaluate the same model with its
// adapters on).
// Thread safety: add() mutates nothing; a model's switch is read once per call, so
// flipping it while another thread runs a forward on that model gives the forward a mix.
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "aspen/model/imports.h"
#include "aspen/parallel/shard_spec.h"
#include "aspen/parallel/tensor_parallel.h"

namespace aspen::model {

// Which projections get adapters, and how they are scaled. rank 0: no LoRA.
struct LoraOptions {
  int64_t rank = 0;
  double alpha = 16.0;
  double dropout = 0.0;
  bool use_rslora = false;
  // Leaf names of the target projections (PEFT's target_modules): any of
  // lora_target_names(). They apply to the attention block, the dense MLP and
  // DeepSeek-V3's shared experts; a MoE model's routed experts get adapters only with
  // `experts` (one adapter per expert multiplies the adapter's size by E).
  std::vector<std::string> targets = {"q_proj", "k_proj", "v_proj", "o_proj",
                                      "gate_proj", "up_proj", "down_proj"};
  bool experts = false;

  bool enabled() const { return rank > 0; }
  double scaling() const;
  bool targets_projection(const std::string& leaf) const;
  // aspen::Error naming `what` and the field: rank < 0, alpha <= 0, dropout outside
  // [0, 1), an empty or unknown target.
  void validate(const std::string& what) const;
};

// q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj.
const std::vector<std::string>& lora_target_names();

// True for an adapter parameter's name (".lora_A." / ".lora_B." in it).
bool is_lora_parameter(const std::string& name);

// A model's adapters on or off, shared by all of its branches.
struct LoraSwitch {
  std::atomic<bool> on{true};
};

// While alive, every adapter is off on this thread (nestable): the reference policy of
// RL with LoRA is the base model, the actor with its adapters off - no second copy.
class LoraDisabled {
 public:
  LoraDisabled();
  ~LoraDisabled();
  LoraDisabled(const LoraDisabled&) = delete;
  LoraDisabled& operator=(const LoraDisabled&) = delete;
  // Whether a LoraDisabled is alive on this thread.
  static bool active();
};

// The adapter of one target Linear. Default-constructed: no adapter (add() is the
// identity), so every projection can hold one unconditionally.
class LoraBranch {
 public:
  LoraBranch() = default;
  // Registers lora_A [r, in] and lora_B [out, r] inside `target` (in/out: the
  // target's local shapes), initialised as PEFT does. a_spec/b_spec: their TP layouts
  // (replicated copies get their gradients summed over `tp`).
  LoraBranch(torch::nn::Linear& target, const LoraOptions& options,
             std::shared_ptr<const LoraSwitch> on, ShardSpec a_spec, ShardSpec b_spec,
             const TensorParallel& tp);

  bool attached() const { return static_cast<bool>(a_); }
  // y + scaling * B(A(dropout(x))) when attached and switched on; y otherwise.
  // x [T, in], y [T, out] (under TP: this rank's partial output of a row-parallel
  // target, or its output columns of a column-parallel one).
  torch::Tensor add(const torch::Tensor& x, const torch::Tensor& y) const;
  // scaling * B A [out, in] in the adapter's dtype: what merging adds to W.
  torch::Tensor delta_weight() const;

 private:
  torch::nn::Linear a_{nullptr};
  torch::nn::Linear b_{nullptr};
  double scaling_ = 0.0;
  double dropout_ = 0.0;
  ShardSpec a_spec_;
  ShardSpec b_spec_;
  TensorParallel tp_;
  std::shared_ptr<const LoraSwitch> on_;
};

// The TP layouts of a target's A and B given the target weight's layout: see the
// header comment.
ShardSpec lora_a_spec(const ShardSpec& target_weight);
ShardSpec lora_b_spec(const ShardSpec& target_weight);

}  // namespace aspen::model
