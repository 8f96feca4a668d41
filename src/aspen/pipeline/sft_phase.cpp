#include "aspen/pipeline/sft_phase.h"

#include <chrono>
#include <iomanip>
#include <iostream>
#include <random>

#include "aspen/io/jsonl.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/trajectory_demonstrations.h"
#include "aspen/report/finite_metrics.h"
#include "aspen/train/sft.h"
#include "aspen/util/seconds_since.h"

namespace aspen::pipeline {

TrainerOptions trainer_options(const TrainSection& train, double lr, int64_t total_steps) {
  TrainerOptions options;
  options.optimizer.lr = lr;
  options.optimizer.weight_decay = train.weight_decay;
  options.optimizer.max_grad_norm = train.grad_clip;
  options.optimizer.schedule.kind =
      train.schedule;
  options.optimizer.schedule.warmup_steps = train.warmup_steps;
  options.optimizer.schedule.total_steps = std::max(total_steps, train.warmup_steps);
  options.optimizer.schedule.min_lr_ratio = train.min_lr_ratio;
  options.compute_dtype =
      train.compute_dtype == ComputeDtype::kBf16 ? torch::kBFloat16 : torch::kFloat;
  options.recompute = train.recompute;
  options.max_tokens_per_micro_batch = train.micro_batch_tokens;
  return options;
}

void run_sft_phase(const TrainConfig& config, RlSetup& setup, std::ostream& metrics) {
  const TrainSection& train = config.train;
  if (train.sft_steps <= 0) return;
  check_input(!setup.eos_token_ids.empty(), "the model declares no EOS token", "sft");
  std::vector<SftExample> examples;
  const TokenId eos = setup.eos_token_ids.front();
  // Multi-turn runs: one example per model turn of each demonstration, in the contexts
  // the rollout builds (trajectory_demonstrations.h).
  const auto trajectories = make_trajectory_environments(config, setup);
  if (trajectories) {
    for (const auto& example : setup.train_examples) {
      const auto segments =
          demonstration_segments(*trajectories, example, demonstration_turns(setup, example));
      for (SftExample& sft : demonstration_sft_examples(*setup.tokenizer, segments)) {
        examples.push_back(std::move(sft));
      }
    }
  } else {
    // Single-turn runs: prompt -> reference answer + EOS.
    for (const auto& example : setup.train_examples) {
      SftExample sft;
      for (TokenId t : setup.tokenizer->encode(example.prompt_text)) sft.prompt.push_back(t);
      for (TokenId t : setup.tokenizer->encode(sft_answer(setup, example))) sft.answer.push_back(t);
      sft.answer.push_back(eos);
      examples.push_back(std::move(sft));
    }
  }
  TrainSection sft_train = train;
  sft_train.schedule = LrScheduleKind::kCosine;
  SftTrainer trainer(setup.model, trainer_options(sft_train, train.sft_lr, train.sft_steps),
                     config.algorithm.router_aux_loss_coef);
  std::mt19937_64 rng(train.seed + 1);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < train.sft_steps; ++step) {
    std::vector<SftExample> batch;
    for (int64_t i = 0; i < train.sft_batch_size; ++i)
      batch.push_back(examples[rng() % examples.size()]);
    const SftStepMetrics m = trainer.step(batch);
    if ((step + 1) % 50 != 0 && step + 1 != train.sft_steps) continue;
    const nlohmann::json line = {{"phase", "sft"},      {"step", step + 1},
                                 {"nll", m.nll},        {"lr", m.lr},
                                 {"grad_norm", m.grad_norm}, {"seconds", seconds_since(start)}};
    check_finite_metrics(line, "metrics.jsonl: sft step " + std::to_string(step + 1));
    write_jsonl(metrics, line);
    if (config.logging.console) {
      std::cout << "sft step " << std::setw(4) << step + 1 << "/" << train.sft_steps << "  nll "
                << std::fixed << std::setprecision(3) << m.nll << "  lr " << std::scientific
                << std::setprecision(2) << m.lr << std::defaultfloat << "\n"
                << std::flush;
    }
  }
}

}  // namespace aspen::pipeline
