// The reward verifiers' answer parsers (reward/). Input: a ground truth (JSON, or the
// raw text when it is not JSON), a NUL byte, then the model's response.
// Checks: answer extraction, normalisation, number parsing and the countdown expression
// parser never throw; every verifier kind scores any response against a well-formed
// ground truth without throwing, and against the fuzzed ground truth either scores or
// throws aspen::Error; a JSON object {"kind": K, "options": {...}} also builds verifier K
// from those options (aspen::Error or a verifier that scores).
#include <cmath>

#include "aspen/reward/answer_extraction.h"
#include "aspen/reward/answer_normalizer.h"
#include "aspen/reward/arithmetic_expression.h"
#include "aspen/reward/verifier_registry.h"
#include "aspen/util/bounded_json.h"
#include "fuzz_common.h"

namespace {

void must_not_throw(const char* what, const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    aspen::fuzz::defect(std::string(what) + " threw " + aspen::fuzz::type_name(typeid(e)) + ": " +
                        e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [truth_text, response_view] = aspen::fuzz::split_at_nul(data, size);
  const std::string response(response_view);
  must_not_throw("answer parsing", [&] {
    for (auto mode : {aspen::reward::AnswerExtraction::kAuto, aspen::reward::AnswerExtraction::kBoxed,
                      aspen::reward::AnswerExtraction::kHash, aspen::reward::AnswerExtraction::kPlain}) {
      const auto answer =
          aspen::reward::extract_answer(response, mode, mode == aspen::reward::AnswerExtraction::kAuto);
      if (answer) aspen::reward::parse_number(aspen::reward::normalize_answer(*answer));
    }
    aspen::reward::parse_number(aspen::reward::normalize_answer(response));
    const aspen::reward::ParsedExpression parsed = aspen::reward::parse_arithmetic_expression(response);
    aspen::fuzz::require(parsed.well_formed || !parsed.value,
                         "a malformed expression has no value");
  });

  nlohmann::json truth;
  try {
    truth = aspen::parse_json_bounded(truth_text, "ground truth");
  } catch (const aspen::Error&) {
    truth = std::string(truth_text);
  }
  const nlohmann::json good_truths[] = {
      "42", nlohmann::json{{"target", 24}, {"numbers", {1, 2, 3, 4}}}, nullptr};
  for (const std::string& kind : aspen::reward::verifier_kinds()) {
    // A weighted reward has no default components (make_verifier refuses it without
    // them); it is fuzzed through the {"kind", "options"} truths below.
    if (kind == "weighted") continue;
    // External rewards run programs or call services: never from fuzzed input.
    if (kind == "command" || kind == "http") continue;
    std::unique_ptr<aspen::reward::Verifier> verifier = aspen::reward::make_verifier(kind);
    for (const auto& good : good_truths) {
      // Which truth fits which kind is the verifier's business: an aspen::Error here means
      // "wrong truth for this kind"; anything else, or an Error that depends on the
      // response, is checked by scoring an empty response with the same truth.
      bool truth_ok = true;
      try {
        verifier->score({"", "", good});
      } catch (const aspen::Error&) {
        truth_ok = false;
      }
      if (!truth_ok) continue;
      must_not_throw("score() on a well-formed ground truth", [&] {
        const double score = verifier->score({"prompt", response, good});
        aspen::fuzz::require(std::isfinite(score), "scores are finite");
      });
    }
    ASPEN_FUZZ_CONTRACT(verifier->score({"prompt", response, truth}));
  }
  if (truth.is_object() && truth.contains("kind") && truth["kind"].is_string() &&
      truth.contains("options") && truth["kind"] != "command" && truth["kind"] != "http" &&
      truth["options"].dump().find("command") == std::string::npos &&
      truth["options"].dump().find("http") == std::string::npos) {
    ASPEN_FUZZ_CONTRACT({
      auto verifier = aspen::reward::make_verifier(truth["kind"].get<std::string>(), truth["options"]);
      const nlohmann::json ground = truth.value("truth", nlohmann::json("1"));
      verifier->score({"prompt", response, ground});
    });
  }
  return 0;
}
