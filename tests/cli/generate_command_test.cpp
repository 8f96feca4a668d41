// `aspen generate` and `aspen info` on a random-weight Qwen3 checkpoint written by
// HF transformers (tools/python/hf_reference.py) with the real Qwen3 tokenizer.
// The --json log-probs must equal what `aspen logprobs` computes for prompt + output.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "support/hf_reference.h"
#include "support/oracles.h"
#include "tiny_model_dir.h"

namespace aspen::cli {
namespace {

using testing::run_command;

std::string make_model_dir() {
  // The real vocabulary size, bf16 storage and Qwen's own bos/eos ids, as a real
  // checkpoint has them; the weights are random.
  nlohmann::json model = {{"arch", "qwen3"}, {"tied", false}, {"seed", 3}, {"vocab", 151936}};
  model["dtype"] = "bfloat16";
  model["bos_token_id"] = 151643;
  model["eos_token_id"] = 151645;
  return testing::hf_model_dir_with_qwen3_tokenizer(testing::scratch_dir() + "/model", model,
                                                     testing::scratch_dir());
}

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

TEST(GenerateCommand, JsonOutputIsConsistentWithLogprobsCommand) {
  const std::string dir = make_model_dir();
  const auto result = run_command(testing::aspen_cli() + " generate --model " + dir +
                                  " --prompt 'Hello, world' --n 3 --max-tokens 6 --temperature 0.9"
                                  " --seed 5 --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto lines = json_lines(result.out);
  ASSERT_EQ(lines.size(), 3u);
  const auto prompt_ids = json_lines(
      run_command(testing::aspen_cli() + " tokenize --tokenizer " + dir, "\"Hello, world\"\n")
          .out)[0];
  for (size_t j = 0; j < lines.size(); ++j) {
    const auto& line = lines[j];
    EXPECT_EQ(line["prompt_index"], 0);
    EXPECT_EQ(line["sample_index"], static_cast<int>(j));
    ASSERT_EQ(line["token_ids"].size(), line["logprobs"].size());
    EXPECT_TRUE(line["finish_reason"] == "stop" || line["finish_reason"] == "length");
    EXPECT_TRUE(line["text"].is_string());
    // Recompute log p(output | prompt) with the logprobs command.
    nlohmann::json tokens = prompt_ids;
    for (const auto& id : line["token_ids"]) tokens.push_back(id);
    const auto scored = run_command(testing::aspen_cli() + " logprobs --model " + dir,
                                    nlohmann::json{{"tokens", tokens}}.dump() + "\n");
    ASSERT_EQ(scored.exit_code, 0) << scored.err;
    const auto all = json_lines(scored.out)[0]["logprobs"];
    const size_t offset = prompt_ids.size() - 1;
    for (size_t i = 0; i < line["logprobs"].size(); ++i) {
      EXPECT_NEAR(line["logprobs"][i].get<double>(), all[offset + i].get<double>(), 1e-3);
    }
  }
  // Same seed, same samples.
  EXPECT_EQ(
      run_command(testing::aspen_cli() + " generate --model " + dir +
                  " --prompt 'Hello, world' --n 3 --max-tokens 6 --temperature 0.9 --seed 5 --json")
          .out,
      result.out);
}

TEST(GenerateCommand, GreedyPromptsFileWithChatMessages) {
  const std::string dir = make_model_dir();
  const std::string prompts = testing::scratch_dir() + "/prompts.jsonl";
  testing::write_text(prompts,
                      "{\"prompt\": \"2+2=\"}\n"
                      "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
  const auto result =
      run_command(testing::aspen_cli() + " generate --model " + dir + " --prompts " + prompts +
                  " --n 2 --max-tokens 4 --temperature 0 --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto lines = json_lines(result.out);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["token_ids"], lines[1]["token_ids"]);  // greedy: samples agree
  EXPECT_EQ(lines[2]["prompt_index"], 1);
}

TEST(GenerateCommand, PlainTextIsTheCompletionAloneOrLabelledByPromptAndSample) {
  const std::string dir = make_model_dir();
  const std::string base = testing::aspen_cli() + " generate --model " + dir +
                           " --prompt 'Hello' --max-tokens 4 --temperature 0";
  const auto one = run_command(base);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto json = json_lines(run_command(base + " --json").out);
  ASSERT_EQ(json.size(), 1u);
  EXPECT_EQ(one.out, json[0]["text"].get<std::string>() + "\n") << "no unexplained [0.0]";
  const auto two = run_command(base + " --n 2");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.out.rfind("[prompt 0 sample 0] ", 0), 0u) << two.out;
  EXPECT_NE(two.out.find("\n[prompt 0 sample 1] "), std::string::npos) << two.out;
}

TEST(GenerateCommand, BadInputsGetClearErrors) {
  const std::string dir = make_model_dir();
  const std::string prompts = testing::scratch_dir() + "/bad.jsonl";
  testing::write_text(prompts, "{\"prompt\": \"ok\"}\n{\"text\": \"no prompt field\"}\n");
  const auto bad_line =
      run_command(testing::aspen_cli() + " generate --model " + dir + " --prompts " + prompts);
  EXPECT_EQ(bad_line.exit_code, 1);
  EXPECT_NE(bad_line.err.find("bad.jsonl: line 2"), std::string::npos) << bad_line.err;
  const auto bad_top_p =
      run_command(testing::aspen_cli() + " generate --model " + dir + " --prompt x --top-p 1.5");
  EXPECT_EQ(bad_top_p.exit_code, 1);
  EXPECT_NE(bad_top_p.err.find("top_p"), std::string::npos) << bad_top_p.err;
  const auto both = run_command(testing::aspen_cli() + " generate --model " + dir);
  EXPECT_EQ(both.exit_code, 1);
}

// Values vLLM would refuse get one line naming the flag's value (the sampling flags
// before the model loads); -1 is vLLM's "top-k off" and keeps that meaning. A KV cache
// of 9 * 10^12 MiB overflowed the byte count and ran with a single block.
TEST(GenerateCommand, OutOfRangeSamplingAndCacheFlagsAreRefused) {
  const std::string dir = testing::write_tiny_model_dir(testing::scratch_dir() + "/model");
  const std::string base = testing::aspen_cli() + " generate --model " + dir +
                           " --prompt ab --max-tokens 2 --kv-cache-mb 1";
  const auto off = run_command(base + " --top-k -1 --seed 0");
  EXPECT_EQ(off.exit_code, 0) << off.err;
  struct Case {
    std::string flags;
    std::string named;
  };
  for (const Case& c : {Case{"--top-k -5", "top_k must be -1 or 0 (off) or >= 1, got -5"},
                        Case{"--seed -1", "--seed must be >= 0, got -1"},
                        Case{"--kv-cache-mb 9000000000000", "--kv-cache-mb: 9000000000000 MiB is more"}}) {
    const auto result = run_command(testing::aspen_cli() + " generate --model " + dir +
                                    " --prompt ab --max-tokens 2 " + c.flags);
    EXPECT_EQ(result.exit_code, 1) << c.flags << ": " << result.out;
    EXPECT_NE(result.err.find(c.named), std::string::npos) << c.flags << ": " << result.err;
    EXPECT_EQ(result.err.find('\n'), result.err.size() - 1) << "one line: " << result.err;
  }
}

TEST(InfoCommand, DescribesArchitectureWeightsAndTokenizer) {
  const std::string dir = make_model_dir();
  const auto result = run_command(testing::aspen_cli() + " info --model " + dir);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto info = nlohmann::json::parse(result.out);
  EXPECT_EQ(info["architecture"], "Qwen3ForCausalLM");
  EXPECT_EQ(info["vocab_size"], 151936);
  EXPECT_GT(info["parameters"].get<int64_t>(), 151936 * 8);
  EXPECT_TRUE(info["dtypes"].contains("BFloat16"));
  EXPECT_EQ(info["tokenizer"]["chat_template"], "qwen3");
  EXPECT_GT(info["tokenizer"]["vocab_size"].get<int64_t>(), 151643);
}

}  // namespace
}  // namespace aspen::cli
