// Format reward: think/answer tag structure and the regex mode.
#include "aspen/reward/format_verifier.h"

#include <gtest/gtest.h>

#include "aspen/util/error.h"

namespace aspen::reward {
namespace {

double grade_format(const std::string& response, const nlohmann::json& options = nlohmann::json::object(),
             const std::string& prompt = "") {
  return FormatVerifier(options).score({prompt, response, nullptr});
}

TEST(FormatVerifier, ThinkThenAnswer) {
  EXPECT_EQ(grade_format("<think>reason</think><answer>5</answer>"), 1.0);
  EXPECT_EQ(grade_format("\n<think>a\nb</think>\n\n<answer> 5 </answer>\n"), 1.0);
  EXPECT_EQ(grade_format("<think></think><answer></answer>"), 1.0);
}

TEST(FormatVerifier, BrokenStructures) {
  EXPECT_EQ(grade_format("<answer>5</answer><think>x</think>"), 0.0);                    // wrong order
  EXPECT_EQ(grade_format("<think>x</think>"), 0.0);                                      // no answer
  EXPECT_EQ(grade_format("<think>x<answer>5</answer></think><answer>5</answer>"), 0.0);  // nested
  EXPECT_EQ(grade_format("<think>x</think> hmm <answer>5</answer>"), 0.0);               // text between
  EXPECT_EQ(grade_format("<think>x</think><answer>5</answer> bye"), 0.0);                // trailing text
  EXPECT_EQ(grade_format("Sure! <think>x</think><answer>5</answer>"), 0.0);              // leading text
  EXPECT_EQ(grade_format("<think>x</think><answer>5"), 0.0);                             // unclosed
  EXPECT_EQ(grade_format("<think>x</think><answer>5</answer><answer>6</answer>"), 0.0);
  EXPECT_EQ(grade_format(""), 0.0);
}

TEST(FormatVerifier, Options) {
  EXPECT_EQ(grade_format("<think>x</think><answer>5</answer> bye", {{"allow_trailing_text", true}}), 1.0);
  EXPECT_EQ(grade_format("<answer>5</answer>", {{"tags", {"answer"}}}), 1.0);
  EXPECT_EQ(grade_format("<answer>5</answer>", {{"wrong_score", -1.0}}), -1.0);
  // A prompt that opens <think> (R1-Zero style) is continued by the response.
  EXPECT_EQ(grade_format("reason</think><answer>5</answer>", {}, "Assistant: <think>\n"), 1.0);
  EXPECT_EQ(grade_format("reason</think><answer>5</answer>", {}, "Assistant:"), 0.0);
}

TEST(FormatVerifier, RegexMode) {
  nlohmann::json options = {{"mode", "regex"}, {"pattern", "^\\d+$"}, {"max_chars", 10}};
  EXPECT_EQ(grade_format("12345", options), 1.0);
  EXPECT_EQ(grade_format("12a45", options), 0.0);
  EXPECT_EQ(grade_format("12345678901", options), 0.0);  // over max_chars
}

TEST(FormatVerifier, LongResponseIsLinearInTagsMode) {
  std::string response = "<think>" + std::string(2'000'000, 'x') + "</think><answer>1</answer>";
  EXPECT_EQ(grade_format(response), 1.0);
}

TEST(FormatVerifier, BadOptionsAreErrors) {
  EXPECT_THROW(FormatVerifier(nlohmann::json{{"mode", "glob"}}), Error);
  EXPECT_THROW(FormatVerifier(nlohmann::json{{"mode", "regex"}}), Error);
  EXPECT_THROW(FormatVerifier(nlohmann::json{{"mode", "regex"}, {"pattern", "(unclosed"}}), Error);
  EXPECT_THROW(FormatVerifier(nlohmann::json{{"tags", nlohmann::json::array()}}), Error);
  EXPECT_THROW(FormatVerifier(nlohmann::json{{"tags", {"<think>"}}}), Error);
  EXPECT_THROW(FormatVerifier(nlohmann::json{{"tag", {"think"}}}), Error);
}

}  // namespace
}  // namespace aspen::reward
