// docs/config.md's key tables are the field description's own (train_config_fields.h):
// each <!-- config table: SECTION --> block equals config_reference_markdown(SECTION), so
// a key added, renamed or re-defaulted in the code changes the page or fails here. And
// the description reads what it writes: as_json of any parsed config parses back to the
// same JSON, enums included (aliases come back as their names).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "aspen/config/train_config.h"
#include "aspen/util/error.h"

namespace aspen::config {
namespace {

std::string read_page() {
  std::ifstream in(std::string(ASPEN_SOURCE_DIR) + "/docs/config.md");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text between the section's marker line and the end marker.
std::string table_block(const std::string& page, const std::string& section) {
  const std::string marker = "<!-- config table: " + section + " ";
  const size_t start = page.find(marker);
  if (start == std::string::npos) return "(no block for " + section + ")";
  const size_t body = page.find('\n', start) + 1;
  const size_t end = page.find("<!-- end config table -->", body);
  return page.substr(body, end - body);
}

TEST(ConfigDocs, EveryKeyTableOfThePageIsTheFieldDescriptions) {
  const std::string page = read_page();
  for (const std::string& section : config_sections()) {
    EXPECT_EQ(table_block(page, section), config_reference_markdown(section))
        << "docs/config.md's " << section
        << " table differs from `aspen train --config-reference`; paste its output there";
  }
  EXPECT_EQ(config_reference_markdown("no_such_section"), "");
}

TEST(ConfigDocs, EveryKeyOfAParsedConfigIsDocumented) {
  Config config = Config::empty();
  const nlohmann::json written = parse_train_config(config).as_json();
  for (const auto& [section, keys] : written.items()) {
    const std::string table = config_reference_markdown(section);
    for (const auto& [key, value] : keys.items()) {
      // A nested mapping (placement.train, train.lora) is documented key by key; a
      // free-form options block (json_field) by its own key.
      if (value.is_object() && table.find("| `" + key + "` |") == std::string::npos) {
        for (const auto& [sub, unused] : value.items()) {
          EXPECT_NE(table.find("| `" + key + "." + sub + "` |"), std::string::npos) << key << "." << sub;
        }
        continue;
      }
      EXPECT_NE(table.find("| `" + key + "` |"), std::string::npos) << section << "." << key;
    }
  }
}

TEST(ConfigDocs, WhatIsWrittenReadsBackTheSame) {
  Config config = Config::parse(
      "algorithm: {name: dapo, kl_estimator: k1, loss_agg: seq-mean-token-sum-norm}\n"
      "train: {schedule: cosine, compute_dtype: bf16}\n"
      "pipeline: {mode: async, dispatch: round_robin, on_instance_failure: stop}\n"
      "data: {task: countdown}\n",
      "run.yaml");
  const TrainConfig parsed = parse_train_config(config);
  EXPECT_EQ(parsed.algorithm.name, AlgorithmName::kDapo);
  EXPECT_EQ(parsed.algorithm.kl_estimator, KlEstimator::kK1);
  EXPECT_EQ(parsed.algorithm.loss_agg, AggMode::kSeqMeanTokenSumNorm);
  EXPECT_EQ(parsed.algorithm.clip_ratio_high, 0.28);  // dapo's preset
  EXPECT_EQ(parsed.algorithm.off_policy, OffPolicy::kDecoupled);  // auto, async
  EXPECT_EQ(parsed.train.schedule, LrScheduleKind::kCosine);
  EXPECT_EQ(parsed.train.compute_dtype, ComputeDtype::kBf16);
  EXPECT_EQ(parsed.pipeline.dispatch, DispatchPolicyKind::kRoundRobin);
  EXPECT_EQ(parsed.data.task, TaskKind::kCountdown);
  EXPECT_EQ(parsed.data.task_options, nlohmann::json::object());  // only arithmetic's differ
  const nlohmann::json written = parsed.as_json();
  EXPECT_EQ(written["algorithm"]["kl_estimator"], "kl");  // the alias, written as its name
  Config again = Config::parse(written.dump(), "config.json");
  EXPECT_EQ(parse_train_config(again).as_json(), written);
}

TEST(ConfigDocs, AnUnknownEnumSpellingListsTheNames) {
  Config config = Config::parse("train: {schedule: linear}\n", "run.yaml");
  try {
    parse_train_config(config);
    FAIL() << "accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.input(), "run.yaml: train.schedule");
    EXPECT_NE(error.hint().find("constant, cosine"), std::string::npos) << error.hint();
  }
}

}  // namespace
}  // namespace aspen::config
