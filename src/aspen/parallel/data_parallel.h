// Data parallelism: gradient all-reduce in buckets, and global-count helpers.
//
// Loss normalisation contract (why DP = 2 trains exactly like DP = 1):
//   Each rank computes its loss over its LOCAL rows but normalised by the GLOBAL
//   denominator, e.g. token-mean loss = sum over local tokens / global token count,
//   where global token count = all_reduce_sum(group, local token count). The global
//   loss is then the SUM over ranks of the local losses, so the global gradient is the
//   SUM of the local gradients: GradientAllReducer sums and does NOT divide
//   (GradientScale::kSum). Only if a caller normalises per rank (local mean) with equal
//   local batches may it ask for kMeanOverRanks, which divides by WORLD_SIZE.
//   With that, clipping by global norm and AdamW see identical gradients on every
//   rank, so parameters stay identical across ranks without any broadcast after the
//   initial one (broadcast_parameters).
//
// GradientAllReducer: the trainable parameters (requires_grad) are grouped, in reverse
// registration order (roughly the order backward produces their grads), into buckets
// of about bucket_mb MB of one dtype, each with a persistent flat buffer.
// Per optimizer step:
//   reducer.prepare_for_backward();  // before the LAST backward of the step (optional)
//   loss.backward();
//   reducer.finish();                // before Optimizer::step()
// Overlap: once armed by prepare_for_backward(), a per-parameter autograd hook copies
// the parameter's final gradient (the incoming one plus any .grad accumulated by earlier
// micro-batches) into its bucket; when a bucket is complete and every earlier bucket has
// been launched, its async SUM all-reduce starts while backward continues. Buckets are
// always launched in index order, so every rank issues the same collectives in the same
// order even if its backward visits parameters differently.
// finish() launches the buckets no hook completed (a parameter no hook saw contributes
// its current .grad, or zeros), waits for all, and writes the reduced values into .grad:
// afterwards every trainable parameter has a defined grad. Without prepare_for_backward()
// finish() is the synchronous bucketed all-reduce (all_reduce() is an alias).
// Earlier micro-batches' backwards (not armed) just accumulate into .grad locally.
// Errors: aspen::Error at construction when ranks disagree on the parameter set (count
// or sizes), and from all_reduce() when a collective fails (e.g. a peer died).
// Thread safety: prepare_for_backward/finish from the trainer thread, in the same order
// on every rank; the hooks may run on autograd threads and are serialised internally.
// Not copyable or movable (the hooks point at it); the destructor removes the hooks.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "aspen/parallel/imports.h"
#include "aspen/parallel/process_group.h"
#include "aspen/util/mutex.h"

namespace aspen::parallel {

// (name, parameter) pairs; the same type as train/optimizer.h's NamedParams (parallel
// sits below train and model, so it cannot include them).
using NamedParams = std::vector<std::pair<std::string, torch::Tensor>>;

// Global sums of per-rank counts (token counts, row counts, loss sums) for denominators.
// Exact for int64; double is summed in fp64.
int64_t all_reduce_sum(ProcessGroupHandle& group, int64_t value);
double all_reduce_sum(ProcessGroupHandle& group, double value);

// Makes every rank's parameters equal to `root`'s (call once after building the model,
// unless every rank initialises from the same seed or checkpoint).
void broadcast_parameters(ProcessGroupHandle& group, const NamedParams& params, int root = 0);

enum class GradientScale { kSum, kMeanOverRanks };

struct DataParallelOptions {
  double bucket_mb = 25.0;  // bucket capacity; a larger parameter gets a bucket of its own
  GradientScale scale = GradientScale::kSum;
};

class GradientAllReducer {
 public:
  GradientAllReducer(ProcessGroupHandle group, const NamedParams& params,
                     const DataParallelOptions& options = {});
  ~GradientAllReducer();
  GradientAllReducer(const GradientAllReducer&) = delete;
  GradientAllReducer& operator=(const GradientAllReducer&) = delete;

  // Arms the hooks for the next backward (the last one before finish()).
  void prepare_for_backward() EXCLUDES(mutex_);
  // Sums the grads of every trainable parameter over all ranks, in place (see above).
  void finish() EXCLUDES(mutex_);
  void all_reduce() { finish(); }

  // Bucket layout (for tests and logs): parameter indices (into the trainable subset of
  // the constructor's list, in its order) per bucket, in launch order.
  const std::vector<std::vector<size_t>>& buckets() const { return bucket_params_; }
  // Buckets whose all-reduce the hooks launched during the last armed backward.
  size_t launched_during_backward() const EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    return launched_during_backward_;
  }

 private:
  struct Slot {
    size_t bucket = 0;
    int64_t offset = 0;
  };
  void on_grad(size_t param, const torch::Tensor& grad) EXCLUDES(mutex_);
  void launch_ready_buckets_locked() REQUIRES(mutex_);
  void launch_locked(size_t bucket) REQUIRES(mutex_);

  ProcessGroupHandle group_;
  DataParallelOptions options_;
  std::vector<torch::Tensor> params_;
  std::vector<Slot> slots_;
  std::vector<std::vector<size_t>> bucket_params_;
  std::vector<torch::Tensor> flats_;
  std::vector<unsigned> hook_ids_;

  // The per-step state below: the hooks (autograd's threads) against the trainer thread.
  mutable Mutex mutex_;
  bool armed_ GUARDED_BY(mutex_) = false;
  std::vector<char> ready_ GUARDED_BY(mutex_);  // per parameter: its slot holds this step's grad
  std::vector<size_t> missing_ GUARDED_BY(mutex_);     // per bucket: parameters not ready yet
  std::vector<PendingWork> works_ GUARDED_BY(mutex_);  // per bucket
  size_t next_launch_ GUARDED_BY(mutex_) = 0;          // buckets [0, next_launch_) are launched
  size_t launched_during_backward_ GUARDED_BY(mutex_) = 0;
};

}  // namespace aspen::parallel
