// The stages an RL sample passes through after rollout, each one a dock consumer
// (rl_rows.h): it claims rows, reads their columns, computes, writes its column
// back and acks. Both schedules run the same stages; they differ only in when and
// on which rows (sync: the whole iteration's batch; async: rows as they complete).
//
//   reward      verifier score (+ DAPO overlong shaping)          -> scores
//   reference   frozen reference log-probs                        -> ref_logprobs
//   old         old/proximal log-probs (or the rollout's, when
//               the update is exactly on-policy)                  -> old_logprobs
//   values      critic values at rollout time (ppo)               -> values
//   advantage   the configured estimator, whole groups; with
//               kl_in_reward the KL penalty enters the reward      -> advantages, returns
//   update      actor (and critic) optimizer steps on the rows
//
// RlWorkers owns the trainer-side models of one run. Errors: aspen::Error.
// Thread safety: the stages of one RlWorkers run on one thread.
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
#include "aspen/pipeline/prompt_source.h"
#include "aspen/pipeline/rl_rows.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/train/actor.h"
#include "aspen/train/critic.h"
#include "aspen/train/reference.h"

namespace aspen {

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
  // setup.model again stays the full policy (gathered after each update).
  RlWorkers(const TrainConfig& config, RlSetup& setup, const SavedWorkerWeights* saved = nullptr,
            std::optional<ProcessGroupHandle> data_parallel = std::nullopt,
            const TensorParallel& tensor_parallel = {}, const ExpertParallel& expert_parallel = {},
            std::optional<ProcessGroupHandle> expert_data_parallel = std::nullopt);

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

  // `other`'s rows after these (a later sampling round or streamed part of the batch).
  void append(const RewardStats& other);
};

// Scores the claimed rows of the reward consumer (verifier, + DAPO overlong shaping):
// puts the shaped `scores` and the unshaped `verifier_score` columns, then acks the
// claim. A row's example comes from its `example` column.
void reward_stage(const TrainConfig& config, const RlSetup& setup, TransferDock& dock,
                  const Claim& claim);
// The stages below compute on rows claimed by the caller and leave the ack to it (a
// multi-rank engine claims once and hands each rank its share: iteration_engine.h).
// They do nothing for an empty claim, except where a collective needs every rank;
// with write = false they compute but put nothing (the tensor-parallel peers of the
// rank that writes: they must run the same collectives, and one copy of a column is
// enough).
void reference_stage(ReferencePolicy& reference, TransferDock& dock, const Claim& claim,
                     bool write = true);
// reuse_rollout: the rows were generated by exactly the weights about to be
// updated, so the rollout's log-probs are the old log-probs (no recompute).
void old_logprob_stage(ActorTrainer& actor, TransferDock& dock, const Claim& claim,
                       bool reuse_rollout, bool write = true);
void value_stage(CriticTrainer& critic, TransferDock& dock, const Claim& claim, bool write = true);

struct AdvantageStats {
  int64_t rows = 0;
  double kl_in_reward = 0.0;  // token-mean KL penalised in the reward (0 when off)
  double kl_coef = 0.0;       // the controller's beta used
};
AdvantageStats advantage_stage(const AlgorithmSection& algorithm, KlController& kl_ctrl,
                               TransferDock& dock, const ClaimOptions& claim);

struct UpdateStats {
  ActorMetrics actor;
  CriticMetrics critic;
  int64_t rows = 0;                   // rows trained on
  int64_t response_tokens = 0;        // their response tokens (the "consumed" tokens)
  std::vector<int64_t> row_versions;  // policy version that generated each row
};
// Claims the update's rows (claim.max_rows of them), trains on them and acks them;
// ppo also updates the critic.
// proximal_is_current: decoupled PPO takes the proximal log-probs from the update's
// own forward pass (single-step updates; see ActorUpdateOptions).
UpdateStats update_stage(const TrainConfig& config, RlWorkers& workers, TransferDock& dock,
                         const ClaimOptions& claim, uint64_t seed,
                         bool proximal_is_current = false);
// On rows claimed elsewhere (critic_claim: the critic_update rows, ppo only). With a
// data-parallel actor/critic the updates are collective and run on empty shares too;
// rows and response_tokens are then this rank's.
UpdateStats update_stage(const TrainConfig& config, RlWorkers& workers, TransferDock& dock,
                         const Claim& claim, const Claim& critic_claim, uint64_t seed,
                         bool proximal_is_current = false);

// Streaming update (the async pipeline trains groups as they complete): the claimed
// rows go into the actor's accumulated gradients (ActorTrainer::accumulate); the
// returned stats hold their rows, tokens and versions, no actor metrics.
// finish_update_stage takes the one optimizer step over everything accumulated and
// returns its metrics. Single-step updates without a critic only (aspen::Error).
UpdateStats accumulate_update_stage(const TrainConfig& config, RlWorkers& workers,
                                    TransferDock& dock, const ClaimOptions& claim, uint64_t seed,
                                    bool proximal_is_current);
ActorMetrics finish_update_stage(const TrainConfig& config, RlWorkers& workers, uint64_t seed);

}  // namespace aspen
