#include "aspen/train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <type_traits>

#include "aspen/io/safetensors.h"
#include "aspen/train/imports.h"
#include "aspen/util/error.h"
#include "aspen/util/strings.h"

namespace aspen::train {
namespace {

bool decays(const std::string& name, const torch::Tensor& param) {
  const bool is_bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
  return param.dim() >= 2 && !is_bias;
}

// torch::optim keys its state map by the parameter's TensorImpl pointer.
template <typename Map>
typename Map::key_type state_key(const torch::Tensor& param) {
  return static_cast<typename Map::key_type>(param.unsafeGetTensorImpl());
}

// AdamW in one pass per tensor: torch's fused kernel (at::_fused_adamw_, CPU and CUDA)
// reads param, grad, exp_avg and exp_avg_sq once and writes three of them, where
// torch::optim::AdamW::step() makes about eight passes (decay, two moment updates, sqrt,
// divide, add eps, addcdiv) and allocates the denominator: 0.45 s of a 3.5 s bf16_head
// update on the 103M bench shape. Same math and state (AdamWParamState, so save/resume
// and swapping see the same tensors). Returns false, changing nothing, where the fused
// kernel does not apply (amsgrad, sparse grads, other dtypes or devices, a group
// mixing dtypes or devices): the caller
// then steps torch::optim::AdamW.
bool fused_adamw_step(torch::optim::AdamW& adamw) {
  using State = torch::optim::AdamWParamState;
  for (auto& group : adamw.param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    if (o.amsgrad()) return false;
    const torch::Tensor* first = nullptr;  // one kernel call per group: one dtype, one device
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (first == nullptr) first = &p;
      const auto dtype = p.scalar_type();
      if (p.grad().is_sparse() || p.grad().scalar_type() != dtype ||
          (dtype != torch::kFloat && dtype != torch::kDouble) ||
          (!p.device().is_cpu() && !p.device().is_cuda()) || p.grad().device() != p.device() ||
          dtype != first->scalar_type() || p.device() != first->device()) {
        return false;
      }
    }
  }
  auto& state = adamw.state();
  torch::NoGradGuard no_grad;
  for (auto& group : adamw.param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto key = state_key<std::decay_t<decltype(state)>>(p);
      auto it = state.find(key);
      if (it == state.end()) {
        auto fresh = std::make_unique<State>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        it = state.emplace(key, std::move(fresh)).first;
      }
      auto& s = static_cast<State&>(*it->second);
      s.step(s.step() + 1);
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(s.exp_avg());
      exp_avg_sqs.push_back(s.exp_avg_sq());
      // The kernel reads the step count (already advanced) from a float tensor.
      steps.push_back(torch::full({}, static_cast<double>(s.step()),
                                  torch::TensorOptions().dtype(torch::kFloat).device(p.device())));
    }
    if (params.empty()) continue;
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, o.lr(),
                      std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(), o.eps(),
                      /*amsgrad=*/false, /*maximize=*/false);
  }
  return true;
}

// ||g||^2 accumulated in fp64, without an fp64 copy of g: for the 103M bench model that
// copy and its square were 1.6 GB of allocation and memory traffic per step. Slices of
// 2^20 elements are upcast one at a time and dotted with themselves.
torch::Tensor squared_norm_fp64(const torch::Tensor& grad) {
  constexpr int64_t kSlice = int64_t{1} << 20;
  const torch::Tensor flat = grad.detach().reshape(-1);
  const int64_t numel = flat.numel();
  if (numel <= kSlice) {
    const torch::Tensor g = flat.to(torch::kDouble);
    return g.dot(g);
  }
  torch::Tensor total = torch::zeros({}, flat.options().dtype(torch::kDouble));
  for (int64_t begin = 0; begin < numel; begin += kSlice) {
    const torch::Tensor g = flat.narrow(0, begin, std::min(kSlice, numel - begin)).to(torch::kDouble);
    total.add_(g.dot(g));
  }
  return total;
}

}  // namespace

void OptimizerOptions::validate() const {
  check_input(lr >= 0.0, "must be >= 0", "optimizer.lr");
  check_input(beta1 >= 0.0 && beta1 < 1.0, "must be in [0, 1)", "optimizer.beta1");
  check_input(beta2 >= 0.0 && beta2 < 1.0, "must be in [0, 1)", "optimizer.beta2");
  check_input(eps > 0.0, "must be > 0", "optimizer.eps");
  check_input(weight_decay >= 0.0, "must be >= 0", "optimizer.weight_decay");
  schedule.validate();
}

double global_grad_norm(const std::vector<torch::Tensor>& params, const ShardedNorm* sharded) {
  TORCH_CHECK(sharded == nullptr || sharded->copies.size() == params.size(),
              "sharded norm: one copy count per parameter expected");
  torch::Tensor total;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].grad().defined()) continue;
    torch::Tensor sq = squared_norm_fp64(params[i].grad());
    if (sharded != nullptr) sq = sq / sharded->copies[i];
    total = total.defined() ? total + sq : sq;
  }
  if (sharded == nullptr) {
    // One host sync per step: the skip decision needs the value.
    return total.defined() ? std::sqrt(total.item<double>()) : 0.0;
  }
  torch::Tensor reduced =
      total.defined() ? total.reshape({1}).cpu() : torch::zeros({1}, torch::kDouble);
  sharded->sum_over_ranks(reduced);
  return std::sqrt(reduced.item<double>());
}

double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm,
                      const ShardedNorm* sharded) {
  const double norm = global_grad_norm(params, sharded);
  if (max_norm > 0.0 && std::isfinite(norm) && norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    torch::NoGradGuard no_grad;
    for (const auto& p : params) {
      if (p.grad().defined()) p.grad().mul_(scale);
    }
  }
  return norm;
}

Optimizer::Optimizer(const NamedParams& params, const OptimizerOptions& options)
    : options_(options) {
  options_.validate();
  std::vector<torch::Tensor> decay, no_decay;
  std::vector<std::string> decay_names, no_decay_names;
  for (const auto& [name, param] : params) {
    TORCH_CHECK(param.is_leaf(), "optimizer parameter ", name, " is not a leaf tensor");
    const bool d = decays(name, param);
    (d ? decay : no_decay).push_back(param);
    (d ? decay_names : no_decay_names).push_back(name);
  }
  // params_ in group order, so save/load and the norm see one fixed order.
  params_ = decay;
  params_.insert(params_.end(), no_decay.begin(), no_decay.end());
  names_ = decay_names;
  names_.insert(names_.end(), no_decay_names.begin(), no_decay_names.end());
  auto group_options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(options_.lr)
            .betas(std::make_tuple(options_.beta1, options_.beta2))
            .eps(options_.eps)
            .weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (!decay.empty()) groups.emplace_back(decay, group_options(options_.weight_decay));
  if (!no_decay.empty()) groups.emplace_back(no_decay, group_options(0.0));
  check_input(!groups.empty(), "no parameters to optimize", "optimizer");
  adamw_ = std::make_unique<torch::optim::AdamW>(
      groups, torch::optim::AdamWOptions(options_.lr)
                  .betas(std::make_tuple(options_.beta1, options_.beta2))
                  .eps(options_.eps)
                  .weight_decay(options_.weight_decay));
}

double Optimizer::next_lr() const {
  return options_.lr * lr_factor(options_.schedule, step_count_);
}

NamedParams Optimizer::state_tensors() const {
  NamedParams out;
  const auto& state = adamw_->state();
  for (size_t i = 0; i < params_.size(); ++i) {
    auto it = state.find(state_key<std::decay_t<decltype(state)>>(params_[i]));
    if (it == state.end()) continue;
    auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
    // Copies of the handles share the TensorImpl, so callers see AdamW's own tensors.
    if (s.exp_avg().defined()) out.emplace_back(names_[i] + ".exp_avg", s.exp_avg());
    if (s.exp_avg_sq().defined()) out.emplace_back(names_[i] + ".exp_avg_sq", s.exp_avg_sq());
    if (s.max_exp_avg_sq().defined()) {
      out.emplace_back(names_[i] + ".max_exp_avg_sq", s.max_exp_avg_sq());
    }
  }
  return out;
}

NamedParams Optimizer::grad_tensors() const {
  NamedParams out;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].grad().defined()) out.emplace_back(names_[i] + ".grad", params_[i].grad());
  }
  return out;
}

void Optimizer::zero_grad() {
  // Set to none rather than zeroed: no memset, and grads that are views (set by a caller
  // or a collective's bucket) cannot be detached in place anyway.
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();
}

StepResult Optimizer::step() {
  StepResult result;
  result.grad_norm = clip_grad_norm(params_, options_.max_grad_norm, sharded_norm_.get());
  if (!std::isfinite(result.grad_norm)) {
    result.skipped = true;
    zero_grad();
    return result;
  }
  result.lr = next_lr();
  for (auto& group : adamw_->param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(result.lr);
  }
  if (!fused_adamw_step(*adamw_)) adamw_->step();
  ++step_count_;
  zero_grad();
  return result;
}

void Optimizer::set_sharded_norm(const std::function<double(const std::string& name)>& copies_of,
                                 std::function<void(torch::Tensor&)> sum_over_ranks) {
  check_input(static_cast<bool>(sum_over_ranks), "no reduction given", "optimizer sharded norm");
  auto norm = std::make_unique<ShardedNorm>();
  for (const std::string& name : names_) {
    const double copies = copies_of(name);
    check_input(copies >= 1.0, "a copy count below 1", "optimizer sharded norm: " + name);
    norm->copies.push_back(copies);
  }
  norm->sum_over_ranks = std::move(sum_over_ranks);
  sharded_norm_ = std::move(norm);
}

namespace {

constexpr const char* kStepCountKey = "optimizer.step_count";

// The torch archive Aspen wrote before the named format (same parameters, same order).
int64_t load_torch_archive(torch::optim::AdamW& adamw, const std::string& path) {
  torch::serialize::InputArchive archive;
  torch::serialize::InputArchive adamw_archive;
  torch::Tensor step_count;
  try {
    archive.load_from(path);
    archive.read("adamw", adamw_archive);
    archive.read("step_count", step_count);
    adamw.load(adamw_archive);
  } catch (const c10::Error& e) {
    throw Error(std::string("cannot read optimizer state: ") + e.what_without_backtrace(), path,
                "was it written by Optimizer::save over the same parameters?");
  }
  return step_count.item<int64_t>();
}

}  // namespace

std::optional<StateEntryOwner> state_entry_owner(const std::string& state_name) {
  for (const char* suffix : {".exp_avg", ".exp_avg_sq", ".max_exp_avg_sq", ".step"}) {
    const std::string tail(suffix);
    if (state_name.size() <= tail.size() || !ends_with(state_name, tail)) continue;
    return StateEntryOwner{state_name.substr(0, state_name.size() - tail.size()), tail != ".step"};
  }
  return std::nullopt;
}

NamedParams Optimizer::checkpoint_state(
    const std::function<bool(const std::string& name)>& include) const {
  NamedParams out;
  const auto& state = adamw_->state();
  for (size_t i = 0; i < params_.size(); ++i) {
    if (include && !include(names_[i])) continue;
    auto it = state.find(state_key<std::decay_t<decltype(state)>>(params_[i]));
    if (it == state.end()) continue;
    const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    out.emplace_back(names_[i] + ".step", torch::tensor(s.step(), torch::kLong));
    out.emplace_back(names_[i] + ".exp_avg", s.exp_avg().detach());
    out.emplace_back(names_[i] + ".exp_avg_sq", s.exp_avg_sq().detach());
    if (s.max_exp_avg_sq().defined()) {
      out.emplace_back(names_[i] + ".max_exp_avg_sq", s.max_exp_avg_sq().detach());
    }
  }
  out.emplace_back(kStepCountKey, torch::tensor(step_count_, torch::kLong));
  return out;
}

void Optimizer::restore_state(const std::map<std::string, torch::Tensor>& state,
                              const std::string& source) {
  const auto count = state.find(kStepCountKey);
  check_input(count != state.end() && count->second.numel() == 1, "no optimizer step counter",
              source, std::string("optimizer state carries \"") + kStepCountKey + "\"");
  auto& adamw_state = adamw_->state();
  using Key = std::decay_t<decltype(adamw_state)>::key_type;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = names_[i];
    const torch::Tensor& param = params_[i];
    adamw_state.erase(state_key<std::decay_t<decltype(adamw_state)>>(param));
    const auto step = state.find(name + ".step");
    if (step == state.end()) continue;  // no state yet (never stepped with a gradient)
    // A moment of this parameter's shape, on its device and in its dtype (a copy:
    // the source may be a mapped file).
    auto moment = [&](const std::string& suffix, bool required) -> torch::Tensor {
      const auto it = state.find(name + suffix);
      if (it == state.end()) {
        check_input(!required, "has " + name + ".step but no " + name + suffix, source);
        return {};
      }
      check_input(it->second.sizes() == param.sizes(),
                  "shape of " + name + suffix + " does not match the parameter's", source);
      return it->second.to(param.options(), /*non_blocking=*/false, /*copy=*/true);
    };
    auto restored = std::make_unique<torch::optim::AdamWParamState>();
    restored->step(step->second.item<int64_t>());
    restored->exp_avg(moment(".exp_avg", true));
    restored->exp_avg_sq(moment(".exp_avg_sq", true));
    if (torch::Tensor max_sq = moment(".max_exp_avg_sq", false); max_sq.defined()) {
      restored->max_exp_avg_sq(max_sq);
    }
    adamw_state[static_cast<Key>(param.unsafeGetTensorImpl())] = std::move(restored);
  }
  step_count_ = count->second.item<int64_t>();
}

void Optimizer::save(const std::string& path) const {
  write_safetensors(path, checkpoint_state());
}

void Optimizer::load(const std::string& path) {
  const bool torch_archive = path.size() >= 3 && path.compare(path.size() - 3, 3, ".pt") == 0;
  if (torch_archive) {
    step_count_ = load_torch_archive(*adamw_, path);
    return;
  }
  restore_state(load_safetensors(path), path);
}

}  // namespace aspen::train
