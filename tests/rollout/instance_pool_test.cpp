#include "aspen/rollout/instance_pool.h"

#include <gtest/gtest.h>

#include <set>

#include "aspen/model/weights_init.h"

namespace aspen {
namespace {

ModelConfig pool_config() {
  ModelConfig config;
  config.vocab_size = 64;
  config.hidden_size = 32;
  config.intermediate_size = 64;
  config.num_hidden_layers = 1;
  config.num_attention_heads = 2;
  config.num_key_value_heads = 1;
  config.head_dim = 16;
  config.max_position_embeddings = 256;
  config.tie_word_embeddings = true;
  return config;
}

std::vector<Completion> drain(InstancePool& pool, size_t expected) {
  std::vector<Completion> out;
  while (out.size() < expected) {
    auto next = pool.pop_completion(std::chrono::seconds(30));
    if (!next) break;
    out.push_back(next->completion);
  }
  return out;
}

TEST(InstancePool, EveryInstanceServesItsRequestsAndReportsQueues) {
  std::vector<QwenForCausalLM> models{make_random_model(pool_config(), 1),
                                      make_random_model(pool_config(), 1)};
  InstancePool pool(models, {InstanceOptions{}, InstanceOptions{}});
  for (int i = 0; i < 6; ++i) {
    GenerationRequest request;
    request.id = std::to_string(i);
    request.prompt = {1, 2, 3, static_cast<TokenId>(i)};
    request.params.max_tokens = 5;
    request.params.seed = 9;
    request.n = 2;
    pool.submit(i % 2, request);
  }
  const auto completions = drain(pool, 12);
  ASSERT_EQ(completions.size(), 12u);
  std::set<std::pair<std::string, int64_t>> seen;
  for (const auto& c : completions) {
    EXPECT_EQ(c.token_ids.size(), 5u);
    seen.insert({c.request_id, c.sample_index});
  }
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_EQ(pool.in_flight(), 0);
  for (const auto& state : pool.queue_states()) {
    EXPECT_EQ(state.running + state.waiting, 0);
    EXPECT_EQ(state.free_blocks, state.total_blocks);
  }
}

TEST(InstancePool, SameSeedGivesSameSamplesOnAnyInstance) {
  std::vector<QwenForCausalLM> models{make_random_model(pool_config(), 3),
                                      make_random_model(pool_config(), 3)};
  InstancePool pool(models, {InstanceOptions{}, InstanceOptions{}});
  GenerationRequest request;
  request.prompt = {5, 6, 7};
  request.params.max_tokens = 8;
  request.params.seed = 42;
  pool.submit(0, request);
  pool.submit(1, request);
  const auto completions = drain(pool, 2);
  ASSERT_EQ(completions.size(), 2u);
  EXPECT_EQ(completions[0].token_ids, completions[1].token_ids);
}

std::shared_ptr<const WeightSet> weight_set(uint64_t seed, int64_t version) {
  auto set = std::make_shared<WeightSet>();
  set->version = version;
  for (const auto& [name, tensor] : make_random_model(pool_config(), seed)->hf_state())
    set->tensors.emplace_back(name, tensor);
  return set;
}

TEST(InstancePool, PublishedWeightsApplyAtTheNextStep) {
  std::vector<QwenForCausalLM> models{make_random_model(pool_config(), 1)};
  InstancePool pool(models, {InstanceOptions{}});
  pool.publish_weights(weight_set(2, 3));
  GenerationRequest request;
  request.prompt = {1, 2};
  request.params.max_tokens = 4;
  pool.submit(0, request);
  const auto completions = drain(pool, 1);
  ASSERT_EQ(completions.size(), 1u);
  for (int64_t version : completions[0].policy_versions) EXPECT_EQ(version, 3);
}

TEST(InstancePool, AnInstanceSwitchesToTheNewestSetAndSamplesLikeThoseWeights) {
  std::vector<QwenForCausalLM> models{make_random_model(pool_config(), 1)};
  InstancePool pool(models, {InstanceOptions{}});
  pool.publish_weights(weight_set(2, 3));
  pool.publish_weights(weight_set(4, 5));  // before any step: version 3 is never used
  GenerationRequest request;
  request.prompt = {1, 2};
  request.params.max_tokens = 6;
  request.params.seed = 9;
  pool.submit(0, request);
  const auto completions = drain(pool, 1);
  ASSERT_EQ(completions.size(), 1u);
  for (int64_t version : completions[0].policy_versions) EXPECT_EQ(version, 5);
  // The same request on an engine holding the seed-4 weights gives the same tokens.
  RolloutEngine reference(make_random_model(pool_config(), 4), EngineConfig{});
  request.n = 1;
  EXPECT_EQ(reference.generate({request}).at(0).token_ids, completions[0].token_ids);
}

TEST(InstancePool, UnservableRequestIsAbortedNotLost) {
  std::vector<QwenForCausalLM> models{make_random_model(pool_config(), 1)};
  InstancePool pool(models, {InstanceOptions{}});
  GenerationRequest request;
  request.prompt = {1, 2, 999};  // outside the 64-token vocabulary
  request.n = 3;
  pool.submit(0, request);
  const auto completions = drain(pool, 3);
  ASSERT_EQ(completions.size(), 3u);
  for (const auto& c : completions) EXPECT_EQ(c.finish_reason, FinishReason::kAbort);
}

}  // namespace
}  // namespace aspen
