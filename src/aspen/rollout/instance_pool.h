// InstancePool: N rollout engines in one process, each driven by its own thread
// with its own intra-op thread budget (and optionally pinned cores), as the ASP
// pipeline's "several rollout instances".
//
// Requests go to a chosen instance (the dispatcher decides which, from the queue
// states every instance publishes after each step). Finished samples come out of
// one shared completion queue, in finishing order. New weights are published on one
// WeightBoard (parallel/weight_set.h, the versioned sets the resharder produces too),
// and each instance switches to the board's latest set at its next step boundary.
//
// Thread safety: every public method may be called from any thread.
// Locking: each instance's inbox and published queue state are guarded by that
// instance's mutex; the completion queue by completions_mutex_; the board by its own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "aspen/parallel/weight_set.h"
#include "aspen/rollout/engine.h"

namespace aspen {

struct InstanceOptions {
  EngineConfig engine;
  int intra_op_threads = 1;  // torch threads this instance's steps may use
  std::vector<int> cores;    // pin the instance thread here; empty: no pinning
  // Called on the instance thread after every engine step that did work (timeline
  // tracing); must be cheap and thread-safe. Empty: nothing is called.
  std::function<void(std::chrono::steady_clock::time_point start,
                     std::chrono::steady_clock::time_point end, int64_t scheduled_tokens)>
      on_step;
};

// A completion tagged with the instance that produced it.
struct PooledCompletion {
  int instance = 0;
  Completion completion;
};

class InstancePool {
 public:
  // One model per instance (each instance owns its weights, as separate
  // inference replicas do). `tokenizer` may be null (see RolloutEngine).
  InstancePool(std::vector<QwenForCausalLM> models, std::vector<InstanceOptions> options,
               std::shared_ptr<const Tokenizer> tokenizer = nullptr);
  ~InstancePool();
  InstancePool(const InstancePool&) = delete;
  InstancePool& operator=(const InstancePool&) = delete;

  int size() const { return static_cast<int>(instances_.size()); }

  // Queues a request on `instance`. Invalid requests throw aspen::Error here, in
  // the caller's thread (they are validated before queueing).
  void submit(int instance, GenerationRequest request);
  // Latest queue state of each instance (requests still in an inbox count as waiting).
  std::vector<QueueState> queue_states() const;
  // Total samples submitted and not yet returned by pop_completion.
  int64_t in_flight() const;

  // Blocks up to `timeout` for the next finished sample.
  std::optional<PooledCompletion> pop_completion(std::chrono::milliseconds timeout);

  // Publishes `weights` (HF names, the full model: these instances are not
  // tensor-parallel) on the board. Every instance loads the latest published set,
  // as weights->version, before its next step; a set superseded before an instance
  // stepped is skipped by it.
  void publish_weights(std::shared_ptr<const WeightSet> weights);
  // Per-instance engine statistics (snapshot).
  std::vector<EngineStats> stats() const;

 private:
  struct Instance;
  void run_instance(Instance& instance);

  WeightBoard board_;
  std::vector<std::unique_ptr<Instance>> instances_;
  mutable std::mutex completions_mutex_;
  std::condition_variable completions_ready_;
  std::deque<PooledCompletion> completions_;  // GUARDED_BY(completions_mutex_)
  int64_t in_flight_ = 0;                     // GUARDED_BY(completions_mutex_)
};

}  // namespace aspen
