#include "aspen/pipeline/trajectory_eval.h"
#include "aspen/pipeline/imports.h"

#include <map>
#include <memory>

#include "aspen/pipeline/agent_loop.h"
#include "aspen/pipeline/trajectory_loop.h"
#include "aspen/rollout/engine.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {
namespace {

// The trajectories: the environments' loop, or (rollout.agent.command) the agent
// programs, whose calls the evaluation's engine answers at the evaluation's sampling.
std::unique_ptr<TrajectorySource> evaluation_source(const RlSetup& setup,
                                                    const TrajectoryEnvironments& envs,
                                                    const SamplingParams& params) {
  if (envs.agent) {
    AgentLoopOptions options = *envs.agent;
    options.sampling = params;
    options.max_turn_tokens = params.max_tokens;
    return std::make_unique<AgentLoop>(options, setup.tokenizer, *envs.chat_template);
  }
  TrajectoryLoopOptions loop_options = envs.loop;
  loop_options.max_turn_tokens = params.max_tokens;
  loop_options.max_trajectory_tokens = std::max(loop_options.max_trajectory_tokens, params.max_tokens);
  return std::make_unique<TrajectoryLoop>(loop_options, envs.make_environment, setup.tokenizer,
                                          *envs.chat_template);
}

}  // namespace

TrajectoryEvalResult evaluate_trajectories(RlSetup& setup, const TrajectoryEnvironments& envs,
                                           const std::vector<TaskExample>& examples,
                                           const SamplingParams& params, int64_t n,
                                           int64_t kv_cache_bytes) {
  check_input(n >= 1, "n = " + std::to_string(n), "trajectory evaluation", "sample at least once");
  TrajectoryEvalResult result;
  result.pass.examples = static_cast<int64_t>(examples.size());
  result.pass.samples_per_example = n;
  result.pass.correct.assign(examples.size(), 0);
  if (examples.empty()) return result;
  torch::NoGradGuard no_grad;
  RolloutEngine engine(setup.model, evaluation_engine_config(setup, kv_cache_bytes),
                       setup.tokenizer);
  const std::unique_ptr<TrajectorySource> source = evaluation_source(setup, envs, params);
  TrajectorySource& loop = *source;
  // Key: group = example, sample = its sample index (lease unused).
  std::map<std::pair<int64_t, int64_t>, nlohmann::ordered_json> rows;
  for (size_t e = 0; e < examples.size(); ++e) {
    for (int64_t i = 0; i < n; ++i) {
      nlohmann::ordered_json row = envs.data_row(examples[e]);
      rows[{static_cast<int64_t>(e), i}] = row;
      loop.start({0, static_cast<int64_t>(e), i}, std::move(row));
    }
  }
  const int64_t total = static_cast<int64_t>(examples.size()) * n;
  int64_t done = 0, turns = 0, calls = 0, failed = 0;
  double score_sum = 0.0;
  std::vector<TrajectorySource::NextTurn> next;
  std::vector<TrajectorySource::Finished> finished;
  std::map<std::string, TrajectoryKey> origins;  // by engine request id
  while (done < total) {
    next.clear();
    finished.clear();
    if (!engine.has_unfinished()) loop.wait_ready(0.05);
    loop.poll(next, finished);
    for (TrajectorySource::NextTurn& turn : next) {
      GenerationRequest request;
      request.id = std::to_string(turn.key.group) + ":" + std::to_string(turn.key.sample) + "/t" +
                   std::to_string(turn.turn);
      request.prompt = std::move(turn.context);
      // An agent's call carries its own sampling (the evaluation's, with the call's
      // seed and stop strings); the budget and the end-of-turn stop are the turn's.
      request.params = turn.params ? *turn.params : params;
      request.params.max_tokens = turn.max_tokens;
      request.params.min_tokens = 0;
      request.params.stop_token_ids.push_back(loop.end_of_turn());
      if (params.seed && !(turn.params && turn.params->seed)) {
        request.params.seed = *params.seed + static_cast<uint64_t>(turn.key.group * n + turn.key.sample) +
                              static_cast<uint64_t>(turn.turn) * 0x9E3779B97F4A7C15ULL;
      }
      request.sample_indices = {turn.key.sample};
      origins[request.id] = turn.key;
      engine.add_request(std::move(request));
    }
    for (TrajectorySource::Finished& f : finished) {
      const Trajectory& t = f.trajectory;
      double score = 0.0;
      if (t.end == TrajectoryEnd::kEnvironment) {
        ++failed;
      } else if (t.has_reward) {
        score = t.reward;
      } else if (!t.turn_starts.empty()) {
        const std::vector<TokenId> last(t.response.begin() + t.turn_starts.back(), t.response.end());
        score = score_final_answer(setup, rows.at({f.key.group, f.key.sample}),
                                   setup.tokenizer->decode(last, /*skip_special_tokens=*/true));
      }
      score_sum += score;
      if (score >= 1.0) ++result.pass.correct[static_cast<size_t>(f.key.group)];
      turns += t.turns();
      calls += t.tool_calls;
      result.pass.response_tokens += static_cast<int64_t>(t.response.size());
      ++done;
    }
    if (!engine.has_unfinished()) continue;
    for (const Completion& c : engine.step()) {
      loop.turn_finished(origins.at(c.request_id), c);
      origins.erase(c.request_id);
    }
  }
  const auto count = static_cast<double>(total);
  result.pass.mean_score = score_sum / count;
  result.turns_mean = static_cast<double>(turns) / count;
  result.tool_calls_mean = static_cast<double>(calls) / count;
  result.environment_error_fraction = static_cast<double>(failed) / count;
  result.pass.pass_at = mean_pass_at_ks(result.pass.correct, n);
  return result;
}

}  // namespace aspen::pipeline
