// SyntheticEnvironment (kind "synthetic"): a throughput workload for benchmarks, as
// rollout.long_tail_fraction is one for single-turn samples (issue #35: `aspen bench
// pipeline --tool-latency`). A benchmark's tiny random model never writes a tool call, so
// the tools environment would end every trajectory after one turn; this environment makes
// every model turn but the last "a tool call" whatever the model wrote, mirroring the
// simulator's tool model (docs/simulate.md, "Tool latency"):
//   - an episode has exactly `turns` model turns;
//   - after each turn but the last, step() blocks for a log-normal latency (median
//     `tool_latency_ms`, log-sigma `tool_latency_sigma`) drawn from the episode's seed,
//     then returns one "tool" message of `observation_tokens` decimal digits, also drawn
//     from the seed. Under the Qwen pre-tokenizer (Qwen2/2.5/3's Split regex, which the
//     built-in BPE tokenizer uses too) every digit is a pre-token of its own and a
//     single byte of the byte alphabet, so the message's content is exactly
//     `observation_tokens` tokens; the chat template adds its fixed <tool_response>
//     wrapping and the next generation prompt around it;
//   - the last turn ends the episode with the verifier's score of that turn's text
//     against the data row (the run's own verifier, as the tools environment scores a
//     final answer): the reward is honest, not drawn, so the RL run stays a real one
//     whose final_reward means what it means without tools.
// No tool schemas are offered: the prompt is the one the model sees without tools.
//
// Seeds (deterministic, so the sync and async sides of a benchmark wait the same): under
// the trajectory loop (reset_episode) the episode's seed is a hash of the options' seed,
// the data row's "id" (or its dump), the group id and the sample index, so each
// trajectory gets the same latencies and observations in every run, on every rank and
// whatever order the instances start them in. A bare reset() (no episode id) counts
// instead: the k-th episode of a row the shared SyntheticEpisodeSeeds has started.
//
// Data rows: as the tools environment's ({"prompt": ...} or {"messages": [...]}); a row
// with neither throws aspen::Error naming the field. A verifier that throws ends the
// trajectory with a kRefused error naming it.
// Thread safety: as Environment; SyntheticEpisodeSeeds is safe to share between threads.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "aspen/agent/environment.h"
#include "aspen/agent/imports.h"
#include "aspen/agent/tools_environment.h"

namespace aspen::agent {

struct SyntheticEnvironmentOptions {
  int turns = 3;                   // model turns per episode (>= 1)
  double tool_latency_ms = 200;    // median of the log-normal latency (>= 0; 0: no wait)
  double tool_latency_sigma = 0.5; // its log-space standard deviation (>= 0; 0: constant)
  int observation_tokens = 32;     // digits per tool message (>= 1)
};

// The seeds of episodes, counted per data row: shared by the environments of one run.
class SyntheticEpisodeSeeds {
 public:
  explicit SyntheticEpisodeSeeds(uint64_t seed) : seed_(seed) {}
  // A fresh episode of the row named `row_key`: its seed.
  uint64_t next(const std::string& row_key);
  // The episode `episode` of the row named `row_key`: its seed (counts nothing).
  uint64_t of_episode(const std::string& row_key, const EpisodeId& episode) const;

 private:
  uint64_t seed_;
  std::mutex mutex_;
  std::map<std::string, uint64_t> started_;
};

// The latency of a tool call of the episode seeded `episode_seed`, call `call` (0-based),
// in seconds: median * exp(sigma * z) with z a standard normal drawn from the two seeds
// (Box-Muller over splitmix64, so the draw is the same on every platform).
double synthetic_tool_latency_s(const SyntheticEnvironmentOptions& options,
                                uint64_t episode_seed, int call);

class SyntheticEnvironment : public Environment {
 public:
  // Throws aspen::Error for a null seeds or verifier, or options out of range.
  SyntheticEnvironment(std::shared_ptr<SyntheticEpisodeSeeds> seeds, AnswerVerifier verifier,
                       SyntheticEnvironmentOptions options);

  std::string kind() const override { return "synthetic"; }
  ResetResult reset(const nlohmann::ordered_json& row) override;
  ResetResult reset_episode(const nlohmann::ordered_json& row, const EpisodeId& episode) override;
  StepResult step(const std::string& turn) override;

 private:
  ResetResult start_episode(const nlohmann::ordered_json& row, uint64_t episode_seed);

  std::shared_ptr<SyntheticEpisodeSeeds> seeds_;
  AnswerVerifier verifier_;
  SyntheticEnvironmentOptions options_;
  nlohmann::ordered_json row_;
  uint64_t episode_seed_ = 0;
  bool active_ = false;
  int turns_ = 0;
};

}  // namespace aspen::agent
