#include "aspen/pipeline/process_workers.h"

#include <map>

#include "aspen/model/expert_parallel_state.h"
#include "aspen/parallel/tensor_parallel.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rollout_requests.h"
#include "aspen/pipeline/trajectory_environments.h"
#include "aspen/train/model_copy.h"
#include "aspen/util/log.h"

namespace aspen::pipeline {
namespace {

// Status-board keys of workers that failed: "worker-error/rank <r>" -> the message.
constexpr const char* kWorkerErrorPrefix = "worker-error/";

// The policy of a multi-rank instance: this rank's tensor-parallel shards or experts,
// loaded from the full policy.
QwenForCausalLM instance_shards(const TrainConfig& config, const RlSetup& setup, int instance,
                                ProcessGroupHandle& group) {
  // Every rank of an instance steps the same batch: an expert-parallel instance's
  // ranks hold the same tokens (ExpertParallel::replicated_tokens).
  const bool expert_parallel = config.placement.rollout_ep > 1;
  QwenForCausalLM model =
      expert_parallel
          ? QwenForCausalLM(setup.model->config, TensorParallel{},
                            ExpertParallel::over(group, /*replicated_tokens=*/true))
          : QwenForCausalLM(setup.model->config, TensorParallel::over(group));
  if (expert_parallel) {
    const int64_t experts = setup.model->config.moe.num_experts;
    const int64_t first = model->ep.first_local_expert(experts);
    log_info("rollout instance ", instance, ": expert-parallel rank ", model->ep.rank, " of ",
             model->ep.size, " holds experts [", first, ", ",
             first + model->ep.local_expert_count(experts), ") of ", experts);
  }
  // The policy's adapters (train.lora): the instance receives only them after this.
  if (setup.model->has_lora()) model->attach_lora(setup.model->lora_options);
  model->to(setup.rollout_device);
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> full;
  for (const auto& [name, tensor] : setup.model->hf_state()) full[name] = tensor.detach();
  model->load_state(full, "rollout weights");
  for (auto& parameter : model->parameters()) parameter.set_requires_grad(false);
  return model;
}

}  // namespace

void ProcessWorkers::Errors::add(std::exception_ptr error) {
  MutexLock lock(mutex_);
  errors_.push_back(std::move(error));
}

std::vector<std::exception_ptr> ProcessWorkers::Errors::all() const {
  MutexLock lock(mutex_);
  return errors_;
}

ProcessWorkers::ProcessWorkers(const TrainConfig& config, RlSetup& setup,
                               const EngineLayout& layout, std::optional<ProcessGroupHandle> world,
                               TransferDock& dock, const ProcessWorkersOptions& options)
    : layout_(layout), dock_(dock) {
  // Every rank creates every multi-rank (tensor- or expert-parallel) instance's
  // subgroup (a collective).
  std::map<int, ProcessGroupHandle> instance_groups;
  if (world && config.placement.rollout_instance_size() > 1) {
    for (int i = 0; i < layout.instances; ++i) {
      if (auto group = world->new_subgroup(layout.instance_ranks[static_cast<size_t>(i)])) {
        instance_groups.emplace(i, *group);
      }
    }
  }
  const int64_t kv_cache_bytes =
      rollout_kv_cache_bytes(config, setup, static_cast<int64_t>(layout.instances_here.size()));
  const std::shared_ptr<const TrajectoryEnvironments> trajectories =
      layout.instances_here.empty() ? nullptr : make_rollout_trajectories(config, setup);
  for (const int instance : layout.instances_here) {
    RolloutWorkerOptions worker;
    worker.trajectories = trajectories;
    worker.instance = instance;
    worker.rank = layout.rank;
    worker.engine = rollout_engine_config(config, setup);
    worker.engine.kv_cache_bytes = kv_cache_bytes;
    worker.engine.interrupt_on_weight_update = config.pipeline.interrupt;
    worker.intra_op_threads = config.pipeline.rollout_threads;
    const std::vector<int>& cores = config.pipeline.rollout_cores;
    if (!cores.empty()) worker.cores = {cores[static_cast<size_t>(instance) % cores.size()]};
    worker.weights_from = options.weights_from;
    worker.dispatch_chunk = dispatch_chunk(config, layout.instances);
    worker.lease_s = config.pipeline.instance_timeout_s;
    worker.trace = options.trace;
    worker.own_shards = options.own_shards;
    QwenForCausalLM model{nullptr};
    auto group = instance_groups.find(instance);
    if (group != instance_groups.end()) {
      worker.peers = group->second;
      model = instance_shards(config, setup, instance, group->second);
    } else {
      model = copy_model(setup.model, torch::kFloat, setup.rollout_device, /*trainable=*/false);
    }
    rollout_.push_back(
        std::make_unique<RolloutWorker>(config, model, setup.tokenizer, dock, worker));
  }
  if (!layout.instances_here.empty()) {
    reward_ = std::make_unique<RewardWorker>(config, setup, dock, options.trace,
                                             "reward (rank " + std::to_string(layout.rank) + ")");
  }
}

void ProcessWorkers::start() {
  if (!threads_.empty() || stopped_) return;
  // A rollout-only rank runs its one instance on its main thread (serve()).
  const size_t first = layout_.trains() ? 0 : 1;
  for (size_t k = first; k < rollout_.size(); ++k) {
    threads_.emplace_back([this, worker = rollout_[k].get()] {
      try {
        if (worker->leads()) {
          worker->run();
        } else {
          worker->follow();
        }
      } catch (const std::exception& e) {
        log_error("rollout instance: ", e.what());
        errors_.add(std::current_exception());
        report(e.what());
      }
    });
  }
  if (reward_) threads_.emplace_back([this] { reward_->run(); });
}

void ProcessWorkers::report(const std::string& what) {
  try {
    dock_.post_status(std::string(kWorkerErrorPrefix) + "rank " + std::to_string(layout_.rank),
                      what);
  } catch (const std::exception& e) {
    log_warn("could not report a worker error to the trainers: ", e.what());
  }
}

void ProcessWorkers::serve() {
  start();
  if (rollout_.empty()) return;
  RolloutWorker& worker = *rollout_.front();
  if (reward_) {
    // The reward thread's failure ends this rank's instance too, and the trainers hear
    // of it from the board.
    worker.set_health_check([this] {
      if (std::exception_ptr error = reward_->error()) std::rethrow_exception(error);
    });
  }
  try {
    if (worker.leads()) {
      worker.run();
    } else {
      worker.follow();
    }
  } catch (const std::exception& e) {
    report(e.what());
    throw;
  }
}

void ProcessWorkers::check() const {
  if (reward_) {
    if (std::exception_ptr error = reward_->error()) std::rethrow_exception(error);
  }
  for (const std::exception_ptr& error : errors_.all()) std::rethrow_exception(error);
  // A worker on another rank that failed says so on the board (rl_run: its rank then
  // exits, possibly tolerated, so its error must reach the trainers this way).
  for (const auto& [key, entry] : dock_.statuses(kWorkerErrorPrefix)) {
    throw Error(entry.value, key.substr(std::string(kWorkerErrorPrefix).size()));
  }
}

void ProcessWorkers::stop() {
  if (stopped_) return;
  stopped_ = true;
  for (auto& worker : rollout_) worker->stop();
  if (reward_) reward_->stop();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

}  // namespace aspen::pipeline
