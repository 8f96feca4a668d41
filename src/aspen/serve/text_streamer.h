// TextStreamer: turns one sample's tokens, as they arrive, into text deltas whose
// concatenation is exactly the final text the engine reports (Completion::text).
//
// Each token re-decodes the output so far (skipping special tokens, as the final text
// does) and releases only what cannot change:
//   - a trailing U+FFFD is held back: it may be the first bytes of a character that the
//     next token completes;
//   - with stop strings, nothing from the first occurrence of a stop string on is sent
//     (the engine cuts the text there; the token that completes it may carry more
//     text after it), and the last (longest stop - 1) bytes are held back, so a stop
//     string that a later token completes is never sent either.
// finish() releases the rest of the final text. Byte-level BPE decodes prefixes of the
// output to prefixes of its text (apart from the held-back cases), which is what makes
// the deltas add up; if the final text ever disagreed with what was sent, finish()
// sends nothing more rather than a wrong correction (the non-streamed response is
// authoritative).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "aspen/serve/imports.h"
#include "aspen/tokenizer/tokenizer.h"

namespace aspen::serve {

class TextStreamer {
 public:
  TextStreamer(const Tokenizer& tokenizer, const std::vector<std::string>& stop_strings);

  // The text that became final with this token (may be empty).
  std::string append(TokenId token);
  // The remainder of `final_text` not yet sent.
  std::string finish(const std::string& final_text);

  const std::string& sent() const { return sent_; }

 private:
  const Tokenizer& tokenizer_;
  std::vector<std::string> stop_strings_;
  size_t hold_back_ = 0;
  std::vector<TokenId> tokens_;
  std::string sent_;
};

}  // namespace aspen::serve
