// Math answer grading on the answers that trip up naive string comparison.
#include "aspen/reward/math_verifier.h"

#include <gtest/gtest.h>

#include "aspen/reward/answer_extraction.h"
#include "aspen/reward/answer_normalizer.h"
#include "aspen/util/error.h"

namespace aspen::reward {
namespace {

double grade_math(const std::string& response, const nlohmann::json& truth,
             const nlohmann::json& options = nlohmann::json::object()) {
  MathVerifier verifier(MathVerifierOptions::from_json(options));
  return verifier.score({"", response, truth});
}

TEST(AnswerExtraction, LastBoxedWithNestedBraces) {
  EXPECT_EQ(extract_last_boxed("so \\boxed{\\frac{\\sqrt{2}}{2}} done"), "\\frac{\\sqrt{2}}{2}");
  EXPECT_EQ(extract_last_boxed("\\boxed{1} then \\boxed{2}"), "2");
  EXPECT_EQ(extract_last_boxed("\\boxed{1} then \\fbox{3}"), "3");
  EXPECT_EQ(extract_last_boxed("$\\boxed 7$"), "7");
  EXPECT_EQ(extract_last_boxed("no box here"), std::nullopt);
  // An unbalanced final box is no answer, not a fallback to the earlier box.
  EXPECT_EQ(extract_last_boxed("\\boxed{1} and \\boxed{2"), std::nullopt);
}

TEST(AnswerExtraction, HashPhraseAndPlain) {
  EXPECT_EQ(extract_hash_answer("work\n#### 1,234\n"), "1,234");
  EXPECT_EQ(extract_answer_phrase("So the Answer is 42.\n"), "42.");
  EXPECT_EQ(extract_answer_phrase("Answer: 7"), "7");
  EXPECT_EQ(extract_answer("  85\n", AnswerExtraction::kPlain, false), "85");
  EXPECT_EQ(extract_answer("   ", AnswerExtraction::kPlain, false), std::nullopt);
  EXPECT_EQ(extract_answer("the answer is 5", AnswerExtraction::kAuto, false), std::nullopt);
  EXPECT_EQ(extract_answer("the answer is 5", AnswerExtraction::kAuto, true), "5");
}

TEST(AnswerNormalizer, CanonicalForms) {
  EXPECT_EQ(normalize_answer("$1,234.$"), "1234");
  EXPECT_EQ(normalize_answer("\\dfrac12"), "\\frac{1}{2}");
  EXPECT_EQ(normalize_answer("\\tfrac{3}{4}"), "\\frac{3}{4}");
  EXPECT_EQ(normalize_answer("3/4"), "\\frac{3}{4}");
  EXPECT_EQ(normalize_answer("-3/4"), "-\\frac{3}{4}");
  EXPECT_EQ(normalize_answer("\\text{ 5 }"), "5");
  EXPECT_EQ(normalize_answer("\\left( 1, 2 \\right)"), "(1,2)");
  EXPECT_EQ(normalize_answer("\\leftarrow"), "\\leftarrow");
  EXPECT_EQ(normalize_answer("x = 5"), "5");
  EXPECT_EQ(normalize_answer("+.5"), "0.5");
  EXPECT_EQ(normalize_answer("\\sqrt2"), "\\sqrt{2}");
  EXPECT_EQ(normalize_answer("1,2"), "1,2");  // a tuple, not a thousands separator
  EXPECT_EQ(normalize_answer("12,34"), "12,34");
  EXPECT_EQ(normalize_answer("50\\%"), "50");
  EXPECT_EQ(normalize_answer("50\\%", {/*strip_percent=*/false, false}), "50\\%");
  EXPECT_EQ(normalize_answer("12 cm", {true, /*strip_units=*/true}), "12");
  EXPECT_EQ(normalize_answer("12 cm"), "12cm");
}

TEST(AnswerNormalizer, ParseNumberRejectsNonNumbers) {
  EXPECT_EQ(parse_number("\\frac{1}{2}"), 0.5);
  EXPECT_EQ(parse_number("-\\frac{1}{4}"), -0.25);
  EXPECT_EQ(parse_number("1.5e3"), 1500.0);
  EXPECT_EQ(parse_number("inf"), std::nullopt);
  EXPECT_EQ(parse_number("nan"), std::nullopt);
  EXPECT_EQ(parse_number("0x10"), std::nullopt);
  EXPECT_EQ(parse_number("e5"), std::nullopt);
  EXPECT_EQ(parse_number("\\frac{1}{0}"), std::nullopt);
  EXPECT_EQ(parse_number("\\sqrt{2}"), std::nullopt);
  EXPECT_EQ(parse_number("1-2"), std::nullopt);
}

TEST(MathVerifier, TrickyEqualAnswers) {
  EXPECT_EQ(grade_math("\\boxed{1,000}", 1000), 1.0);
  EXPECT_EQ(grade_math("\\boxed{\\frac{1}{2}}", "0.5"), 1.0);
  EXPECT_EQ(grade_math("\\boxed{\\dfrac12}", "1/2"), 1.0);
  EXPECT_EQ(grade_math("\\boxed{\xE2\x88\x92"
                  "3}",
                  "-3"),
            1.0);  // U+2212 minus
  EXPECT_EQ(grade_math("\\boxed{3.0}", "3"), 1.0);
  EXPECT_EQ(grade_math("\\boxed{$5$}", 5), 1.0);
  EXPECT_EQ(grade_math("\\boxed{\\frac{\\sqrt{2}}{2}}", "\\dfrac{\\sqrt2}{2}"), 1.0);
  EXPECT_EQ(grade_math("\\boxed{1} no wait \\boxed{2}", "2"), 1.0);
  EXPECT_EQ(grade_math("\\boxed{2} no wait \\boxed{1}", "2"), 0.0);
  EXPECT_EQ(grade_math("so #### 1,234", 1234), 1.0);
  EXPECT_EQ(grade_math("\\boxed{2.5e-1}", "1/4"), 1.0);
  EXPECT_EQ(grade_math("\\boxed{+7.}", 7), 1.0);
  EXPECT_EQ(grade_math("\\boxed{0.5}", 0.5), 1.0);
}

TEST(MathVerifier, WrongAnswersScoreWrong) {
  EXPECT_EQ(grade_math("\\boxed{1001}", 1000), 0.0);
  EXPECT_EQ(grade_math("\\boxed{-3}", 3), 0.0);
  EXPECT_EQ(grade_math("\\boxed{\\frac{1}{3}}", "0.33"), 0.0);
  EXPECT_EQ(grade_math("\\boxed{x^2}", "x^3"), 0.0);
  EXPECT_EQ(grade_math("\\boxed{x^2}", "x^{2}"), 0.0);  // no symbolic equivalence
}

TEST(MathVerifier, NoAnswerUsesItsOwnScore) {
  EXPECT_EQ(grade_math("I think it is 5", 5), 0.0);
  EXPECT_EQ(grade_math("I think it is 5", 5, {{"no_answer_score", -1.0}}), -1.0);
  EXPECT_EQ(grade_math("\\boxed{}", 5, {{"no_answer_score", -1.0}}), -1.0);
  EXPECT_EQ(grade_math("\\boxed{4}", 5, {{"no_answer_score", -1.0}, {"wrong_score", -0.5}}), -0.5);
}

TEST(MathVerifier, ExtractionModes) {
  EXPECT_EQ(grade_math("85", "85", {{"extract", "plain"}}), 1.0);
  EXPECT_EQ(grade_math(" 85\n", "85", {{"extract", "plain"}}), 1.0);
  EXPECT_EQ(grade_math("85 ", "86", {{"extract", "plain"}}), 0.0);
  EXPECT_EQ(grade_math("85", "85"), 0.0);  // auto needs \boxed or ####
  EXPECT_EQ(grade_math("#### 5", "5", {{"extract", "boxed"}}), 0.0);
  EXPECT_EQ(grade_math("\\boxed{5}", "5", {{"extract", "hash"}}), 0.0);
  EXPECT_EQ(grade_math("The answer is 5.", "5", {{"answer_phrase", true}}), 1.0);
  EXPECT_EQ(grade_math("The answer is 5.", "5"), 0.0);
}

TEST(MathVerifier, GroundTruthForms) {
  EXPECT_EQ(grade_math("\\boxed{72}", "Natalia sold 48/2 = 24 clips...\n#### 72"), 1.0);
  EXPECT_EQ(grade_math("\\boxed{0.5}", nlohmann::json::array({"1/3", "1/2"})), 1.0);
  EXPECT_EQ(grade_math("\\boxed{2.5}", 2.5), 1.0);
  EXPECT_THROW(grade_math("\\boxed{1}", nlohmann::json::object()), Error);
  EXPECT_THROW(grade_math("\\boxed{1}", nlohmann::json::array()), Error);
}

TEST(MathVerifier, ToleranceIsConfigurable) {
  EXPECT_EQ(grade_math("\\boxed{3.1416}", "3.14159265"), 0.0);
  EXPECT_EQ(grade_math("\\boxed{3.1416}", "3.14159265", {{"rel_tol", 1e-4}}), 1.0);
}

TEST(MathVerifier, BadOptionsAreErrors) {
  EXPECT_THROW(MathVerifierOptions::from_json({{"extract", "last"}}), Error);
  EXPECT_THROW(MathVerifierOptions::from_json({{"rel_tolerance", 1e-3}}), Error);
  EXPECT_THROW(MathVerifierOptions::from_json({{"answer_phrase", "yes"}}), Error);
  EXPECT_THROW(MathVerifierOptions::from_json({{"abs_tol", -1}}), Error);
  try {
    MathVerifierOptions::from_json({{"rel_tolerance", 1e-3}});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rel_tolerance"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aspen::reward
