#include "aspen/model/tp_layout.h"

#include "aspen/model/imports.h"
#include "aspen/model/lora.h"
#include "aspen/util/error.h"
#include "aspen/util/strings.h"

namespace aspen::model {
namespace {

// "....mlp.experts.<j>.<projection>.weight"
bool is_expert_weight(const std::string& hf_name, const std::string& projection) {
  const std::string suffix = "." + projection + ".weight";
  const std::string marker = ".mlp.experts.";
  const size_t at = hf_name.rfind(marker);
  if (at == std::string::npos || !ends_with(hf_name, suffix)) return false;
  const size_t digits = at + marker.size();
  const size_t end = hf_name.size() - suffix.size();
  if (end <= digits) return false;
  for (size_t i = digits; i < end; ++i) {
    if (hf_name[i] < '0' || hf_name[i] > '9') return false;
  }
  return true;
}

}  // namespace

ShardSpec qwen_shard_spec(const std::string& hf_name, const ModelConfig& config) {
  // A LoRA adapter follows its target (model/lora.h): A splits like a row-parallel
  // target's input, B like a column-parallel target's output; the other is whole.
  for (const char* matrix : {".lora_A.weight", ".lora_B.weight"}) {
    if (!ends_with(hf_name, matrix)) continue;
    const std::string target =
        hf_name.substr(0, hf_name.size() - std::string(matrix).size()) + ".weight";
    const ShardSpec spec = qwen_shard_spec(target, config);
    return matrix[6] == 'A' ? lora_a_spec(spec) : lora_b_spec(spec);
  }
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
  // MoE (Qwen3-MoE): each expert is split like the dense MLP, over its own width;
  // the router is replicated (every rank routes the same full hidden states).
  if (is_expert_weight(hf_name, "gate_proj") || is_expert_weight(hf_name, "up_proj")) {
    return {0, config.moe.moe_intermediate_size};
  }
  if (is_expert_weight(hf_name, "down_proj")) return {1, config.moe.moe_intermediate_size};
  if (ends_with(hf_name, ".mlp.gate.weight")) return {};
  // DeepSeek-V3: shared experts split like the dense MLP; the router's bias replicated.
  const int64_t shared = config.moe.moe_intermediate_size * config.moe.n_shared_experts;
  if (ends_with(hf_name, ".mlp.shared_experts.gate_proj.weight") ||
      ends_with(hf_name, ".mlp.shared_experts.up_proj.weight")) {
    return {0, shared};
  }
  if (ends_with(hf_name, ".mlp.shared_experts.down_proj.weight")) return {1, shared};
  if (ends_with(hf_name, ".mlp.gate.e_score_correction_bias")) return {};
  // Multi-head latent attention is not split (validate_tp_size refuses TP > 1 for it):
  // its tensors are whole on the one rank.
  if (config.is_mla() && hf_name.find(".self_attn.") != std::string::npos) return {};
  if (ends_with(hf_name, "norm.weight")) return {};  // every RMSNorm, incl. q/k norms
  throw Error("no tensor-parallel layout for parameter '" + hf_name + "'", "model TP layout",
              "a Qwen2/Qwen3/Qwen3-MoE/DeepSeek-V3 checkpoint key was expected");
}

void validate_tp_size(const ModelConfig& config, int size) {
  const std::string what = "tensor parallel size " + std::to_string(size);
  check_input(size >= 1, "must be at least 1", what);
  check_input(size == 1 || !config.is_mla(),
              "multi-head latent attention (deepseek_v3) has no tensor-parallel layout; use "
              "data and expert parallelism",
              what);
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
  if (config.is_moe()) {
    need(config.moe.moe_intermediate_size % size == 0, "moe_intermediate_size",
         config.moe.moe_intermediate_size);
  }
}

}  // namespace aspen::model
