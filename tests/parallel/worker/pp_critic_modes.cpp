// Pipeline-parallel critic rank program:
//   pp_critic CASE[@LAYOUT]...
//                     for each CASE (pp_cases.h) builds the same seeded 3-layer policy
//                     whole and as this rank's stage, a critic from each
//                     (critic_from_policy: the stage's decoder, the value head on the
//                     last stage, set to the same seeded values so the decoder learns
//                     from the first step), and runs both: values (compute_values: the
//                     forward-only pass over the stages), then one CriticTrainer update
//                     of two AdamW steps (PPO's clipped value loss, mini-batches of 4
//                     rows, several micro-batches each in 1F1B order, gradient clipping
//                     active). Every stage must report the one process's values, value
//                     loss, clip fraction, grad norm and step count, and hold its
//                     parameters as the one process updated them (rtol 1e-4, atol 2e-5).
//                     Prints "rank R pp_critic CASE[@LAYOUT] ok".
//   LAYOUT (pp_grid.h): none (the world is the pipeline) or dpN (DP x PP: N pipelines
//                     training their balanced shares, against the one process stepping
//                     on each global mini-batch, actor_dp_problem.h).
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "actor_dp_problem.h"
#include "aspen/model/qwen_model.h"
#include "aspen/model/weights_init.h"
#include "aspen/train/critic.h"
#include "aspen/util/error.h"
#include "pp_cases.h"
#include "pp_grid.h"
#include "tensor_checks.h"
#include "worker_mode.h"

namespace aspen::testing {

using namespace aspen::model;
using namespace aspen::parallel;
using namespace aspen::train;
// Named, not anonymous: the unity build compiles this file with the other modes.
namespace pipeline_critic_check {

using namespace pipeline_cases;

TrainerOptions critic_options() {
  TrainerOptions options;
  options.optimizer.eps = 1e-2;  // as pp_actor: steps proportional to the clipped gradient
  options.optimizer.lr = 1e-2;
  options.optimizer.weight_decay = 0.01;
  options.optimizer.max_grad_norm = 0.05;  // far below the norm: clipping acts
  options.max_tokens_per_micro_batch = 12;  // 2-4 micro-batches per mini-batch
  return options;
}

// The same seeded value head on both critics (where the stage has one).
void seed_value_head(CriticModel& critic) {
  if (!critic->score) return;
  torch::manual_seed(41);
  torch::NoGradGuard no_grad;
  critic->score->weight.copy_(0.3 * torch::randn_like(critic->score->weight));
  critic->score->bias.fill_(0.1);
}

std::map<std::string, torch::Tensor> named_copies(const CriticModel& critic) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : critic->named_parameters(/*recurse=*/true)) {
    out[item.key()] = item.value().detach().clone();
  }
  return out;
}

void run_case(ProcessGroupHandle& world, const std::string& spec) {
  const size_t at = spec.find('@');
  const std::string name = spec.substr(0, at);
  const PpGrid grid = make_pp_grid(world, at == std::string::npos ? "" : spec.substr(at + 1));
  check_input(grid.kind == "" || grid.kind == "dp", "the critic has no TP or EP", spec);
  const std::string where = "pp_critic " + spec + " rank " + std::to_string(world.rank());
  const ModelConfig config = case_config(name, "pp_critic");
  QwenForCausalLM full(config);
  init_weights(full, /*seed=*/31, /*initializer_range=*/0.2);
  std::map<std::string, torch::Tensor> weights;
  for (const auto& [key, tensor] : full->hf_state()) weights[key] = tensor.detach().clone();
  QwenForCausalLM stage(config, TensorParallel{}, ExpertParallel{}, grid.pp);
  stage->load_state(weights, "whole weights");
  CriticModel critic_one = critic_from_policy(full);
  CriticModel critic_many = critic_from_policy(stage);
  seed_value_head(critic_one);
  seed_value_head(critic_many);
  check_input(static_cast<bool>(critic_many->score) == grid.pp.last(),
              "the value head is on the last stage only", where);
  const std::map<std::string, torch::Tensor> initial = named_copies(critic_many);

  DataParallelConfig data_parallel;
  if (grid.kind == "dp") data_parallel.group = grid.inner;
  CriticTrainer one(critic_one, critic_options());
  CriticTrainer many(critic_many, critic_options(), data_parallel);
  TrainBatch batch = seeded_batch(config.vocab_size);
  const torch::Tensor values = one.compute_values(batch);
  // Rollout-time values off the current ones, returns further off: some values clip.
  torch::manual_seed(42);
  batch.token_columns[columns::kValues] = values + 0.3 * torch::randn_like(values);
  batch.token_columns[columns::kReturns] = values + torch::randn_like(values);
  const TrainBatch local =
      grid.kind == "dp" ? split_balanced(batch, grid.inner_size).at(static_cast<size_t>(grid.inner_rank))
                        : batch;
  expect_close_to(many.compute_values(local), one.compute_values(local), "values", where,
                  "one process");

  CriticUpdateOptions update;
  update.mini_batch_size = 4;  // two optimizer steps
  update.clip_range = 0.2;
  CriticMetrics want;
  if (grid.kind == "dp") {
    CriticUpdateOptions step = update;
    step.mini_batch_size = 0;
    std::vector<CriticMetrics> steps;
    for (const TrainBatch& b : dp_global_steps(batch, grid.inner_size)) {
      steps.push_back(one.update(b, step));
    }
    want = combine(steps);
  } else {
    want = one.update(batch, update);
  }
  const CriticMetrics got = many.update(local, update);
  check_input(want.steps == 2 && got.steps == 2 && got.skipped_steps == 0,
              "expected two optimizer steps, got " + std::to_string(got.steps), where);
  check_input(want.grad_norm > 10 * critic_options().optimizer.max_grad_norm,
              "the case must clip", where);
  check_input(want.clip_frac > 0.0, "some values must clip", where);
  expect_near(got.grad_norm, want.grad_norm, "grad norm", where);
  expect_near(got.value_loss, want.value_loss, "value loss", where);
  expect_near(got.clip_frac, want.clip_frac, "clip fraction", where);
  const std::map<std::string, torch::Tensor> updated = named_copies(critic_one);
  const std::map<std::string, torch::Tensor> trained = named_copies(critic_many);
  for (const auto& [key, tensor] : trained) {
    check_input(!torch::equal(tensor, initial.at(key)), key + " did not move", where);
    expect_close_to(tensor, updated.at(key), key + " after two steps", where, "one process");
  }
  check_input(!trained.empty() && trained.size() < updated.size(),
              "the stage holds " + std::to_string(trained.size()) + " of " +
                  std::to_string(updated.size()) + " parameters",
              where);
}

int run_pp_critic(ProcessGroupHandle& group, const std::vector<std::string>& cases) {
  for (const std::string& spec : cases) {
    run_case(group, spec);
    std::printf("rank %d pp_critic %s ok\n", group.rank(), spec.c_str());
    std::fflush(stdout);
  }
  return 0;
}

const RegisterWorkerMode kPpCritic{{"pp_critic", "pp_critic CASE[@LAYOUT]...", run_pp_critic}};

}  // namespace pipeline_critic_check
}  // namespace aspen::testing
