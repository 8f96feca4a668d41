#include "aspen/tokenizer/unicode_class.h"

#include <cstdlib>
#include <memory>
#include <string>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "aspen/tokenizer/imports.h"
#include "aspen/tokenizer/utf8.h"

namespace aspen::tokenizer::unicode_class {
namespace {

// A single-character class compiled once; `matches` tests one code point.
class CharClass {
 public:
  explicit CharClass(const char* pattern) {
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    code_ =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &error_code, &error_offset, nullptr);
    // The patterns are constants of this file: failing to compile is a build bug.
    if (code_ == nullptr) std::abort();
  }
  ~CharClass() { pcre2_code_free(code_); }

  bool matches(char32_t cp) const {
    thread_local const std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> data(
        pcre2_match_data_create(1, nullptr), pcre2_match_data_free);
    std::string text;
    utf8::append_code_point(cp, text);
    return pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
                       PCRE2_NO_UTF_CHECK, data.get(), nullptr) >= 0;
  }

 private:
  pcre2_code* code_ = nullptr;
};

}  // namespace

bool is_word(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
           cp == '_';
  }
  static const CharClass kWord(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}])");
  return kWord.matches(cp);
}

bool is_white_space(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= '\t' && cp <= '\r');
  static const CharClass kSpace(R"(\p{White_Space})");
  return kSpace.matches(cp);
}

}  // namespace aspen::tokenizer::unicode_class
