// data.verifier: model: a Qwen2/Qwen3ForSequenceClassification reward model scores
// sequences exactly as transformers does (random checkpoints written by transformers,
// fp32, 1e-4), pooling on the last token that is not the pad id; texts are scored with
// the model's own tokenizer; configs name it through make_verifier (weighted included);
// bad options and a causal LM directory are errors naming them.
#include "aspen/pipeline/reward_model_verifier.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "aspen/reward/verifier_registry.h"
#include "aspen/util/error.h"
#include "support/hf_reference.h"
#include "support/oracles.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;

std::string scratch() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir = ::testing::TempDir() + "/aspen_rm_" + info->name();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

const std::vector<std::vector<int64_t>> kSequences = {
    {5, 17, 42, 99, 3}, {8}, {250, 7, 7}, {7, 7}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}};

// Scores by transformers for each architecture's random reward model (num_labels 2,
// pad id 7: sequence 3 ends in pads, sequence 4 is all pads).
TEST(RewardModelVerifier, ScoresEqualTransformersForQwen2AndQwen3) {
  const std::string dir = scratch();
  std::vector<nlohmann::json> jobs;
  for (const std::string arch : {"qwen2", "qwen3"}) {
    jobs.push_back(testing::hf_make_job(dir + "/" + arch, {{"arch", arch},
                                                          {"head", "seqcls"},
                                                          {"num_labels", 2},
                                                          {"pad_token_id", 7},
                                                          {"seed", 3},
                                                          {"vocab", 300}}));
    for (const auto& sequence : kSequences) {
      jobs.push_back({{"op", "score"}, {"model", dir + "/" + arch}, {"tokens", sequence}});
    }
  }
  const auto run = testing::run_hf_reference(jobs, dir);
  ASSERT_TRUE(run.ok(jobs.size())) << run.errors;

  std::vector<std::vector<TokenId>> sequences;
  for (const auto& s : kSequences) sequences.emplace_back(s.begin(), s.end());
  size_t result = 0;
  for (const std::string arch : {"qwen2", "qwen3"}) {
    ++result;  // the make job
    // score_tokens needs a tokenizer in the directory only at construction.
    fs::copy_file(testing::qwen3_tokenizer_json(), dir + "/" + arch + "/tokenizer.json");
    for (int label = 0; label < 2; ++label) {
      RewardModelOptions options;
      options.path = dir + "/" + arch;
      options.label = label;
      options.batch_tokens = 6;  // several packed forwards, one sequence longer than that
      const std::vector<double> scores = RewardModelVerifier(options).score_tokens(sequences);
      ASSERT_EQ(scores.size(), kSequences.size());
      for (size_t i = 0; i < kSequences.size(); ++i) {
        const double expected = run.results[result + i]["scores"][label].get<double>();
        EXPECT_NEAR(scores[i], expected, 1e-4) << arch << " label " << label << " sequence " << i;
      }
    }
    result += kSequences.size();
  }
}

TEST(RewardModelVerifier, TextIsTokenizedWithTheRewardModelsTokenizerAndNamedByConfigs) {
  const std::string dir = scratch();
  const std::string model = testing::hf_model_dir_with_qwen3_tokenizer(
      dir + "/rm", {{"arch", "qwen3"}, {"head", "seqcls"}, {"seed", 4}, {"vocab", 151936}}, dir);
  register_reward_model_verifier();
  const auto verifier = make_verifier("model", {{"path", model}});
  EXPECT_EQ(verifier->name(), "model");
  const RewardInput input{"What is 2+2? ", "It is 4.", "4"};
  RewardModelOptions options;
  options.path = model;
  const RewardModelVerifier direct(options);
  const Tokenizer tokenizer = Tokenizer::from_file(model);
  EXPECT_DOUBLE_EQ(verifier->score(input),
                   direct.score_tokens({tokenizer.encode(input.prompt + input.response)})[0]);
  const auto batch = verifier->score_batch({input, {"Q ", "A", "x"}});
  EXPECT_DOUBLE_EQ(batch[0], verifier->score(input));
  // As a weighted component: 0.5 x the model's score.
  const auto weighted = make_verifier(
      "weighted", nlohmann::json::array({{{"name", "rm"},
                                          {"verifier", "model"},
                                          {"weight", 0.5},
                                          {"options", {{"path", model}}}}}));
  EXPECT_NEAR(weighted->score(input), 0.5 * verifier->score(input), 1e-12);
  const auto kinds = verifier_kinds();
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "model"), kinds.end());
}

TEST(RewardModelVerifier, BadOptionsAndACausalLmAreErrorsNamingThem) {
  const std::string dir = scratch();
  const std::vector<nlohmann::json> jobs = {
      testing::hf_make_job(dir + "/lm", {{"arch", "qwen3"}, {"vocab", 300}}),
      testing::hf_make_job(dir + "/rm", {{"arch", "qwen3"}, {"head", "seqcls"}, {"vocab", 300}})};
  ASSERT_TRUE(testing::run_hf_reference(jobs, dir).ok(jobs.size()));
  fs::copy_file(testing::qwen3_tokenizer_json(), dir + "/lm/tokenizer.json");
  fs::copy_file(testing::qwen3_tokenizer_json(), dir + "/rm/tokenizer.json");
  auto error_of = [](const nlohmann::json& options) -> std::string {
    try {
      RewardModelVerifier verifier(RewardModelOptions::from_json(options));
    } catch (const Error& error) {
      return error.input() + " | " + error.problem();
    }
    return "accepted";
  };
  EXPECT_NE(error_of({{"path", dir + "/lm"}}).find("not a reward model"), std::string::npos);
  EXPECT_NE(error_of(nlohmann::json::object()).find("verifier options (model).path"),
            std::string::npos);
  EXPECT_NE(error_of({{"path", dir + "/rm/tokenizer.json"}})
                .find("verifier options (model).path " + dir +
                      "/rm/tokenizer.json | is not a "
                      "directory"),
            std::string::npos);
  EXPECT_NE(error_of({{"path", dir + "/rm"}, {"label", 1}}).find(".label"), std::string::npos);
  EXPECT_NE(error_of({{"path", dir + "/rm"}, {"dtype", "fp8"}}).find(".dtype"), std::string::npos);
  EXPECT_NE(error_of({{"path", dir + "/rm"}, {"batch", 3}}).find("batch"), std::string::npos);
  EXPECT_EQ(error_of({{"path", dir + "/rm"}, {"label", 0}}), "accepted");  // one label
}

}  // namespace
}  // namespace aspen::pipeline
