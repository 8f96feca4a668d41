// TrainConfig: everything `aspen train` reads, one struct per YAML section
// (model, data, algorithm, rollout, train, pipeline, logging).
// Every key, its default and meaning is documented in docs/config.md; parsing is
// strict (util/config.h): unknown keys and wrong types are errors naming the path.
// The defaults ARE the built-in demo: a tokenizer and tiny Qwen3 trained from
// nothing, SFT on arithmetic, then GRPO.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "aspen/util/config.h"

namespace aspen {

struct ModelSection {
  std::string path;           // HF model directory; empty: build the built-in tiny model
  int64_t hidden_size = 128;  // built-in model shape (Qwen3 architecture)
  int64_t num_layers = 4;
  int64_t num_heads = 4;
  int64_t num_kv_heads = 2;
  int64_t head_dim = 32;
  int64_t intermediate_size = 384;
  int64_t tokenizer_vocab = 300;  // built-in tokenizer: BPE trained on the task corpus
};

struct DataSection {
  std::string task = "arithmetic";  // built-in task, or "jsonl"
  // Absent for arithmetic: 2-digit addition, the demo's task. Otherwise the task's defaults.
  nlohmann::json task_options = nlohmann::json::object();
  std::string path;  // jsonl: dataset file
  std::string prompt_field = "prompt";
  std::string answer_field = "answer";
  std::string verifier = "math";  // jsonl: verifier kind
  nlohmann::json verifier_options = nlohmann::json::object();
  bool chat_template = false;  // jsonl: render prompts with the model's template
  int64_t train_size = 4000;
  int64_t eval_size = 200;
  uint64_t seed = 1;
};

struct AlgorithmSection {
  std::string name = "grpo";  // grpo | dr_grpo | dapo | rloo | reinforce_pp | reinforce_pp_baseline
  double clip_ratio_low = 0.2;
  double clip_ratio_high = 0.2;  // DAPO clip-higher: e.g. 0.28
  double clip_ratio_c = 0.0;     // dual-clip constant (> 1); 0: off
  std::string loss_agg = "token-mean";
  double kl_coef = 0.0;  // KL-in-loss coefficient (0: no reference model)
  std::string kl_estimator = "low_var_kl";
  double entropy_coef = 0.0;
  bool dynamic_sampling = false;  // DAPO: drop groups whose rewards are all equal
  int64_t overlong_buffer = 0;    // DAPO overlong shaping buffer (tokens); 0: off
  double overlong_penalty = 1.0;
  double gamma = 1.0;  // REINFORCE++ discount
};

struct RolloutSection {
  int64_t n = 8;  // samples per prompt (group size)
  int64_t prompts_per_iteration = 16;
  int64_t max_tokens = 8;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  int64_t kv_cache_mb = 128;
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 2048;
};

struct TrainSection {
  int64_t iterations = 60;
  double lr = 1e-5;
  std::string schedule = "constant";  // constant | cosine
  int64_t warmup_steps = 0;
  double min_lr_ratio = 0.1;
  double weight_decay = 0.0;
  double grad_clip = 1.0;
  int64_t mini_batch_size = 0;  // rows per optimizer step; 0: the whole batch
  int64_t epochs = 1;
  int64_t micro_batch_tokens = 4096;
  std::string compute_dtype = "fp32";
  bool recompute = false;
  uint64_t seed = 0;
  // Supervised warm-up before RL (the demo's "learn the format first" phase).
  int64_t sft_steps = 900;
  int64_t sft_batch_size = 32;
  double sft_lr = 2e-3;
};

struct PipelineSection {
  std::string mode = "sync";  // sync (the baseline schedule)
  // torch intra-op threads; 0: torch's default. 1 by default: on the tiny demo model
  // 2 OpenMP threads measured ~3x slower than 1 (spin-waits outweigh the small ops).
  int threads = 1;
};

struct LoggingSection {
  int64_t eval_every = 10;  // iterations between greedy evaluations; 0: start and end only
  bool console = true;
};

struct TrainConfig {
  ModelSection model;
  DataSection data;
  AlgorithmSection algorithm;
  RolloutSection rollout;
  TrainSection train;
  PipelineSection pipeline;
  LoggingSection logging;
  nlohmann::json as_json() const;  // what was run, written next to the metrics
};

// Reads and validates every section; aspen::Error names the key path.
TrainConfig parse_train_config(Config& config);

}  // namespace aspen
