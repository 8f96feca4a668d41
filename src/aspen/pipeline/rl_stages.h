// The trainer-side models of one run (RlWorkers), the reward stage and the figures
// the trainer's stages report. An RL sample's trip through the roles:
//
//   admission   trainer 0 allocates the group's rows (prompt, example, sample index)
//   rollout     an instance generates them                        -> response, rollout_logprobs
//   reward      verifier score (+ DAPO overlong shaping)          -> scores, verifier_score
//   batch       trainer 0 claims the batch's groups and reads their columns once;
//               the trainer's stages (trainer_stages.h) then run in memory
//
// Errors: aspen::Error. Thread safety: the stages of one RlWorkers run on one thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "aspen/algo/kl_controller.h"
#include "aspen/config/train_config.h"
#include "aspen/dock/transfer_dock.h"
#include "aspen/parallel/pipeline_stages.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/prompt_source.h"
#include "aspen/pipeline/rl_rows.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/train/actor.h"
#include "aspen/train/critic.h"
#include "aspen/train/reference.h"

namespace aspen::pipeline {

// Weights a resumed run gives its reference and critic instead of copies of the policy.
struct SavedWorkerWeights {
  std::map<std::string, torch::Tensor> reference;  // HF names
  std::map<std::string, torch::Tensor> critic;     // critic module parameter names
};

struct RlWorkers {
  // The actor trains setup.model in place; the reference (when a KL term needs it)
  // is a frozen copy of it as it is now; the critic (ppo) starts from its decoder.
  // With `saved`, the reference and critic take those weights instead.
  // With `data_parallel` the actor and critic train data-parallel over that group
  // (train/trainer_data_parallel.h); construction is then collective. With an enabled
  // `tensor_parallel` context the actor (and reference) hold this rank's shards of
  // setup.model, which then stays the full policy that schedules publish into (for
  // evaluation and export); no critic (its value head is not tensor-parallel). With an
  // enabled `expert_parallel` context (placement.train.ep) the actor and reference hold
  // this rank's experts (model/qwen_moe_block.h) and the actor reduces their gradients
  // over `expert_data_parallel` (the ranks holding the same experts; none: alone);
  // setup.model again stays the full policy (gathered when read, weight_publisher.h). With an
  // enabled `pipeline` context (placement.train.pp) the actor and reference hold this
  // rank's stage of setup.model (its layers under their global HF names,
  // parallel/pipeline_stages.h) and train it by 1F1B over the pipeline group
  // (train/pipeline_actor.h); setup.model stays the full policy (the stages gathered
  // when it is read, weight_publisher.h); no critic (ppo is refused).
  RlWorkers(const TrainConfig& config, RlSetup& setup, const SavedWorkerWeights* saved = nullptr,
            std::optional<ProcessGroupHandle> data_parallel = std::nullopt,
            const TensorParallel& tensor_parallel = {}, const ExpertParallel& expert_parallel = {},
            std::optional<ProcessGroupHandle> expert_data_parallel = std::nullopt,
            const PipelineStages& pipeline = {});

  std::unique_ptr<ActorTrainer> actor;
  std::unique_ptr<ReferencePolicy> reference;
  std::unique_ptr<CriticTrainer> critic;
  KlController kl_ctrl;  // the KL-in-reward coefficient
  RlSchemaOptions schema;
};

// Copies `weights` (by registered parameter name) into `module`; aspen::Error naming
// `source` for a missing, extra or mis-shaped tensor; everything is checked before
// anything is copied.
void load_named_parameters(torch::nn::Module& module,
                           const std::map<std::string, torch::Tensor>& weights,
                           const std::string& source);

// The policy's weights by HF name, detached copies: what a weight publish sends to
// rollout engines (copies, so later in-place updates of the trainer cannot leak in).
// A policy with LoRA adapters sends the adapters only: the instances hold the frozen
// base from their start (adapter-only sync; RolloutEngine::load_weights).
std::map<std::string, torch::Tensor> policy_weights(const QwenForCausalLM& model);

// Claims with no deadline surprises: a stage may take long on a slow CPU.
ClaimOptions claim_rows(int64_t rows, bool whole_groups = false);

// The reward statistics of the rows read back for a batch, in claim order.
struct RewardStats {
  std::vector<double> scores;       // verifier scores before shaping
  std::vector<int64_t> lengths;     // response tokens
  std::vector<int64_t> versions;    // policy version of each row
  std::vector<int64_t> row_groups;  // group of each row
  std::set<int64_t> groups;         // every group scored
  std::set<int64_t> informative;    // groups whose shaped rewards are not all equal
  // Trajectories (rollout.environment): each row's trajectory_stats (rl_rows.h).
  std::vector<std::vector<float>> trajectory_stats;

  // `other`'s rows after these (a later sampling round or streamed part of the batch).
  void append(const RewardStats& other);
};

// Scores the claimed rows of the reward consumer (verifier, + DAPO overlong shaping):
// puts the shaped `scores` and the unshaped `verifier_score` columns, then acks the
// claim. A row's example comes from its `example` column.
void reward_stage(const TrainConfig& config, const RlSetup& setup, TransferDock& dock,
                  const Claim& claim);

struct AdvantageStats {
  int64_t rows = 0;
  double kl_in_reward = 0.0;  // token-mean KL penalised in the reward (0 when off)
  double kl_coef = 0.0;       // the controller's beta used
};

struct UpdateStats {
  ActorMetrics actor;
  CriticMetrics critic;
  int64_t rows = 0;                   // rows trained on
  int64_t response_tokens = 0;        // their response tokens (the "consumed" tokens)
  std::vector<int64_t> row_versions;  // policy version that generated each row
};

}  // namespace aspen::pipeline
