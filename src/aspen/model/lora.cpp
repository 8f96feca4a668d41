#include "aspen/model/lora.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "aspen/model/imports.h"
#include "aspen/parallel/tp_collectives.h"
#include "aspen/util/error.h"

namespace aspen::model {

const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> names = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};
  return names;
}

double LoraOptions::scaling() const {
  return use_rslora ? alpha / std::sqrt(static_cast<double>(rank))
                    : alpha / static_cast<double>(rank);
}

bool LoraOptions::targets_projection(const std::string& leaf) const {
  return enabled() && std::find(targets.begin(), targets.end(), leaf) != targets.end();
}

void LoraOptions::validate(const std::string& what) const {
  check_input(rank >= 0, "rank must be >= 0 (0 turns LoRA off), got " + std::to_string(rank),
              what + ".rank");
  if (!enabled()) return;
  check_input(alpha > 0, "alpha must be > 0, got " + std::to_string(alpha), what + ".alpha");
  check_input(dropout >= 0 && dropout < 1, "dropout must be in [0, 1), got " + std::to_string(dropout),
              what + ".dropout");
  check_input(!targets.empty(), "needs at least one target projection", what + ".targets");
  const std::vector<std::string>& known = lora_target_names();
  std::string listed;
  for (const std::string& name : known) listed += std::string(listed.empty() ? "" : ", ") + name;
  for (const std::string& target : targets) {
    check_input(std::find(known.begin(), known.end(), target) != known.end(),
                "unknown target '" + target + "'; LoRA targets are " + listed,
                what + ".targets");
  }
}

namespace {
thread_local int lora_disabled_depth = 0;
}  // namespace

LoraDisabled::LoraDisabled() { ++lora_disabled_depth; }
LoraDisabled::~LoraDisabled() { --lora_disabled_depth; }
bool LoraDisabled::active() { return lora_disabled_depth > 0; }

bool is_lora_parameter(const std::string& name) {
  return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
}

ShardSpec lora_a_spec(const ShardSpec& target_weight) {
  // Row-parallel target (split along its input, dim 1): A [r, in] splits the same way.
  return target_weight.dim == 1 ? target_weight : ShardSpec{};
}

ShardSpec lora_b_spec(const ShardSpec& target_weight) {
  // Column-parallel target (split along its output, dim 0): B [out, r] splits the same way.
  return target_weight.dim == 0 ? target_weight : ShardSpec{};
}

LoraBranch::LoraBranch(torch::nn::Linear& target, const LoraOptions& options,
                       std::shared_ptr<const LoraSwitch> on, ShardSpec a_spec, ShardSpec b_spec,
                       const TensorParallel& tp)
    : scaling_(options.scaling()),
      dropout_(options.dropout),
      a_spec_(a_spec),
      b_spec_(b_spec),
      tp_(tp),
      on_(std::move(on)) {
  const torch::Tensor& weight = target->weight;
  const int64_t out = weight.size(0);
  const int64_t in = weight.size(1);
  // Built in fp32 on the CPU (torch's default init draws there, the same on every
  // platform), then moved to the target's device; adapters train in fp32 whatever the
  // base's dtype.
  torch::nn::Linear a(torch::nn::LinearOptions(in, options.rank).bias(false));
  torch::nn::Linear b(torch::nn::LinearOptions(options.rank, out).bias(false));
  {
    torch::NoGradGuard no_grad;
    b->weight.zero_();
  }
  a->to(weight.device());
  b->to(weight.device());
  a_ = target->register_module("lora_A", a);
  b_ = target->register_module("lora_B", b);
}

torch::Tensor LoraBranch::add(const torch::Tensor& x, const torch::Tensor& y) const {
  if (!a_ || !on_->on.load(std::memory_order_relaxed) || LoraDisabled::active()) return y;
  torch::Tensor input = x.to(a_->weight.scalar_type());
  if (dropout_ > 0 && torch::GradMode::is_enabled()) {
    input = torch::dropout(input, dropout_, /*train=*/true);
  }
  const torch::Tensor a = sum_replica_grads(a_->weight, a_spec_, tp_);
  const torch::Tensor b = sum_replica_grads(b_->weight, b_spec_, tp_);
  const torch::Tensor delta = torch::nn::functional::linear(
      torch::nn::functional::linear(input, a), b);
  return y + (delta * scaling_).to(y.scalar_type());
}

torch::Tensor LoraBranch::delta_weight() const {
  check_input(attached(), "no adapter is attached", "LoRA branch");
  return torch::matmul(b_->weight, a_->weight) * scaling_;
}

}  // namespace aspen::model
