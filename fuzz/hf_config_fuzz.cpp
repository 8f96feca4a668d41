// HF config.json parsing. Checks: parse works or throws aspen::Error; a parsed config
// validates and survives to_hf_config_json -> parse unchanged.
#include "aspen/io/hf_config.h"
#include "fuzz_common.h"

namespace {

bool same(const aspen::io::ModelConfig& a, const aspen::io::ModelConfig& b) {
  return a.family == b.family && a.vocab_size == b.vocab_size && a.hidden_size == b.hidden_size &&
         a.intermediate_size == b.intermediate_size && a.num_hidden_layers == b.num_hidden_layers &&
         a.num_attention_heads == b.num_attention_heads &&
         a.num_key_value_heads == b.num_key_value_heads && a.head_dim == b.head_dim &&
         a.max_position_embeddings == b.max_position_embeddings && a.rope_theta == b.rope_theta &&
         a.rms_norm_eps == b.rms_norm_eps && a.tie_word_embeddings == b.tie_word_embeddings &&
         a.attention_bias == b.attention_bias && a.torch_dtype == b.torch_dtype &&
         a.bos_token_id == b.bos_token_id && a.eos_token_id == b.eos_token_id && a.moe == b.moe;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ASPEN_FUZZ_CONTRACT({
    const aspen::io::ModelConfig config = aspen::io::parse_hf_config(text, "config.json");
    try {
      config.validate("parsed");
    } catch (const aspen::Error& e) {
      aspen::fuzz::defect(std::string("a parsed config does not validate: ") + e.what());
    }
    aspen::io::ModelConfig again;
    try {
      again = aspen::io::parse_hf_config(aspen::io::to_hf_config_json(config), "written config.json");
    } catch (const aspen::Error& e) {
      aspen::fuzz::defect(std::string("a written config.json does not parse: ") + e.what());
    }
    aspen::fuzz::require(same(config, again), "to_hf_config_json -> parse round trip");
  });
  return 0;
}
