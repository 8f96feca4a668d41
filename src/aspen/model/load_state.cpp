// QwenForCausalLMImpl::load_state: checks every key and shape first, then copies,
// so a bad checkpoint never leaves the model half-overwritten. Under tensor
// parallelism a tensor of the full HF shape is sharded here (take_shard); one of the
// local shape is taken as this rank's shard already.
#include <set>
#include <sstream>

#include "aspen/model/expert_parallel_state.h"
#include "aspen/model/imports.h"
#include "aspen/model/qwen_model.h"
#include "aspen/model/tp_layout.h"
#include "aspen/util/error.h"

namespace aspen::model {
namespace {

std::string shape_string(c10::IntArrayRef sizes) {
  std::ostringstream out;
  out << sizes;
  return out.str();
}

// Under EP: an expert of a sparse layer that another EP rank holds.
bool other_ranks_expert(const std::string& key, const ModelConfig& config, const ExpertParallel& ep) {
  if (!ep.enabled()) return false;
  const std::optional<int64_t> index = expert_index(key);
  if (!index || *index >= config.moe.num_experts) return false;
  const int64_t first = ep.first_local_expert(config.moe.num_experts);
  return *index < first || *index >= first + ep.local_expert_count(config.moe.num_experts);
}

bool tolerated_extra(const std::string& key, bool tied) {
  const std::string inv_freq = "rotary_emb.inv_freq";
  if (key.size() >= inv_freq.size() &&
      key.compare(key.size() - inv_freq.size(), inv_freq.size(), inv_freq) == 0) {
    return true;
  }
  return tied && key == "lm_head.weight";
}

// Checks `weights` against `params` (every key present, a local or full shape, floating
// point; no key outside `params` unless `extra_ok` says so), then copies.
template <typename ExtraOk>
void check_and_copy(const std::vector<std::pair<std::string, torch::Tensor>>& params,
                    const std::map<std::string, torch::Tensor>& weights, const std::string& source,
                    const ModelConfig& config, const TensorParallel& tp, ExtraOk extra_ok) {
  std::set<std::string> expected;
  std::set<std::string> full;  // keys given in the full HF shape, to be sharded
  for (const auto& [key, param] : params) {
    expected.insert(key);
    auto it = weights.find(key);
    if (it == weights.end()) {
      throw Error("missing weight \"" + key + "\"", source,
                  "the checkpoint does not match config.json (" + config.model_type() + ", " +
                      std::to_string(config.num_hidden_layers) + " layers)");
    }
    const c10::IntArrayRef local = param.sizes();
    if (it->second.sizes() != local) {
      const std::vector<int64_t> full_sizes =
          tp.enabled() ? full_shape(qwen_shard_spec(key, config), local, tp.size, key)
                       : local.vec();
      if (it->second.sizes() != c10::IntArrayRef(full_sizes)) {
        throw Error(
            "weight \"" + key + "\" has shape " + shape_string(it->second.sizes()) +
                ", the model expects " + shape_string(local) +
                (tp.enabled() ? " (this TP rank's shard) or the full " + shape_string(full_sizes)
                              : ""),
            source, "the checkpoint does not match config.json");
      }
      full.insert(key);
    }
    if (!it->second.is_floating_point()) {
      throw Error("weight \"" + key + "\" is not a floating-point tensor", source);
    }
  }
  for (const auto& entry : weights) {
    if (expected.count(entry.first) == 0 && !extra_ok(entry.first)) {
      throw Error("unexpected weight \"" + entry.first + "\"", source,
                  "the checkpoint does not match config.json (tie_word_embeddings, "
                  "attention_bias, model_type, num_hidden_layers) or the LoRA options");
    }
  }
  torch::NoGradGuard no_grad;
  for (const auto& [key, param] : params) {
    const torch::Tensor& value = weights.at(key);
    param.copy_(full.count(key) != 0
                    ? take_shard(value, qwen_shard_spec(key, config), tp.rank, tp.size, key)
                    : value);
  }
}

}  // namespace

void QwenForCausalLMImpl::load_state(const std::map<std::string, torch::Tensor>& weights,
                                     const std::string& source) {
  check_and_copy(hf_state(), weights, source, config, tp, [&](const std::string& key) {
    return tolerated_extra(key, config.tie_word_embeddings) || other_ranks_expert(key, config, ep) ||
           on_other_stage(key);
  });
}

void QwenForCausalLMImpl::load_lora_state(const std::map<std::string, torch::Tensor>& weights,
                                          const std::string& source) {
  check_input(has_lora(), "the model has no LoRA adapters to load into", source);
  check_and_copy(lora_state(), weights, source, config, tp, [&](const std::string& key) {
    return other_ranks_expert(key, config, ep) || on_other_stage(key);
  });
}

}  // namespace aspen::model
