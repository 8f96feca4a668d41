#include "aspen/pipeline/rl_setup.h"

#include <algorithm>
#include <filesystem>
#include <random>

#include "aspen/io/model_dir.h"
#include "aspen/model/pretrained.h"
#include "aspen/model/weights_init.h"
#include "aspen/parallel/device.h"
#include "aspen/parallel/dist_env.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/reward_model_verifier.h"
#include "aspen/pipeline/trajectory_demonstrations.h"
#include "aspen/reward/verifier_registry.h"
#include "aspen/rollout/generation_defaults.h"
#include "aspen/tasks/jsonl_dataset.h"
#include "aspen/tasks/task_registry.h"
#include "aspen/tokenizer/bpe_trainer.h"
#include "aspen/tokenizer/chat_template.h"
#include "aspen/util/file.h"

namespace aspen::pipeline {
ModelConfig builtin_model_config(const ModelSection& model, int64_t tokenizer_vocab) {
  ModelConfig model_config;
  switch (model.kind) {
    case BuiltinModelKind::kQwen3: model_config.family = ModelFamily::kQwen3; break;
    case BuiltinModelKind::kQwen3Moe: model_config.family = ModelFamily::kQwen3Moe; break;
    case BuiltinModelKind::kDeepseekV3: model_config.family = ModelFamily::kDeepseekV3; break;
  }
  if (model_config.is_moe()) {
    model_config.moe.num_experts = model.num_experts;
    model_config.moe.num_experts_per_tok = model.num_experts_per_tok;
    model_config.moe.moe_intermediate_size = model.moe_intermediate_size;
    model_config.moe.norm_topk_prob = true;  // as Qwen3-30B-A3B and DeepSeek-V3
  }
  const int64_t head_dim = model.head_dim;
  if (model_config.is_mla()) {
    // DeepSeek-V3's proportions (128/64/128 per head, latent 512, query 1536), scaled
    // to the built-in head_dim (the field doc in train_config_fields.h states them).
    model_config.mla.qk_nope_head_dim = head_dim;
    model_config.mla.qk_rope_head_dim = head_dim / 2;
    model_config.mla.v_head_dim = head_dim;
    model_config.mla.kv_lora_rank = 2 * head_dim;
    model_config.mla.q_lora_rank = 3 * head_dim;
    model_config.moe.scoring = RouterScoring::kSigmoidGroupLimited;
    model_config.moe.n_group = 4;
    model_config.moe.topk_group = 2;
    model_config.moe.routed_scaling_factor = 2.5;
    model_config.moe.n_shared_experts = 1;
    model_config.moe.first_k_dense_replace = 1;
  }
  const int64_t multiple = model.vocab_multiple;
  model_config.vocab_size = (tokenizer_vocab + multiple - 1) / multiple * multiple;
  model_config.hidden_size = model.hidden_size;
  model_config.intermediate_size = model.intermediate_size;
  model_config.num_hidden_layers = model.num_layers;
  model_config.num_attention_heads = model.num_heads;
  // MLA has no kv-head grouping (transformers sets kv heads = heads for DeepSeek-V3),
  // and its RoPE table covers the rope part of a head.
  model_config.num_key_value_heads =
      model_config.is_mla() ? model.num_heads : model.num_kv_heads;
  model_config.head_dim = model_config.is_mla() ? head_dim / 2 : head_dim;
  model_config.max_position_embeddings = 1024;
  model_config.tie_word_embeddings = true;
  model_config.torch_dtype = "float32";
  return model_config;
}

namespace {

constexpr const char* kEndOfText = "<|endoftext|>";

void load_data(const TrainConfig& config, RlSetup& setup) {
  const DataSection& data = config.data;
  register_reward_model_verifier();  // data.verifier: model (and as a weighted component)
  if (data.task == TaskKind::kJsonl) {
    JsonlDatasetOptions options;
    options.prompt_field = data.prompt_field;
    options.answer_field = data.answer_field;
    options.id_field = data.id_field;
    options.system_prompt = data.system_prompt;
    options.verifier = data.verifier;
    options.verifier_field = data.verifier_field;
    options.enable_thinking = data.enable_thinking;
    std::optional<ChatTemplate> chat_template;
    if (data.chat_template) chat_template = ChatTemplate::from_config(config.model.path);
    const ChatTemplate* render = chat_template ? &*chat_template : nullptr;
    auto examples = load_jsonl_dataset(data.path, options, render);
    std::mt19937_64 rng(data.seed);
    std::shuffle(examples.begin(), examples.end(), rng);
    if (data.eval_path.empty()) {
      check_input(static_cast<int64_t>(examples.size()) > data.eval_size,
                  "the dataset has " + std::to_string(examples.size()) +
                      " examples; need more than eval_size",
                  data.path, "or give a validation file as data.eval_path");
      // A seeded, deterministic split: the last eval_size examples after a shuffle.
      setup.eval_examples.assign(examples.end() - data.eval_size, examples.end());
      examples.resize(examples.size() - data.eval_size);
    } else {
      // A validation file of its own: its first eval_size examples, in file order.
      auto eval = load_jsonl_dataset(data.eval_path, options, render);
      check_input(!eval.empty(), "has no examples", data.eval_path);
      if (static_cast<int64_t>(eval.size()) > data.eval_size) eval.resize(data.eval_size);
      setup.eval_examples = std::move(eval);
    }
    if (static_cast<int64_t>(examples.size()) > data.train_size) examples.resize(data.train_size);
    setup.train_examples = std::move(examples);
    setup.verifier = make_verifier(data.verifier, data.verifier_options);
    // data.verifier_field: each line may name its own verifier kind (default options).
    for (const auto* split : {&setup.train_examples, &setup.eval_examples}) {
      for (const TaskExample& example : *split) {
        if (example.verifier.empty() || example.verifier == data.verifier ||
            setup.line_verifiers.count(example.verifier)) {
          continue;
        }
        setup.line_verifiers[example.verifier] =
            make_verifier(example.verifier, nlohmann::json::object());
      }
    }
    return;
  }
  setup.task = make_task(name_of(data.task), data.task_options);
  setup.train_examples = setup.task->make_split(Split::kTrain, data.train_size, data.seed);
  setup.eval_examples = setup.task->make_split(Split::kEval, data.eval_size, data.seed);
  setup.verifier = setup.task->make_verifier();
}

void build_builtin_model(const TrainConfig& config, RlSetup& setup) {
  std::vector<std::string> corpus;
  // Multi-turn runs with the built-in tools: the demonstrations as the chat template
  // renders them, tools and observations included, so the tokenizer learns the
  // conversation's text too. (A command or http environment is not started for the
  // tokenizer: its corpus is the examples' text, as without an environment.)
  const auto trajectories = config.rollout.environment.kind == EnvironmentKind::kTools
                                ? make_trajectory_environments(config, setup)
                                : nullptr;
  for (const auto& example : setup.train_examples) {
    if (!trajectories) {
      corpus.push_back(example.prompt_text + sft_answer(setup, example));
      continue;
    }
    std::string text;
    for (const DemonstrationSegment& segment :
         demonstration_segments(*trajectories, example, demonstration_turns(setup, example))) {
      text += segment.text;
    }
    corpus.push_back(std::move(text));
  }
  BpeTrainerOptions options;
  options.vocab_size = config.model.tokenizer_vocab;
  options.special_tokens = {kEndOfText, "<|im_start|>", "<|im_end|>"};
  setup.tokenizer_json = train_bpe_tokenizer(corpus, options);
  setup.tokenizer = std::make_shared<const Tokenizer>(
      Tokenizer::from_json(setup.tokenizer_json, "built-in tokenizer"));
  ModelConfig model_config =
      builtin_model_config(config.model, static_cast<int64_t>(setup.tokenizer->vocab_size()));
  const TokenId eos = *setup.tokenizer->token_to_id(kEndOfText);
  model_config.eos_token_id = eos;
  model_config.bos_token_id = eos;
  setup.model = make_random_model(model_config, config.train.seed + 17);
  setup.eos_token_ids = {eos};
}

// Files of an HF model directory besides the weights, config.json and tokenizer.json
// that transformers, vLLM or `aspen generate --chat` read.
constexpr const char* kCarriedFiles[] = {"tokenizer_config.json",
                                         "generation_config.json",
                                         "special_tokens_map.json",
                                         "vocab.json",
                                         "merges.txt",
                                         "chat_template.jinja",
                                         "chat_template.json"};

void load_pretrained(const TrainConfig& config, RlSetup& setup) {
  const std::string& dir = config.model.path;
  check_model_dir(dir, "model.path");
  setup.tokenizer = std::make_shared<const Tokenizer>(Tokenizer::from_file(dir));
  setup.tokenizer_json = read_file((std::filesystem::path(dir) / "tokenizer.json").string());
  for (const char* name : kCarriedFiles) {
    const std::filesystem::path path = std::filesystem::path(dir) / name;
    if (std::filesystem::is_regular_file(path))
      setup.carried_files[name] = read_file(path.string());
  }
  setup.model = load_pretrained_model(dir);
  setup.eos_token_ids = model_eos_token_ids(setup.model->config, read_generation_config(dir));
  check_input(!setup.eos_token_ids.empty(), "the model declares no EOS token",
              dir + "/config.json");
}

}  // namespace

void export_policy(const RlSetup& setup, const std::string& dir) {
  save_pretrained_model(dir, setup.model);
  write_file_atomic((std::filesystem::path(dir) / "tokenizer.json").string(), setup.tokenizer_json);
  for (const auto& [name, text] : setup.carried_files) {
    write_file_atomic((std::filesystem::path(dir) / name).string(), text);
  }
}

const Verifier& verifier_for(const RlSetup& setup, const TaskExample& example) {
  auto it = setup.line_verifiers.find(example.verifier);
  return it != setup.line_verifiers.end() ? *it->second : *setup.verifier;
}

std::vector<std::string> demonstration_turns(const RlSetup& setup, const TaskExample& example) {
  if (setup.task) return setup.task->demonstration_turns(example);
  return {sft_answer(setup, example)};
}

std::string sft_answer(const RlSetup& setup, const TaskExample& example) {
  if (setup.task) return setup.task->sft_target(example);
  return example.ground_truth.is_string() ? example.ground_truth.get<std::string>()
                                          : example.ground_truth.dump();
}

RlSetup build_rl_setup(const TrainConfig& config) {
  RlSetup setup;
  // Devices first: a GPU asked for but missing fails before any data or model work.
  const int local_rank = dist_env_present() ? read_dist_env().local_rank : 0;
  setup.train_device = resolve_device(config.train.device, local_rank, "train.device");
  setup.rollout_device = resolve_device(config.rollout.device, local_rank, "rollout.device");
  load_data(config, setup);
  if (config.model.path.empty()) {
    build_builtin_model(config, setup);
  } else {
    load_pretrained(config, setup);
  }
  setup.model->to(setup.train_device);
  return setup;
}

}  // namespace aspen::pipeline
