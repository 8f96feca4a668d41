// The CUDA paths, checked against the CPU ones: the rollout engine (paged KV cache,
// sampler) on a GPU reproduces the CPU model's log-probs, an actor update on a GPU
// equals the same update on the CPU, and the synchronous RL loop runs end to end with
// train.device and rollout.device on cuda; with two GPUs, collectives on CUDA tensors
// go through NCCL across two rank processes and agree with Gloo.
//
// Labelled "cuda". Without a usable GPU every test here is reported as skipped, never
// as passed (GTEST_SKIP; CTest shows them as "Skipped"). scripts/gpu-check runs them on
// a GPU machine.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>

#include "aspen/model/weights_init.h"
#include "aspen/parallel/device.h"
#include "aspen/pipeline/rl_run.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/rollout/engine.h"
#include "aspen/train/actor.h"
#include "aspen/train/model_copy.h"
#include "parallel/binaries.h"
#include "parallel/run_command.h"
#include "pipeline/tiny_run.h"
#include "support/tiny_model_configs.h"
#include "train/train_fixtures.h"

namespace aspen::pipeline {
namespace {

#define ASPEN_REQUIRE_CUDA() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: skipped, not passed"

const torch::Device kCuda(torch::kCUDA, 0);

// The rollout engine tests' model with the train tests' rope_theta.
ModelConfig rollout_config() {
  ModelConfig config = testing::tiny_rollout_config();
  config.rope_theta = 10000.0;
  return config;
}

// Teacher-forced log-probs of `response` after `prompt` on `model`'s device.
torch::Tensor teacher_forced(QwenForCausalLM& model, const std::vector<TokenId>& prompt,
                             const std::vector<TokenId>& response) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> ids(prompt.begin(), prompt.end());
  ids.insert(ids.end(), response.begin(), response.end());
  const torch::Device device = model->lm_head_weight().device();
  const torch::Tensor input = torch::tensor(ids, torch::kInt64).to(device);
  const torch::Tensor cu = torch::tensor({int64_t{0}, input.numel()}, torch::kInt64).to(device);
  const torch::Tensor all = model->token_logprobs(input, cu).logprobs.to(torch::kCPU);
  return all.slice(0, static_cast<int64_t>(prompt.size()) - 1);
}

TEST(CudaRollout, EngineLogprobsOnTheGpuEqualTheCpuModel) {
  ASPEN_REQUIRE_CUDA();
  QwenForCausalLM cpu_model = make_random_model(rollout_config(), 3);
  init_weights(cpu_model, 3, /*initializer_range=*/0.5);
  QwenForCausalLM gpu_model = copy_model(cpu_model, torch::kFloat, kCuda, /*trainable=*/false);

  EngineConfig config;
  config.block_size = 4;
  config.kv_cache_bytes = 8 << 20;
  config.max_num_batched_tokens = 7;  // chunked prefill and mixed steps on the GPU too
  RolloutEngine engine(gpu_model, config);
  std::vector<GenerationRequest> requests;
  for (int64_t i = 0; i < 4; ++i) {
    GenerationRequest request;
    for (int64_t t = 0; t < 3 + 4 * i; ++t) request.prompt.push_back((5 + 7 * t + i) % 97);
    request.params.temperature = 1.0;
    request.params.seed = 11 + i;
    request.params.max_tokens = 12;
    request.n = 2;
    requests.push_back(request);
  }
  const auto completions = engine.generate(requests);
  ASSERT_EQ(completions.size(), 8u);
  for (const Completion& c : completions) {
    ASSERT_FALSE(c.token_ids.empty());
    const torch::Tensor reference = teacher_forced(cpu_model, c.prompt_token_ids, c.token_ids);
    const torch::Tensor got = torch::tensor(c.logprobs);
    EXPECT_LT((got - reference).abs().max().item<double>(), 1e-4) << c.request_id;
  }
}

// EngineConfig::cuda_graphs: decode steps replayed from CUDA graphs (batch padded to
// its bucket, keys to a power of two of blocks, one scratch block for the padding)
// give the eager engine's tokens one for one and its log-probs, greedy and sampled,
// while sequences finish and the batch shrinks through the buckets.
TEST(CudaRollout, DecodeGraphReplayGivesTheEagerDecodesTokens) {
  ASPEN_REQUIRE_CUDA();
  QwenForCausalLM cpu_model = make_random_model(rollout_config(), 5);
  init_weights(cpu_model, 5, /*initializer_range=*/0.5);
  std::vector<GenerationRequest> requests;
  for (int64_t i = 0; i < 6; ++i) {
    GenerationRequest request;
    for (int64_t t = 0; t < 3 + 3 * i; ++t) request.prompt.push_back((5 + 7 * t + i) % 97);
    request.params.temperature = i % 2 == 0 ? 0.0 : 0.9;
    request.params.top_p = 0.95;
    request.params.seed = 21 + i;
    request.params.max_tokens = 10 + 4 * i;  // finishing at different steps
    requests.push_back(request);
  }
  EngineConfig config;
  config.block_size = 4;
  config.num_blocks = 128;
  config.max_num_seqs = 8;
  std::vector<std::vector<Completion>> results;
  for (const bool graphs : {false, true}) {
    config.cuda_graphs = graphs;
    RolloutEngine engine(copy_model(cpu_model, torch::kFloat, kCuda, /*trainable=*/false), config);
    results.push_back(engine.generate(requests));
    if (graphs) EXPECT_GT(engine.decode_graphs_captured(), 1);
    if (!graphs) EXPECT_EQ(engine.decode_graphs_captured(), 0);
  }
  const auto& eager = results[0];
  const auto& replayed = results[1];
  ASSERT_EQ(eager.size(), replayed.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    EXPECT_EQ(replayed[i].token_ids, eager[i].token_ids) << "request " << i;
    ASSERT_EQ(replayed[i].logprobs.size(), eager[i].logprobs.size());
    const torch::Tensor difference =
        torch::tensor(replayed[i].logprobs) - torch::tensor(eager[i].logprobs);
    EXPECT_LT(difference.abs().max().item<double>(), 1e-4) << "request " << i;
  }
}

TEST(CudaTraining, ActorUpdateOnTheGpuEqualsTheCpuUpdate) {
  ASPEN_REQUIRE_CUDA();
  ActorOptions options;
  options.trainer.optimizer.lr = 1e-2;
  ActorTrainer cpu(testing::tiny_model(7), options);
  ActorTrainer gpu(copy_model(testing::tiny_model(7), torch::kFloat, kCuda, /*trainable=*/true),
                   options);
  TrainBatch batch = testing::tiny_batch({{3, 6}, {2, 4}, {4, 5}, {1, 7}});
  const int64_t r = batch.num_response_tokens();
  const torch::Tensor old = cpu.compute_logprobs(batch).logprobs;
  batch.token_columns[columns::kOldLogprobs] = old + 0.1 * torch::sin(torch::arange(r) * 1.7);
  batch.token_columns[columns::kAdvantages] = torch::cos(torch::arange(r) * 0.9);

  const ActorMetrics m_cpu = cpu.update(batch, ActorUpdateOptions{});
  const ActorMetrics m_gpu = gpu.update(batch, ActorUpdateOptions{});
  EXPECT_NEAR(m_cpu.policy_loss, m_gpu.policy_loss, 1e-5);
  EXPECT_NEAR(m_cpu.grad_norm, m_gpu.grad_norm, 1e-4);
  EXPECT_TRUE(gpu.model()->lm_head_weight().is_cuda());
  QwenForCausalLM back = copy_model(gpu.model(), torch::kFloat, torch::kCPU, false);
  EXPECT_LT(testing::max_param_diff(*cpu.model(), *back), 1e-5);
  EXPECT_GT(testing::max_param_diff(*cpu.model(), *testing::tiny_model(7)), 1e-4);
}

TEST(CudaRlLoop, TheSyncLoopRunsOnTheGpu) {
  ASPEN_REQUIRE_CUDA();
  const TrainConfig config =
      testing::tiny_run_config({"train.device=cuda", "rollout.device=cuda", "train.iterations=3"});
  RlSetup setup = build_rl_setup(config);
  EXPECT_TRUE(setup.model->lm_head_weight().is_cuda());
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("aspen_cuda_rl_" + std::to_string(getpid()));
  const nlohmann::json summary = run_rl(config, setup, RunOptions{dir.string()});
  EXPECT_EQ(summary["iterations"].get<int64_t>(), 3);
  EXPECT_GT(summary["samples"].get<int64_t>(), 0);
  EXPECT_TRUE(std::filesystem::exists(dir / "final" / "model.safetensors"));
  std::filesystem::remove_all(dir);
}

TEST(CudaCollectives, TwoRanksReduceGatherAndBroadcastThroughNccl) {
  if (cuda_device_count() < 2) GTEST_SKIP() << "fewer than 2 CUDA devices: skipped, not passed";
  const auto result = testing::run_command(
      kAspen + " launch --nproc-per-node 2 --master-port 0 -- " + kWorker + " nccl_collectives");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("rank 0 nccl ok"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("rank 1 nccl ok"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace aspen::pipeline
