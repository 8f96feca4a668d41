// `aspen info --model DIR`: one JSON object describing a model directory —
// architecture, parameter count, checkpoint dtypes, context length, tokenizer.
// Reads only headers and mapped views; no weights are converted. The weights are held
// against config.json as loading the model does: a contradiction is an error, exit 1.
// "parameters" counts the tensors the model uses (DeepSeek's multi-token-prediction
// layers, which Aspen skips, are left out, as DeepSeek's own 671B count does).
#include <filesystem>
#include <iostream>
#include <map>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/io/hf_config.h"
#include "aspen/io/hf_head.h"
#include "aspen/io/jsonl.h"
#include "aspen/io/model_dir.h"
#include "aspen/model/pretrained.h"
#include "aspen/tokenizer/chat_template.h"
#include "aspen/tokenizer/tokenizer.h"
#include "aspen/util/error.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace info_command {

nlohmann::json architecture_json(const ModelConfig& config) {
  nlohmann::json out = {{"architecture", config.architecture()},
          {"model_type", config.model_type()},
          {"hidden_size", config.hidden_size},
          {"intermediate_size", config.intermediate_size},
          {"num_hidden_layers", config.num_hidden_layers},
          {"num_attention_heads", config.num_attention_heads},
          {"num_key_value_heads", config.num_key_value_heads},
          {"head_dim", config.head_dim},
          {"vocab_size", config.vocab_size},
          {"rope_theta", config.rope_theta},
          {"rope_scaling", config.rope_scaling.yarn
                               ? nlohmann::json{{"type", "yarn"},
                                                {"factor", config.rope_scaling.factor},
                                                {"original_max_position_embeddings",
                                                 config.rope_scaling.original_max_position_embeddings}}
                               : nlohmann::json(nullptr)},
          {"tie_word_embeddings", config.tie_word_embeddings},
          {"context_length", config.max_position_embeddings},
          {"config_dtype", config.torch_dtype}};
  if (config.is_moe()) {
    out["num_experts"] = config.moe.num_experts;
    out["num_experts_per_tok"] = config.moe.num_experts_per_tok;
    out["moe_intermediate_size"] = config.moe.moe_intermediate_size;
    int64_t sparse = 0;
    for (int64_t i = 0; i < config.num_hidden_layers; ++i) sparse += config.is_sparse_layer(i);
    out["sparse_layers"] = sparse;
    if (config.moe.scoring == RouterScoring::kSigmoidGroupLimited) {
      out["n_group"] = config.moe.n_group;
      out["topk_group"] = config.moe.topk_group;
      out["routed_scaling_factor"] = config.moe.routed_scaling_factor;
      out["n_shared_experts"] = config.moe.n_shared_experts;
    }
  }
  if (config.is_mla()) {
    out["q_lora_rank"] = config.mla.q_lora_rank;
    out["kv_lora_rank"] = config.mla.kv_lora_rank;
    out["qk_nope_head_dim"] = config.mla.qk_nope_head_dim;
    out["qk_rope_head_dim"] = config.mla.qk_rope_head_dim;
    out["v_head_dim"] = config.mla.v_head_dim;
    out["mtp_layers_ignored"] = config.mla.num_nextn_predict_layers;
  }
  return out;
}

// The weights as a command that loads the model reads them: checked against config.json
// first (model/pretrained.h), so a config that contradicts the checkpoint is refused
// here as `logprobs` or `generate` would refuse it, not described as if it were true.
nlohmann::json weights_json(const std::string& dir, const ModelConfig& config,
                            const HfHeadConfig& head) {
  const auto weights = load_weights_matching_config(dir, config, head);
  int64_t parameters = 0;
  int64_t bytes = 0;
  std::map<std::string, int64_t> tensors_per_dtype;
  for (const auto& [name, tensor] : weights) {
    parameters += tensor.numel();
    bytes += tensor.numel() * static_cast<int64_t>(tensor.element_size());
    tensors_per_dtype[std::string(c10::toString(tensor.scalar_type()))] += 1;
  }
  return {{"parameters", parameters},
          {"tensors", weights.size()},
          {"weight_bytes", bytes},
          {"dtypes", tensors_per_dtype}};
}

nlohmann::json tokenizer_json(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::exists(fs::path(dir) / "tokenizer.json")) return nullptr;
  const Tokenizer tokenizer = Tokenizer::from_file(dir);
  nlohmann::json special = nlohmann::json::array();
  for (const auto& added : tokenizer.added_tokens()) {
    if (added.special) special.push_back(added.content);
  }
  nlohmann::json summary = {{"vocab_size", tokenizer.vocab_size()},
                            {"added_tokens", tokenizer.added_tokens().size()},
                            {"special_tokens", special}};
  if (fs::exists(fs::path(dir) / "tokenizer_config.json")) {
    try {
      summary["chat_template"] = ChatTemplate::from_config(dir).name();
    } catch (const Error& e) {
      summary["chat_template"] = std::string("unrecognised: ") + e.problem();
    }
  }
  return summary;
}

int run_info(const std::string& dir) {
  check_model_dir(dir, "--model");
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  const ModelConfig config = load_hf_config(config_path);
  nlohmann::json info = architecture_json(config);
  info.update(weights_json(dir, config, load_hf_head(config_path)));
  info["tokenizer"] = tokenizer_json(dir);
  const auto generation = read_generation_config(dir);
  if (generation) info["generation_eos_token_ids"] = generation->eos_token_ids;
  std::cout << info.dump(2) << '\n';
  return 0;
}

void setup(CLI::App& root) {
  auto dir = std::make_shared<std::string>();
  CLI::App* command = root.add_subcommand("info", "Describe an HF model directory (JSON)");
  command->add_option("--model", *dir, "HF model directory")->required();
  on_run(command, [dir] { return run_info(*dir); });
}

ASPEN_REGISTER_COMMAND(30, setup);

}  // namespace info_command
}  // namespace aspen::cli
