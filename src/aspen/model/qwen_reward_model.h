// HF Qwen{2,3}ForSequenceClassification: the dense Qwen decoder with a score head,
// as reward models are published. Parameter names are the checkpoint's:
//   model.* (exactly QwenModel's, see qwen_model.h)
//   score.weight [num_labels, C]  (no bias)
//
// forward scores every sequence of a packed batch on ONE token, the one transformers
// pools: the last token that is not pad_token_id; the last token when there is no pad
// id; the first token when every token is the pad id (the argmax of an all-zero mask).
// A sequence ending in a pad-valued token (Qwen pads with <|endoftext|>, which a
// response may end with) is therefore scored on the token before it, as transformers
// scores it. Output: [B, num_labels] fp32, whatever the compute dtype.
//
// Thread safety: forward mutates nothing and may run concurrently (under
// torch::NoGradGuard); load_state and ->to() must not overlap with it.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

#include "aspen/io/hf_config.h"
#include "aspen/model/imports.h"
#include "aspen/model/qwen_model.h"

namespace aspen::model {

struct QwenForSequenceClassificationImpl : torch::nn::Module {
  QwenForSequenceClassificationImpl(const ModelConfig& config, int64_t num_labels,
                                    int64_t pad_token_id);

  // input_ids [T] int64, cu_seqlens [B+1] int64 -> [B, num_labels] fp32. Bad ids or
  // offsets: aspen::Error.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& cu_seqlens);
  // The packed index of the token each sequence is scored on.
  std::vector<int64_t> pooled_positions(const torch::Tensor& input_ids,
                                        const std::vector<int64_t>& offsets) const;

  // Strict, as QwenForCausalLM::load_state: every key present with its shape, no
  // unexpected key (rotary inv_freq buffers tolerated); nothing copied otherwise.
  void load_state(const std::map<std::string, torch::Tensor>& weights,
                  const std::string& source = "weights");

  ModelConfig config;
  int64_t num_labels;
  int64_t pad_token_id;  // -1: none
  QwenModel model{nullptr};
  torch::nn::Linear score{nullptr};
};
TORCH_MODULE(QwenForSequenceClassification);

// Reads an HF Qwen{2,3}ForSequenceClassification directory (config.json + safetensors)
// into `dtype` on `device`. aspen::Error naming the directory when it holds a
// causal LM instead, or for any config/weight mismatch.
QwenForSequenceClassification load_pretrained_reward_model(const std::string& dir,
                                                           torch::ScalarType dtype = torch::kFloat,
                                                           torch::Device device = torch::kCPU);

}  // namespace aspen::model
