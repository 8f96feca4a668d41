// TrainConfig: everything `aspen train` reads, one struct per YAML section
// (model, data, algorithm, rollout, train, pipeline, logging, checkpoint,
// placement).
// One field description per section (train_config_fields.h: key, member, meaning)
// drives reading a config, writing it back (as_json, the run's config.json) and the
// key tables of docs/config.md (config_reference_markdown; a test keeps the page equal
// to it). Parsing is strict (util/config.h): unknown keys and wrong types are errors
// naming the path. Enum keys are parsed once, here, into the enums the modules use.
// The defaults ARE the built-in demo: a tokenizer and tiny Qwen3 trained from
// nothing, SFT on arithmetic, then GRPO.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/algo/aggregate.h"
#include "aspen/algo/kl.h"
#include "aspen/algo/rollout_correction.h"
#include "aspen/config/imports.h"
#include "aspen/model/lora.h"
#include "aspen/parallel/device.h"
#include "aspen/parallel/placement.h"
#include "aspen/train/lr_schedule.h"
#include "aspen/util/config.h"

namespace aspen::config {

// Enum keys, each parsed once when the config is read; name_of gives the spelling the
// config and its JSON use (aliases such as kl_estimator's "k3" read as their value).
enum class TaskKind { kArithmetic, kCountdown, kJsonl };  // data.task
enum class BuiltinModelKind { kQwen3, kQwen3Moe, kDeepseekV3 };  // model.kind
enum class AlgorithmName {                                 // algorithm.name
  kGrpo,
  kDrGrpo,
  kDapo,
  kRloo,
  kReinforcePp,
  kReinforcePpBaseline,
  kPpo
};
enum class KlControl { kFixed, kAdaptive };  // algorithm.kl_ctrl
// algorithm.off_policy; kAuto is resolved when the config is read (decoupled for
// pipeline.mode async, none for sync), so the rest of the code never sees it.
enum class OffPolicy { kAuto, kNone, kDecoupled, kTis };
enum class ComputeDtype { kFp32, kBf16 };  // train.compute_dtype
// pipeline.mode: both run the iteration engine; sync is the baseline (eta 0, whole
// batches), async is ASP.
enum class PipelineMode { kSync, kAsync };
// pipeline.on_instance_failure: a failed instance's groups are generated again
// elsewhere, or the run stops naming it.
enum class InstanceFailurePolicy { kRegenerate, kStop };
// pipeline.weight_sync: what a weight publish moves to the rollout instances that fetch
// it from a trainer's warehouse: the full set, or the deltas from the version each one
// holds (dock/weight_board.h).
enum class WeightSync { kFull, kDelta };
// rollout.environment.kind: what a multi-turn trajectory talks to (agent/environment.h);
// none: single-turn samples.
enum class EnvironmentKind { kNone, kTools, kCommand, kHttp, kSynthetic };
// rollout.environment.on_error: a trajectory the environment failed (crash, hang, garbage).
enum class EnvironmentErrorPolicy { kZero, kDrop };
// rollout.agent.on_prefix_break: an agent's call that does not extend its session's
// context splits the session or is refused (agent/session_ledger.h).
enum class AgentPrefixBreak { kSplit, kRefuse };
// pipeline.dispatch: the rollout instance a prompt group goes to
// (pipeline/dispatch_policy.h implements each policy).
enum class DispatchPolicyKind { kRoundRobin, kLeastRequests, kQueueAware };

const char* name_of(TaskKind value);
const char* name_of(BuiltinModelKind value);
const char* name_of(AlgorithmName value);
const char* name_of(AggMode value);
const char* name_of(KlEstimator value);
const char* name_of(KlControl value);
const char* name_of(OffPolicy value);
const char* name_of(LrScheduleKind value);
const char* name_of(ComputeDtype value);
const char* name_of(DispatchPolicyKind value);
const char* name_of(PipelineMode value);
const char* name_of(InstanceFailurePolicy value);
const char* name_of(WeightSync value);
const char* name_of(EnvironmentKind value);
const char* name_of(AgentPrefixBreak value);
const char* name_of(EnvironmentErrorPolicy value);

struct ModelSection {
  std::string path;           // HF model directory; empty: build the built-in tiny model
  BuiltinModelKind kind = BuiltinModelKind::kQwen3;  // built-in model: dense, MoE or MLA + MoE
  int64_t hidden_size = 128;  // built-in model shape (Qwen3 architecture)
  int64_t num_layers = 4;
  int64_t num_heads = 4;
  int64_t num_kv_heads = 2;
  int64_t head_dim = 32;
  int64_t intermediate_size = 384;
  // Built-in qwen3_moe: every layer sparse, num_experts_per_tok experts of
  // moe_intermediate_size each; the defaults activate as many MLP weights per token
  // (2 x 192) as the dense model's 384.
  int64_t num_experts = 8;
  int64_t num_experts_per_tok = 2;
  int64_t moe_intermediate_size = 192;
  int64_t tokenizer_vocab = 300;  // built-in tokenizer: BPE trained on the task corpus
  // Built-in model: embedding/head rows padded up to a multiple of this (Megatron's
  // make_vocab_size_divisible_by; tensor parallelism splits the vocabulary). Padded ids
  // are never sampled. 1: no padding.
  int64_t vocab_multiple = 1;
};

struct DataSection {
  TaskKind task = TaskKind::kArithmetic;  // a built-in task, or jsonl
  // Absent for arithmetic: 2-digit addition with teacher_carry_slip 0.6, the demo's task.
  // Otherwise the task's defaults.
  nlohmann::json task_options = nlohmann::json::object();
  std::string path;  // jsonl: dataset file
  // jsonl: a separate validation file (its first eval_size examples); empty: the
  // validation set is carved from `path` (a seeded split).
  std::string eval_path;
  std::string prompt_field = "prompt";
  std::string answer_field = "answer";
  std::string id_field;  // jsonl: example ids from this field; empty: "<file>:<line>"
  // jsonl: a system message (with the chat template; without it, prepended as text)
  std::string system_prompt;
  // jsonl: verifier kind (math | format | countdown | weighted: verifier_options is then
  // the list of {name, verifier, weight, options} components)
  std::string verifier = "math";
  nlohmann::json verifier_options = nlohmann::json::object();
  // jsonl: a field naming each line's own verifier kind (empty: `verifier` for all)
  std::string verifier_field;
  bool chat_template = false;   // jsonl: render prompts with the model's template
  bool enable_thinking = true;  // jsonl + chat_template: Qwen3's thinking switch
  int64_t train_size = 4000;
  int64_t eval_size = 200;
  uint64_t seed = 1;
};

// algorithm.rollout_correction: verl's names and meanings (algo/rollout_correction.h).
struct RolloutCorrectionSection {
  RolloutIsLevel rollout_is = RolloutIsLevel::kNone;  // IS weights: none | token | sequence
  double rollout_is_threshold = 2.0;                  // truncation C of the IS weights
  RolloutRsLevel rollout_rs = RolloutRsLevel::kNone;  // none | token | sequence | geometric
  double rollout_rs_threshold = 0.0;        // upper bound; 0: rollout_is_threshold
  double rollout_rs_threshold_lower = 0.0;  // lower bound; 0: 1 / upper
  // true: the PPO anchor is the rollout's log-probs (no proximal recompute; no IS/RS).
  bool bypass_mode = false;
  // MoE: the trainer's forwards replay the rollout's expert choices per token (R3).
  bool routing_replay = false;
  // Whether an IS weight, a rejection or bypass mode is asked for (routing replay alone
  // changes no loss).
  bool corrects() const {
    return rollout_is != RolloutIsLevel::kNone || rollout_rs != RolloutRsLevel::kNone || bypass_mode;
  }
};

struct AlgorithmSection {
  // grpo | dr_grpo | dapo | rloo | reinforce_pp | reinforce_pp_baseline | ppo (critic + GAE)
  AlgorithmName name = AlgorithmName::kGrpo;
  double clip_ratio_low = 0.2;
  double clip_ratio_high = 0.2;  // DAPO clip-higher: e.g. 0.28
  double clip_ratio_c = 0.0;     // dual-clip constant (> 1); 0: off
  AggMode loss_agg = AggMode::kTokenMean;
  double kl_coef = 0.0;  // KL-in-loss coefficient (0: no reference model)
  KlEstimator kl_estimator = KlEstimator::kK3;  // low_var_kl
  double entropy_coef = 0.0;
  double router_aux_loss_coef = 0.0;  // MoE load-balancing loss; 0: off
  bool dynamic_sampling = false;  // DAPO: drop groups whose rewards are all equal
  int64_t overlong_buffer = 0;    // DAPO overlong shaping buffer (tokens); 0: off
  double overlong_penalty = 1.0;
  double gamma = 1.0;       // REINFORCE++ and GAE discount
  double lambda = 1.0;      // GAE lambda (ppo)
  double value_clip = 0.5;  // ppo critic: clip range of the value loss
  // KL-in-reward (verl's use_kl_in_reward): r_t -= beta * kl_t, beta from a controller.
  bool kl_in_reward = false;
  KlControl kl_ctrl = KlControl::kFixed;
  double kl_reward_coef = 0.001;  // initial beta
  double kl_target = 0.1;         // adaptive controller's target KL
  double kl_horizon = 10000;      // adaptive controller's horizon (samples)
  // Off-policy correction for rows generated by an older policy (async pipeline):
  // auto (decoupled for pipeline.mode async, none for sync) | none |
  // decoupled (AReaL decoupled PPO) | tis (truncated importance sampling).
  OffPolicy off_policy = OffPolicy::kAuto;
  double off_policy_cap = 0.0;  // decoupled: drop threshold (0: none); tis: truncation C
  // verl's algorithm.rollout_correction; when it corrects, off_policy must stay auto
  // (resolved to none) or none.
  RolloutCorrectionSection rollout_correction;
};

// rollout.environment: multi-turn trajectories (issue #35; docs/agents.md).
struct EnvironmentSection {
  EnvironmentKind kind = EnvironmentKind::kNone;
  std::vector<std::string> tools = {"calculator"};  // kTools: the built-in tools offered
  int64_t max_turns = 4;                           // model turns per trajectory
  int64_t max_trajectory_tokens = 512;             // response tokens, model + observation
  double tool_timeout_s = 30;                      // kTools: per call
  int64_t max_observation_bytes = 8192;            // kTools: per tool response
  std::string command;                             // kCommand: the program
  std::string url;                                 // kHttp: the service
  double timeout_s = 60;                           // kCommand, kHttp: per call
  EnvironmentErrorPolicy on_error = EnvironmentErrorPolicy::kZero;
  int64_t threads = 4;                             // per rollout instance
  std::string chat_template;  // a built-in template (qwen2.5, qwen3); empty: the model's
  // kSynthetic: the benchmark workload (agent/synthetic_environment.h).
  int64_t synthetic_turns = 3;      // model turns per trajectory
  double tool_latency_ms = 200;     // median of the log-normal tool latency
  double tool_latency_sigma = 0.5;  // its log-space sigma
  int64_t observation_tokens = 32;  // tokens of each tool message's content
};

// rollout.agent: bring your own agent (issue #35; docs/agents.md, pipeline/agent_loop.h).
// rollout.environment's max_turns, on_error and chat_template apply to its trajectories
// too; rollout.max_tokens caps each call.
struct AgentSection {
  std::string command;         // the program run per trajectory; empty: off
  int64_t max_concurrent = 8;  // programs at once per rollout instance
  double timeout_s = 300;      // per program run
  AgentPrefixBreak on_prefix_break = AgentPrefixBreak::kSplit;
};

struct RolloutSection {
  int64_t n = 8;  // samples per prompt (group size)
  int64_t prompts_per_iteration = 16;
  int64_t max_tokens = 8;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  int64_t kv_cache_mb = 128;
  // > 0: instead of kv_cache_mb, this share of the memory free once the policy is
  // loaded (vLLM's gpu_memory_utilization idea), split evenly over the process's
  // rollout instances (rollout/kv_budget.h).
  double kv_cache_fraction = 0.0;
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 2048;
  // Synthetic long-tail workload (benchmarks): this fraction of prompt groups, picked
  // by group id, must generate max_tokens (min_tokens = max_tokens). 0: off.
  double long_tail_fraction = 0.0;
  // Where the rollout engine runs (its model copy and KV cache): cpu | cuda | cuda:N.
  // Plain cuda is cuda:LOCAL_RANK under aspen launch (parallel/device.h).
  DeviceSpec device;
  EnvironmentSection environment;
  AgentSection agent;
  // Rows are multi-turn trajectories: an environment's or an agent program's.
  bool multi_turn() const {
    return environment.kind != EnvironmentKind::kNone || !agent.command.empty();
  }
};

struct TrainSection {
  int64_t iterations = 80;
  double lr = 1e-4;
  LrScheduleKind schedule = LrScheduleKind::kConstant;
  int64_t warmup_steps = 0;
  double min_lr_ratio = 0.1;
  double weight_decay = 0.0;
  double grad_clip = 1.0;
  int64_t mini_batch_size = 0;  // rows per optimizer step; 0: the whole batch
  int64_t epochs = 1;
  int64_t micro_batch_tokens = 4096;
  ComputeDtype compute_dtype = ComputeDtype::kFp32;
  // With bf16 compute: the log-prob head's GEMMs in bf16 too (kernels/logprob_head.h).
  bool head_gemm_bf16 = false;
  bool recompute = false;
  uint64_t seed = 0;
  // Supervised warm-up before RL (the demo's "learn the format first" phase).
  int64_t sft_steps = 1800;
  int64_t sft_batch_size = 32;
  double sft_lr = 2e-3;
  double critic_lr = 1e-4;  // ppo: the critic's learning rate
  // Where the trainer runs (policy, reference, critic, optimizer state): cpu | cuda |
  // cuda:N. Plain cuda is cuda:LOCAL_RANK under aspen launch (parallel/device.h).
  DeviceSpec device;
  // The actor's LoRA adapters (rank 0: full fine-tuning). The targets default to every
  // projection, as PEFT's "all-linear" on a Qwen model.
  LoraOptions lora = [] {
    LoraOptions options;
    options.alpha = 16.0;
    return options;
  }();
  bool lora_export_merged = false;  // final/merged/: base + adapters as one HF model
};

struct PipelineSection;
struct TrainConfig;
// pipeline.dispatch_chunk's `auto` (its default), as the section holds it.
inline constexpr int64_t kDispatchChunkAuto = -1;
// The samples of one dispatch unit in a run with `instances` rollout instances:
// pipeline.dispatch_chunk; rollout.n for 0; for `auto`, half a group (the smallest
// divisor of rollout.n that is >= n / 2) in async mode with more than one instance,
// otherwise the whole group. Why half: across ranks whole groups left a skewness of
// 0.15 (one long group holds one instance while the others idle) and chunks of half
// a group 0.03 with a higher async/sync ratio, while chunks of 1 paid a prompt prefill
// per sample and lost the gain (docs/benchmarks.md, "Across processes"). Sync keeps
// whole groups: it is the baseline exactly as before `auto`. With pipeline.over_sample
// the unit is the whole group (an abort drops whole groups).
int64_t dispatch_chunk(const TrainConfig& config, int64_t instances);

struct PipelineSection {
  PipelineMode mode = PipelineMode::kSync;
  // torch intra-op threads of the trainer (and of sync's rollout); 0: torch's default.
  // 1 by default: on the tiny demo model 2 OpenMP threads measured ~3x slower than 1
  // (spin-waits outweigh the small ops).
  int threads = 1;
  // async only (sync is eta 0): max_staleness, stream_updates, interrupt.
  int64_t max_staleness = 2;             // eta: a row generated at version v trains at v..v+eta
  int64_t sync_every = 1;                // publish weights to the rollout every N updates
  int64_t instances = 2;                 // rollout instances (one thread each)
  DispatchPolicyKind dispatch = DispatchPolicyKind::kQueueAware;
  // Samples per dispatch unit: 0 = a whole group (its prompt computed once and shared);
  // a divisor of rollout.n splits each group into chunks dispatched on their own, so a
  // long group spreads over instances; kDispatchChunkAuto picks (see dispatch_chunk()).
  int64_t dispatch_chunk = kDispatchChunkAuto;
  // Train each prompt group as soon as the batch may take it (gradients accumulated,
  // one step when the batch is whole) instead of waiting for the whole batch: removes
  // the sorting bubble. Applies to single-step updates with group-local advantages
  // (grpo, dapo, dr_grpo, rloo) without a critic or KL-in-reward; otherwise the batch
  // is trained whole.
  bool stream_updates = true;
  bool interrupt = false;          // in-flight requests on new weights: continue (false) or
                                   // interrupt and resume (recompute on the new weights)
  // Partial rollouts (rollout_worker.h): at an instance's weight switch, while another
  // instance is idle, units whose samples ran under the older weights and hold >=
  // partial_rollout_min_tokens output tokens go back to the dock with their output and
  // are resumed by any instance.
  bool partial_rollout = false;
  int64_t partial_rollout_min_tokens = 32;
  // Over-sampling with abort of stragglers (staleness_window.h): admit ceil(f B) more
  // groups than the bound; update i trains the oldest B scored groups of version >=
  // i - eta and aborts the groups that can no longer train within the bound once no
  // consumer holds them (Admission::batch_whole). 0: off.
  double over_sample = 0.0;
  int rollout_threads = 1;         // torch intra-op threads per rollout instance
  std::vector<int> rollout_cores;  // pin rollout instance threads here; empty: no pinning
  std::vector<int> trainer_cores;  // pin the trainer thread here; empty: no pinning
  // A rollout instance silent this long has failed; also the lease of the groups it
  // generates (renewed while it lives), so its groups come back after this long.
  double instance_timeout_s = 30.0;
  // What a failed rollout instance does to the run: regenerate (its groups are
  // generated again by the others) | stop (the run ends, naming it).
  InstanceFailurePolicy on_instance_failure = InstanceFailurePolicy::kRegenerate;
  // Full sets, or deltas from the version an instance holds (docs/benchmarks.md, "Delta
  // weight sync", measured the choice of default).
  WeightSync weight_sync = WeightSync::kFull;
};

struct LoggingSection {
  int64_t eval_every = 10;  // iterations between greedy evaluations; 0: start and end only
  bool console = true;
  std::string trace;  // Chrome trace-event JSON path; empty: no trace
  // TensorBoard event files of the metrics lines in OUT/tensorboard (report/tensorboard_writer.h)
  bool tensorboard = false;
};

struct CheckpointSection {
  int64_t every = 0;      // iterations between checkpoints; 0: none (the final export remains)
  int64_t keep_last = 2;  // checkpoints kept on disk; 0: all
};

// What the sync side of `aspen simulate` runs on (simulate.baseline).
enum class SimulateBaseline { kColocated, kSame };
const char* name_of(SimulateBaseline value);

// Read by `aspen simulate` only (sim/simulation_spec.h; `aspen train` ignores it): the
// device, the model's shape when it is not the run's, the response-length workload
// and the efficiency factors of the cost model. 0 (or empty) keeps the preset's value.
struct SimulateSection {
  std::string model;  // a preset name, a config.json or a model directory; empty: the run's
  std::string device = "h200";  // h100 | h200 | ascend_910b | cpu
  int64_t devices = 0;          // > 0, disaggregated: the rollout takes the trainers' rest
  SimulateBaseline baseline = SimulateBaseline::kColocated;
  double peak_tflops = 0;
  double memory_gb = 0;
  double memory_bandwidth_gbs = 0;
  double link_gbs = 0;
  double network_gbs = 0;
  int64_t devices_per_node = 0;
  double train_mfu = 0;
  double prefill_mfu = 0;
  double decode_efficiency = 0;
  double step_overhead_ms = -1;  // < 0: the preset's
  double memory_utilization = 0.9;
  double length_median = 1024;
  double length_sigma = 1.0;
  int64_t prompt_tokens = 256;
  double reward_ms = 1.0;
  // The rollout without in-flight updates, for comparison: an instance stops taking
  // groups once newer weights are published and loads them when its running ones end.
  bool drain_on_update = false;
  // Bytes of a delta publish (pipeline.weight_sync: delta) over a full one.
  double delta_fraction = 0.104;
  // Multi-turn trajectories with tool calls (sim/workload.h ToolModel): model turns per
  // sample, the tool latency's log-normal, the tokens each tool result adds.
  int64_t turns = 1;
  double tool_latency_ms = 0;
  double tool_latency_sigma = 1.0;
  int64_t observation_tokens = 64;
  std::string replay;       // a run's metrics.jsonl: replay its groups' response lengths
  std::string calibration;  // an `aspen bench pipeline --json` output: fit the cpu preset to it
  // Pipeline-parallel trainers: micro-batches per optimizer step (0: from train.micro_batch_tokens).
  int64_t micro_batches = 0;
  uint64_t seed = 1;
};

struct TrainConfig {
  ModelSection model;
  DataSection data;
  AlgorithmSection algorithm;
  RolloutSection rollout;
  TrainSection train;
  PipelineSection pipeline;
  LoggingSection logging;
  CheckpointSection checkpoint;
  // Which ranks train (train.dp x train.tp) and which serve rollout (rollout.instances
  // x rollout.tp), colocated or disaggregated (parallel/placement.h). The default is
  // one process doing both.
  Placement placement;
  SimulateSection simulate;
  // Every key, as a config file would spell it: parse_train_config of this JSON gives
  // back the same config (the run directory's config.json, which --resume reads).
  nlohmann::json as_json() const;
};

// Reads and validates every section; aspen::Error names the key path.
TrainConfig parse_train_config(Config& config);

// The key table of one section ("model", "data", ..., "placement") in docs/config.md's
// markdown: | key | default | meaning |, from the same field description that reads
// the section. Empty for an unknown section name.
std::string config_reference_markdown(const std::string& section);
// The section names, in the config's order.
const std::vector<std::string>& config_sections();

}  // namespace aspen::config
