// docs/walkthrough.md ("Bring your own task") runs as written: every ```sh block of the
// page, in order, in one bash with -euo pipefail, from an empty directory, with `aspen`
// on PATH and MODEL naming a tiny random Qwen3 checkpoint written by transformers with
// the real Qwen3 tokenizer and chat template. Then the files the page promises are there:
// the trained model, the metrics of every iteration, the eval JSON and the report.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_test_util.h"
#include "support/hf_reference.h"
#include "support/oracles.h"

namespace aspen::cli {
namespace {

namespace fs = std::filesystem;
using testing::run_command;

// The page's ```sh blocks, concatenated in order.
std::string shell_blocks(const std::string& markdown) {
  std::istringstream in(markdown);
  std::string line, script;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside && line == "```sh") {
      inside = true;
    } else if (inside && line == "```") {
      inside = false;
      script += "\n";
    } else if (inside) {
      script += line + "\n";
    }
  }
  return script;
}

TEST(Walkthrough, TheBringYourOwnTaskPageRunsAsWritten) {
  const std::string page = testing::read_text(std::string(ASPEN_SOURCE_DIR) + "/docs/walkthrough.md");
  const std::string script = shell_blocks(page);
  ASSERT_NE(script.find("aspen train"), std::string::npos);
  ASSERT_NE(script.find("aspen eval"), std::string::npos);
  ASSERT_NE(script.find("aspen report"), std::string::npos);

  const std::string scratch = testing::scratch_dir();
  nlohmann::json model = {{"arch", "qwen3"}, {"tied", true}, {"seed", 21}, {"vocab", 151936}};
  model["eos_token_id"] = 151645;
  const std::string model_dir =
      testing::hf_model_dir_with_qwen3_tokenizer(scratch + "/model", model, scratch);
  const std::string work = scratch + "/work";
  fs::create_directories(work);
  testing::write_text(work + "/walkthrough.sh", script);

  const std::string bin = fs::path(testing::aspen_cli()).parent_path().string();
  const auto result = run_command("cd '" + work + "' && PATH='" + bin + "':\"$PATH\" MODEL='" +
                                  model_dir + "' bash -euo pipefail walkthrough.sh");
  ASSERT_EQ(result.exit_code, 0) << result.err << "\n--- stdout\n" << result.out;

  const std::string run = work + "/runs/my_task";
  for (const char* file : {"final/config.json", "final/model.safetensors", "final/tokenizer.json",
                           "final/tokenizer_config.json", "summary.json", "config.json",
                           "report.html", "eval.json"}) {
    EXPECT_TRUE(fs::exists(run + "/" + file)) << file;
  }
  int rl_lines = 0;
  std::ifstream metrics(run + "/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    rl_lines += nlohmann::json::parse(line).value("phase", "") == "rl";
  }
  EXPECT_EQ(rl_lines, 6);
  const nlohmann::json eval = nlohmann::json::parse(testing::read_text(run + "/eval.json"));
  EXPECT_EQ(eval["examples"], 2);
  EXPECT_EQ(eval["n"], 4);
  EXPECT_TRUE(eval.contains("pass@4")) << eval.dump();
  // The eval's JSON went to the file and was printed by `cat`.
  EXPECT_NE(result.out.find("\"pass@1\""), std::string::npos);
}

// docs/agents.md's calculator walkthrough runs as written: a tiny multi-turn run with the
// calculator tool, then the trained model as an agent under aspen eval.
TEST(Walkthrough, TheCalculatorAgentPageRunsAsWritten) {
  const std::string page = testing::read_text(std::string(ASPEN_SOURCE_DIR) + "/docs/agents.md");
  const std::string script = shell_blocks(page);
  ASSERT_NE(script.find("rollout.environment.kind=tools"), std::string::npos);
  const std::string work = testing::scratch_dir() + "/agents";
  fs::create_directories(work);
  testing::write_text(work + "/walkthrough.sh", script);
  const std::string bin = fs::path(testing::aspen_cli()).parent_path().string();
  const auto result = run_command("cd '" + work + "' && PATH='" + bin +
                                  "':\"$PATH\" bash -euo pipefail walkthrough.sh");
  ASSERT_EQ(result.exit_code, 0) << result.err << "\n--- stdout\n" << result.out;
  EXPECT_NE(result.out.find("\"tool_calls_mean\":"), std::string::npos) << result.out;
  const nlohmann::json eval =
      nlohmann::json::parse(testing::read_text(work + "/runs/calculator/eval.json"));
  EXPECT_EQ(eval["examples"], 2);
  EXPECT_EQ(eval["environment"], "tools");
  EXPECT_GE(eval["turns_mean"].get<double>(), 1.0);
  EXPECT_TRUE(eval.contains("tool_calls_mean")) << eval.dump();
}

}  // namespace
}  // namespace aspen::cli
