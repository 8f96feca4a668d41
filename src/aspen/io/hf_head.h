// Which head an HF Qwen checkpoint puts on its decoder, read from config.json's
// `architectures`: Qwen{2,3}ForCausalLM (the language-model head: a policy) or
// Qwen{2,3}ForSequenceClassification (a score head, [num_labels, hidden] without bias,
// on one token per sequence: a reward model). ModelConfig (hf_config.h) describes the
// decoder, which both share.
//
// num_labels: config.json's "num_labels", else the size of its "id2label" (what
// transformers writes), else transformers' default of 2. pad_token_id: -1 when absent
// or null; the classification head pools the last token that is not pad_token_id.
//
// Errors: aspen::Error naming `source` and the key for a malformed value. A config
// without `architectures` is a causal LM (as transformers' AutoModelForCausalLM reads it).
#pragma once

#include <cstdint>
#include <string>

#include "aspen/io/imports.h"

namespace aspen::io {

enum class HfHead { kCausalLM, kSequenceClassification };

struct HfHeadConfig {
  HfHead head = HfHead::kCausalLM;
  int64_t num_labels = 0;     // kSequenceClassification only
  int64_t pad_token_id = -1;  // -1: none
};

HfHeadConfig parse_hf_head(const std::string& json_text, const std::string& source);
HfHeadConfig load_hf_head(const std::string& config_path);

}  // namespace aspen::io
