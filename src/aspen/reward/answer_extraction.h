// Pulling the final answer out of a free-form response, the way math RL recipes grade:
//   boxed  - the content of the last \boxed{...} or \fbox{...}, braces balanced, so
//            \boxed{\frac{\sqrt{2}}{2}} yields \frac{\sqrt{2}}{2}; "\boxed 5" (no braces)
//            yields the next token. If the last occurrence is unbalanced there is no answer
//            (an earlier box is not silently used: the model's final word was malformed).
//   hash   - GSM8K style: the rest of the line after the last "####".
//   plain  - the whole response, trimmed (for tiny models trained to answer "85<eos>").
//   auto   - boxed, else hash.
//   answer phrase (optional fallback) - the rest of the line after the last "answer is" or
//            "answer:" (case-insensitive).
// All functions are pure and thread-safe; they never throw.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "aspen/reward/imports.h"

namespace aspen::reward {

enum class AnswerExtraction { kAuto, kBoxed, kHash, kPlain };

// Parses "auto" | "boxed" | "hash" | "plain"; throws aspen::Error naming `where` otherwise.
AnswerExtraction parse_answer_extraction(const std::string& text, const std::string& where);

std::optional<std::string> extract_last_boxed(std::string_view text);
std::optional<std::string> extract_hash_answer(std::string_view text);
std::optional<std::string> extract_answer_phrase(std::string_view text);

// Applies `mode`, then the answer-phrase fallback when `phrase_fallback` is set.
// A found but empty answer counts as no answer.
std::optional<std::string> extract_answer(std::string_view text, AnswerExtraction mode,
                                          bool phrase_fallback);

// Strips ASCII whitespace from both ends.
std::string trim_ascii(std::string_view text);

}  // namespace aspen::reward
