#include "aspen/pipeline/reward_model_verifier.h"

#include "aspen/io/model_dir.h"
#include "aspen/model/compute_dtype.h"
#include "aspen/parallel/device.h"
#include "aspen/pipeline/imports.h"
#include "aspen/reward/json_options.h"
#include "aspen/reward/verifier_registry.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {

RewardModelOptions RewardModelOptions::from_json(const nlohmann::json& options) {
  JsonOptions reader(options, "verifier options (model)");
  RewardModelOptions parsed;
  parsed.path = reader.string("path", "");
  parsed.label = reader.integer("label", parsed.label);
  parsed.dtype = reader.string("dtype", parsed.dtype);
  parsed.device = reader.string("device", parsed.device);
  parsed.batch_tokens = reader.integer("batch_tokens", parsed.batch_tokens);
  reader.check_no_unknown_keys();
  check_input(!parsed.path.empty(), "no reward model directory", reader.path("path"),
              "e.g. path: /models/my-reward-model");
  check_model_dir(parsed.path, reader.path("path"));
  check_input(parsed.batch_tokens >= 1 && parsed.batch_tokens <= (1 << 24),
              "must be in [1, 16777216]", reader.path("batch_tokens"));
  parse_compute_dtype(parsed.dtype, reader.path("dtype"));
  return parsed;
}

RewardModelVerifier::RewardModelVerifier(RewardModelOptions options)
    : options_(std::move(options)),
      device_(device_from_option(options_.device, "verifier options (model).device")) {
  tokenizer_ = std::make_shared<const Tokenizer>(Tokenizer::from_file(options_.path));
  model_ = load_pretrained_reward_model(
      options_.path, parse_compute_dtype(options_.dtype, "verifier options (model).dtype"), device_);
  model_->eval();
  check_input(options_.label >= 0 && options_.label < model_->num_labels,
              "label " + std::to_string(options_.label) + " is not one of the model's " +
                  std::to_string(model_->num_labels) + " labels",
              "verifier options (model).label");
}

std::vector<double> RewardModelVerifier::score_tokens(
    const std::vector<std::vector<TokenId>>& sequences) const {
  std::vector<double> scores;
  scores.reserve(sequences.size());
  torch::NoGradGuard no_grad;
  size_t next = 0;
  while (next < sequences.size()) {
    // Pack sequences up to batch_tokens (at least one).
    std::vector<int64_t> ids, offsets = {0};
    while (next < sequences.size() &&
           (offsets.size() == 1 ||
            offsets.back() + static_cast<int64_t>(sequences[next].size()) <= options_.batch_tokens)) {
      // An empty text still needs a token to be scored on: HF scores the first token
      // of an all-pad row, and there is no row here at all, so use the pad id or 0.
      const std::vector<TokenId>& sequence = sequences[next];
      if (sequence.empty()) {
        ids.push_back(std::max<int64_t>(model_->pad_token_id, 0));
      } else {
        ids.insert(ids.end(), sequence.begin(), sequence.end());
      }
      offsets.push_back(static_cast<int64_t>(ids.size()));
      ++next;
    }
    QwenForSequenceClassification model = model_;  // a handle: forward is not const
    const torch::Tensor logits =
        model->forward(torch::tensor(ids, torch::kLong).to(device_),
                        torch::tensor(offsets, torch::kLong).to(device_))
            .select(1, options_.label)
            .to(torch::kCPU, torch::kDouble)
            .contiguous();
    const double* data = logits.data_ptr<double>();
    scores.insert(scores.end(), data, data + logits.size(0));
  }
  return scores;
}

std::vector<double> RewardModelVerifier::score_batch(const std::vector<RewardInput>& inputs) const {
  std::vector<std::vector<TokenId>> sequences;
  sequences.reserve(inputs.size());
  for (const RewardInput& input : inputs) sequences.push_back(tokenizer_->encode(input.prompt + input.response));
  return score_tokens(sequences);
}

double RewardModelVerifier::score(const RewardInput& input) const { return score_batch({input})[0]; }

void register_reward_model_verifier() {
  register_verifier_kind("model", [](const nlohmann::json& options) -> std::unique_ptr<Verifier> {
    return std::make_unique<RewardModelVerifier>(RewardModelOptions::from_json(options));
  });
}

}  // namespace aspen::pipeline
