#include "aspen/reward/answer_extraction.h"

#include <algorithm>
#include <cctype>

#include "aspen/reward/imports.h"
#include "aspen/util/error.h"
#include "aspen/util/strings.h"

namespace aspen::reward {
namespace {

// Content of the brace group opening at text[open] ('{'), or nullopt when unbalanced.
std::optional<std::string> brace_group(std::string_view text, size_t open) {
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && --depth == 0) return std::string(text.substr(open + 1, i - open - 1));
  }
  return std::nullopt;
}

std::string rest_of_line(std::string_view text, size_t from) {
  size_t end = text.find('\n', from);
  return trim_ascii(text.substr(from, end == std::string_view::npos ? text.npos : end - from));
}

}  // namespace

std::string trim_ascii(std::string_view text) {
  size_t begin = 0;
  size_t end = text.size();
  while (begin < end && is_space(text[begin])) ++begin;
  while (end > begin && is_space(text[end - 1])) --end;
  return std::string(text.substr(begin, end - begin));
}

AnswerExtraction parse_answer_extraction(const std::string& text, const std::string& where) {
  if (text == "auto") return AnswerExtraction::kAuto;
  if (text == "boxed") return AnswerExtraction::kBoxed;
  if (text == "hash") return AnswerExtraction::kHash;
  if (text == "plain") return AnswerExtraction::kPlain;
  throw Error("unknown answer extraction \"" + text + "\"", where,
              "use one of: auto, boxed, hash, plain");
}

std::optional<std::string> extract_last_boxed(std::string_view text) {
  size_t boxed = text.rfind("\\boxed");
  size_t fbox = text.rfind("\\fbox");
  size_t at = boxed;
  size_t command_length = 6;
  if (fbox != std::string_view::npos && (boxed == std::string_view::npos || fbox > boxed)) {
    at = fbox;
    command_length = 5;
  }
  if (at == std::string_view::npos) return std::nullopt;
  size_t pos = at + command_length;
  if (pos < text.size() && text[pos] == '{') return brace_group(text, pos);
  // "\boxed 5": the answer is the next whitespace- or '$'-delimited token.
  if (pos >= text.size() || text[pos] != ' ') return std::nullopt;
  while (pos < text.size() && text[pos] == ' ') ++pos;
  size_t end = pos;
  while (end < text.size() && !is_space(text[end]) && text[end] != '$') ++end;
  return std::string(text.substr(pos, end - pos));
}

std::optional<std::string> extract_hash_answer(std::string_view text) {
  size_t at = text.rfind("####");
  if (at == std::string_view::npos) return std::nullopt;
  return rest_of_line(text, at + 4);
}

std::optional<std::string> extract_answer_phrase(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  size_t best = std::string::npos;
  size_t best_end = 0;
  for (const std::string phrase : {"answer is", "answer:"}) {
    size_t at = lower.rfind(phrase);
    if (at != std::string::npos && (best == std::string::npos || at > best)) {
      best = at;
      best_end = at + phrase.size();
    }
  }
  if (best == std::string::npos) return std::nullopt;
  std::string answer = rest_of_line(text, best_end);
  if (!answer.empty() && answer[0] == ':') answer = trim_ascii(answer.substr(1));
  return answer;
}

std::optional<std::string> extract_answer(std::string_view text, AnswerExtraction mode,
                                          bool phrase_fallback) {
  std::optional<std::string> answer;
  switch (mode) {
    case AnswerExtraction::kBoxed:
      answer = extract_last_boxed(text);
      break;
    case AnswerExtraction::kHash:
      answer = extract_hash_answer(text);
      break;
    case AnswerExtraction::kPlain:
      answer = trim_ascii(text);
      break;
    case AnswerExtraction::kAuto:
      answer = extract_last_boxed(text);
      if (!answer) answer = extract_hash_answer(text);
      break;
  }
  if (answer && trim_ascii(*answer).empty()) answer.reset();
  if (!answer && phrase_fallback) answer = extract_answer_phrase(text);
  if (answer && trim_ascii(*answer).empty()) answer.reset();
  return answer;
}

}  // namespace aspen::reward
