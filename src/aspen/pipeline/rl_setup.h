// RlSetup: the ingredients of a run, built from a TrainConfig — the tokenizer and
// policy model (loaded from an HF directory, or made from nothing for the built-in
// demo: a BPE tokenizer trained on the task's text and a random tiny Qwen3), the
// train/eval examples and the verifier that scores responses.
// Thread safety: build once; the members are then read-only (the model is trained
// in place by its owner).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "aspen/config/train_config.h"
#include "aspen/model/qwen_model.h"
#include "aspen/pipeline/imports.h"
#include "aspen/reward/verifier.h"
#include "aspen/tasks/task.h"
#include "aspen/tokenizer/tokenizer.h"

namespace aspen::pipeline {

struct RlSetup {
  // train.device and rollout.device, resolved for this rank (parallel/device.h). The
  // policy `model` lives on train_device; rollout engines copy it to rollout_device.
  torch::Device train_device = torch::kCPU;
  torch::Device rollout_device = torch::kCPU;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::string tokenizer_json;  // the tokenizer.json text, to export with the model
  // The other files of the source model directory (model.path) a model directory needs
  // to be used as one: tokenizer_config.json (chat template, special tokens),
  // generation_config.json, special_tokens_map.json, vocab.json, merges.txt,
  // chat_template.jinja; by file name, carried into every export unchanged.
  std::map<std::string, std::string> carried_files;
  QwenForCausalLM model{nullptr};
  std::vector<TokenId> eos_token_ids;
  std::unique_ptr<Task> task;  // null for jsonl data
  std::vector<TaskExample> train_examples;
  std::vector<TaskExample> eval_examples;
  std::unique_ptr<Verifier> verifier;
  // data.verifier_field: the verifiers lines name other than `verifier`, by kind.
  std::map<std::string, std::unique_ptr<Verifier>> line_verifiers;
};

// The verifier that scores `example`: the one its line names (data.verifier_field),
// else the run's.
const Verifier& verifier_for(const RlSetup& setup, const TaskExample& example);

RlSetup build_rl_setup(const TrainConfig& config);

// The built-in model's architecture for `model` (model.path empty) with a tokenizer of
// `tokenizer_vocab` tokens (padded to model.vocab_multiple); eos/bos left unset.
ModelConfig builtin_model_config(const ModelSection& model, int64_t tokenizer_vocab);

// Writes the policy as an HF model directory: config.json, model.safetensors, the
// tokenizer.json it was trained with and the carried files, so the export loads,
// chats and stops like the model it came from.
void export_policy(const RlSetup& setup, const std::string& dir);

// The supervised answer for an example: the task's reference solution, or the
// dataset's answer field for jsonl data.
std::string sft_answer(const RlSetup& setup, const TaskExample& example);

// The assistant turns demonstrating an example in a multi-turn run: the task's
// (Task::demonstration_turns), or the dataset's answer as one turn.
std::vector<std::string> demonstration_turns(const RlSetup& setup, const TaskExample& example);

}  // namespace aspen::pipeline
