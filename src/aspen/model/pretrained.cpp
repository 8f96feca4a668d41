#include "aspen/model/pretrained.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "aspen/io/hf_head.h"
#include "aspen/io/model_dir.h"
#include "aspen/model/imports.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"
#include "aspen/util/log.h"

namespace aspen::model {
namespace {

std::string dtype_name(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat:
      return "float32";
    case torch::kBFloat16:
      return "bfloat16";
    case torch::kHalf:
      return "float16";
    default:
      throw Error("cannot save parameters of dtype " + std::string(c10::toString(dtype)),
                  "save_pretrained_model", "use float32, bfloat16 or float16");
  }
}

// DeepSeek-V3 stores its multi-token-prediction modules as decoder layers
// num_hidden_layers .. num_hidden_layers + num_nextn_predict_layers - 1. Aspen trains
// and samples the main model only: those tensors are dropped, and the log says so.
void drop_mtp_layers(const ModelConfig& config, std::map<std::string, torch::Tensor>& weights,
                     const std::string& dir) {
  if (!config.is_mla() || config.mla.num_nextn_predict_layers == 0) return;
  const std::string prefix = "model.layers.";
  int64_t dropped = 0;
  for (auto it = weights.begin(); it != weights.end();) {
    const bool mtp = it->first.rfind(prefix, 0) == 0 &&
                     std::stoll(it->first.substr(prefix.size())) >= config.num_hidden_layers;
    if (mtp) {
      it = weights.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  if (dropped > 0) {
    log_info("model: ", dir, ": skipped ", config.mla.num_nextn_predict_layers,
             " multi-token-prediction layer(s) (", dropped,
             " tensors): not used for training or sampling");
  }
}

}  // namespace

void check_config_matches_weights(const ModelConfig& config, const HfHeadConfig& head,
                                  const std::map<std::string, torch::Tensor>& weights,
                                  const std::string& config_path) {
  auto expect_shape = [&](const std::string& name, std::vector<int64_t> shape,
                          const std::string& keys) {
    auto it = weights.find(name);
    check_input(it != weights.end(), "the weights have no " + name, config_path);
    const std::vector<int64_t> actual = it->second.sizes().vec();
    if (actual == shape) return;
    auto text = [](const std::vector<int64_t>& dims) {
      std::string out = "[";
      for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
      return out + "]";
    };
    throw Error(keys + " say " + name + " is " + text(shape) + "; the weights hold " + text(actual),
                config_path, "config.json must describe the checkpoint beside it");
  };
  // A tensor on one side only would be a missing or an unexpected weight on load.
  auto expect_presence = [&](const std::string& name, bool wanted, const std::string& keys) {
    const bool present = weights.count(name) != 0;
    if (present == wanted) return;
    throw Error(keys + (wanted ? " call for " : " rule out ") + name + "; the weights " +
                    (present ? "hold it" : "have none"),
                config_path, "config.json must describe the checkpoint beside it");
  };
  expect_shape("model.embed_tokens.weight", {config.vocab_size, config.hidden_size},
               "vocab_size and hidden_size");
  // A special token names a row of that embedding: an eos past it could never be
  // sampled, so no sample would end on it.
  const std::pair<std::string, int64_t> special_ids[] = {{"bos_token_id", config.bos_token_id},
                                                          {"eos_token_id", config.eos_token_id}};
  for (const auto& [key, id] : special_ids) {
    check_input(id < config.vocab_size,
                key + " " + std::to_string(id) + " is not below vocab_size " +
                    std::to_string(config.vocab_size),
                config_path);
  }
  if (head.head == HfHead::kSequenceClassification) {
    expect_shape("score.weight", {head.num_labels, config.hidden_size},
                 "num_labels and hidden_size");
  } else if (!config.tie_word_embeddings) {
    expect_shape("lm_head.weight", {config.vocab_size, config.hidden_size},
                 "tie_word_embeddings false, vocab_size and hidden_size");
  }
  int64_t layers = 0;
  const std::string prefix = "model.layers.";
  for (const auto& [name, tensor] : weights) {
    if (name.rfind(prefix, 0) != 0) continue;
    layers = std::max<int64_t>(layers, std::stoll(name.substr(prefix.size())) + 1);
  }
  check_input(layers == config.num_hidden_layers,
              "num_hidden_layers is " + std::to_string(config.num_hidden_layers) +
                  "; the weights have " + std::to_string(layers) + " layers",
              config_path);
  if (layers == 0) return;
  for (int64_t i = 0; i < layers; ++i) {
    expect_presence(prefix + std::to_string(i) + ".mlp.gate.weight", config.is_sparse_layer(i),
                    "the MoE keys (num_experts, decoder_sparse_step, mlp_only_layers, "
                    "first_k_dense_replace)");
  }
  // The first dense and the first sparse (MoE) layer: every size the model is built from
  // is held against bytes that exist before anything is allocated.
  for (int64_t i = 0; i < layers; ++i) {
    if (config.is_sparse_layer(i)) continue;
    expect_shape(prefix + std::to_string(i) + ".mlp.gate_proj.weight",
                 {config.intermediate_size, config.hidden_size},
                 "intermediate_size and hidden_size");
    break;
  }
  for (int64_t i = 0; i < layers; ++i) {
    if (!config.is_sparse_layer(i)) continue;
    const std::string mlp = prefix + std::to_string(i) + ".mlp.";
    expect_shape(mlp + "gate.weight", {config.moe.num_experts, config.hidden_size},
                 "num_experts and hidden_size");
    expect_shape(mlp + "experts.0.gate_proj.weight",
                 {config.moe.moe_intermediate_size, config.hidden_size},
                 "moe_intermediate_size and hidden_size");
    const std::string shared = mlp + "shared_experts.gate_proj.weight";
    expect_presence(shared, config.moe.n_shared_experts > 0, "n_shared_experts");
    if (config.moe.n_shared_experts > 0) {
      expect_shape(shared,
                   {config.moe.n_shared_experts * config.moe.moe_intermediate_size,
                    config.hidden_size},
                   "n_shared_experts, moe_intermediate_size and hidden_size");
    }
    break;
  }
  if (config.is_mla()) {
    const MlaConfig& mla = config.mla;
    const std::string attn = "model.layers.0.self_attn.";
    expect_shape(attn + "kv_a_proj_with_mqa.weight",
                 {mla.kv_lora_rank + mla.qk_rope_head_dim, config.hidden_size},
                 "kv_lora_rank, qk_rope_head_dim and hidden_size");
    expect_shape(attn + "kv_b_proj.weight",
                 {config.num_attention_heads * (mla.qk_nope_head_dim + mla.v_head_dim),
                  mla.kv_lora_rank},
                 "num_attention_heads, qk_nope_head_dim, v_head_dim and kv_lora_rank");
    if (mla.q_lora_rank > 0) {
      expect_shape(attn + "q_a_proj.weight", {mla.q_lora_rank, config.hidden_size},
                   "q_lora_rank and hidden_size");
    } else {
      expect_shape(attn + "q_proj.weight",
                   {config.num_attention_heads * mla.qk_head_dim(), config.hidden_size},
                   "num_attention_heads, qk_nope_head_dim and qk_rope_head_dim (q_lora_rank null)");
    }
    return;
  }
  expect_shape("model.layers.0.self_attn.q_proj.weight",
               {config.num_attention_heads * config.head_dim, config.hidden_size},
               "num_attention_heads, head_dim and hidden_size");
  expect_shape("model.layers.0.self_attn.k_proj.weight",
               {config.num_key_value_heads * config.head_dim, config.hidden_size},
               "num_key_value_heads, head_dim and hidden_size");
  expect_shape("model.layers.0.self_attn.o_proj.weight",
               {config.hidden_size, config.num_attention_heads * config.head_dim},
               "hidden_size, num_attention_heads and head_dim");
  expect_presence("model.layers.0.self_attn.q_proj.bias", config.attention_bias,
                  "attention_bias (always true for qwen2)");
  expect_presence("model.layers.0.self_attn.q_norm.weight", config.has_qk_norm(),
                  "model_type " + config.model_type() + " (q/k norms: qwen3 and qwen3_moe)");
}

std::map<std::string, torch::Tensor> load_weights_matching_config(const std::string& dir,
                                                                  const ModelConfig& config,
                                                                  const HfHeadConfig& head) {
  std::map<std::string, torch::Tensor> weights = load_model_weights(dir);
  drop_mtp_layers(config, weights, dir);
  check_config_matches_weights(config, head, weights,
                               (std::filesystem::path(dir) / "config.json").string());
  return weights;
}


QwenForCausalLM load_pretrained_model(const std::string& dir, torch::ScalarType dtype,
                                      torch::Device device) {
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  ModelConfig config = load_hf_config(config_path);
  const HfHeadConfig head = load_hf_head(config_path);
  check_input(head.head == HfHead::kCausalLM,
              "a sequence-classification (reward) model, not a causal LM", config_path,
              "use it as a reward: data.verifier: model with verifier_options.path");
  const std::map<std::string, torch::Tensor> weights =
      load_weights_matching_config(dir, config, head);
  QwenForCausalLM model(config);
  model->to(device, dtype);
  model->load_state(weights, dir);
  return model;
}

void save_pretrained_model(const std::string& dir, const QwenForCausalLM& model,
                           int64_t max_shard_bytes, SavedWeights weights) {
  ModelConfig config = model->config;
  config.torch_dtype = dtype_name(model->lm_head_weight().scalar_type());
  std::filesystem::create_directories(dir);
  std::vector<std::pair<std::string, torch::Tensor>> state;
  if (weights == SavedWeights::kMerged) {
    state = model->merged_state();
  } else {
    for (auto& [name, tensor] : model->hf_state()) {
      if (weights == SavedWeights::kAll || !is_lora_parameter(name)) state.emplace_back(name, tensor);
    }
  }
  save_model_weights(dir, state, max_shard_bytes);
  write_file_atomic((std::filesystem::path(dir) / "config.json").string(),
                    to_hf_config_json(config));
}

}  // namespace aspen::model
