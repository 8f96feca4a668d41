// RewardModelVerifier (verifier kind "model"): a reward model from an HF directory
// (Qwen2ForSequenceClassification / Qwen3ForSequenceClassification,
// model/qwen_reward_model.h) scoring each response on the device the options name, as
// verl's RM worker does. The score is the chosen label's logit at the pooled token.
//
// What it reads: prompt + response, exactly the text the policy saw and wrote
// (RewardInput), tokenized with the reward model's own tokenizer.json. A reward model
// trained on a chat format therefore wants a policy prompt rendered with that format
// (data.chat_template). The "answer" is not used.
//
// Options (data.verifier_options, or a weighted component's options):
//   path          required: the reward model's directory (config.json, safetensors,
//                 tokenizer.json)
//   label         default 0: which of num_labels logits is the score
//   dtype         fp32 (default) | bf16: the compute dtype
//   device        cpu (default) | cuda | cuda:N
//   batch_tokens  default 8192: tokens per forward; score_batch packs sequences up to
//                 this many (a longer sequence goes alone)
// Errors: aspen::Error naming the option or the directory, at construction.
//
// register_reward_model_verifier() adds the kind to make_verifier's registry
// (reward/verifier_registry.h); rl_setup calls it, so configs, datasets and weighted
// components can all name "model".
//
// Thread safety: score()/score_batch() may run concurrently (the model is read-only).
#pragma once

#include <memory>
#include <string>

#include "aspen/model/qwen_reward_model.h"
#include "aspen/pipeline/imports.h"
#include "aspen/reward/verifier.h"
#include "aspen/tokenizer/tokenizer.h"

namespace aspen::pipeline {

struct RewardModelOptions {
  std::string path;
  int64_t label = 0;
  std::string dtype = "fp32";
  std::string device = "cpu";
  int64_t batch_tokens = 8192;
  static RewardModelOptions from_json(const nlohmann::json& options);
};

class RewardModelVerifier : public Verifier {
 public:
  explicit RewardModelVerifier(RewardModelOptions options);

  std::string name() const override { return "model"; }
  double score(const RewardInput& input) const override;
  std::vector<double> score_batch(const std::vector<RewardInput>& inputs) const override;

  // The scores of token sequences (for tests against transformers).
  std::vector<double> score_tokens(const std::vector<std::vector<TokenId>>& sequences) const;

 private:
  RewardModelOptions options_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  QwenForSequenceClassification model_{nullptr};
  torch::Device device_;
};

void register_reward_model_verifier();

}  // namespace aspen::pipeline
