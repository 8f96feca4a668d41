#include "aspen/io/hf_config.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "aspen/io/imports.h"
#include "aspen/io/strict_json.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"

namespace aspen::io {
namespace {

using Json = nlohmann::ordered_json;

// Reads typed keys of one config.json object; every error names source and key.
class ConfigReader {
 public:
  ConfigReader(const Json& root, const std::string& source) : root_(root), source_(source) {}

  bool has(const char* key) const { return root_.contains(key) && !root_.at(key).is_null(); }

  Error error(const char* key, const std::string& problem, const std::string& hint = {}) const {
    return Error(problem, source_ + ": " + key, hint);
  }

  const Json& required(const char* key) const {
    if (!has(key)) throw error(key, "missing required key");
    return root_.at(key);
  }

  int64_t integer(const char* key) const {
    const Json& value = required(key);
    if (!value.is_number_integer()) throw error(key, "must be an integer");
    return value.get<int64_t>();
  }
  int64_t integer(const char* key, int64_t fallback) const {
    return has(key) ? integer(key) : fallback;
  }

  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const Json& value = root_.at(key);
    if (!value.is_number()) throw error(key, "must be a number");
    return value.get<double>();
  }

  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const Json& value = root_.at(key);
    if (!value.is_boolean()) throw error(key, "must be true or false");
    return value.get<bool>();
  }

  std::string string(const char* key) const {
    const Json& value = required(key);
    if (!value.is_string()) throw error(key, "must be a string");
    return value.get<std::string>();
  }

  // A token id that HF writes either as an int or as a list of ints (generation
  // may stop on several); the model config keeps the first, the primary one. -1, the
  // "none" some exports write, reads as absent; another negative id is an error (it
  // could name no token, and config.json could not be written back the same: found by
  // fuzz_hf_config, HfConfig.ANegativeTokenIdOtherThanMinusOneIsAnError).
  int64_t token_id(const char* key) const {
    if (!has(key)) return -1;
    const Json& value = root_.at(key);
    int64_t id = 0;
    if (value.is_number_integer()) {
      id = value.get<int64_t>();
    } else if (value.is_array() && !value.empty() && value[0].is_number_integer()) {
      for (const Json& item : value) {
        if (!item.is_number_integer() || item.get<int64_t>() < 0) {
          throw error(key, "list must hold only token ids >= 0");
        }
      }
      id = value[0].get<int64_t>();
    } else {
      throw error(key, "must be an integer or a non-empty list of integers");
    }
    if (id < -1) throw error(key, "a token id must be >= 0 (or -1 / null: none)");
    return id;
  }

 private:
  const Json& root_;
  const std::string& source_;
};

ModelFamily parse_family(const ConfigReader& config) {
  const std::string model_type = config.string("model_type");
  ModelFamily family;
  if (model_type == "qwen2") {
    family = ModelFamily::kQwen2;
  } else if (model_type == "qwen3") {
    family = ModelFamily::kQwen3;
  } else if (model_type == "qwen3_moe") {
    family = ModelFamily::kQwen3Moe;
  } else if (model_type == "deepseek_v3") {
    family = ModelFamily::kDeepseekV3;
  } else {
    throw config.error("model_type", "unsupported model_type \"" + model_type + "\"",
                       "supported: qwen2 (Qwen2/Qwen2.5), qwen3 (dense), qwen3_moe, deepseek_v3");
  }
  ModelConfig probe;
  probe.family = family;
  const std::string architecture = probe.architecture();
  if (config.has("architectures")) {
    const Json& architectures = config.required("architectures");
    if (!architectures.is_array()) throw config.error("architectures", "must be a list");
    // The same decoder under a sequence-classification head (a reward model,
    // io/hf_head.h) has the same config otherwise.
    const std::string classifier =
        architecture.substr(0, architecture.size() - std::string("ForCausalLM").size()) +
        "ForSequenceClassification";
    for (const Json& item : architectures) {
      if (!item.is_string() ||
          (item.get<std::string>() != architecture && item.get<std::string>() != classifier)) {
        throw config.error("architectures", "expected [\"" + architecture + "\"] for " +
                                                model_type + ", got " + architectures.dump());
      }
    }
  }
  return family;
}

// Rejects every setting that would change the model's math in a way this code
// does not implement, instead of computing something subtly different.
void reject_unsupported(const ConfigReader& config, const Json& root) {
  if (config.boolean("use_sliding_window", false)) {
    throw config.error("use_sliding_window", "sliding-window attention is not supported");
  }
  if (config.has("layer_types")) {
    const Json& types = root.at("layer_types");
    if (!types.is_array()) throw config.error("layer_types", "must be a list");
    for (const Json& type : types) {
      if (type != "full_attention") {
        throw config.error("layer_types", "only full_attention layers are supported");
      }
    }
  }
  if (config.has("hidden_act")) {
    const std::string act = config.string("hidden_act");
    if (act != "silu")
      throw config.error("hidden_act", "unsupported \"" + act + "\"; must be silu");
  }
  if (config.has("quantization_config")) {
    // DeepSeek-V3's published weights are fp8 blocks with scales beside them.
    throw config.error("quantization_config", "quantized checkpoints are not supported",
                       "convert the weights to bfloat16 first (DeepSeek's fp8_cast_bf16.py)");
  }
}

// "rope_scaling" (older configs) or "rope_parameters" (transformers >= 5, which also
// moves rope_theta there): plain RoPE or YaRN. Any other key or type is an error.
RopeScaling parse_rope_scaling(const ConfigReader& config, const Json& root,
                               int64_t max_position_embeddings) {
  RopeScaling out;
  const char* key = config.has("rope_scaling") ? "rope_scaling" : "rope_parameters";
  if (!config.has(key)) return out;
  const Json& rope = root.at(key);
  if (!rope.is_object()) throw config.error(key, "must be an object (or null)");
  const ConfigReader fields(rope, std::string(key));
  std::string type = "default";
  for (const char* name : {"rope_type", "type"}) {
    if (rope.contains(name) && !rope.at(name).is_null()) {
      if (!rope.at(name).is_string()) throw config.error(key, std::string(name) + " must be a string");
      type = rope.at(name).get<std::string>();
    }
  }
  const std::vector<std::string> known =
      type == "yarn" ? std::vector<std::string>{"rope_type", "type", "rope_theta", "factor",
                                                "original_max_position_embeddings",
                                                "beta_fast", "beta_slow", "mscale",
                                                "mscale_all_dim", "attention_factor", "truncate"}
                     : std::vector<std::string>{"rope_type", "type", "rope_theta"};
  for (const auto& [name, value] : rope.items()) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw config.error(key, "\"" + name + "\" is not supported with rope type " + type,
                         "supported: plain RoPE (default) and yarn; got " + rope.dump());
    }
  }
  if (type == "default") return out;
  if (type != "yarn") {
    throw config.error(key, "rope type \"" + type + "\" is not supported",
                       "supported: default and yarn");
  }
  out.yarn = true;
  auto number = [&](const char* name, double fallback) {
    if (!rope.contains(name) || rope.at(name).is_null()) return fallback;
    if (!rope.at(name).is_number()) throw config.error(key, std::string(name) + " must be a number");
    return rope.at(name).get<double>();
  };
  out.original_max_position_embeddings = config.integer("original_max_position_embeddings", 0);
  if (rope.contains("original_max_position_embeddings")) {
    if (!rope.at("original_max_position_embeddings").is_number_integer()) {
      throw config.error(key, "original_max_position_embeddings must be an integer");
    }
    out.original_max_position_embeddings = rope.at("original_max_position_embeddings").get<int64_t>();
  }
  if (out.original_max_position_embeddings <= 0) {
    throw config.error(key, "yarn needs a positive original_max_position_embeddings");
  }
  out.factor = number("factor", static_cast<double>(max_position_embeddings) /
                                    static_cast<double>(out.original_max_position_embeddings));
  out.beta_fast = number("beta_fast", 32.0);
  out.beta_slow = number("beta_slow", 1.0);
  out.mscale = number("mscale", 0.0);
  out.mscale_all_dim = number("mscale_all_dim", 0.0);
  out.attention_factor = number("attention_factor", 0.0);
  out.truncate = fields.boolean("truncate", true);
  for (const auto& [name, value] :
       std::vector<std::pair<const char*, double>>{{"factor", out.factor},
                                                   {"beta_fast", out.beta_fast},
                                                   {"beta_slow", out.beta_slow}}) {
    if (!(std::isfinite(value) && value > 0)) throw config.error(key, std::string(name) + " must be positive");
  }
  for (const auto& [name, value] : std::vector<std::pair<const char*, double>>{
           {"mscale", out.mscale}, {"mscale_all_dim", out.mscale_all_dim},
           {"attention_factor", out.attention_factor}}) {
    if (!(std::isfinite(value) && value >= 0)) throw config.error(key, std::string(name) + " must be >= 0");
  }
  return out;
}

// DeepseekV3Config's MoE keys (routing by sigmoid scores, topk_method noaux_tc).
MoeConfig parse_deepseek_moe(const ConfigReader& config) {
  MoeConfig moe;
  moe.num_experts = config.integer(config.has("n_routed_experts") ? "n_routed_experts"
                                                                  : "num_local_experts");
  moe.num_experts_per_tok = config.integer("num_experts_per_tok");
  moe.moe_intermediate_size = config.integer("moe_intermediate_size");
  moe.norm_topk_prob = config.boolean("norm_topk_prob", true);
  moe.scoring = RouterScoring::kSigmoidGroupLimited;
  moe.n_group = config.integer("n_group", 1);
  moe.topk_group = config.integer("topk_group", 1);
  moe.routed_scaling_factor = config.number("routed_scaling_factor", 1.0);
  moe.n_shared_experts = config.integer("n_shared_experts", 0);
  moe.first_k_dense_replace = config.integer("first_k_dense_replace", 0);
  // Written by DeepSeek's own config class; only the values transformers implements.
  if (config.has("topk_method") && config.string("topk_method") != "noaux_tc") {
    throw config.error("topk_method", "only noaux_tc (DeepSeek-V3's routing) is supported");
  }
  if (config.has("scoring_func") && config.string("scoring_func") != "sigmoid") {
    throw config.error("scoring_func", "only sigmoid (DeepSeek-V3's scoring) is supported");
  }
  if (config.integer("moe_layer_freq", 1) != 1) {
    throw config.error("moe_layer_freq", "only 1 (every layer after the dense ones) is supported");
  }
  return moe;
}

MlaConfig parse_mla(const ConfigReader& config) {
  MlaConfig mla;
  mla.q_lora_rank = config.integer("q_lora_rank", 0);  // null: no query compression
  if (config.has("q_lora_rank") && mla.q_lora_rank <= 0) {
    throw config.error("q_lora_rank", "must be positive (or null: no query compression)");
  }
  mla.kv_lora_rank = config.integer("kv_lora_rank");
  mla.qk_nope_head_dim = config.integer("qk_nope_head_dim");
  mla.qk_rope_head_dim = config.integer("qk_rope_head_dim");
  mla.v_head_dim = config.integer("v_head_dim");
  mla.rope_interleave = config.boolean("rope_interleave", true);
  mla.num_nextn_predict_layers = config.integer(
      config.has("num_nextn_predict_layers") ? "num_nextn_predict_layers" : "num_mtp_layers", 0);
  if (mla.num_nextn_predict_layers < 0) {
    throw config.error("num_nextn_predict_layers", "must be >= 0");
  }
  return mla;
}

// Qwen3MoeConfig's keys. transformers >= 5 writes the expert count as
// "num_local_experts", the published checkpoints as "num_experts"; both are read.
MoeConfig parse_moe(const ConfigReader& config, const Json& root) {
  MoeConfig moe;
  const char* experts_key = config.has("num_experts") ? "num_experts" : "num_local_experts";
  moe.num_experts = config.integer(experts_key);
  moe.num_experts_per_tok = config.integer("num_experts_per_tok");
  moe.moe_intermediate_size = config.integer("moe_intermediate_size");
  moe.decoder_sparse_step = config.integer("decoder_sparse_step", 1);
  moe.norm_topk_prob = config.boolean("norm_topk_prob", false);
  moe.router_aux_loss_coef = config.number("router_aux_loss_coef", 0.001);
  if (config.has("mlp_only_layers")) {
    const Json& layers = root.at("mlp_only_layers");
    if (!layers.is_array()) throw config.error("mlp_only_layers", "must be a list of layer indices");
    for (const Json& layer : layers) {
      if (!layer.is_number_integer()) {
        throw config.error("mlp_only_layers", "must be a list of layer indices");
      }
      moe.mlp_only_layers.push_back(layer.get<int64_t>());
    }
  }
  return moe;
}

}  // namespace

double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

double RopeScaling::cos_sin_scale() const {
  if (!yarn) return 1.0;
  if (attention_factor > 0) return attention_factor;
  if (mscale > 0 && mscale_all_dim > 0) {
    return yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all_dim);
  }
  return yarn_mscale(factor);
}

namespace {

// The rope_scaling object of a written config.json (null for plain RoPE).
nlohmann::json rope_scaling_json(const RopeScaling& rope) {
  if (!rope.yarn) return nullptr;
  nlohmann::json out;
  out["type"] = "yarn";
  out["factor"] = rope.factor;
  out["original_max_position_embeddings"] = rope.original_max_position_embeddings;
  out["beta_fast"] = rope.beta_fast;
  out["beta_slow"] = rope.beta_slow;
  if (rope.mscale > 0) out["mscale"] = rope.mscale;
  if (rope.mscale_all_dim > 0) out["mscale_all_dim"] = rope.mscale_all_dim;
  if (rope.attention_factor > 0) out["attention_factor"] = rope.attention_factor;
  if (!rope.truncate) out["truncate"] = false;
  return out;
}

}  // namespace

bool ModelConfig::is_sparse_layer(int64_t layer) const {
  if (!is_moe() || moe.num_experts <= 0) return false;
  if (family == ModelFamily::kDeepseekV3) return layer >= moe.first_k_dense_replace;
  for (int64_t dense : moe.mlp_only_layers) {
    if (dense == layer) return false;
  }
  return (layer + 1) % moe.decoder_sparse_step == 0;
}

std::string ModelConfig::model_type() const {
  switch (family) {
    case ModelFamily::kQwen2: return "qwen2";
    case ModelFamily::kQwen3: return "qwen3";
    case ModelFamily::kQwen3Moe: return "qwen3_moe";
    case ModelFamily::kDeepseekV3: return "deepseek_v3";
  }
  return "?";
}

std::string ModelConfig::architecture() const {
  switch (family) {
    case ModelFamily::kQwen2: return "Qwen2ForCausalLM";
    case ModelFamily::kQwen3: return "Qwen3ForCausalLM";
    case ModelFamily::kQwen3Moe: return "Qwen3MoeForCausalLM";
    case ModelFamily::kDeepseekV3: return "DeepseekV3ForCausalLM";
  }
  return "?";
}

void ModelConfig::validate(const std::string& source) const {
  auto positive = [&](int64_t value, const char* key) {
    if (value <= 0) {
      throw Error("must be positive, got " + std::to_string(value), source + ": " + key);
    }
  };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(intermediate_size, "intermediate_size");
  positive(num_hidden_layers, "num_hidden_layers");
  positive(num_attention_heads, "num_attention_heads");
  positive(num_key_value_heads, "num_key_value_heads");
  positive(head_dim, "head_dim");
  positive(max_position_embeddings, "max_position_embeddings");
  if (num_attention_heads % num_key_value_heads != 0) {
    throw Error("num_attention_heads " + std::to_string(num_attention_heads) +
                    " is not a multiple of num_key_value_heads " +
                    std::to_string(num_key_value_heads),
                source + ": num_key_value_heads");
  }
  if (head_dim % 2 != 0) {
    throw Error("must be even for rotary embeddings, got " + std::to_string(head_dim),
                source + ": head_dim");
  }
  if (family == ModelFamily::kQwen2) {
    if (head_dim * num_attention_heads != hidden_size) {
      throw Error("qwen2 needs head_dim * num_attention_heads == hidden_size",
                  source + ": head_dim");
    }
    if (!attention_bias) {
      throw Error("qwen2 always has q/k/v biases", source + ": attention_bias");
    }
  }
  if (is_moe()) {
    positive(moe.num_experts, "num_experts");
    positive(moe.num_experts_per_tok, "num_experts_per_tok");
    positive(moe.moe_intermediate_size, "moe_intermediate_size");
    positive(moe.decoder_sparse_step, "decoder_sparse_step");
    if (moe.num_experts_per_tok > moe.num_experts) {
      throw Error("num_experts_per_tok " + std::to_string(moe.num_experts_per_tok) +
                      " exceeds num_experts " + std::to_string(moe.num_experts),
                  source + ": num_experts_per_tok");
    }
    for (int64_t layer : moe.mlp_only_layers) {
      if (layer < 0 || layer >= num_hidden_layers) {
        throw Error("layer " + std::to_string(layer) + " is not in [0, num_hidden_layers)",
                    source + ": mlp_only_layers");
      }
    }
    if (!std::isfinite(moe.router_aux_loss_coef)) {
      throw Error("must be finite", source + ": router_aux_loss_coef");
    }
    if (moe.scoring == RouterScoring::kSigmoidGroupLimited) {
      positive(moe.n_group, "n_group");
      positive(moe.topk_group, "topk_group");
      if (moe.num_experts % moe.n_group != 0 || moe.num_experts / moe.n_group < 2) {
        throw Error("n_routed_experts " + std::to_string(moe.num_experts) +
                        " must split into n_group " + std::to_string(moe.n_group) +
                        " equal groups of at least 2 experts",
                    source + ": n_group");
      }
      if (moe.topk_group > moe.n_group) {
        throw Error("exceeds n_group " + std::to_string(moe.n_group), source + ": topk_group");
      }
      if (moe.num_experts_per_tok > moe.topk_group * (moe.num_experts / moe.n_group)) {
        throw Error("exceeds the experts of topk_group groups", source + ": num_experts_per_tok");
      }
      if (!(std::isfinite(moe.routed_scaling_factor) && moe.routed_scaling_factor > 0)) {
        throw Error("must be positive", source + ": routed_scaling_factor");
      }
      if (moe.n_shared_experts < 0) throw Error("must be >= 0", source + ": n_shared_experts");
      if (moe.first_k_dense_replace < 0 || moe.first_k_dense_replace > num_hidden_layers) {
        throw Error("must be in [0, num_hidden_layers]", source + ": first_k_dense_replace");
      }
    }
  }
  if (is_mla()) {
    if (mla.q_lora_rank < 0) throw Error("must be >= 0 (0: none)", source + ": q_lora_rank");
    positive(mla.kv_lora_rank, "kv_lora_rank");
    positive(mla.qk_nope_head_dim, "qk_nope_head_dim");
    positive(mla.qk_rope_head_dim, "qk_rope_head_dim");
    positive(mla.v_head_dim, "v_head_dim");
    if (head_dim != mla.qk_rope_head_dim) {
      throw Error("must equal qk_rope_head_dim " + std::to_string(mla.qk_rope_head_dim) +
                      " (the RoPE width) for deepseek_v3",
                  source + ": head_dim");
    }
  }
  if (!(rope_theta > 0)) throw Error("must be positive", source + ": rope_theta");
  if (!(rms_norm_eps > 0)) throw Error("must be positive", source + ": rms_norm_eps");
  if (torch_dtype != "float32" && torch_dtype != "bfloat16" && torch_dtype != "float16") {
    throw Error("unsupported dtype \"" + torch_dtype + "\"", source + ": torch_dtype",
                "float32, bfloat16 or float16");
  }
}

ModelConfig parse_hf_config(const std::string& json_text, const std::string& source) {
  const Json root = parse_strict_json(json_text, source);
  if (!root.is_object()) throw Error("config.json must be a JSON object", source);
  const ConfigReader config(root, source);

  ModelConfig out;
  out.family = parse_family(config);
  reject_unsupported(config, root);
  // Sizes have no safe default: a missing one means the file is not what we think.
  out.vocab_size = config.integer("vocab_size");
  out.hidden_size = config.integer("hidden_size");
  out.intermediate_size = config.integer("intermediate_size");
  out.num_hidden_layers = config.integer("num_hidden_layers");
  out.num_attention_heads = config.integer("num_attention_heads");
  // The rest default as transformers' Qwen2Config/Qwen3Config do.
  out.num_key_value_heads = config.integer("num_key_value_heads", out.num_attention_heads);
  const int64_t derived_head_dim =
      out.num_attention_heads > 0 ? out.hidden_size / out.num_attention_heads : 0;
  out.head_dim = config.integer("head_dim", derived_head_dim);
  out.max_position_embeddings = config.integer("max_position_embeddings", 32768);
  out.rope_theta = config.number("rope_theta", 10000.0);
  out.rope_scaling = parse_rope_scaling(config, root, out.max_position_embeddings);
  if (config.has("rope_parameters") && root.at("rope_parameters").is_object() &&
      root.at("rope_parameters").contains("rope_theta")) {
    const ConfigReader rope(root.at("rope_parameters"), source + ": rope_parameters");
    out.rope_theta = rope.number("rope_theta", out.rope_theta);
  }
  out.rms_norm_eps = config.number("rms_norm_eps", 1e-6);
  out.tie_word_embeddings = config.boolean("tie_word_embeddings", false);
  // Qwen2's attention hard-codes q/k/v biases; Qwen3 reads the flag.
  out.attention_bias =
      out.family == ModelFamily::kQwen2 ? true : config.boolean("attention_bias", false);
  // transformers >= 4.56 writes "dtype"; older ones "torch_dtype". Absent means
  // transformers would load float32.
  const char* dtype_key = config.has("dtype") ? "dtype" : "torch_dtype";
  out.torch_dtype = config.has(dtype_key) ? config.string(dtype_key) : "float32";
  out.bos_token_id = config.token_id("bos_token_id");
  out.eos_token_id = config.token_id("eos_token_id");
  if (out.is_mla()) {
    out.mla = parse_mla(config);
    out.head_dim = out.mla.qk_rope_head_dim;  // as transformers' DeepseekV3Config sets it
    out.moe = parse_deepseek_moe(config);
  } else if (out.is_moe()) {
    out.moe = parse_moe(config, root);
  }
  out.validate(source);
  return out;
}

ModelConfig moe_variant(const ModelConfig& dense, int64_t num_experts, int64_t experts_per_tok) {
  check_input(experts_per_tok >= 1 && experts_per_tok <= num_experts &&
                  dense.intermediate_size % experts_per_tok == 0,
              "needs 1 <= experts per token <= experts, dividing intermediate_size " +
                  std::to_string(dense.intermediate_size),
              "MoE variant of a dense model");
  ModelConfig moe = dense;
  moe.family = ModelFamily::kQwen3Moe;
  moe.moe.num_experts = num_experts;
  moe.moe.num_experts_per_tok = experts_per_tok;
  moe.moe.moe_intermediate_size = dense.intermediate_size / experts_per_tok;
  moe.moe.norm_topk_prob = true;
  return moe;
}

ModelConfig load_hf_config(const std::string& path) {
  return parse_hf_config(read_file(path), path);
}

namespace {

// The keys every supported config.json has, whatever the architecture.
void write_common_keys(const ModelConfig& config, nlohmann::json& out) {
  out["architectures"] = nlohmann::json::array({config.architecture()});
  out["attention_dropout"] = 0.0;
  out["bos_token_id"] =
      config.bos_token_id >= 0 ? nlohmann::json(config.bos_token_id) : nlohmann::json(nullptr);
  out["eos_token_id"] =
      config.eos_token_id >= 0 ? nlohmann::json(config.eos_token_id) : nlohmann::json(nullptr);
  out["hidden_act"] = "silu";
  out["hidden_size"] = config.hidden_size;
  out["initializer_range"] = 0.02;
  out["intermediate_size"] = config.intermediate_size;
  out["max_position_embeddings"] = config.max_position_embeddings;
  out["model_type"] = config.model_type();
  out["num_attention_heads"] = config.num_attention_heads;
  out["num_hidden_layers"] = config.num_hidden_layers;
  out["num_key_value_heads"] = config.num_key_value_heads;
  out["rms_norm_eps"] = config.rms_norm_eps;
  out["rope_scaling"] = rope_scaling_json(config.rope_scaling);
  out["rope_theta"] = config.rope_theta;
  out["tie_word_embeddings"] = config.tie_word_embeddings;
  out["torch_dtype"] = config.torch_dtype;
  out["use_cache"] = true;
  out["vocab_size"] = config.vocab_size;
}

// DeepseekV3Config's own keys, as transformers reads them (and DeepSeek's checkpoints
// write them).
void write_deepseek_keys(const ModelConfig& config, nlohmann::json& out) {
  const MoeConfig& moe = config.moe;
  const MlaConfig& mla = config.mla;
  out["attention_bias"] = config.attention_bias;
  out["first_k_dense_replace"] = moe.first_k_dense_replace;
  out["kv_lora_rank"] = mla.kv_lora_rank;
  out["moe_intermediate_size"] = moe.moe_intermediate_size;
  out["n_group"] = moe.n_group;
  out["n_routed_experts"] = moe.num_experts;
  out["n_shared_experts"] = moe.n_shared_experts;
  out["norm_topk_prob"] = moe.norm_topk_prob;
  out["num_experts_per_tok"] = moe.num_experts_per_tok;
  out["num_nextn_predict_layers"] = mla.num_nextn_predict_layers;
  out["q_lora_rank"] = mla.q_lora_rank > 0 ? nlohmann::json(mla.q_lora_rank) : nlohmann::json(nullptr);
  out["qk_nope_head_dim"] = mla.qk_nope_head_dim;
  out["qk_rope_head_dim"] = mla.qk_rope_head_dim;
  out["rope_interleave"] = mla.rope_interleave;
  out["routed_scaling_factor"] = moe.routed_scaling_factor;
  out["scoring_func"] = "sigmoid";
  out["topk_group"] = moe.topk_group;
  out["topk_method"] = "noaux_tc";
  out["v_head_dim"] = mla.v_head_dim;
}

// Qwen2Config / Qwen3Config / Qwen3MoeConfig's own keys.
void write_qwen_keys(const ModelConfig& config, nlohmann::json& out) {
  const bool qwen3 = config.family != ModelFamily::kQwen2;
  if (qwen3) {
    out["attention_bias"] = config.attention_bias;
    out["head_dim"] = config.head_dim;
  }
  out["max_window_layers"] = config.num_hidden_layers;
  out["sliding_window"] = nullptr;
  out["use_sliding_window"] = false;
  if (config.is_moe()) {
    out["decoder_sparse_step"] = config.moe.decoder_sparse_step;
    out["mlp_only_layers"] = config.moe.mlp_only_layers;
    out["moe_intermediate_size"] = config.moe.moe_intermediate_size;
    out["norm_topk_prob"] = config.moe.norm_topk_prob;
    out["num_experts"] = config.moe.num_experts;  // the published checkpoints' key
    out["num_experts_per_tok"] = config.moe.num_experts_per_tok;
    out["router_aux_loss_coef"] = config.moe.router_aux_loss_coef;
  }
}

}  // namespace

std::string to_hf_config_json(const ModelConfig& config) {
  // nlohmann::json keeps its keys sorted, as transformers writes them.
  nlohmann::json out;
  write_common_keys(config, out);
  if (config.is_mla()) {
    write_deepseek_keys(config, out);
  } else {
    write_qwen_keys(config, out);
  }
  return out.dump(2) + "\n";
}

}  // namespace aspen::io
