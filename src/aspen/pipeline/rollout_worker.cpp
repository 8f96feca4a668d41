#include "aspen/pipeline/rollout_worker.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <random>
#include <thread>

#include "aspen/pipeline/rl_rows.h"
#include "aspen/pipeline/sync_schedule.h"
#include "aspen/pipeline/trace_writer.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"
#include "aspen/util/thread_affinity.h"

namespace aspen {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_from(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

int64_t environment_int(const char* name, int64_t otherwise) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::atoll(value) : otherwise;
}

std::vector<RowId> rows_of(const Claim& claim) {
  std::vector<RowId> ids;
  for (const ClaimedRow& row : claim.rows) ids.push_back(row.id);
  return ids;
}

}  // namespace

RolloutWorker::RolloutWorker(const TrainConfig& config, QwenForCausalLM model,
                             std::shared_ptr<const Tokenizer> tokenizer, TransferDock& dock,
                             RolloutWorkerOptions options)
    : config_(config),
      dock_(dock),
      options_(std::move(options)),
      engine_(std::move(model), options_.engine, std::move(tokenizer)),
      step_delay_ms_(std::max<int64_t>(0, environment_int("ASPEN_FAULT_STEP_DELAY_MS", 0))) {
  if (environment_int("ASPEN_FAULT_SIGKILL_RANK", -1) == options_.rank) {
    kill_after_steps_ = environment_int("ASPEN_FAULT_SIGKILL_AFTER_STEPS", -1);
  }
  status_.instance = options_.instance;
  status_.rank = options_.rank;
  if (options_.trace != nullptr) {
    track_ = options_.trace->track("rollout instance " + std::to_string(options_.instance) +
                                   " (rank " + std::to_string(options_.rank) + ")");
  }
}

void RolloutWorker::refresh_weights() {
  std::shared_ptr<const WeightSet> latest =
      dock_.latest_weights(options_.weights_from, engine_.policy_version());
  if (!latest) return;
  const auto start = Clock::now();
  engine_.load_weights(latest->version,
                       std::map<std::string, torch::Tensor>(latest->tensors.begin(),
                                                            latest->tensors.end()));
  if (options_.trace != nullptr) {
    options_.trace->span(track_, "load weights", start, Clock::now(),
                         {{"version", latest->version}});
  }
}

int64_t RolloutWorker::claim_groups(double wait_s) {
  ClaimOptions options;
  options.max_rows = config_.rollout.n;
  options.min_rows = 1;
  options.whole_groups = true;
  options.target = options_.instance;
  options.max_version = engine_.policy_version();
  options.lease_s = options_.lease_s;
  options.timeout_s = wait_s;
  int64_t claimed = 0;
  // One group per claim, so each group's lease is acked when that group finishes.
  while (!stopping_) {
    Claim claim = dock_.claim(rl_consumers::kRollout, options);
    if (claim.empty()) break;
    options.timeout_s = 0.0;  // waited once; take the rest without waiting
    const int64_t group = claim.rows.front().info.group_id;
    const std::vector<ColumnData> columns = dock_.get(claim);
    const torch::Tensor prompt =
        find_column(columns, rl_columns::kPrompt).values.front().to(torch::kInt64).contiguous();
    GenerationRequest request;
    request.id = std::to_string(group);
    request.prompt.assign(prompt.data_ptr<int64_t>(), prompt.data_ptr<int64_t>() + prompt.numel());
    request.params = rollout_sampling(config_, group);
    request.n = static_cast<int64_t>(claim.rows.size());
    try {
      engine_.add_request(std::move(request));
    } catch (const Error& e) {
      // A group no instance can serve is dropped from the dock, not retried forever.
      log_error("rollout instance ", options_.instance, ": group ", group, " dropped: ", e.what());
      dock_.discard(rows_of(claim));
      continue;
    }
    status_.claimed_samples += static_cast<int64_t>(claim.rows.size());
    held_[group] = HeldGroup{std::move(claim), {}};
    ++claimed;
  }
  return claimed;
}

void RolloutWorker::finish_group(int64_t group, HeldGroup& held) {
  const bool aborted = std::any_of(held.samples.begin(), held.samples.end(), [](const Completion& c) {
    return c.finish_reason == FinishReason::kAbort;
  });
  if (aborted) {
    log_error("rollout instance ", options_.instance, ": group ", group,
              " was aborted by the engine; dropped");
    dock_.discard(rows_of(held.claim));
    return;
  }
  std::sort(held.samples.begin(), held.samples.end(),
            [](const Completion& a, const Completion& b) { return a.sample_index < b.sample_index; });
  // Rows were allocated sample by sample at admission: the claim's j-th row (by id)
  // is sample j.
  std::vector<ClaimedRow> rows = held.claim.rows;
  std::sort(rows.begin(), rows.end(),
            [](const ClaimedRow& a, const ClaimedRow& b) { return a.id < b.id; });
  std::vector<RowId> ids;
  std::vector<RowInfo> infos;
  for (size_t j = 0; j < rows.size(); ++j) {
    const Completion& c = held.samples[j];
    RowInfo info = rows[j].info;
    info.tokens = static_cast<int64_t>(c.token_ids.size());
    info.version = c.policy_versions.empty() ? engine_.policy_version() : c.policy_versions.front();
    ids.push_back(rows[j].id);
    infos.push_back(info);
    status_.completed_prompt_tokens += static_cast<int64_t>(c.prompt_token_ids.size());
    status_.completed_response_tokens += info.tokens;
  }
  status_.completed_samples += static_cast<int64_t>(rows.size());
  // A lease that ran out (this instance too slow to renew it) may have let another
  // instance regenerate the group, and its rows may even have retired: then there is
  // nothing to write (the other instance wrote the same samples).
  if (!dock_.renew(held.claim, options_.lease_s)) {
    log_warn("rollout instance ", options_.instance, ": lease of group ", group,
             " had expired; another instance regenerates it");
    return;
  }
  // Length and version first: the rows become claimable for reward on the put.
  dock_.update_info(ids, infos);
  dock_.put_columns(ids, response_columns(held.samples));
  dock_.ack(held.claim);
}

void RolloutWorker::renew_leases() {
  if (seconds_from(last_renew_) < options_.lease_s / 4) return;
  last_renew_ = Clock::now();
  for (auto& [group, held] : held_) {
    if (!dock_.renew(held.claim, options_.lease_s)) {
      log_warn("rollout instance ", options_.instance, ": lease of group ", group, " was lost");
    }
  }
}

void RolloutWorker::post_status(bool exited) {
  status_.queue = engine_.queue_state();
  status_.busy_seconds = engine_.stats().busy_seconds;
  status_.scheduled_tokens = engine_.stats().scheduled_tokens;
  status_.version = engine_.policy_version();
  status_.exited = exited;
  dock_.post_status(instance_status_key(options_.instance), encode_instance_status(status_));
  last_status_ = Clock::now();
}

bool RolloutWorker::run_is_over() {
  const auto entries = dock_.statuses(kRunStatusKey);
  auto it = entries.find(kRunStatusKey);
  return it != entries.end() && it->second.value == kRunDone;
}

void RolloutWorker::run() {
  // OpenMP's thread count is per calling thread, so this budget is this instance's own.
  at::set_num_threads(std::max(1, options_.intra_op_threads));
  pin_current_thread(options_.cores, "rollout instance " + std::to_string(options_.instance));
  torch::NoGradGuard no_grad;
  std::mt19937 jitter(static_cast<uint32_t>(options_.instance * 7919 + options_.rank));
  last_renew_ = Clock::now();
  post_status(false);
  while (!stopping_) {
    refresh_weights();
    // Idle: wait (briefly, to keep weights and status fresh) for a dispatched group.
    const bool claimed = claim_groups(engine_.has_unfinished() ? 0.0 : 0.05) > 0;
    if (claimed || seconds_from(last_status_) >= options_.status_period_s) {
      post_status(false);
      if (run_is_over()) break;  // what is still generating is not needed any more
    }
    if (!engine_.has_unfinished()) continue;
    const int64_t tokens_before = engine_.stats().scheduled_tokens;
    const auto start = Clock::now();
    std::vector<Completion> finished = engine_.step();
    const int64_t tokens = engine_.stats().scheduled_tokens - tokens_before;
    if (options_.trace != nullptr && tokens > 0) {
      options_.trace->span(track_, "generate step", start, Clock::now(), {{"tokens", tokens}});
    }
    if (++steps_ == kill_after_steps_) {
      log_error("rollout instance ", options_.instance, ": fault injection, SIGKILL after ",
                steps_, " steps");
      raise(SIGKILL);
    }
    if (step_delay_ms_ > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(
          std::uniform_int_distribution<int64_t>(0, step_delay_ms_)(jitter)));
    }
    for (Completion& c : finished) {
      const int64_t group = std::stoll(c.request_id);
      HeldGroup& held = held_.at(group);
      held.samples.push_back(std::move(c));
      if (held.samples.size() < held.claim.rows.size()) continue;
      finish_group(group, held);
      held_.erase(group);
    }
    renew_leases();
  }
  post_status(true);
}

}  // namespace aspen
