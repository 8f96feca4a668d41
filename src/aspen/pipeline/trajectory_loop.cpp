#include "aspen/pipeline/trajectory_loop.h"
#include "aspen/pipeline/imports.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "aspen/agent/observation_suffix.h"
#include "aspen/tokenizer/utf8.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"

namespace aspen::pipeline {

TrajectoryLoop::TrajectoryLoop(TrajectoryLoopOptions options, EnvironmentFactory factory,
                               std::shared_ptr<const Tokenizer> tokenizer,
                               ChatTemplate chat_template)
    : options_(options),
      factory_(std::move(factory)),
      tokenizer_(std::move(tokenizer)),
      template_(std::move(chat_template)) {
  const std::string who = "rollout.environment";
  check_input(options_.max_turns >= 1, "max_turns must be >= 1", who + ".max_turns");
  check_input(options_.max_turn_tokens >= 1, "must be >= 1", "rollout.max_tokens");
  check_input(options_.max_trajectory_tokens >= options_.max_turn_tokens,
              "must be at least rollout.max_tokens (one whole turn)",
              who + ".max_trajectory_tokens");
  check_input(options_.threads >= 1, "must be >= 1", who + ".threads");
  check_input(factory_ != nullptr && tokenizer_ != nullptr, "needs an environment and a tokenizer",
              who);
  const auto end = tokenizer_->token_to_id("<|im_end|>");
  check_input(end.has_value(),
              "the tokenizer has no <|im_end|> token, which ends a turn in the chat template",
              who);
  end_of_turn_ = *end;
  for (int i = 0; i < options_.threads; ++i) workers_.emplace_back([this] { work(); });
}

TrajectoryLoop::~TrajectoryLoop() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  jobs_cv_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void TrajectoryLoop::start(const TrajectoryKey& key, nlohmann::ordered_json row) {
  auto state = std::make_shared<State>();
  state->row = std::move(row);
  states_[key] = state;
  MutexLock lock(mutex_);
  if (idle_.empty()) {
    state->environment = factory_();
  } else {
    state->environment = std::move(idle_.back());
    idle_.pop_back();
  }
  ++in_environment_;
  jobs_.push_back(Job{key, state, "", /*reset=*/true});
  jobs_cv_.notify_one();
}

void TrajectoryLoop::turn_finished(const TrajectoryKey& key, const Completion& turn) {
  auto it = states_.find(key);
  check_input(it != states_.end(), "a turn of a trajectory that is not running", "trajectory loop");
  std::shared_ptr<State> state = it->second;
  state->trajectory.append_turn(turn);
  // The text the environment parses: the turn without its end-of-turn token (the
  // template's marker, not content).
  std::vector<TokenId> content = turn.token_ids;
  if (!content.empty() && content.back() == end_of_turn_) content.pop_back();
  MutexLock lock(mutex_);
  ++in_environment_;
  jobs_.push_back(Job{key, state, tokenizer_->decode(content, /*skip_special_tokens=*/true)});
  jobs_cv_.notify_one();
}

bool TrajectoryLoop::turn_refused(const TrajectoryKey& key, const std::string&) {
  // Nothing of it is in flight (its environment waits for this turn): the environment
  // serves the next trajectory, as when one ends.
  auto it = states_.find(key);
  if (it == states_.end()) return false;
  MutexLock lock(mutex_);
  idle_.push_back(std::move(it->second->environment));
  states_.erase(it);
  return false;
}

void TrajectoryLoop::poll(std::vector<NextTurn>& next, std::vector<Finished>& finished) {
  MutexLock lock(mutex_);
  for (NextTurn& turn : next_) next.push_back(std::move(turn));
  for (Finished& done : finished_) {
    states_.erase(done.key);
    finished.push_back(std::move(done));
  }
  in_environment_ -= static_cast<int64_t>(next_.size() + finished_.size());
  next_.clear();
  finished_.clear();
}

void TrajectoryLoop::wait_ready(double seconds) {
  MutexLock lock(mutex_);
  if (!next_.empty() || !finished_.empty() || in_environment_ == 0) return;
  ready_cv_.wait_for(mutex_, std::chrono::duration<double>(seconds));
}

int64_t TrajectoryLoop::waiting() const {
  MutexLock lock(mutex_);
  return in_environment_;
}

void TrajectoryLoop::forget(int64_t lease) {
  for (auto it = states_.begin(); it != states_.end();) {
    it = it->first.lease == lease ? states_.erase(it) : std::next(it);
  }
  MutexLock lock(mutex_);
  forgotten_.insert(lease);
  // What is ready already is dropped here; what is in flight, when it lands.
  auto drop = [lease](const auto& item) { return item.key.lease == lease; };
  const size_t before = next_.size() + finished_.size();
  next_.erase(std::remove_if(next_.begin(), next_.end(), drop), next_.end());
  finished_.erase(std::remove_if(finished_.begin(), finished_.end(), drop), finished_.end());
  const auto queued = std::remove_if(jobs_.begin(), jobs_.end(), drop);
  const size_t dropped_jobs = static_cast<size_t>(std::distance(queued, jobs_.end()));
  jobs_.erase(queued, jobs_.end());
  in_environment_ -= static_cast<int64_t>(before - next_.size() - finished_.size() + dropped_jobs);
}

void TrajectoryLoop::work() {
  while (true) {
    Job job;
    {
      MutexLock lock(mutex_);
      while (!stopping_ && jobs_.empty()) jobs_cv_.wait(mutex_);
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    run_job(job);
  }
}

void TrajectoryLoop::run_job(Job& job) {
  State& state = *job.state;
  Trajectory& t = state.trajectory;
  bool ends = false;
  std::vector<TokenId> observation;
  // The environment never throws for a trajectory's fault (environment.h); anything
  // else it throws (a data row it cannot read, a template that cannot render the
  // conversation) ends this trajectory with the error rather than the instance.
  try {
    if (job.reset) {
      const agent::ResetResult reset =
          state.environment->reset_episode(state.row, {job.key.group, job.key.sample});
      t.tool_wait_s += reset.wait_seconds;
      if (reset.error) {
        t.end = TrajectoryEnd::kEnvironment;
        t.error = reset.error->message;
        ends = true;
      } else {
        t.prompt = tokenizer_->encode(template_.render(reset.messages, /*add_generation_prompt=*/true,
                                                       options_.enable_thinking, reset.tools));
      }
    } else {
      const agent::StepResult step = state.environment->step(job.turn_text);
      t.tool_calls += step.metrics.tool_calls;
      t.tool_errors += step.metrics.tool_errors;
      t.tool_wait_s += step.metrics.wait_seconds;
      if (step.turn_reward) t.turn_rewards.back() = static_cast<float>(*step.turn_reward);
      if (step.error) {
        t.end = TrajectoryEnd::kEnvironment;
        t.error = step.error->message;
        ends = true;
      } else if (step.done) {
        t.end = step.metrics.max_turns_reached ? TrajectoryEnd::kMaxTurns : TrajectoryEnd::kDone;
        t.has_reward = step.reward.has_value();
        t.reward = step.reward.value_or(0.0);
        ends = true;
      } else if (t.turns() >= options_.max_turns) {
        t.end = TrajectoryEnd::kMaxTurns;
        t.has_reward = true;
        t.reward = 0;
        ends = true;
      } else {
        // Observations quote what the model wrote (a malformed call's parse error cites
        // its bytes, possibly cut inside a character): made valid UTF-8, invalid bytes
        // becoming U+FFFD, because the tokenizer encodes only valid text.
        std::vector<ChatMessage> observations = step.observations;
        for (ChatMessage& message : observations) {
          std::string valid;
          utf8::append_lossy(message.content, valid);
          message.content = std::move(valid);
        }
        const agent::ObservationSuffix suffix =
            observation_suffix(template_, observations, options_.enable_thinking);
        const bool closed = !t.response.empty() && t.response.back() == end_of_turn_;
        observation = tokenizer_->encode(closed ? suffix.rest : suffix.text());
        t.append_observation(observation);
        if (static_cast<int64_t>(t.response.size()) >= options_.max_trajectory_tokens) {
          t.end = TrajectoryEnd::kMaxTokens;
          t.has_reward = true;
          t.reward = 0;
          ends = true;
        }
      }
    }
  } catch (const std::exception& e) {
    t.end = TrajectoryEnd::kEnvironment;
    t.error = e.what();
    ends = true;
  }
  MutexLock lock(mutex_);
  if (forgotten_.count(job.key.lease) > 0) {
    --in_environment_;
    idle_.push_back(std::move(state.environment));  // its next reset starts afresh
    return;
  }
  if (ends) {
    finish(job.key, job.state);
  } else {
    next_turn(job.key, state);
  }
  ready_cv_.notify_all();
}

void TrajectoryLoop::finish(const TrajectoryKey& key, std::shared_ptr<State> state) {
  finished_.push_back(Finished{key, std::move(state->trajectory)});
  idle_.push_back(std::move(state->environment));  // serves the next trajectory
}

void TrajectoryLoop::next_turn(const TrajectoryKey& key, const State& state) {
  const Trajectory& t = state.trajectory;
  const int64_t room = options_.max_trajectory_tokens - static_cast<int64_t>(t.response.size());
  // No sampling of its own: the worker samples an environment's turns per group.
  next_.push_back(NextTurn{key, t.context(), std::min(options_.max_turn_tokens, room), t.turns(),
                           std::nullopt});
}

}  // namespace aspen::pipeline
