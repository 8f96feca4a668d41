// Aspen's Qwen2/Qwen3/Qwen3-MoE/DeepSeek-V3 model against HF transformers (tools/python/hf_reference.py,
// CPU, fp32, eager attention), the reference implementation of these architectures:
//  - checkpoints transformers writes: Aspen's packed per-token log-probs equal
//    transformers' to 1e-4 (Qwen2 with tied embeddings, Qwen3 untied with head_dim !=
//    hidden / heads; 300-id vocabularies);
//  - checkpoints Aspen writes (models it built, and transformers' models it loaded and
//    saved again, sharded too) load in transformers as the same model.
// Elsewhere: greedy decoding in tests/rollout/transformers_greedy_test.cpp, and the
// full 151,936-id vocabulary stored in bf16 through `aspen logprobs` in
// tests/cli/logprobs_parity_test.cpp.
//
// The random weights are far from HF's init (see hf_reference.py): peaked next-token
// distributions, live q/k/v biases and norm weights; resetting a single layer's q/k/v
// bias or norm weight to 0 or 1 moves some log-prob by 0.3 or more, thousands of times
// the tolerance. Measured differences are 1e-6 to 2e-5: fp32 rounding at these logit
// magnitudes (transformers' own fp32 and fp64 results differ by 1e-5).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/model/pretrained.h"
#include "hf_parity_util.h"
#include "support/hf_reference.h"
#include "tiny_configs.h"

namespace aspen::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::aspen_built_model;
using testing::aspen_logprobs;
using testing::count_logprobs;
using testing::max_logprob_diff;
using testing::parity_prompts;

constexpr double kTolerance = 1e-4;

std::vector<json> logprobs_jobs(const std::string& model,
                                const std::vector<std::vector<int64_t>>& prompts) {
  std::vector<json> jobs;
  for (const auto& prompt : prompts) jobs.push_back(testing::hf_logprobs_job(model, prompt));
  return jobs;
}

// ---- checkpoints transformers writes, loaded by Aspen ----

struct HfModel {
  std::string name;
  json make;  // hf_reference.py make options
};

void PrintTo(const HfModel& model, std::ostream* out) {
  *out << model.name;
}

class TransformersCheckpoint : public ::testing::TestWithParam<HfModel> {};

TEST_P(TransformersCheckpoint, PackedLogprobsMatchTransformersWithin1e4) {
  const HfModel& param = GetParam();
  const std::string dir = testing::hf_parity_scratch_dir();
  const std::string model_dir = dir + "/model";
  const int64_t vocab = param.make.value("vocab", int64_t{300});
  const auto prompts = parity_prompts(vocab);
  std::vector<json> jobs = {testing::hf_make_job(model_dir, param.make)};
  for (const json& job : logprobs_jobs(model_dir, prompts)) jobs.push_back(job);
  const auto reference = testing::run_hf_reference(jobs, dir);
  ASSERT_TRUE(reference.ok(jobs.size())) << reference.errors;

  QwenForCausalLM model = load_pretrained_model(model_dir);
  EXPECT_EQ(model->config.vocab_size, vocab);
  const auto got = aspen_logprobs(model, prompts);
  const std::vector<json> want(reference.results.begin() + 1, reference.results.end());
  const double diff = max_logprob_diff(got, want);
  std::printf("%s: max |aspen - transformers| = %.3g over %zu log-probs\n", param.name.c_str(),
              diff, count_logprobs(got));
  EXPECT_LE(diff, kTolerance);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Models, TransformersCheckpoint,
    ::testing::Values(HfModel{"Qwen2Tied", {{"arch", "qwen2"}, {"tied", true}, {"seed", 11}}},
                      HfModel{"Qwen3Untied", {{"arch", "qwen3"}, {"tied", false}, {"seed", 12}}},
                      // transformers gives Qwen3's o_proj a bias with attention_bias.
                      HfModel{"Qwen3AttentionBias",
                              {{"arch", "qwen3"}, {"tied", false}, {"seed", 13},
                               {"attention_bias", true}}},
                      // Qwen3-MoE: 8 experts, top-2 renormalised, a dense layer among
                      // the sparse ones (mlp_only_layers).
                      HfModel{"Qwen3MoeNormTopK",
                              {{"arch", "qwen3_moe"}, {"tied", false}, {"seed", 14},
                               {"layers", 3}, {"experts", 8}, {"experts_per_tok", 2},
                               {"mlp_only_layers", "1"}, {"norm_topk_prob", true}}},
                      // Raw top-3 probabilities as weights; every other layer sparse.
                      HfModel{"Qwen3MoeSparseStep2",
                              {{"arch", "qwen3_moe"}, {"tied", true}, {"seed", 15},
                               {"layers", 4}, {"experts", 6}, {"experts_per_tok", 3},
                               {"decoder_sparse_step", 2}}},
                      // DeepSeek-V3: MLA with a compressed query and interleaved rope;
                      // 8 experts in 4 groups, 2 groups per token, top-2 by the biased
                      // sigmoid scores, renormalised and scaled 2.5; one shared expert;
                      // layer 0 dense (first_k_dense_replace 1).
                      HfModel{"DeepseekV3",
                              {{"arch", "deepseek_v3"}, {"tied", false}, {"seed", 16},
                               {"layers", 3}, {"experts", 8}, {"experts_per_tok", 2},
                               {"norm_topk_prob", true}}},
                      // No query compression, plain (halves) rope layout, biases on the
                      // low-rank projections and o_proj, raw sigmoid weights over 6
                      // experts in 1 group, top-3, two shared experts' width, no dense layer.
                      HfModel{"DeepseekV3PlainQueryNoInterleave",
                              {{"arch", "deepseek_v3"}, {"tied", true}, {"seed", 17},
                               {"layers", 2}, {"experts", 6}, {"experts_per_tok", 3},
                               {"q_lora_rank", 0}, {"no_rope_interleave", true},
                               {"attention_bias", true}, {"n_group", 1}, {"topk_group", 1},
                               {"n_shared_experts", 2}, {"first_k_dense_replace", 0},
                               {"routed_scaling_factor", 1.0}}},
                      // YaRN rope scaling as DeepSeek-V3 ships it (mscale_all_dim also
                      // sharpens the softmax), with mscale != mscale_all_dim so that cos and
                      // sin are scaled too; a context far past the original 16 positions.
                      HfModel{"DeepseekV3Yarn",
                              {{"arch", "deepseek_v3"}, {"tied", false}, {"seed", 18},
                               {"layers", 2}, {"norm_topk_prob", true},
                               {"rope_scaling",
                                R"({"rope_type": "yarn", "factor": 8.0, "mscale": 0.8,
                                    "mscale_all_dim": 1.0, "original_max_position_embeddings": 16,
                                    "beta_fast": 8, "beta_slow": 1})"}}},
                      // Qwen3 with YaRN (as its long-context configs): attention_factor
                      // derived from the factor alone.
                      HfModel{"Qwen3Yarn",
                              {{"arch", "qwen3"}, {"tied", false}, {"seed", 19},
                               {"rope_scaling",
                                R"({"rope_type": "yarn", "factor": 4.0,
                                    "original_max_position_embeddings": 8})"}}}),
    [](const ::testing::TestParamInfo<HfModel>& info) { return info.param.name; });

// ---- checkpoints Aspen writes, loaded by transformers ----

TEST(AspenCheckpoint, ModelsAspenBuildsLoadInTransformersWithTheSameLogprobs) {
  const std::string dir = testing::hf_parity_scratch_dir();
  ModelConfig qwen2 = testing::tiny_config(ModelFamily::kQwen2, /*tied=*/true, /*head_dim=*/8);
  ModelConfig qwen3 = testing::tiny_config(ModelFamily::kQwen3, /*tied=*/false, /*head_dim=*/12);
  ModelConfig qwen3_moe = testing::tiny_moe_config();
  ModelConfig deepseek = testing::tiny_deepseek_config();
  std::vector<QwenForCausalLM> models;
  std::vector<std::string> dirs;
  std::vector<json> jobs;
  for (ModelConfig config : {qwen2, qwen3, qwen3_moe, deepseek}) {
    config.vocab_size = 300;
    models.push_back(aspen_built_model(config, 21 + models.size()));
    dirs.push_back(dir + "/" + config.model_type());
    save_pretrained_model(dirs.back(), models.back());
    for (const json& job : logprobs_jobs(dirs.back(), parity_prompts(300))) jobs.push_back(job);
  }
  const auto reference = testing::run_hf_reference(jobs, dir);
  ASSERT_TRUE(reference.ok(jobs.size())) << reference.errors;

  const size_t per_model = parity_prompts(300).size();
  for (size_t m = 0; m < models.size(); ++m) {
    const auto got = aspen_logprobs(models[m], parity_prompts(300));
    const std::vector<json> want(reference.results.begin() + m * per_model,
                                 reference.results.begin() + (m + 1) * per_model);
    const double diff = max_logprob_diff(got, want);
    std::printf("Aspen-built %s: max |aspen - transformers| = %.3g over %zu log-probs\n",
                models[m]->config.model_type().c_str(), diff, count_logprobs(got));
    EXPECT_LE(diff, kTolerance) << models[m]->config.model_type();
  }
  fs::remove_all(dir);
}

// transformers writes a model, Aspen loads it and saves it again (Qwen3 as shards with
// an index), transformers loads Aspen's copy: the same log-probs as the original, to the
// last bit (same fp32 weights, same program), and as Aspen's to 1e-4.
TEST(AspenCheckpoint, TransformersModelsAspenSavesAgainLoadBackUnchanged) {
  const std::string dir = testing::hf_parity_scratch_dir();
  const std::vector<json> models = {{{"arch", "qwen2"}, {"tied", true}, {"seed", 31}},
                                    {{"arch", "qwen3"}, {"tied", false}, {"seed", 32}},
                                    {{"arch", "qwen3_moe"}, {"tied", false}, {"seed", 33},
                                     {"layers", 3}, {"mlp_only_layers", "0"}},
                                    {{"arch", "deepseek_v3"}, {"tied", false}, {"seed", 34},
                                     {"layers", 3}}};
  std::vector<json> make_jobs;
  for (const json& options : models) {
    make_jobs.push_back(
        testing::hf_make_job(dir + "/hf_" + options["arch"].get<std::string>(), options));
  }
  const auto made = testing::run_hf_reference(make_jobs, dir + "/make");
  ASSERT_TRUE(made.ok(make_jobs.size())) << made.errors;

  const auto prompts = parity_prompts(300);
  std::vector<QwenForCausalLM> loaded;
  std::vector<json> jobs;
  for (const json& options : models) {
    const std::string arch = options["arch"];
    loaded.push_back(load_pretrained_model(dir + "/hf_" + arch));
    const int64_t shard_bytes = arch == "qwen3" ? 40000 : 0;
    save_pretrained_model(dir + "/aspen_" + arch, loaded.back(), shard_bytes);
    for (const json& job : logprobs_jobs(dir + "/hf_" + arch, prompts)) jobs.push_back(job);
    for (const json& job : logprobs_jobs(dir + "/aspen_" + arch, prompts)) jobs.push_back(job);
  }
  ASSERT_TRUE(fs::exists(dir + "/aspen_qwen3/model.safetensors.index.json"));
  const auto reference = testing::run_hf_reference(jobs, dir + "/score");
  ASSERT_TRUE(reference.ok(jobs.size())) << reference.errors;

  const auto slice = [&](size_t block) {
    return std::vector<json>(reference.results.begin() + block * prompts.size(),
                             reference.results.begin() + (block + 1) * prompts.size());
  };
  for (size_t m = 0; m < models.size(); ++m) {
    const std::string arch = models[m]["arch"];
    const std::vector<json> original = slice(2 * m), resaved = slice(2 * m + 1);
    EXPECT_EQ(original, resaved) << arch << ": transformers sees another model in Aspen's copy";
    const auto got = aspen_logprobs(loaded[m], prompts);
    const double diff = max_logprob_diff(got, resaved);
    std::printf("%s saved by Aspen: max |aspen - transformers| = %.3g over %zu log-probs\n",
                arch.c_str(), diff, count_logprobs(got));
    EXPECT_LE(diff, kTolerance) << arch;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace aspen::model
