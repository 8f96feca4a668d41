// PreTokenizer: the `pre_tokenizer` section of tokenizer.json as a chain of Isolated
// regex splits followed by the ByteLevel byte->character mapping.
// Supported (everything byte-level BPE models such as GPT-2 and Qwen use):
//   {"type":"Split","pattern":{"Regex"|"String":...},"behavior":"Isolated","invert":false}
//   {"type":"ByteLevel","add_prefix_space":false,"use_regex":true|false}
//   {"type":"Sequence","pretokenizers":[...]} of those.
// ByteLevel with use_regex=true adds the GPT-2 split. The ByteLevel mapping itself is
// applied by the BPE model (it works on bytes), so `split` yields raw byte pieces.
// Contract: a ByteLevel step must be present and last; anything else throws
// aspen::Error at load time. Input must be well-formed UTF-8.
// Thread safety: immutable after construction; `split` may run concurrently.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "aspen/tokenizer/imports.h"
#include "aspen/tokenizer/regex_splitter.h"

namespace aspen::tokenizer {

class PreTokenizer {
 public:
  static PreTokenizer from_json(const nlohmann::json& spec, const std::string& source);

  // Calls `on_word(piece)` for each pre-token of `text`, left to right.
  template <typename OnWord>
  void split(std::string_view text, OnWord&& on_word) const {
    split_from(0, text, on_word);
  }

 private:
  template <typename OnWord>
  void split_from(size_t step, std::string_view text, OnWord& on_word) const {
    if (step == steps_.size()) {
      on_word(text);
      return;
    }
    steps_[step].split(text, [&](std::string_view piece) { split_from(step + 1, piece, on_word); });
  }

  std::vector<RegexSplitter> steps_;
};

}  // namespace aspen::tokenizer
