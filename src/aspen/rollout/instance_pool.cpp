#include "aspen/rollout/instance_pool.h"

#include <ATen/Parallel.h>

#include "aspen/util/error.h"
#include "aspen/util/log.h"
#include "aspen/util/thread_affinity.h"

namespace aspen {

struct InstancePool::Instance {
  int index = 0;
  InstanceOptions options;
  std::unique_ptr<RolloutEngine> engine;  // touched only by the instance thread after start

  mutable std::mutex mutex;
  std::condition_variable wake;
  std::deque<GenerationRequest> inbox;  // GUARDED_BY(mutex)
  int64_t inbox_samples = 0;            // GUARDED_BY(mutex)
  QueueState state;                     // GUARDED_BY(mutex)
  EngineStats stats;                    // GUARDED_BY(mutex)
  bool stopping = false;  // GUARDED_BY(mutex)
  std::shared_ptr<const WeightSet> loaded;  // the board's set in the engine; instance thread only
  std::thread thread;
};


InstancePool::InstancePool(std::vector<QwenForCausalLM> models,
                           std::vector<InstanceOptions> options,
                           std::shared_ptr<const Tokenizer> tokenizer) {
  check_input(!models.empty() && models.size() == options.size(),
              "need one model and one InstanceOptions per instance", "instance pool");
  for (size_t i = 0; i < models.size(); ++i) {
    auto instance = std::make_unique<Instance>();
    instance->index = static_cast<int>(i);
    instance->options = options[i];
    instance->engine = std::make_unique<RolloutEngine>(models[i], options[i].engine, tokenizer);
    instance->state = instance->engine->queue_state();
    instances_.push_back(std::move(instance));
  }
  for (auto& instance : instances_) {
    Instance* raw = instance.get();
    instance->thread = std::thread([this, raw] { run_instance(*raw); });
  }
}

InstancePool::~InstancePool() {
  for (auto& instance : instances_) {
    {
      std::lock_guard<std::mutex> lock(instance->mutex);
      instance->stopping = true;
    }
    instance->wake.notify_all();
  }
  for (auto& instance : instances_) instance->thread.join();
}

void InstancePool::submit(int index, GenerationRequest request) {
  check_input(index >= 0 && index < size(), "no rollout instance " + std::to_string(index),
              "submit");
  check_input(request.n >= 1, "n must be >= 1", "request " + request.id);
  request.params.validate("request " + request.id);
  Instance& instance = *instances_[index];
  {
    std::lock_guard<std::mutex> lock(completions_mutex_);
    in_flight_ += request.n;
  }
  {
    std::lock_guard<std::mutex> lock(instance.mutex);
    instance.inbox_samples += request.n;
    instance.state.waiting += request.n;
    instance.state.outstanding_tokens +=
        static_cast<int64_t>(request.prompt.size()) + request.params.max_tokens * request.n;
    instance.inbox.push_back(std::move(request));
  }
  instance.wake.notify_one();
}

std::vector<QueueState> InstancePool::queue_states() const {
  std::vector<QueueState> states;
  for (const auto& instance : instances_) {
    std::lock_guard<std::mutex> lock(instance->mutex);
    states.push_back(instance->state);
  }
  return states;
}

std::vector<EngineStats> InstancePool::stats() const {
  std::vector<EngineStats> all;
  for (const auto& instance : instances_) {
    std::lock_guard<std::mutex> lock(instance->mutex);
    all.push_back(instance->stats);
  }
  return all;
}

int64_t InstancePool::in_flight() const {
  std::lock_guard<std::mutex> lock(completions_mutex_);
  return in_flight_;
}

std::optional<PooledCompletion> InstancePool::pop_completion(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(completions_mutex_);
  if (!completions_ready_.wait_for(lock, timeout, [this] { return !completions_.empty(); })) {
    return std::nullopt;
  }
  PooledCompletion completion = std::move(completions_.front());
  completions_.pop_front();
  --in_flight_;
  return completion;
}

void InstancePool::publish_weights(std::shared_ptr<const WeightSet> weights) {
  check_input(weights != nullptr, "no weights", "publish_weights");
  board_.publish(std::move(weights));
  for (auto& instance : instances_) {
    // Taking the lock orders the publish before the instance's next predicate check.
    { std::lock_guard<std::mutex> lock(instance->mutex); }
    instance->wake.notify_one();
  }
}

void InstancePool::run_instance(Instance& instance) {
  // OpenMP's thread count is per calling thread, so this budget is this instance's own.
  at::set_num_threads(instance.options.intra_op_threads);
  pin_current_thread(instance.options.cores, "rollout instance " + std::to_string(instance.index));
  RolloutEngine& engine = *instance.engine;
  while (true) {
    std::deque<GenerationRequest> arrivals;
    std::shared_ptr<const WeightSet> latest;
    {
      std::unique_lock<std::mutex> lock(instance.mutex);
      instance.wake.wait(lock, [&] {
        latest = board_.latest();
        return instance.stopping || !instance.inbox.empty() || latest != instance.loaded ||
               engine.has_unfinished();
      });
      if (instance.stopping) return;
      arrivals.swap(instance.inbox);
      instance.inbox_samples = 0;
    }
    if (latest != instance.loaded) {  // a step boundary: switch to the newest set
      const std::map<std::string, torch::Tensor> tensors(latest->tensors.begin(),
                                                         latest->tensors.end());
      engine.load_weights(latest->version, tensors);
      instance.loaded = std::move(latest);
    }
    std::vector<Completion> finished;
    for (auto& request : arrivals) {
      try {
        engine.add_request(request);
      } catch (const Error& e) {
        // A request the engine cannot take (e.g. longer than the cache) is answered
        // with aborted samples so no consumer waits for it forever.
        log_error("rollout instance ", instance.index, ": ", e.what());
        for (int64_t j = 0; j < request.n; ++j) {
          Completion aborted;
          aborted.request_id = request.id;
          aborted.sample_index = j;
          aborted.prompt_token_ids = request.prompt;
          aborted.finish_reason = FinishReason::kAbort;
          finished.push_back(std::move(aborted));
        }
      }
    }
    const int64_t tokens_before = engine.stats().scheduled_tokens;
    const auto step_start = std::chrono::steady_clock::now();
    for (auto& completion : engine.step()) finished.push_back(std::move(completion));
    const int64_t step_tokens = engine.stats().scheduled_tokens - tokens_before;
    if (instance.options.on_step && step_tokens > 0) {
      instance.options.on_step(step_start, std::chrono::steady_clock::now(), step_tokens);
    }
    {
      std::lock_guard<std::mutex> lock(instance.mutex);
      instance.state = engine.queue_state();
      instance.state.waiting += instance.inbox_samples;
      instance.stats = engine.stats();
    }
    if (!finished.empty()) {
      {
        std::lock_guard<std::mutex> lock(completions_mutex_);
        for (auto& completion : finished)
          completions_.push_back({instance.index, std::move(completion)});
      }
      completions_ready_.notify_all();
    }
  }
}

}  // namespace aspen
