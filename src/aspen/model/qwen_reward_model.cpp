#include "aspen/model/qwen_reward_model.h"

#include <filesystem>
#include <set>

#include "aspen/io/hf_head.h"
#include "aspen/io/model_dir.h"
#include "aspen/model/imports.h"
#include "aspen/model/packing.h"
#include "aspen/model/pretrained.h"
#include "aspen/util/error.h"

namespace aspen::model {

QwenForSequenceClassificationImpl::QwenForSequenceClassificationImpl(const ModelConfig& config,
                                                                     int64_t num_labels,
                                                                     int64_t pad_token_id)
    : config(config), num_labels(num_labels), pad_token_id(pad_token_id) {
  config.validate("model config");
  check_input(num_labels >= 1, "must be >= 1", "num_labels");
  model = register_module("model", QwenModel(config));
  score = register_module(
      "score", torch::nn::Linear(torch::nn::LinearOptions(config.hidden_size, num_labels).bias(false)));
}

std::vector<int64_t> QwenForSequenceClassificationImpl::pooled_positions(
    const torch::Tensor& input_ids, const std::vector<int64_t>& offsets) const {
  const torch::Tensor ids = input_ids.to(torch::kCPU).contiguous();
  const int64_t* data = ids.data_ptr<int64_t>();
  std::vector<int64_t> pooled;
  for (size_t b = 0; b + 1 < offsets.size(); ++b) {
    const int64_t begin = offsets[b], end = offsets[b + 1];
    int64_t chosen = end - 1;
    if (pad_token_id >= 0) {
      chosen = begin;  // transformers' argmax over an all-pad sequence
      for (int64_t t = end - 1; t >= begin; --t) {
        if (data[t] != pad_token_id) {
          chosen = t;
          break;
        }
      }
    }
    pooled.push_back(chosen);
  }
  return pooled;
}

torch::Tensor QwenForSequenceClassificationImpl::forward(const torch::Tensor& input_ids,
                                                         const torch::Tensor& cu_seqlens) {
  const std::vector<int64_t> offsets = check_packed_batch(input_ids, cu_seqlens, config.vocab_size);
  for (size_t b = 0; b + 1 < offsets.size(); ++b) {
    check_input(offsets[b + 1] > offsets[b], "sequence " + std::to_string(b) + " is empty",
                "cu_seqlens");
  }
  const torch::Tensor hidden =
      model(input_ids, cu_seqlens, packed_positions(offsets, input_ids.device()));
  const torch::Tensor rows = torch::tensor(pooled_positions(input_ids, offsets),
                                           torch::TensorOptions(torch::kLong).device(hidden.device()));
  return score(hidden.index_select(0, rows)).to(torch::kFloat);
}

void QwenForSequenceClassificationImpl::load_state(
    const std::map<std::string, torch::Tensor>& weights, const std::string& source) {
  const auto params = named_parameters(/*recurse=*/true);
  std::set<std::string> expected;
  for (const auto& item : params) {
    expected.insert(item.key());
    auto it = weights.find(item.key());
    check_input(it != weights.end(), "missing weight \"" + item.key() + "\"", source,
                "the checkpoint does not match config.json");
    check_input(it->second.sizes() == item.value().sizes() && it->second.is_floating_point(),
                "weight \"" + item.key() + "\" has the wrong shape or dtype", source,
                "the checkpoint does not match config.json");
  }
  const std::string inv_freq = "rotary_emb.inv_freq";
  for (const auto& [key, value] : weights) {
    const bool buffer = key.size() >= inv_freq.size() &&
                        key.compare(key.size() - inv_freq.size(), inv_freq.size(), inv_freq) == 0;
    check_input(expected.count(key) != 0 || buffer, "unexpected weight \"" + key + "\"", source,
                "the checkpoint does not match config.json");
  }
  torch::NoGradGuard no_grad;
  for (const auto& item : params) item.value().copy_(weights.at(item.key()));
}

QwenForSequenceClassification load_pretrained_reward_model(const std::string& dir,
                                                           torch::ScalarType dtype,
                                                           torch::Device device) {
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  const HfHeadConfig head = load_hf_head(config_path);
  check_input(head.head == HfHead::kSequenceClassification,
              "not a reward model: config.json's architectures name a causal LM", config_path,
              "a reward model is a Qwen2ForSequenceClassification or "
              "Qwen3ForSequenceClassification checkpoint");
  const ModelConfig config = load_hf_config(config_path);
  const std::map<std::string, torch::Tensor> weights =
      load_weights_matching_config(dir, config, head);
  QwenForSequenceClassification model(config, head.num_labels, head.pad_token_id);
  model->to(device, dtype);
  model->load_state(weights, dir);
  return model;
}

}  // namespace aspen::model
