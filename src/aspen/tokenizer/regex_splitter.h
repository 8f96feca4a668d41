// RegexSplitter: HF's Split pre-tokenizer with behaviour "Isolated" — every regex match
// and every stretch of text between matches becomes its own piece, in order, with no
// byte dropped. HF patterns are written for Oniguruma; they are compiled with PCRE2
// (UTF + UCP, JIT) after `translate_onig_pattern` maps the shorthand classes whose
// meaning differs between the engines. Tests pin the result against HF on a
// multilingual corpus.
// Contract: input must be well-formed UTF-8 (not re-checked, for speed).
// Thread safety: immutable after construction; `split` may run concurrently (match
// state is per thread).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "aspen/tokenizer/imports.h"

namespace aspen::tokenizer {

// Rewrites an Oniguruma (HF) pattern for PCRE2: \s/\S become \p{White_Space}/\P{..}
// (Oniguruma's \s is White_Space: it includes U+0085 and excludes U+180E, PCRE2's
// \s does the opposite), \d/\D become \p{Nd}/\P{Nd}, and \w becomes Oniguruma's
// [\p{L}\p{M}\p{Nd}\p{Pc}]. Throws aspen::Error (naming `source`) for \W inside a
// character class and for \h/\H, which mean hex digits in Oniguruma.
std::string translate_onig_pattern(const std::string& pattern, const std::string& source);

class RegexSplitter {
 public:
  // `pattern` is in HF's (Oniguruma) syntax. Throws aspen::Error naming `source` when
  // it does not compile.
  RegexSplitter(const std::string& pattern, const std::string& source);
  ~RegexSplitter();
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;

  // Calls `on_piece` for each non-empty piece of `text`, left to right. The
  // callback type is a template parameter so the hot loop inlines it.
  template <typename OnPiece>
  void split(std::string_view text, OnPiece&& on_piece) const {
    size_t pos = 0;
    size_t match_begin = 0;
    size_t match_end = 0;
    while (pos < text.size() && next_match(text, pos, &match_begin, &match_end)) {
      if (match_begin > pos) on_piece(text.substr(pos, match_begin - pos));
      on_piece(text.substr(match_begin, match_end - match_begin));
      pos = match_end;
    }
    if (pos < text.size()) on_piece(text.substr(pos));
  }

 private:
  // Finds the first non-empty match at or after `from`; false when there is none.
  bool next_match(std::string_view text, size_t from, size_t* begin, size_t* end) const;

  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace aspen::tokenizer
