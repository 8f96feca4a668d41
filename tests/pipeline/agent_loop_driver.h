// What the AgentLoop tests share (agent_loop_test.cpp, agent_loop_faults_test.cpp): a
// tiny Qwen3 engine and a driver that steps it for an AgentLoop exactly as a rollout
// worker's thread does (poll, add the next turns, step, hand the finished turns back).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "aspen/model/weights_init.h"
#include "aspen/pipeline/agent_loop.h"
#include "support/oracles.h"
#include "support/tiny_model_configs.h"

namespace aspen::pipeline::agent_loop_testing {

inline std::shared_ptr<const Tokenizer> qwen3_tokenizer() {
  static const auto tokenizer = std::make_shared<const Tokenizer>(
      Tokenizer::from_file(testing::qwen3_tokenizer_json()));
  return tokenizer;
}

inline std::unique_ptr<RolloutEngine> tiny_engine() {
  // The whole Qwen3 vocabulary: the chat template's tokens are in the prompt.
  ModelConfig config = testing::tiny_model_config(ModelFamily::kQwen3, {151936, 32, 48, 2, 4, 2, 8});
  config.tie_word_embeddings = true;
  EngineConfig engine;
  engine.num_blocks = 512;
  engine.block_size = 8;
  engine.max_num_seqs = 8;
  engine.max_model_len = 1024;
  return std::make_unique<RolloutEngine>(make_random_model(config, 3), engine, qwen3_tokenizer());
}

inline std::string agent_dir(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("aspen-agent-loop-" + std::to_string(getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// Steps `engine` for `loop` as RolloutWorker does until `count` trajectories ended.
inline std::vector<TrajectorySource::Finished> drive(AgentLoop& loop, RolloutEngine& engine,
                                                     size_t count) {
  using Clock = std::chrono::steady_clock;
  std::vector<TrajectorySource::Finished> ended;
  std::map<std::string, TrajectoryKey> keys;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (ended.size() < count && Clock::now() < deadline) {
    std::vector<TrajectorySource::NextTurn> next;
    if (!engine.has_unfinished()) loop.wait_ready(0.05);
    loop.poll(next, ended);
    for (TrajectorySource::NextTurn& turn : next) {
      GenerationRequest request;
      request.id = std::to_string(turn.key.sample) + "/t" + std::to_string(turn.turn);
      request.prompt = turn.context;
      request.params = *turn.params;
      request.params.max_tokens = turn.max_tokens;
      request.params.stop_token_ids.push_back(loop.end_of_turn());
      if (!request.params.seed) request.params.seed = 7 + turn.turn;
      keys[request.id] = turn.key;
      engine.add_request(std::move(request));
    }
    if (!engine.has_unfinished()) continue;
    for (const Completion& c : engine.step()) loop.turn_finished(keys.at(c.request_id), c);
  }
  EXPECT_EQ(ended.size(), count) << "trajectories still running after 60 s";
  return ended;
}

}  // namespace aspen::pipeline::agent_loop_testing
