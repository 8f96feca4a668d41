// The JSONL data options a verl user sets from the config: a separate validation file
// (data.eval_path), ids, a per-line verifier (data.verifier_field), a weighted sum of
// verifiers (data.verifier: weighted), and a system prompt with Qwen3's thinking switch
// through the model's own chat template.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "aspen/pipeline/rl_setup.h"
#include "aspen/util/error.h"
#include "support/hf_reference.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

std::string write_jsonl(const std::string& name, int lines, int first_answer) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream out(path);
  for (int i = 0; i < lines; ++i) {
    const int answer = first_answer + i;
    out << nlohmann::json{{"uid", name + "-" + std::to_string(i)},
                          {"prompt", std::to_string(answer) + "+0="},
                          {"answer", answer},
                          {"kind", i % 2 == 0 ? "math" : "countdown"}}
               .dump()
        << "\n";
  }
  return path;
}

TEST(JsonlData, AValidationFileOfItsOwnAndIdsFromAField) {
  const std::string train = write_jsonl("jsonl_data_train.jsonl", 30, 0);
  const std::string eval = write_jsonl("jsonl_data_eval.jsonl", 12, 100);
  const RlSetup setup = build_rl_setup(
      testing::tiny_run_config({"data.task=jsonl", "data.path=" + train, "data.eval_path=" + eval,
                                "data.eval_size=10", "data.id_field=uid", "train.sft_steps=0"}));
  // Every training line is trained on (nothing carved out); validation is the other
  // file's first eval_size lines, in file order.
  EXPECT_EQ(setup.train_examples.size(), 30u);
  ASSERT_EQ(setup.eval_examples.size(), 10u);
  for (size_t i = 0; i < setup.eval_examples.size(); ++i) {
    EXPECT_EQ(setup.eval_examples[i].id, "jsonl_data_eval.jsonl-" + std::to_string(i));
  }
  for (const TaskExample& example : setup.train_examples) {
    EXPECT_EQ(example.id.rfind("jsonl_data_train.jsonl-", 0), 0u) << example.id;
  }
  EXPECT_THROW(build_rl_setup(testing::tiny_run_config(
                   {"data.task=jsonl", "data.path=" + train, "data.eval_path=/no/such.jsonl"})),
               Error);
}

TEST(JsonlData, EachLineIsScoredByTheVerifierItNames) {
  const std::string train = write_jsonl("jsonl_data_kinds.jsonl", 30, 0);
  const RlSetup setup = build_rl_setup(
      testing::tiny_run_config({"data.task=jsonl", "data.path=" + train, "data.eval_size=4",
                                "data.verifier_field=kind", "train.sft_steps=0"}));
  EXPECT_EQ(setup.verifier->name(), "math");
  for (const TaskExample& example : setup.train_examples) {
    EXPECT_EQ(verifier_for(setup, example).name(), example.verifier) << example.id;
  }
}

TEST(JsonlData, AWeightedSumOfVerifiersFromTheConfig) {
  const std::string train = write_jsonl("jsonl_data_weighted.jsonl", 30, 0);
  const RlSetup setup = build_rl_setup(testing::tiny_run_config(
      {"data.task=jsonl", "data.path=" + train, "data.eval_size=4", "data.verifier=weighted",
       "data.verifier_options=[{name: acc, verifier: math, weight: 1.0}, "
       "{name: acc_half, verifier: math, weight: 0.5}]",
       "train.sft_steps=0"}));
  ASSERT_EQ(setup.verifier->name(), "weighted");
  EXPECT_DOUBLE_EQ(setup.verifier->score({"7+0=", "\\boxed{7}", nlohmann::json(7)}), 1.5);
  EXPECT_DOUBLE_EQ(setup.verifier->score({"7+0=", "\\boxed{8}", nlohmann::json(7)}), 0.0);
}

TEST(JsonlData, TheSystemPromptAndQwen3ThinkingSwitchComeFromTheConfig) {
  const std::string dir = ::testing::TempDir() + "/jsonl_data_qwen3";
  std::filesystem::remove_all(dir);
  nlohmann::json model = {{"arch", "qwen3"}, {"tied", true}, {"seed", 1}, {"vocab", 151936}};
  model["eos_token_id"] = 151645;
  const std::string model_dir =
      testing::hf_model_dir_with_qwen3_tokenizer(dir + "/model", model, dir);
  const std::string train = write_jsonl("jsonl_data_thinking.jsonl", 12, 0);
  const RlSetup setup = build_rl_setup(testing::tiny_run_config(
      {"data.task=jsonl", "data.path=" + train, "data.eval_size=4", "train.sft_steps=0",
       "model.path=" + model_dir, "data.chat_template=true", "data.enable_thinking=false",
       "data.system_prompt=Be brief."}));
  ASSERT_FALSE(setup.train_examples.empty());
  for (const TaskExample& example : setup.train_examples) {
    const std::string& text = example.prompt_text;
    EXPECT_EQ(text.rfind("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n", 0), 0u)
        << text;
    // enable_thinking false: the generation prompt ends in an empty think block.
    const std::string tail = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    ASSERT_GE(text.size(), tail.size());
    EXPECT_EQ(text.substr(text.size() - tail.size()), tail) << text;
  }
}

}  // namespace
}  // namespace aspen::pipeline
