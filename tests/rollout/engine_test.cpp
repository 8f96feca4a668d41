#include "aspen/rollout/engine.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "aspen/model/moe_routing.h"
#include "aspen/rollout/decode_graphs.h"
#include "aspen/rollout/kv_cache.h"
#include "aspen/model/weights_init.h"
#include "aspen/tokenizer/bpe_trainer.h"
#include "aspen/util/error.h"
#include "support/tiny_model_configs.h"

namespace aspen::rollout {
namespace {

QwenForCausalLM tiny_model(uint64_t seed = 1) {
  // A larger init than HF's 0.02 so greedy paths are not all the same token.
  QwenForCausalLM model = make_random_model(testing::tiny_rollout_config(), seed);
  init_weights(model, seed, /*initializer_range=*/0.5);
  return model;
}

std::vector<TokenId> prompt_of(int64_t length, TokenId start) {
  std::vector<TokenId> prompt;
  for (int64_t i = 0; i < length; ++i) prompt.push_back((start + 7 * i) % 97);
  return prompt;
}

// Greedy decoding by recomputing the whole sequence every token: the reference.
std::vector<TokenId> greedy_reference(QwenForCausalLM& model, std::vector<TokenId> tokens,
                                      int64_t steps) {
  torch::NoGradGuard no_grad;
  std::vector<TokenId> output;
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<int64_t> ids(tokens.begin(), tokens.end());
    const torch::Tensor input = torch::tensor(ids, torch::kInt64);
    const torch::Tensor cu = torch::tensor({int64_t{0}, input.numel()}, torch::kInt64);
    const torch::Tensor hidden = model->forward(input, cu);
    const torch::Tensor logits = torch::matmul(hidden[-1], model->lm_head_weight().t());
    const TokenId next = static_cast<TokenId>(logits.argmax().item<int64_t>());
    output.push_back(next);
    tokens.push_back(next);
  }
  return output;
}

GenerationRequest greedy_request(std::vector<TokenId> prompt, int64_t max_tokens, int64_t n = 1) {
  GenerationRequest request;
  request.prompt = std::move(prompt);
  request.params.temperature = 0.0;
  request.params.max_tokens = max_tokens;
  request.n = n;
  return request;
}

TEST(RolloutEngine, GreedyMatchesFullRecomputeWithChunkedPrefillAndSmallBlocks) {
  QwenForCausalLM model = tiny_model();
  EngineConfig config;
  config.block_size = 4;
  config.num_blocks = 64;
  config.max_num_batched_tokens = 7;  // forces chunked prefill and mixed steps
  RolloutEngine engine(tiny_model(), config);
  std::vector<GenerationRequest> requests;
  const std::vector<int64_t> lengths = {3, 9, 14, 1};
  for (size_t i = 0; i < lengths.size(); ++i)
    requests.push_back(greedy_request(prompt_of(lengths[i], i * 11), 6));
  const auto completions = engine.generate(requests);
  ASSERT_EQ(completions.size(), lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) {
    EXPECT_EQ(completions[i].token_ids, greedy_reference(model, prompt_of(lengths[i], i * 11), 6))
        << i;
    EXPECT_EQ(completions[i].finish_reason, FinishReason::kLength);
  }
}

TEST(RolloutEngine, LogprobsEqualTheModelsRecomputedLogprobs) {
  QwenForCausalLM model = tiny_model();
  EngineConfig config;
  config.block_size = 8;
  RolloutEngine engine(tiny_model(), config);
  GenerationRequest request;
  request.prompt = prompt_of(10, 3);
  request.params.temperature = 0.8;
  request.params.top_p = 0.9;
  request.params.max_tokens = 12;
  request.params.seed = 5;
  request.n = 3;
  const auto completions = engine.generate({request});
  ASSERT_EQ(completions.size(), 3u);
  torch::NoGradGuard no_grad;
  for (const auto& completion : completions) {
    std::vector<int64_t> ids(completion.prompt_token_ids.begin(),
                             completion.prompt_token_ids.end());
    ids.insert(ids.end(), completion.token_ids.begin(), completion.token_ids.end());
    const torch::Tensor input = torch::tensor(ids, torch::kInt64);
    const torch::Tensor logprobs =
        model->token_logprobs(input, torch::tensor({int64_t{0}, input.numel()}, torch::kInt64))
            .logprobs;
    const torch::Tensor generated =
        logprobs.narrow(0, 9, static_cast<int64_t>(completion.token_ids.size()));
    const torch::Tensor engine_logprobs = torch::tensor(completion.logprobs);
    EXPECT_LT((generated - engine_logprobs).abs().max().item<double>(), 1e-4);
  }
}

// The expert choices the engine records per generated token (for the trainer's
// routing-mismatch metric) are those a full forward over prompt + response makes at
// the position that predicted the token - through chunked prefill, sampling and
// several sequences per step.
TEST(RolloutEngine, MoeRecordsEachTokensExpertsAsTheFullForwardRoutesThem) {
  const ModelConfig moe = testing::tiny_moe_config();
  const auto make = [&] {
    QwenForCausalLM model = make_random_model(moe, 3);
    init_weights(model, 3, /*initializer_range=*/0.5);
    return model;
  };
  QwenForCausalLM model = make();
  EngineConfig config;
  config.block_size = 4;
  config.max_num_batched_tokens = 6;  // chunked prefill, mixed prefill/decode steps
  config.record_routed_experts = true;
  RolloutEngine engine(make(), config);
  GenerationRequest request;
  request.prompt = {3, 14, 15, 9, 26, 5, 35, 8, 9};
  request.params.temperature = 1.0;
  request.params.max_tokens = 7;
  request.params.seed = 11;
  request.n = 3;
  const auto completions = engine.generate({request});
  ASSERT_EQ(completions.size(), 3u);

  const int64_t sparse_layers = 2;  // layer 1 is dense (mlp_only_layers)
  const int64_t k = moe.moe.num_experts_per_tok;
  const int64_t prompt = static_cast<int64_t>(request.prompt.size());
  torch::NoGradGuard no_grad;
  for (const auto& completion : completions) {
    const int64_t generated = static_cast<int64_t>(completion.token_ids.size());
    ASSERT_EQ(static_cast<int64_t>(completion.routed_experts.size()),
              generated * sparse_layers * k);
    std::vector<int64_t> ids(completion.prompt_token_ids.begin(),
                             completion.prompt_token_ids.end());
    ids.insert(ids.end(), completion.token_ids.begin(), completion.token_ids.end());
    const torch::Tensor input = torch::tensor(ids, torch::kInt64);
    MoeRoutingLog log;
    model->model->forward(input, torch::tensor({int64_t{0}, input.numel()}, torch::kInt64),
                          torch::arange(input.numel()), &log);
    ASSERT_EQ(static_cast<int64_t>(log.layers.size()), sparse_layers);
    std::vector<torch::Tensor> per_layer;
    for (const LayerRouting& layer : log.layers) {
      per_layer.push_back(layer.experts.narrow(0, prompt - 1, generated));
    }
    const torch::Tensor expected = torch::stack(per_layer, 1).to(torch::kInt32);  // [G, S, k]
    const torch::Tensor recorded =
        torch::tensor(completion.routed_experts).view({generated, sparse_layers, k});
    EXPECT_TRUE(torch::equal(recorded, expected)) << recorded << expected;
  }

  // A dense model records nothing, even when asked.
  RolloutEngine dense(tiny_model(), config);
  const auto plain = dense.generate({greedy_request(prompt_of(5, 2), 4)});
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_TRUE(plain[0].routed_experts.empty());
  EXPECT_FALSE(dense.config().record_routed_experts);
}

// DeepSeek-V3's multi-head latent attention over the paged cache: the cache holds one
// latent row per token and layer (kv_lora_rank + rope width, shared by keys and values),
// and decoding in the absorbed form through chunked prefill and small blocks gives the
// tokens of full recomputation.
TEST(RolloutEngine, MlaLatentCacheDecodesAsFullRecompute) {
  const ModelConfig deepseek = testing::tiny_deepseek_config();
  const auto make = [&] {
    QwenForCausalLM model = make_random_model(deepseek, 4);
    init_weights(model, 4, /*initializer_range=*/0.5);
    return model;
  };
  QwenForCausalLM model = make();
  EngineConfig config;
  config.block_size = 4;
  config.num_blocks = 64;
  config.max_num_batched_tokens = 7;
  RolloutEngine engine(make(), config);
  const int64_t row = deepseek.mla.kv_lora_rank + deepseek.mla.qk_rope_head_dim;
  EXPECT_EQ(KvCache::bytes_per_block(deepseek, 4, torch::kFloat),
            deepseek.num_hidden_layers * 4 * row * 4);
  std::vector<GenerationRequest> requests;
  const std::vector<int64_t> lengths = {3, 9, 14, 1};
  for (size_t i = 0; i < lengths.size(); ++i) {
    std::vector<TokenId> prompt;
    for (int64_t t = 0; t < lengths[i]; ++t) prompt.push_back((i * 11 + 7 * t) % 50);
    requests.push_back(greedy_request(prompt, 6));
  }
  const auto completions = engine.generate(requests);
  ASSERT_EQ(completions.size(), lengths.size());
  for (size_t i = 0; i < completions.size(); ++i) {
    EXPECT_EQ(completions[i].token_ids, greedy_reference(model, requests[i].prompt, 6))
        << "request " << i;
  }
}

// EngineConfig::device_code_path runs a GPU's code path on the CPU: the gathered paged
// attention (one group for the decode rows, power-of-two buckets of multi-token rows),
// the step's one packed upload with its indices, the device sampler and, with
// cuda_graphs, the decode graphs' padded steps (batch buckets, a scratch block, keys
// padded to a power of two of blocks). Through chunked prefill, mixed steps, small
// blocks, a sampled group (fan-out), greedy requests and sequences finishing at
// different steps it gives the CPU path's tokens and log-probs.
TEST(RolloutEngine, DeviceCodePathGivesTheCpuPathsTokensAndLogprobs) {
  std::vector<GenerationRequest> requests;
  const std::vector<int64_t> lengths = {3, 9, 14, 1, 6};
  for (size_t i = 0; i < lengths.size(); ++i) {
    // Finishing at different steps: decode batches shrink through the buckets.
    requests.push_back(greedy_request(prompt_of(lengths[i], i * 11), 5 + 2 * i));
  }
  requests[4].params.temperature = 0.8;
  requests[4].params.top_p = 0.9;
  requests[4].params.top_k = 20;
  requests[4].params.seed = 9;
  requests[4].n = 3;
  EngineConfig config;
  config.block_size = 4;
  config.num_blocks = 64;
  config.max_num_batched_tokens = 7;  // chunked prefill and mixed steps
  RolloutEngine cpu_path(tiny_model(), config);
  const auto expected = cpu_path.generate(requests);
  QwenForCausalLM model = tiny_model();
  for (const bool graphs : {false, true}) {
    config.device_code_path = true;
    config.cuda_graphs = graphs;
    RolloutEngine device_path(tiny_model(), config);
    const auto completions = device_path.generate(requests);
    EXPECT_EQ(device_path.decode_graphs_captured() > 0, graphs);
    ASSERT_EQ(completions.size(), expected.size());
    for (size_t i = 0; i < completions.size(); ++i) {
      const std::string what = "completion " + std::to_string(i) + (graphs ? ", graphs" : "");
      EXPECT_EQ(completions[i].request_index, expected[i].request_index) << what;
      EXPECT_EQ(completions[i].token_ids, expected[i].token_ids) << what;
      ASSERT_EQ(completions[i].logprobs.size(), expected[i].logprobs.size()) << what;
      for (size_t t = 0; t < expected[i].logprobs.size(); ++t) {
        EXPECT_NEAR(completions[i].logprobs[t], expected[i].logprobs[t], 1e-4) << what;
        EXPECT_NEAR(completions[i].sampling_logprobs[t], expected[i].sampling_logprobs[t], 1e-4)
            << what;
      }
      const int64_t index = completions[i].request_index;
      if (index < 4) {
        EXPECT_EQ(completions[i].token_ids,
                  greedy_reference(model, completions[i].prompt_token_ids, 5 + 2 * index))
            << what;
      }
    }
  }
}

// MLA's one latent cache (keys and values one tensor, one kv head) on the device path.
TEST(RolloutEngine, MlaLatentCacheDecodesAsFullRecomputeOnTheDeviceCodePath) {
  const ModelConfig deepseek = testing::tiny_deepseek_config();
  const auto make = [&] {
    QwenForCausalLM model = make_random_model(deepseek, 4);
    init_weights(model, 4, /*initializer_range=*/0.5);
    return model;
  };
  QwenForCausalLM model = make();
  EngineConfig config;
  config.block_size = 4;
  config.num_blocks = 64;
  config.max_num_batched_tokens = 7;
  config.device_code_path = true;
  RolloutEngine engine(make(), config);
  std::vector<GenerationRequest> requests;
  for (int64_t length : {3, 9, 14}) {
    std::vector<TokenId> prompt;
    for (int64_t t = 0; t < length; ++t) prompt.push_back((length * 11 + 7 * t) % 50);
    requests.push_back(greedy_request(prompt, 6));
  }
  const auto completions = engine.generate(requests);
  ASSERT_EQ(completions.size(), requests.size());
  for (size_t i = 0; i < completions.size(); ++i) {
    EXPECT_EQ(completions[i].token_ids, greedy_reference(model, requests[i].prompt, 6))
        << "request " << i;
  }
}

// CUDA graphs are a CUDA matter: on the CPU the option changes nothing, and the reason
// says so; the batch buckets are powers of two up to max_num_seqs, and it.
TEST(RolloutEngine, DecodeGraphsStayOffTheCpu) {
  QwenForCausalLM model = tiny_model();
  EXPECT_EQ(DecodeGraphs::unsupported_reason(model), "the model is not on a CUDA device");
  EXPECT_EQ(DecodeGraphs::batch_buckets(48), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 48}));
  EXPECT_EQ(DecodeGraphs::batch_buckets(1), (std::vector<int64_t>{1}));
  EngineConfig config;
  config.num_blocks = 32;
  config.cuda_graphs = true;
  RolloutEngine engine(tiny_model(), config);
  engine.generate({greedy_request(prompt_of(5, 1), 4)});
  EXPECT_EQ(engine.decode_graphs_captured(), 0);
  EXPECT_EQ(engine.queue_state().free_blocks, 32);
}

TEST(RolloutEngine, GroupComputesItsPromptOnceAndSharesBlocks) {
  EngineConfig config;
  config.block_size = 4;
  config.num_blocks = 64;
  RolloutEngine engine(tiny_model(), config);
  const auto completions = engine.generate({greedy_request(prompt_of(10, 1), 5, /*n=*/4)});
  ASSERT_EQ(completions.size(), 4u);
  for (const auto& c : completions) EXPECT_EQ(c.token_ids, completions[0].token_ids);
  EXPECT_EQ(engine.stats().forks, 3);
  // 10 prompt tokens once, then 4 samples x 4 decode steps.
  EXPECT_EQ(engine.stats().scheduled_tokens, 10 + 4 * 4);
  EXPECT_EQ(engine.queue_state().free_blocks, 64);
}

TEST(RolloutEngine, SameSeedSameTokensWhateverElseSharesTheBatch) {
  GenerationRequest request;
  request.prompt = prompt_of(6, 2);
  request.params.temperature = 1.0;
  request.params.max_tokens = 10;
  request.params.seed = 1234;
  request.n = 2;
  RolloutEngine alone(tiny_model(), EngineConfig{});
  const auto expected = alone.generate({request});
  RolloutEngine crowded(tiny_model(), EngineConfig{});
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 3; ++i) {
    GenerationRequest other;
    other.prompt = prompt_of(4 + i, 50 + i);
    other.params.max_tokens = 8;
    requests.push_back(other);
  }
  requests.insert(requests.begin() + 1, request);
  const auto completions = crowded.generate(requests);
  std::vector<std::vector<TokenId>> seeded;
  for (const auto& c : completions) {
    if (c.request_index == 1) seeded.push_back(c.token_ids);
  }
  ASSERT_EQ(seeded.size(), 2u);
  EXPECT_EQ(seeded[0], expected[0].token_ids);
  EXPECT_EQ(seeded[1], expected[1].token_ids);
}

TEST(RolloutEngine, GroupSplitBySampleIndicesGivesTheWholeGroupsSamples) {
  GenerationRequest whole;
  whole.prompt = prompt_of(6, 3);
  whole.params.temperature = 1.0;
  whole.params.max_tokens = 10;
  whole.params.seed = 99;
  whole.n = 4;
  RolloutEngine one(tiny_model(), EngineConfig{});
  const auto expected = one.generate({whole});
  // Samples {3, 1} on one engine, {0} and {2} on another, as a split group would be.
  GenerationRequest a = whole, b = whole, c = whole;
  a.n = 2;
  a.sample_indices = {3, 1};
  b.n = 1;
  b.sample_indices = {0};
  c.n = 1;
  c.sample_indices = {2};
  RolloutEngine first(tiny_model(), EngineConfig{});
  RolloutEngine second(tiny_model(), EngineConfig{});
  std::vector<Completion> parts = first.generate({a});
  for (auto& completion : second.generate({b, c})) parts.push_back(completion);
  ASSERT_EQ(parts.size(), 4u);
  for (const Completion& part : parts) {
    ASSERT_GE(part.sample_index, 0);
    ASSERT_LT(part.sample_index, 4);
    EXPECT_EQ(part.token_ids, expected[static_cast<size_t>(part.sample_index)].token_ids)
        << "sample " << part.sample_index;
  }
  GenerationRequest bad = whole;
  bad.sample_indices = {0, 0, 1, 2};
  EXPECT_THROW(one.add_request(bad), Error);
  bad.sample_indices = {0, 1};
  EXPECT_THROW(one.add_request(bad), Error);
}

TEST(RolloutEngine, PreemptionUnderMemoryPressureKeepsResults) {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 6; ++i) requests.push_back(greedy_request(prompt_of(5 + i, i), 12));
  EngineConfig roomy;
  roomy.block_size = 4;
  roomy.num_blocks = 256;
  RolloutEngine reference(tiny_model(), roomy);
  const auto expected = reference.generate(requests);
  EngineConfig tight = roomy;
  tight.num_blocks = 10;  // far less than 6 sequences of ~20 tokens need
  RolloutEngine engine(tiny_model(), tight);
  const auto completions = engine.generate(requests);
  EXPECT_GT(engine.stats().preemptions, 0);
  ASSERT_EQ(completions.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(completions[i].token_ids, expected[i].token_ids);
}

TEST(RolloutEngine, StopTokenAndMinTokens) {
  RolloutEngine probe(tiny_model(), EngineConfig{});
  const auto free_run = probe.generate({greedy_request(prompt_of(5, 9), 8)});
  const TokenId third = free_run[0].token_ids[2];
  GenerationRequest request = greedy_request(prompt_of(5, 9), 8);
  request.params.stop_token_ids = {third};
  RolloutEngine engine(tiny_model(), EngineConfig{});
  const auto stopped = engine.generate({request});
  ASSERT_LE(stopped[0].token_ids.size(), 3u);
  EXPECT_EQ(stopped[0].token_ids.back(), third);
  EXPECT_EQ(stopped[0].finish_reason, FinishReason::kStop);

  request.params.min_tokens = 8;  // the stop id is suppressed until 8 tokens exist
  RolloutEngine engine2(tiny_model(), EngineConfig{});
  const auto forced = engine2.generate({request});
  EXPECT_EQ(forced[0].token_ids.size(), 8u);
  for (TokenId t : forced[0].token_ids) EXPECT_NE(t, third);
}

TEST(RolloutEngine, TokensRecordThePolicyVersionThatProducedThem) {
  for (bool interrupt : {false, true}) {
    EngineConfig config;
    config.interrupt_on_weight_update = interrupt;
    RolloutEngine engine(tiny_model(1), config);
    engine.add_request(greedy_request(prompt_of(6, 4), 10));
    for (int i = 0; i < 4; ++i) engine.step();  // prefill + 3 decodes: 4 tokens at version 0
    QwenForCausalLM next = tiny_model(2);
    std::map<std::string, torch::Tensor> weights;
    for (const auto& [name, tensor] : next->hf_state()) weights[name] = tensor;
    engine.load_weights(1, weights);
    std::vector<Completion> done;
    while (engine.has_unfinished()) {
      for (auto& c : engine.step()) done.push_back(c);
    }
    ASSERT_EQ(done.size(), 1u);
    const auto& versions = done[0].policy_versions;
    ASSERT_EQ(versions.size(), 10u);
    EXPECT_EQ(std::count(versions.begin(), versions.end(), 0), 4);
    EXPECT_EQ(std::count(versions.begin(), versions.end(), 1), 6);
    if (interrupt) {
      // Continued on new weights after recomputation: the tail is what model 2
      // greedily continues from the prefix, exactly.
      std::vector<TokenId> prefix = prompt_of(6, 4);
      prefix.insert(prefix.end(), done[0].token_ids.begin(), done[0].token_ids.begin() + 4);
      const auto tail = greedy_reference(next, prefix, 6);
      EXPECT_EQ(std::vector<TokenId>(done[0].token_ids.begin() + 4, done[0].token_ids.end()), tail);
    }
  }
}

TEST(RolloutEngine, RejectsBadRequestsWithClearErrors) {
  RolloutEngine engine(tiny_model(), EngineConfig{});
  GenerationRequest empty = greedy_request({}, 4);
  EXPECT_THROW(engine.add_request(empty), Error);
  GenerationRequest out_of_vocab = greedy_request({1, 2, 500}, 4);
  EXPECT_THROW(engine.add_request(out_of_vocab), Error);
  GenerationRequest stop_strings = greedy_request({1, 2}, 4);
  stop_strings.params.stop = {"x"};
  EXPECT_THROW(engine.add_request(stop_strings), Error);  // no tokenizer
}

}  // namespace
}  // namespace aspen::rollout

namespace aspen::rollout {
namespace {

TEST(RolloutEngine, StopStringCutsTheTextAndFinishes) {
  BpeTrainerOptions options;
  options.vocab_size = 280;
  options.special_tokens = {"<|endoftext|>"};
  std::vector<std::string> corpus;
  for (int i = 0; i < 200; ++i) corpus.push_back("the answer is " + std::to_string(i * 37 % 1000));
  auto tokenizer = std::make_shared<const Tokenizer>(
      Tokenizer::from_json(train_bpe_tokenizer(corpus, options), "test tokenizer"));
  ModelConfig config = testing::tiny_rollout_config();
  config.vocab_size = tokenizer->vocab_size();
  QwenForCausalLM model = make_random_model(config, 4);
  init_weights(model, 4, /*initializer_range=*/0.5);

  GenerationRequest request = greedy_request(tokenizer->encode("the answer is"), 24);
  RolloutEngine probe(model, EngineConfig{}, tokenizer);
  const Completion free_run = probe.generate({request})[0];
  ASSERT_GE(free_run.text.size(), 6u) << "greedy text too short to pick a stop string";
  const std::string stop = free_run.text.substr(3, 2);

  request.params.stop = {stop};
  RolloutEngine engine(model, EngineConfig{}, tokenizer);
  const Completion stopped = engine.generate({request})[0];
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
  EXPECT_EQ(stopped.text, free_run.text.substr(0, free_run.text.find(stop)));
  EXPECT_LT(stopped.token_ids.size(), free_run.token_ids.size());
}

TEST(RolloutEngine, PaddedVocabularyRowsAreNeverSampled) {
  // A model with 64 more vocabulary rows than its tokenizer (as Qwen checkpoints and a
  // tensor-parallel built-in model have), whose head strongly prefers the padded rows.
  BpeTrainerOptions options;
  options.vocab_size = 270;
  options.special_tokens = {"<|endoftext|>"};
  std::vector<std::string> corpus;
  for (int i = 0; i < 100; ++i) corpus.push_back("sum " + std::to_string(i * 13 % 100));
  auto tokenizer = std::make_shared<const Tokenizer>(
      Tokenizer::from_json(train_bpe_tokenizer(corpus, options), "test tokenizer"));
  ModelConfig config = testing::tiny_rollout_config();
  config.vocab_size = tokenizer->vocab_size() + 64;
  QwenForCausalLM model = make_random_model(config, 5);
  {
    torch::NoGradGuard no_grad;
    model->lm_head_weight().narrow(0, tokenizer->vocab_size(), 64).mul_(50.0);
  }
  GenerationRequest request;
  request.id = "padded";
  request.prompt = tokenizer->encode("sum");
  request.params.max_tokens = 32;
  request.params.ignore_eos = true;
  request.params.seed = 9;
  request.n = 4;
  RolloutEngine engine(model, EngineConfig{}, tokenizer);
  int64_t sampled = 0;
  for (const Completion& c : engine.generate({request})) {
    for (TokenId id : c.token_ids) {
      EXPECT_LT(id, tokenizer->vocab_size());
      ++sampled;
    }
  }
  EXPECT_EQ(sampled, 4 * 32);
  // Without a tokenizer the engine cannot know the padding: the rows are sampled.
  RolloutEngine blind(model, EngineConfig{});
  int64_t padded = 0;
  for (const Completion& c : blind.generate({request})) {
    for (TokenId id : c.token_ids) padded += id >= tokenizer->vocab_size() ? 1 : 0;
  }
  EXPECT_GT(padded, 0) << "the head must prefer the padded rows for this test to mean anything";
}

}  // namespace
}  // namespace aspen::rollout
