// HfHead: config.json's architectures tell a causal LM from a sequence-classification
// (reward) model; num_labels and pad_token_id are read as transformers reads them.
#include "aspen/io/hf_head.h"

#include <gtest/gtest.h>

#include "aspen/io/hf_config.h"
#include "aspen/util/error.h"

namespace aspen::io {
namespace {

const char* kDecoder =
    R"("model_type": "qwen3", "vocab_size": 300, "hidden_size": 64, "intermediate_size": 96,
       "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16)";

std::string config(const std::string& extra) { return std::string("{") + kDecoder + extra + "}"; }

TEST(HfHead, ArchitecturesNameTheHead) {
  EXPECT_EQ(parse_hf_head(config(""), "c").head, HfHead::kCausalLM);
  EXPECT_EQ(parse_hf_head(config(R"(, "architectures": ["Qwen3ForCausalLM"])"), "c").head,
            HfHead::kCausalLM);
  const HfHeadConfig reward = parse_hf_head(
      config(R"(, "architectures": ["Qwen3ForSequenceClassification"], "pad_token_id": 5,
                 "id2label": {"0": "LABEL_0"})"),
      "c");
  EXPECT_EQ(reward.head, HfHead::kSequenceClassification);
  EXPECT_EQ(reward.num_labels, 1);
  EXPECT_EQ(reward.pad_token_id, 5);
  // transformers omits id2label for its default of two labels.
  EXPECT_EQ(parse_hf_head(config(R"(, "architectures": ["Qwen3ForSequenceClassification"])"), "c")
                .num_labels,
            2);
  // The decoder config is the same either way.
  EXPECT_NO_THROW(
      parse_hf_config(config(R"(, "architectures": ["Qwen3ForSequenceClassification"])"), "c"));
  EXPECT_THROW(parse_hf_config(config(R"(, "architectures": ["Qwen2ForSequenceClassification"])"),
                               "c"),
               Error);
}

TEST(HfHead, MalformedValuesNameTheKey) {
  auto input_of = [](const std::string& text) -> std::string {
    try {
      parse_hf_head(text, "config.json");
    } catch (const Error& error) {
      return error.input();
    }
    return "accepted";
  };
  EXPECT_EQ(input_of(config(R"(, "pad_token_id": -3)")), "config.json: pad_token_id");
  EXPECT_EQ(input_of(config(R"(, "architectures": ["Qwen3ForSequenceClassification"],
                               "num_labels": 0)")),
            "config.json: num_labels");
  EXPECT_EQ(input_of(config(R"(, "pad_token_id": null)")), "accepted");
}

}  // namespace
}  // namespace aspen::io
