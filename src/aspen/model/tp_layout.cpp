#include "aspen/model/tp_layout.h"

#include "aspen/util/error.h"
#include "aspen/util/strings.h"

namespace aspen {
ShardSpec qwen_shard_spec(const std::string& hf_name, const ModelConfig& config) {
  const int64_t heads = config.num_attention_heads;
  const int64_t kv_heads = config.num_key_value_heads;
  const int64_t inter = config.intermediate_size;
  if (hf_name == "model.embed_tokens.weight" || hf_name == "lm_head.weight") {
    return {0, config.vocab_size};
  }
  if (ends_with(hf_name, ".self_attn.q_proj.weight") ||
      ends_with(hf_name, ".self_attn.q_proj.bias")) {
    return {0, heads};
  }
  if (ends_with(hf_name, ".self_attn.k_proj.weight") ||
      ends_with(hf_name, ".self_attn.k_proj.bias") ||
      ends_with(hf_name, ".self_attn.v_proj.weight") ||
      ends_with(hf_name, ".self_attn.v_proj.bias")) {
    return {0, kv_heads};
  }
  if (ends_with(hf_name, ".self_attn.o_proj.weight")) return {1, heads};
  // Added once after the row-parallel reduction: every rank holds all of it.
  if (ends_with(hf_name, ".self_attn.o_proj.bias")) return {};
  if (ends_with(hf_name, ".mlp.gate_proj.weight") || ends_with(hf_name, ".mlp.up_proj.weight")) {
    return {0, inter};
  }
  if (ends_with(hf_name, ".mlp.down_proj.weight")) return {1, inter};
  if (ends_with(hf_name, "norm.weight")) return {};  // every RMSNorm, incl. q/k norms
  throw Error("no tensor-parallel layout for parameter '" + hf_name + "'", "model TP layout",
              "a Qwen2/Qwen3 dense checkpoint key was expected");
}

void validate_tp_size(const ModelConfig& config, int size) {
  const std::string what = "tensor parallel size " + std::to_string(size);
  check_input(size >= 1, "must be at least 1", what);
  auto need = [&](bool ok, const std::string& field, int64_t value) {
    check_input(ok,
                "does not divide " + field + " = " + std::to_string(value) +
                    (field == "num_key_value_heads" ? " (nor is it a multiple of it)" : ""),
                what);
  };
  need(config.num_attention_heads % size == 0, "num_attention_heads", config.num_attention_heads);
  need(config.num_key_value_heads % size == 0 || size % config.num_key_value_heads == 0,
       "num_key_value_heads", config.num_key_value_heads);
  need(config.intermediate_size % size == 0, "intermediate_size", config.intermediate_size);
  need(config.vocab_size % size == 0, "vocab_size", config.vocab_size);
}

}  // namespace aspen
