#include "aspen/parallel/data_parallel.h"

#include <algorithm>
#include <string>

#include "aspen/parallel/imports.h"
#include "aspen/util/error.h"

namespace aspen::parallel {

int64_t all_reduce_sum(ProcessGroupHandle& group, int64_t value) {
  torch::Tensor t = torch::tensor({value}, torch::kInt64);
  group.all_reduce_sum(t);
  return t.item<int64_t>();
}

double all_reduce_sum(ProcessGroupHandle& group, double value) {
  torch::Tensor t = torch::tensor({value}, torch::kFloat64);
  group.all_reduce_sum(t);
  return t.item<double>();
}

void broadcast_parameters(ProcessGroupHandle& group, const NamedParams& params, int root) {
  torch::NoGradGuard no_grad;
  for (const auto& [name, param] : params) {
    // Broadcast into a contiguous copy: a parameter may be a non-contiguous view.
    torch::Tensor buffer = param.detach().contiguous().clone();
    group.broadcast(buffer, root);
    param.detach().copy_(buffer);
  }
}

GradientAllReducer::GradientAllReducer(ProcessGroupHandle group, const NamedParams& params,
                                       const DataParallelOptions& options)
    : group_(std::move(group)), options_(options) {
  check_input(options.bucket_mb > 0, "bucket_mb must be > 0",
              "DataParallelOptions.bucket_mb=" + std::to_string(options.bucket_mb));
  for (const auto& [name, param] : params) {
    if (param.requires_grad()) params_.push_back(param);
  }
  slots_.resize(params_.size());
  const int64_t capacity = static_cast<int64_t>(options.bucket_mb * 1024 * 1024);
  int64_t bucket_bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const torch::Tensor& p = params_[k];
    const int64_t bytes = p.numel() * static_cast<int64_t>(p.element_size());
    const bool same_dtype = !bucket_params_.empty() &&
                            params_[bucket_params_.back().front()].scalar_type() == p.scalar_type();
    if (bucket_params_.empty() || !same_dtype || bucket_bytes + bytes > capacity) {
      bucket_params_.emplace_back();
      bucket_bytes = 0;
    }
    bucket_params_.back().push_back(k);
    bucket_bytes += bytes;
  }
  for (size_t b = 0; b < bucket_params_.size(); ++b) {
    int64_t offset = 0;
    for (size_t k : bucket_params_[b]) {
      slots_[k] = Slot{b, offset};
      offset += params_[k].numel();
    }
    flats_.push_back(torch::zeros({offset}, params_[bucket_params_[b].front()].options()
                                                .requires_grad(false)));
  }
  ready_.assign(params_.size(), 0);
  works_.resize(bucket_params_.size());

  // Every rank must have built the same layout, or the all-reduces would pair up
  // different buffers (garbage or a hang). One cheap check up front.
  int64_t total_numel = 0;
  for (const auto& p : params_) total_numel += p.numel();
  torch::Tensor mine = torch::tensor({static_cast<int64_t>(params_.size()), total_numel,
                                      static_cast<int64_t>(bucket_params_.size())},
                                     torch::kInt64);
  torch::Tensor sum = mine.clone();
  group_.all_reduce_sum(sum);
  check_input(torch::equal(sum, mine * group_.world_size()),
              "ranks disagree on the trainable parameters (this rank: " +
                  std::to_string(params_.size()) + " tensors, " + std::to_string(total_numel) +
                  " elements)",
              "data parallel rank " + std::to_string(group_.rank()),
              "every DP rank must build the same model with the same trainable parameters");

  for (size_t k = 0; k < params_.size(); ++k) {
    hook_ids_.push_back(
        params_[k].register_hook([this, k](const torch::Tensor& grad) { on_grad(k, grad); }));
  }
}

GradientAllReducer::~GradientAllReducer() {
  for (size_t k = 0; k < hook_ids_.size(); ++k) params_[k].remove_hook(hook_ids_[k]);
  // Collectives still in flight reference our buffers through their own handles; wait
  // so the group is not left mid-step (errors are swallowed: we are unwinding).
  for (auto& work : works_) {
    try {
      work.wait();
    } catch (...) {
    }
  }
}

void GradientAllReducer::prepare_for_backward() {
  MutexLock lock(mutex_);
  TORCH_CHECK(!armed_, "prepare_for_backward() called twice without finish()");
  armed_ = true;
  std::fill(ready_.begin(), ready_.end(), 0);
  missing_.clear();
  for (const auto& bucket : bucket_params_) missing_.push_back(bucket.size());
  next_launch_ = 0;
  launched_during_backward_ = 0;
}

void GradientAllReducer::on_grad(size_t param, const torch::Tensor& grad) {
  MutexLock lock(mutex_);
  if (!armed_) return;  // an earlier micro-batch: autograd accumulates into .grad
  TORCH_CHECK(!ready_[param], "a parameter received two gradients in one armed backward; "
              "call prepare_for_backward() only before the last backward of the step");
  torch::NoGradGuard no_grad;
  const Slot& slot = slots_[param];
  torch::Tensor dst = flats_[slot.bucket].narrow(0, slot.offset, params_[param].numel());
  const torch::Tensor& accumulated = params_[param].grad();
  if (accumulated.defined()) {
    torch::add_out(dst, accumulated.reshape({-1}), grad.reshape({-1}));
  } else {
    dst.copy_(grad.reshape({-1}));
  }
  ready_[param] = 1;
  if (--missing_[slot.bucket] == 0) {
    const size_t before = next_launch_;
    launch_ready_buckets_locked();
    launched_during_backward_ += next_launch_ - before;
  }
}

void GradientAllReducer::launch_ready_buckets_locked() {
  while (next_launch_ < bucket_params_.size() && missing_[next_launch_] == 0) {
    launch_locked(next_launch_++);
  }
}

void GradientAllReducer::launch_locked(size_t bucket) {
  works_[bucket] = group_.all_reduce_sum_async(flats_[bucket]);
}

void GradientAllReducer::finish() {
  torch::NoGradGuard no_grad;
  // Waited on outside the lock; the hooks launch nothing more once armed_ is false.
  std::vector<PendingWork> launched(bucket_params_.size());
  {
    MutexLock lock(mutex_);
    if (!armed_) {
      std::fill(ready_.begin(), ready_.end(), 0);
      next_launch_ = 0;
    }
    armed_ = false;
    // Buckets no hook completed: parameters no hook saw contribute .grad or zeros.
    for (size_t b = next_launch_; b < bucket_params_.size(); ++b) {
      for (size_t k : bucket_params_[b]) {
        if (ready_[k]) continue;
        torch::Tensor dst = flats_[b].narrow(0, slots_[k].offset, params_[k].numel());
        const torch::Tensor& grad = params_[k].grad();
        if (grad.defined()) {
          dst.copy_(grad.reshape({-1}));
        } else {
          dst.zero_();
        }
      }
      launch_locked(b);
    }
    next_launch_ = bucket_params_.size();
    launched.swap(works_);
  }

  const double divisor =
      options_.scale == GradientScale::kMeanOverRanks ? group_.world_size() : 1.0;
  for (size_t b = 0; b < bucket_params_.size(); ++b) {
    launched[b].wait();
    if (divisor != 1.0) flats_[b].div_(divisor);
    for (size_t k : bucket_params_[b]) {
      torch::Tensor& param = params_[k];
      torch::Tensor reduced =
          flats_[b].narrow(0, slots_[k].offset, param.numel()).view(param.sizes());
      if (param.grad().defined()) {
        param.mutable_grad().copy_(reduced);
      } else {
        param.mutable_grad() = reduced.clone();
      }
    }
  }
}

}  // namespace aspen::parallel
