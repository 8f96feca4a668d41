#include "aspen/train/actor.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "aspen/algo/packed.h"
#include "aspen/model/moe_routing.h"
#include "aspen/train/expert_lockstep.h"
#include "aspen/train/imports.h"
#include "aspen/train/micro_batches.h"
#include "aspen/train/model_copy.h"
#include "aspen/train/pipeline_actor.h"
#include "aspen/train/policy_logprobs.h"
#include "aspen/util/error.h"
#include "aspen/train/update_steps.h"
#include "aspen/train/whole_model_norm.h"

namespace aspen::train {
namespace {

double value_or_zero(const torch::Tensor& t) {
  return t.defined() ? t.item<double>() : 0.0;
}

// How many (response token, sparse layer) pairs choose another top-k set in the
// trainer's forward (`routing`, rows at the micro-batch's hidden_index) than in the
// rollout (`rollout` [R, S * k]); adds to differ/compared.
void count_routing_mismatch(const MoeRoutingLog& routing, const MicroBatch& mb,
                            const torch::Tensor& rollout, int64_t& differ, int64_t& compared) {
  if (routing.layers.empty() || rollout.numel() == 0) return;
  std::vector<torch::Tensor> per_layer;
  for (const LayerRouting& layer : routing.layers) {
    per_layer.push_back(layer.experts.index_select(0, mb.hidden_index));
  }
  const torch::Tensor trainer = std::get<0>(torch::stack(per_layer, 1).sort(-1)).to(torch::kCPU);
  const torch::Tensor behaviour =
      std::get<0>(rollout.to(torch::kCPU, torch::kLong).view(trainer.sizes()).sort(-1));
  const torch::Tensor differs = (trainer != behaviour).any(-1);  // [R, S]
  differ += differs.sum().item<int64_t>();
  compared += differs.numel();
}

// The rollout_* metrics of ActorMetrics, in MetricSums::rollout_corr's order.
std::vector<double*> rollout_corr_metrics(ActorMetrics& m) {
  return {&m.rollout_is_mean, &m.rollout_is_ratio_mean, &m.rollout_is_truncated_frac,
          &m.rollout_rs_masked_frac, &m.rollout_corr_kl};
}

// Adds `sum` ([5] or undefined), divided by `divisor`, to the rollout_* metrics.
void add_rollout_corr(ActorMetrics& m, const torch::Tensor& sum, double divisor) {
  if (!sum.defined()) return;
  const torch::Tensor values = sum.to(torch::kCPU, torch::kDouble).contiguous();
  const std::vector<double*> slots = rollout_corr_metrics(m);
  for (size_t i = 0; i < slots.size(); ++i) {
    *slots[i] += values[static_cast<int64_t>(i)].item<double>() / divisor;
  }
}

// Folds a step's token-ratio extremes (undefined: none) into the metrics.
void fold_ratio_extremes(ActorMetrics& m, const torch::Tensor& high, const torch::Tensor& low) {
  if (!high.defined()) return;
  const double h = high.item<double>(), l = low.item<double>();
  const bool first = m.rollout_is_ratio_max == 0.0;
  m.rollout_is_ratio_max = first ? h : std::max(m.rollout_is_ratio_max, h);
  m.rollout_is_ratio_min = first ? l : std::min(m.rollout_is_ratio_min, l);
}

// router_load_max / router_load_mean from the [layers, E] slot counts (see ActorMetrics).
void set_router_load(ActorMetrics& metrics, const torch::Tensor& load) {
  if (!load.defined() || load.numel() == 0) return;
  const torch::Tensor per_layer = load.amax(1) / load.mean(1).clamp_min(1e-12);
  metrics.router_load_max = per_layer.max().item<double>();
  metrics.router_load_mean = per_layer.mean().item<double>();
}

}  // namespace

ActorTrainer::ActorTrainer(QwenForCausalLM model, const ActorOptions& options)
    : options_(options),
      model_(model),
      compute_(compute_copy(model, options.trainer)),
      master_(trainable_params(*model_), trainable_params(*compute_)),
      optimizer_(master_.master(), options.trainer.optimizer),
      data_parallel_(options.data_parallel, master_) {
  // Pipeline parallelism: this rank trains one stage (train/pipeline_actor.h), with TP,
  // EP and DP in any combination.
  // Clipping needs the norm of the whole model, not of this rank's shards, experts or
  // stage (train/whole_model_norm.h).
  set_whole_model_clip_norm(optimizer_, model_->config, model_->tp, model_->ep, model_->pp,
                            model_->config.tie_word_embeddings);
}

TokenLogprobs ActorTrainer::compute_logprobs(const TrainBatch& batch, bool with_entropy,
                                             bool routing_replay) {
  LogprobHeadOptions head = options_.head;
  head.with_entropy = with_entropy;
  return batch_logprobs(compute_, batch, options_.trainer.max_tokens_per_micro_batch, head,
                        routing_replay);
}

void ActorTrainer::MetricSums::add(torch::Tensor& slot, const torch::Tensor& value) {
  slot = slot.defined() ? slot + value.detach() : value.detach();
}

void ActorTrainer::backward_micro_batches(const std::vector<MicroBatch>& micro_batches,
                                          const PolicyLossOptions& policy,
                                          const ActorUpdateOptions& options, double metric_tokens,
                                          size_t last_backward, bool measure_mismatch,
                                          ActorMetrics& metrics, MetricSums& sums) {
  const bool use_kl = options.kl_coef != 0.0;
  const bool use_behaviour = needs_behaviour_logprobs(options.policy);
  const bool moe = compute_->config.is_moe();
  LogprobHeadOptions head = options_.head;
  head.with_entropy = true;  // reported always; in the loss only with entropy_coef
  // Expert parallelism: agree on the pass count before any pass's collectives.
  const int64_t passes = static_cast<int64_t>(micro_batches.size());
  int64_t target = passes;
  // Pipeline parallelism: the last stage runs this loop over the pass's messages, the
  // other stages their part of the 1F1B schedule (train/pipeline_actor.h). Under EP
  // the padding passes go through the stages too, after the real ones.
  std::optional<PipelineActorPass> pipeline;
  std::vector<MicroBatch> padding;
  if (compute_->pp.enabled()) {
    int64_t trained = 0;
    for (const MicroBatch& mb : micro_batches) trained += mb.num_response_tokens > 0 ? 1 : 0;
    const int64_t trained_target = lockstep_count(compute_, trained);
    std::vector<MicroBatch> run = micro_batches;
    for (int64_t k = trained; k < trained_target; ++k) {
      padding.push_back(padding_micro_batch(param_device(*compute_)));
      run.push_back(padding.back());
    }
    pipeline.emplace(compute_, run);
    if (!pipeline->last_stage()) {
      for (const MicroBatch& mb : micro_batches) metrics.tokens += mb.num_tokens;
      metrics.micro_batches += passes;
      pipeline->run_stage();
      master_.accumulate_grads();
      pipeline->finish(model_);
      return;
    }
  } else {
    target = lockstep_count(compute_, passes);
  }
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    const MicroBatch& mb = micro_batches[i];
    metrics.tokens += mb.num_tokens;
    ++metrics.micro_batches;
    if (mb.num_response_tokens == 0) {
      // An expert-parallel model's passes are collectives: join the other ranks'.
      if (in_expert_lockstep(compute_) && !pipeline) {
        padding_pass(compute_, head, options_.trainer.recompute);
      }
      continue;
    }
    MoeRoutingLog routing;
    if (options.routing_replay) {
      check_input(!pipeline, "does not run on pipeline stages (placement.train.pp > 1)",
                  "algorithm.rollout_correction.routing_replay");
      routing = routing_replay_log(compute_, mb);
    }
    TokenLogprobs current = pipeline ? pipeline->response_logprobs(mb, head, moe ? &routing : nullptr)
                                     : response_logprobs(compute_, mb, head,
                                                         options_.trainer.recompute,
                                                         moe ? &routing : nullptr);
    const auto dtype = current.logprobs.scalar_type();
    const PackedSeqs packed = response_packing(mb);  // with the loss mask, if any
    PolicyLossInputs inputs;
    inputs.logprobs = current.logprobs;
    inputs.old_logprobs = options.proximal_is_current
                              ? current.logprobs.detach()
                              : mb.token_columns.at(columns::kOldLogprobs).to(dtype);
    inputs.advantages = mb.token_columns.at(columns::kAdvantages).to(dtype);
    if (use_behaviour) {
      inputs.behaviour_logprobs = mb.token_columns.at(columns::kBehaviourLogprobs).to(dtype);
    }
    const auto behaviour = mb.token_columns.find(columns::kBehaviourLogprobs);
    if (measure_mismatch && behaviour != mb.token_columns.end()) {
      torch::NoGradGuard no_grad;
      // In double: [R] values only, and a bf16 trainer's differences stay exact. Over
      // model tokens only: an environment token has no rollout log-prob.
      const torch::Tensor diff = packed.compact(
          (current.logprobs.detach().to(torch::kDouble) - behaviour->second.to(torch::kDouble))
              .abs());
      sums.add(sums.mismatch_sum, diff.sum());
      const torch::Tensor max = diff.numel() > 0 ? diff.max() : torch::zeros({}, diff.options());
      sums.mismatch_max = sums.mismatch_max.defined() ? torch::maximum(sums.mismatch_max, max) : max;
      sums.mismatch_tokens += diff.numel();
    }
    PolicyLossResult pg = policy_loss(inputs, packed, policy);
    torch::Tensor loss = pg.loss;
    if (use_kl) {
      torch::Tensor kl =
          kl_loss(current.logprobs, mb.token_columns.at(columns::kRefLogprobs).to(dtype), packed,
                  options.kl_estimator, policy.agg);
      loss = loss + options.kl_coef * kl;
      sums.add(sums.kl_loss, kl);
    }
    if (options.entropy_coef != 0.0) {
      loss = loss - options.entropy_coef * entropy_loss(current.entropy, packed, policy.agg);
    }
    double aux_scale = 0.0;  // the load-balancing loss's factor in `loss`
    if (moe) {
      // This micro-batch's share of the mini-batch, in the aggregation's unit.
      const double share =
          policy.agg.mode == AggMode::kTokenMean
              ? static_cast<double>(mb.num_loss_tokens) / policy.agg.global_tokens.value_or(1.0)
              : static_cast<double>(mb.response_cu_seqlens.size(0) - 1) /
                    policy.agg.global_seqs.value_or(1.0);
      const torch::Tensor aux = load_balancing_loss(routing).to(loss.scalar_type()) * share;
      if (options.router_aux_loss_coef != 0.0) {
        loss = loss + options.router_aux_loss_coef * aux;
        aux_scale = options.router_aux_loss_coef * share;
      }
      sums.add(sums.router_aux_loss, aux);
      const auto routed = mb.token_columns.find(columns::kBehaviourRoutedExperts);
      if (measure_mismatch && routed != mb.token_columns.end()) {
        count_routing_mismatch(routing, mb, routed->second, sums.routing_differ,
                               sums.routing_compared);
      }
      std::vector<torch::Tensor> load;
      for (const LayerRouting& layer : routing.layers) load.push_back(layer.assignments.to(torch::kDouble));
      if (!load.empty()) sums.add(sums.expert_load, torch::stack(load));
    }
    // Not on pipeline stages: the tied embedding's gradient is summed after the last
    // backward, and an armed reducer would all-reduce it before (pipeline_actor.h).
    if (i == last_backward && !pipeline) data_parallel_.before_last_backward();
    if (pipeline) {
      pipeline->backward(loss, aux_scale);  // the other stages back their aux terms with it
    } else {
      loss.backward();
    }
    master_.accumulate_grads();
    // Token-weighted over model tokens (loss mask): metric_tokens counts only them.
    const double weight = static_cast<double>(mb.num_loss_tokens) / metric_tokens;
    sums.add(sums.policy_loss, pg.loss);
    sums.add(sums.entropy, token_mean_metric(current.entropy, packed) * weight);
    sums.add(sums.clip_frac, pg.clip_frac * weight);
    sums.add(sums.approx_kl, pg.approx_kl_k3 * weight);
    sums.add(sums.capped, pg.correction_capped_frac * weight);
    if (pg.rollout.is_mean.defined()) {
      const RolloutCorrectionMetrics& rc = pg.rollout;
      sums.add(sums.rollout_corr, torch::stack({rc.is_mean, rc.ratio_mean, rc.truncated_frac,
                                                rc.masked_frac, rc.kl_k3})
                                          .to(torch::kDouble) *
                                      weight);
      const torch::Tensor high = rc.ratio_max.detach().to(torch::kDouble);
      const torch::Tensor low = rc.ratio_min.detach().to(torch::kDouble);
      sums.rollout_ratio_max =
          sums.rollout_ratio_max.defined() ? torch::maximum(sums.rollout_ratio_max, high) : high;
      sums.rollout_ratio_min =
          sums.rollout_ratio_min.defined() ? torch::minimum(sums.rollout_ratio_min, low) : low;
    }
  }
  for (const MicroBatch& mb : padding) {
    // Through the stages like a real pass; every gradient it adds is zero.
    MoeRoutingLog routing;
    const TokenLogprobs out = pipeline->response_logprobs(mb, head, moe ? &routing : nullptr);
    pipeline->backward(out.logprobs.sum() * 0.0, /*aux_scale=*/0.0);
  }
  if (pipeline) pipeline->finish(model_);
  // Expert parallelism: as many passes as the EP rank with the most micro-batches.
  for (int64_t k = passes; k < target; ++k) {
    padding_pass(compute_, head, options_.trainer.recompute);
  }
}

ActorMetrics ActorTrainer::update(const TrainBatch& batch, const ActorUpdateOptions& options) {
  batch.validate();
  check_input(options.epochs >= 1, "must be >= 1", "actor update: epochs");
  batch.token_column(columns::kAdvantages, "actor update");
  // Data parallel: the step count follows the GLOBAL row count (identical on all ranks).
  const int64_t global_rows = data_parallel_.global_rows(batch.num_rows());
  if (options.proximal_is_current) {
    check_input(options.epochs == 1 &&
                    (options.mini_batch_size <= 0 || options.mini_batch_size >= global_rows),
                "the proximal policy is the current one only for a single optimizer step",
                "actor update: proximal_is_current");
  } else {
    batch.token_column(columns::kOldLogprobs, "actor update");
  }
  const bool use_kl = options.kl_coef != 0.0;
  const bool use_behaviour = needs_behaviour_logprobs(options.policy);
  if (use_kl) batch.token_column(columns::kRefLogprobs, "actor update (kl_coef != 0)");
  if (use_behaviour) {
    batch.token_column(columns::kBehaviourLogprobs, "actor update (off-policy correction)");
  }
  const torch::Device device = param_device(*compute_);  // a pipeline stage may have no head

  ActorMetrics metrics;
  torch::Tensor expert_load;  // over every mini-batch of the update
  MetricSums first_step;  // the mismatch, measured before any step (see ActorMetrics)
  bool before_first_step = true;
  const UpdateLoopOptions loop{options.epochs, options.mini_batch_size, options.shuffle,
                               options.seed, options_.trainer.max_tokens_per_micro_batch,
                               global_rows};
  for_each_update_step(data_parallel_, batch, loop, device, [&](const UpdateStep& step_plan) {
    PolicyLossOptions policy = options.policy;
    policy.agg.global_tokens = static_cast<double>(step_plan.global_tokens);
    policy.agg.global_seqs = static_cast<double>(step_plan.global_rows);
    // Token-weighted means over the mini-batch, from each micro-batch's own mean.
    MetricSums sums;
    backward_micro_batches(step_plan.micro_batches, policy, options,
                           static_cast<double>(step_plan.global_tokens), step_plan.last_backward,
                           before_first_step, metrics, sums);
    if (before_first_step) {
      first_step.mismatch_sum = sums.mismatch_sum;
      first_step.mismatch_max = sums.mismatch_max;
      first_step.mismatch_tokens = sums.mismatch_tokens;
      first_step.routing_differ = sums.routing_differ;
      first_step.routing_compared = sums.routing_compared;
      before_first_step = false;
    }
    step_and_count(data_parallel_, master_, optimizer_, metrics);
    metrics.policy_loss += value_or_zero(sums.policy_loss);
    metrics.kl_loss += value_or_zero(sums.kl_loss);
    metrics.router_aux_loss += value_or_zero(sums.router_aux_loss);
    if (sums.expert_load.defined()) {
      expert_load = expert_load.defined() ? expert_load + sums.expert_load : sums.expert_load;
    }
    metrics.entropy += value_or_zero(sums.entropy);
    metrics.clip_frac += value_or_zero(sums.clip_frac);
    metrics.approx_kl += value_or_zero(sums.approx_kl);
    metrics.correction_capped_frac += value_or_zero(sums.capped);
    add_rollout_corr(metrics, sums.rollout_corr, 1.0);
    fold_ratio_extremes(metrics, sums.rollout_ratio_max, sums.rollout_ratio_min);
  });
  double mismatch_sum = value_or_zero(first_step.mismatch_sum);
  double mismatch_max = value_or_zero(first_step.mismatch_max);
  double mismatch_tokens = static_cast<double>(first_step.mismatch_tokens);
  double routing_differ = static_cast<double>(first_step.routing_differ);
  double routing_compared = static_cast<double>(first_step.routing_compared);
  if (data_parallel_.enabled()) {
    // The max over ranks from sums: each rank fills only its own slot.
    std::vector<double> values(static_cast<size_t>(data_parallel_.world_size()) + 4, 0.0);
    values[0] = mismatch_sum;
    values[1] = mismatch_tokens;
    values[values.size() - 2] = routing_differ;
    values[values.size() - 1] = routing_compared;
    values[2 + static_cast<size_t>(data_parallel_.rank())] = mismatch_max;
    data_parallel_.sum_over_ranks(values);
    mismatch_sum = values[0];
    mismatch_tokens = values[1];
    routing_differ = values[values.size() - 2];
    routing_compared = values[values.size() - 1];
    mismatch_max = *std::max_element(values.begin() + 2, values.end() - 2);
  }
  metrics.router_topk_compared = std::llround(routing_compared);
  metrics.router_topk_mismatch = routing_compared > 0 ? routing_differ / routing_compared : 0.0;
  if (data_parallel_.enabled() && compute_->config.is_moe()) {
    // Every rank routes its own rows (and a rank may have none): sum the counts.
    int64_t sparse = 0;
    for (int64_t i = 0; i < compute_->config.num_hidden_layers; ++i) {
      sparse += compute_->config.is_sparse_layer(i);
    }
    const int64_t experts = compute_->config.moe.num_experts;
    torch::Tensor local = expert_load.defined() ? expert_load.contiguous()
                                                : torch::zeros({sparse, experts}, torch::kDouble);
    std::vector<double> counts(local.data_ptr<double>(), local.data_ptr<double>() + local.numel());
    data_parallel_.sum_over_ranks(counts);
    expert_load = torch::tensor(counts, torch::kDouble).view({sparse, experts});
  }
  set_router_load(metrics, expert_load);
  metrics.rollout_logprob_diff_tokens = std::llround(mismatch_tokens);
  metrics.rollout_logprob_diff_max = mismatch_max;
  metrics.rollout_logprob_diff_mean = mismatch_tokens > 0 ? mismatch_sum / mismatch_tokens : 0.0;
  if (data_parallel_.enabled()) {
    // Every summed term is already weighted by GLOBAL denominators: the sum over ranks
    // is the global value. Steps and grad_norm are identical on every rank already.
    std::vector<double> sums = {metrics.policy_loss,
                                metrics.kl_loss,
                                metrics.entropy,
                                metrics.clip_frac,
                                metrics.approx_kl,
                                static_cast<double>(metrics.tokens),
                                static_cast<double>(metrics.micro_batches),
                                metrics.correction_capped_frac,
                                metrics.router_aux_loss};
    for (double* slot : rollout_corr_metrics(metrics)) sums.push_back(*slot);
    // The extremes over ranks from sums: each rank fills only its own two slots (a
    // rank without the correction's tokens leaves 0, which the max/min below skip).
    const size_t extremes = sums.size();
    sums.resize(extremes + 2 * static_cast<size_t>(data_parallel_.world_size()), 0.0);
    sums[extremes + 2 * static_cast<size_t>(data_parallel_.rank())] = metrics.rollout_is_ratio_max;
    sums[extremes + 2 * static_cast<size_t>(data_parallel_.rank()) + 1] = metrics.rollout_is_ratio_min;
    data_parallel_.sum_over_ranks(sums);
    metrics.rollout_is_ratio_max = 0.0;
    metrics.rollout_is_ratio_min = 0.0;
    for (int rank = 0; rank < data_parallel_.world_size(); ++rank) {
      const double high = sums[extremes + 2 * static_cast<size_t>(rank)];
      const double low = sums[extremes + 2 * static_cast<size_t>(rank) + 1];
      if (high == 0.0) continue;  // no corrected tokens on that rank
      const bool first = metrics.rollout_is_ratio_max == 0.0;
      metrics.rollout_is_ratio_max = first ? high : std::max(metrics.rollout_is_ratio_max, high);
      metrics.rollout_is_ratio_min = first ? low : std::min(metrics.rollout_is_ratio_min, low);
    }
    for (size_t i = 0; i < rollout_corr_metrics(metrics).size(); ++i) {
      *rollout_corr_metrics(metrics)[i] = sums[9 + i];
    }
    metrics.router_aux_loss = sums[8];
    metrics.correction_capped_frac = sums[7];
    metrics.policy_loss = sums[0];
    metrics.kl_loss = sums[1];
    metrics.entropy = sums[2];
    metrics.clip_frac = sums[3];
    metrics.approx_kl = sums[4];
    metrics.tokens = std::llround(sums[5]);  // exact below 2^53
    metrics.micro_batches = std::llround(sums[6]);
  }
  const int64_t attempts = metrics.steps + metrics.skipped_steps;
  if (attempts > 0) {
    metrics.policy_loss /= attempts;
    metrics.kl_loss /= attempts;
    metrics.router_aux_loss /= attempts;
    metrics.entropy /= attempts;
    metrics.clip_frac /= attempts;
    metrics.approx_kl /= attempts;
    metrics.correction_capped_frac /= attempts;
    for (double* slot : rollout_corr_metrics(metrics)) *slot /= attempts;
  }
  if (metrics.steps > 0) metrics.grad_norm /= metrics.steps;
  share_last_stage_metrics(compute_, metrics);  // pipeline parallelism: the losses' stage
  return metrics;
}

void ActorTrainer::accumulate(const TrainBatch& part, const ActorUpdateOptions& options) {
  part.validate();
  check_input(!data_parallel_.enabled(), "streaming accumulation runs on one data-parallel rank",
              "actor accumulate");
  // The tied embedding's gradient sum is per step, not per part.
  check_input(!compute_->pp.enabled(),
              "streaming accumulation (pipeline.mode async) does not run on pipeline stages yet",
              "placement.train.pp");
  check_input(options.epochs == 1 && options.mini_batch_size <= 0,
              "streaming accumulation is one optimizer step over everything accumulated "
              "(epochs 1, no mini-batches)",
              "actor accumulate");
  part.token_column(columns::kAdvantages, "actor accumulate");
  if (!options.proximal_is_current) part.token_column(columns::kOldLogprobs, "actor accumulate");
  if (options.kl_coef != 0.0) part.token_column(columns::kRefLogprobs, "actor accumulate (kl)");
  if (needs_behaviour_logprobs(options.policy)) {
    part.token_column(columns::kBehaviourLogprobs, "actor accumulate (off-policy correction)");
  }
  std::vector<int64_t> rows(static_cast<size_t>(part.num_rows()));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  const auto micro_batches = make_micro_batches(
      part, rows, options_.trainer.max_tokens_per_micro_batch, compute_->lm_head_weight().device());
  // Unit denominators: every loss is a SUM until step_accumulated() divides.
  PolicyLossOptions policy = options.policy;
  policy.agg.global_tokens = 1.0;
  policy.agg.global_seqs = 1.0;
  // No step is taken between parts: every part is measured before the first step.
  backward_micro_batches(micro_batches, policy, options, /*metric_tokens=*/1.0,
                         micro_batches.size(), /*measure_mismatch=*/true, streamed_metrics_,
                         streamed_sums_);
  streamed_tokens_ += part.num_loss_tokens();  // token-mean counts model tokens only
  streamed_rows_ += part.num_rows();
}

ActorMetrics ActorTrainer::step_accumulated(const ActorUpdateOptions& options) {
  ActorMetrics metrics = streamed_metrics_;
  const MetricSums sums = streamed_sums_;
  const int64_t tokens = streamed_tokens_;
  const int64_t rows = streamed_rows_;
  streamed_metrics_ = ActorMetrics{};
  streamed_sums_ = MetricSums{};
  streamed_tokens_ = 0;
  streamed_rows_ = 0;
  if (tokens == 0) return metrics;  // nothing to learn from: no step, as update() skips
  // The whole batch's denominator, exactly as update() would have passed it.
  const double denominator = options.policy.agg.mode == AggMode::kTokenMean
                                 ? static_cast<double>(tokens)
                                 : static_cast<double>(rows);
  master_.accumulate_grads();
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, param] : master_.master()) {
      if (param.grad().defined()) param.mutable_grad().div_(denominator);
    }
  }
  step_and_count(data_parallel_, master_, optimizer_, metrics);  // one trainer: no reduction
  metrics.policy_loss = value_or_zero(sums.policy_loss) / denominator;
  metrics.kl_loss = value_or_zero(sums.kl_loss) / denominator;
  metrics.router_aux_loss = value_or_zero(sums.router_aux_loss) / denominator;
  set_router_load(metrics, sums.expert_load);
  metrics.router_topk_compared = sums.routing_compared;
  metrics.router_topk_mismatch =
      sums.routing_compared > 0 ? static_cast<double>(sums.routing_differ) /
                                      static_cast<double>(sums.routing_compared)
                                : 0.0;
  // Token-weighted metric sums: divided by the response tokens.
  metrics.entropy = value_or_zero(sums.entropy) / static_cast<double>(tokens);
  metrics.clip_frac = value_or_zero(sums.clip_frac) / static_cast<double>(tokens);
  metrics.approx_kl = value_or_zero(sums.approx_kl) / static_cast<double>(tokens);
  metrics.correction_capped_frac = value_or_zero(sums.capped) / static_cast<double>(tokens);
  add_rollout_corr(metrics, sums.rollout_corr, static_cast<double>(tokens));
  fold_ratio_extremes(metrics, sums.rollout_ratio_max, sums.rollout_ratio_min);
  metrics.rollout_logprob_diff_tokens = sums.mismatch_tokens;
  metrics.rollout_logprob_diff_max = value_or_zero(sums.mismatch_max);
  metrics.rollout_logprob_diff_mean =
      sums.mismatch_tokens > 0
          ? value_or_zero(sums.mismatch_sum) / static_cast<double>(sums.mismatch_tokens)
          : 0.0;
  return metrics;
}

}  // namespace aspen::train
