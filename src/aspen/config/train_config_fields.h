// The field description of TrainConfig: one visit_fields per section names every key,
// the member it sets and what it means, once. train_config.cpp runs three visitors over
// it: a reader (YAML -> section), a writer (section -> JSON: TrainConfig::as_json, the
// run's config.json) and a documenter (the key tables of docs/config.md). Cross-field
// rules and ranges are checked after reading, in train_config.cpp.
//
// A visitor provides:
//   field(key, T& member, meaning)                 string, bool, int, int64_t, uint64_t, double
//   enum_field(key, E& member, names, meaning)     names: EnumNames<E> below
//   json_field(key, nlohmann::json& member, meaning)   a free-form options block
//   device_field(key, DeviceSpec& member, meaning)
//   cores_field(key, std::vector<int>& member, meaning)
//   names_field(key, std::vector<std::string>& member, meaning)   a list of names
//   nested(key, visit)                             a sub-mapping; visit(sub_visitor)
//
// Internal to train_config.cpp.
#pragma once

#include "aspen/config/imports.h"
#include "aspen/config/train_config.h"
#include "aspen/config/train_config_enum_names.h"

namespace aspen::config {

template <typename Visitor>
void visit_fields(ModelSection& s, Visitor& v) {
  v.field("path", s.path,
        "HF model directory (Qwen2/Qwen2.5/Qwen3, dense or MoE). Empty: build the built-in model "
        "from nothing (a BPE tokenizer trained on the task text and a random "
        "Qwen3-architecture model of the shape below).");
  v.enum_field("kind", s.kind, kBuiltinModelKinds,
        "built-in model: `qwen3` (dense), `qwen3_moe` (every MLP a sparse "
        "mixture of experts, Qwen3-MoE's architecture) or `deepseek_v3` (DeepSeek-V3's "
        "architecture: multi-head latent attention with per-head no-rope/rope/value "
        "widths head_dim / head_dim/2 / head_dim, latent rank 2 x head_dim, query rank "
        "3 x head_dim; layer 0 dense, then sparse layers of num_experts experts in 4 "
        "groups, 2 groups and num_experts_per_tok experts per token by sigmoid scores, "
        "scaled 2.5, plus one shared expert)");
  v.field("hidden_size", s.hidden_size,
        "built-in model: hidden size");
  v.field("num_layers", s.num_layers,
        "built-in model: decoder layers");
  v.field("num_heads", s.num_heads,
        "built-in model: attention heads");
  v.field("num_kv_heads", s.num_kv_heads,
        "built-in model: key/value heads (GQA)");
  v.field("head_dim", s.head_dim,
        "built-in model: head dimension");
  v.field("intermediate_size", s.intermediate_size,
        "built-in model: MLP width");
  v.field("num_experts", s.num_experts,
        "built-in `qwen3_moe` and `deepseek_v3`: experts per layer");
  v.field("num_experts_per_tok", s.num_experts_per_tok,
        "built-in `qwen3_moe` and `deepseek_v3`: experts each token is routed to (top-k)");
  v.field("moe_intermediate_size", s.moe_intermediate_size,
        "built-in `qwen3_moe` and `deepseek_v3`: each expert's MLP width (the defaults "
        "activate 2 x 192 = the dense model's 384 per token; deepseek_v3's shared expert "
        "adds 192)");
  v.field("tokenizer_vocab", s.tokenizer_vocab,
        "built-in tokenizer: vocabulary size (256 bytes + merges + 3 specials)");
  v.field("vocab_multiple", s.vocab_multiple,
        "built-in model: embedding and head rows padded up to a multiple of this "
        "(Megatron's `make_vocab_size_divisible_by`, as Qwen checkpoints pad theirs); "
        "tensor parallelism splits the vocabulary, so `placement.train.tp` must "
        "divide the padded size. The rollout never samples padded ids");
}

template <typename Visitor>
void visit_fields(DataSection& s, Visitor& v) {
  v.enum_field("task", s.task, kTaskKinds,
        "`arithmetic`, `countdown` (built-in procedural tasks) or `jsonl`");
  v.json_field("task_options", s.task_options,
        "(the default shown is `arithmetic`'s, the demo; other tasks: `{}`) "
        "options of the built-in task (arithmetic: `digits`, `min_digits`, "
        "`max_digits`, `ops`, `allow_negative`, `eval_fraction`, `teacher_carry_slip` "
        "(probability that the SFT target of an addition drops the carry out of the "
        "units column: a sloppy demonstrator RL must beat), `teacher_tool_rate` (with "
        "the calculator tool: the share of demonstrations that call it), `answer_style` "
        "(`\"number\"`: \"85\"; `\"sentence\"`: \"The answer is 85\", graded after the "
        "phrase); countdown: see `src/aspen/tasks/countdown_task.h`)");
  v.field("path", s.path,
        "`jsonl`: the dataset file");
  v.field("eval_path", s.eval_path,
        "`jsonl`: a separate validation file (its first `eval_size` lines, in order; "
        "`path` is then trained on whole); empty: the validation set is a seeded "
        "split of `path`");
  v.field("prompt_field", s.prompt_field,
        "`jsonl`: dotted path of the prompt (a string or a chat `messages` array)");
  v.field("answer_field", s.answer_field,
        "`jsonl`: dotted path of the ground truth (a null answer is an error naming "
        "the line)");
  v.field("id_field", s.id_field,
        "`jsonl`: dotted path of each example's id (unique); empty: `FILE:LINE`");
  v.field("system_prompt", s.system_prompt,
        "`jsonl`: a system message for every prompt (through the chat template; "
        "without it, prepended as text)");
  v.field("verifier", s.verifier,
        "`jsonl`: verifier kind (`math`, `format`, `countdown`, `command`: your own "
        "reward script speaking JSON lines, `verifier_options` `{command, timeout_s, "
        "max_restarts}`; `http`: a reward service, `{url, timeout_s, retries, "
        "concurrency, batch_size, token_env}`; `model`: a reward model, `{path, "
        "label, dtype, device, batch_tokens}`; docs/rewards.md; or `weighted`: a "
        "weighted sum, `verifier_options` then being the list of components `{name, "
        "verifier, weight, options}`, e.g. `[{verifier: math, weight: 1.0}, "
        "{verifier: format, weight: 0.1}]`)");
  v.json_field("verifier_options", s.verifier_options,
        "`jsonl`: verifier options (`src/aspen/reward/*_verifier.h`, "
        "`weighted_reward.h`)");
  v.field("verifier_field", s.verifier_field,
        "`jsonl`: dotted path of each line's own verifier kind (lines without it use "
        "`verifier`; the kinds a line names take their default options)");
  v.field("chat_template", s.chat_template,
        "`jsonl`: render prompts with the model's chat template");
  v.field("enable_thinking", s.enable_thinking,
        "`jsonl` with `chat_template`: Qwen3's thinking switch in the template");
  v.field("train_size", s.train_size,
        "training prompts");
  v.field("eval_size", s.eval_size,
        "held-out prompts for greedy evaluation (disjoint from training)");
  v.field("seed", s.seed,
        "data generation / split seed");
}

template <typename Visitor>
void visit_fields(AlgorithmSection& s, Visitor& v) {
  v.enum_field("name", s.name, kAlgorithmNames,
        "advantage estimator: `grpo`, `dr_grpo` (no std division), `dapo` (GRPO "
        "advantages + clip-higher 0.28 + dynamic sampling), `rloo`, `reinforce_pp`, "
        "`reinforce_pp_baseline`, `ppo` (a critic on the policy's architecture + GAE)");
  v.field("clip_ratio_low", s.clip_ratio_low,
        "PPO clip below: ratio >= 1 - low");
  v.field("clip_ratio_high", s.clip_ratio_high,
        "PPO clip above: ratio <= 1 + high (DAPO clip-higher: 0.28)");
  v.field("clip_ratio_c", s.clip_ratio_c,
        "dual-clip constant (> 1) for negative advantages; 0: off");
  v.enum_field("loss_agg", s.loss_agg, kAggModes,
        "`token-mean`, `seq-mean-token-mean`, `seq-mean-token-sum`");
  v.field("kl_coef", s.kl_coef,
        "KL-in-loss coefficient against a frozen reference; 0: no reference model");
  v.enum_field("kl_estimator", s.kl_estimator, kKlEstimators,
        "`k1`/`kl`, `k2`/`mse`, `k3`/`low_var_kl`, `abs`");
  v.field("entropy_coef", s.entropy_coef,
        "entropy bonus");
  v.field("router_aux_loss_coef", s.router_aux_loss_coef,
        "MoE models: coefficient of the router's load-balancing loss (Switch "
        "Transformer's, as transformers computes it) in the RL updates and the SFT "
        "warm-up (`aspen sft` too); 0: not trained, still reported "
        "as `router_aux_loss`. Off by default, as in transformers (output_router_logits) "
        "and verl; Qwen3-MoE's pretraining used 0.001");
  v.field("dynamic_sampling", s.dynamic_sampling,
        "(`dapo`: true unless given) "
        "drop groups whose rewards are all equal and draw more prompts (at most 4 "
        "rounds per batch; after the 4th the batch trains on the groups it has, and "
        "skips the update when it has none); sync and async; metrics report "
        "`sampling_rounds` and `dropped_groups`");
  v.field("overlong_buffer", s.overlong_buffer,
        "DAPO overlong shaping buffer in tokens (penalty ramps over the last "
        "`overlong_buffer` tokens before `rollout.max_tokens`); 0: off");
  v.field("overlong_penalty", s.overlong_penalty,
        "DAPO overlong penalty factor");
  v.field("gamma", s.gamma,
        "REINFORCE++ and GAE discount, in (0, 1]");
  v.field("lambda", s.lambda,
        "GAE lambda (`ppo`), in [0, 1]");
  v.field("value_clip", s.value_clip,
        "`ppo`: clip range of the critic's value loss");
  v.field("kl_in_reward", s.kl_in_reward,
        "KL penalty in the reward (r_t -= beta * kl(old, ref)_t; outcome estimators "
        "see the row's shaped sum); needs a reference model, built automatically");
  v.enum_field("kl_ctrl", s.kl_ctrl, kKlControls,
        "beta controller for `kl_in_reward`: `fixed` or `adaptive` (Ziegler et al.)");
  v.field("kl_reward_coef", s.kl_reward_coef,
        "initial beta");
  v.field("kl_target", s.kl_target,
        "`adaptive`: target KL");
  v.field("kl_horizon", s.kl_horizon,
        "`adaptive`: horizon in samples");
  v.enum_field("off_policy", s.off_policy, kOffPolicies,
        "correction for rows from older weights: `none`, `decoupled` (AReaL decoupled "
        "PPO: proximal = recomputed, behaviour = rollout log-probs), `tis` (truncated "
        "importance sampling); `auto` = `decoupled` in `pipeline.mode: async`, `none` "
        "in sync, and `none` whenever `rollout_correction` corrects (verl's spelling of "
        "the same machinery; setting both is an error)");
  v.field("off_policy_cap", s.off_policy_cap,
        "`decoupled`: drop tokens whose behaviour weight exceeds it (0: no cap); "
        "`tis`: truncation C (required, > 0)");
  v.nested("rollout_correction", [&](auto& rc) {
    RolloutCorrectionSection& c = s.rollout_correction;
    rc.enum_field("rollout_is", c.rollout_is, kRolloutIsLevels,
        "verl's importance-sampling weight of each token's loss, proximal over rollout "
        "policy: `token` (TIS: min(rho_t, C)), `sequence` (min(prod_t rho_t, C) for "
        "every token of the row) or `none`/`null`. Replaces `off_policy` (which must "
        "stay `auto` or `none`); docs/design.md, \"Rollout correction\"");
    rc.field("rollout_is_threshold", c.rollout_is_threshold,
        "truncation C of the IS weights, > 0");
    rc.enum_field("rollout_rs", c.rollout_rs, kRolloutRsLevels,
        "rejection sampling (masked IS, MIS): tokens whose ratio is outside [lower, "
        "upper] get zero loss and gradient: `token` (rho_t), `sequence` (prod_t rho_t, "
        "whole row), `geometric` (geometric mean of rho_t, whole row) or `none`/`null`");
    rc.field("rollout_rs_threshold", c.rollout_rs_threshold,
        "rejection's upper bound; 0: `rollout_is_threshold`");
    rc.field("rollout_rs_threshold_lower", c.rollout_rs_threshold_lower,
        "rejection's lower bound; 0: 1 / upper");
    rc.field("bypass_mode", c.bypass_mode,
        "the PPO ratio is anchored at the rollout's log-probs (no proximal recompute); "
        "then proximal = rollout, so `rollout_is`/`rollout_rs` must be none");
    rc.field("routing_replay", c.routing_replay,
        "MoE routing replay (R3): the trainer's forwards (old log-probs and the "
        "update's) route each response token's position to the experts the rollout "
        "chose for it (`rollout_routed_experts`), combine weights from the trainer's "
        "router (gradient flows to its gate); prompt positions keep their own top-k. "
        "Qwen3-MoE (softmax routers) only");
  });
}

template <typename Visitor>
void visit_fields(RolloutSection& s, Visitor& v) {
  v.field("n", s.n,
        "samples per prompt (the group)");
  v.field("prompts_per_iteration", s.prompts_per_iteration,
        "prompts per iteration (batch = n x prompts)");
  v.field("max_tokens", s.max_tokens,
        "response tokens at most");
  v.field("temperature", s.temperature,
        "sampling temperature (> 0 for RL)");
  v.field("top_p", s.top_p,
        "nucleus sampling");
  v.field("top_k", s.top_k,
        "top-k sampling; 0: off");
  v.field("kv_cache_mb", s.kv_cache_mb,
        "KV cache budget of the rollout engine");
  v.field("kv_cache_fraction", s.kv_cache_fraction,
        "> 0: instead of `kv_cache_mb`, this share of the memory free once the policy is "
        "loaded (MemAvailable on the CPU, free device memory on a GPU; vLLM's "
        "gpu_memory_utilization idea), split evenly over the process's rollout instances; "
        "in (0, 0.95]");
  v.field("max_num_seqs", s.max_num_seqs,
        "running sequences at most");
  v.field("max_num_batched_tokens", s.max_num_batched_tokens,
        "tokens per engine step (chunked prefill budget)");
  v.field("long_tail_fraction", s.long_tail_fraction,
        "synthetic long-tail workload for benchmarks: this fraction of prompt groups "
        "(fixed per group id) must generate `max_tokens`");
  v.device_field("device", s.device,
        "where the rollout engine runs (its weights and KV cache): `cpu`, `cuda` or "
        "`cuda:N`; under `aspen launch`, plain `cuda` is `cuda:LOCAL_RANK`. A GPU "
        "asked for but not usable is an error naming the key");
  v.nested("environment", [&](auto& env) {
    EnvironmentSection& e = s.environment;
    env.enum_field("kind", e.kind, kEnvironmentKinds,
        "multi-turn trajectories with tools (docs/agents.md): `tools` (the built-in tools), "
        "`command` (a program per trajectory speaking JSON lines), `http` (a service), "
        "`synthetic` (a benchmark workload: timed tool calls whatever the model writes); "
        "`none`: single-turn samples. `rollout.max_tokens` then caps each model turn");
    env.names_field("tools", e.tools,
        "`tools`: the built-in tools offered, `calculator` and/or `python`");
    env.field("max_turns", e.max_turns,
        "model turns per trajectory; one that is still calling tools then ends with reward 0");
    env.field("max_trajectory_tokens", e.max_trajectory_tokens,
        "response tokens per trajectory (model and observation tokens); a trajectory with no "
        "room for another turn ends with reward 0. At least `rollout.max_tokens`");
    env.field("tool_timeout_s", e.tool_timeout_s,
        "`tools`: seconds per tool call; a late call's observation is a timeout error");
    env.field("max_observation_bytes", e.max_observation_bytes,
        "`tools`: bytes per tool response; a longer one is cut, saying so");
    env.field("command", e.command,
        "`command`: the environment program (agent/command_environment.h's protocol)");
    env.field("url", e.url,
        "`http`: the environment service (agent/http_environment.h's protocol)");
    env.field("timeout_s", e.timeout_s,
        "`command`, `http`: seconds per reset or step before the trajectory fails");
    env.enum_field("on_error", e.on_error, kEnvironmentErrorPolicies,
        "a trajectory the environment failed (crash, hang, garbage, oversized reply): "
        "`zero` trains it with reward 0; `drop` discards its group");
    env.field("threads", e.threads,
        "threads per rollout instance running environment resets and steps");
    env.field("chat_template", e.chat_template,
        "the template rendering conversations and observations: `qwen2.5` or `qwen3` "
        "(built-in), or empty for the model's own (`tokenizer_config.json`)");
    env.field("synthetic_turns", e.synthetic_turns,
        "`synthetic`: model turns per trajectory, each but the last followed by a tool call; "
        "the last is scored by the verifier. At most `max_turns`");
    env.field("tool_latency_ms", e.tool_latency_ms,
        "`synthetic`: median milliseconds of a tool call, log-normal, seeded per trajectory "
        "(0: no wait)");
    env.field("tool_latency_sigma", e.tool_latency_sigma,
        "`synthetic`: sigma of the tool latency's logarithm (0: every call waits the median)");
    env.field("observation_tokens", e.observation_tokens,
        "`synthetic`: tokens of each tool message's content (that many digits, one token "
        "each under the Qwen pre-tokenizer), plus the template's wrapping");
  });
  v.nested("agent", [&](auto& agent) {
    AgentSection& a = s.agent;
    agent.field("command", a.command,
        "bring your own agent (docs/agents.md): a shell command run once per trajectory, "
        "with OPENAI_BASE_URL (the rollout instance's own endpoint), OPENAI_API_KEY and "
        "ASPEN_SESSION set and the data row on stdin; it prints `{\"reward\": x}`. Its "
        "calls' tokens are trained; `rollout.environment`'s max_turns, on_error and "
        "chat_template apply, and `rollout.max_tokens` caps each call. Empty: off");
    agent.field("max_concurrent", a.max_concurrent,
        "agent programs running at once per rollout instance");
    agent.field("timeout_s", a.timeout_s,
        "seconds per program run; a program past it is killed and its trajectory fails");
    agent.enum_field("on_prefix_break", a.on_prefix_break, kAgentPrefixBreaks,
        "a call that does not extend its session's context: `split` starts a new segment "
        "(the trajectory trains on the last one), `refuse` answers it with HTTP 400; "
        "counted in agent_prefix_breaks");
  });
}

template <typename Visitor>
void visit_fields(TrainSection& s, Visitor& v) {
  v.field("iterations", s.iterations,
        "RL iterations");
  v.field("lr", s.lr,
        "AdamW learning rate for RL");
  v.enum_field("schedule", s.schedule, kLrSchedules,
        "`constant` or `cosine` (linear warm-up then cosine to `min_lr_ratio`)");
  v.field("warmup_steps", s.warmup_steps,
        "warm-up optimizer steps");
  v.field("min_lr_ratio", s.min_lr_ratio,
        "cosine floor as a fraction of `lr`");
  v.field("weight_decay", s.weight_decay,
        "AdamW decoupled weight decay (matrices only)");
  v.field("grad_clip", s.grad_clip,
        "clip by global norm; <= 0: off");
  v.field("mini_batch_size", s.mini_batch_size,
        "rows per optimizer step; 0: the whole batch (exactly on-policy)");
  v.field("epochs", s.epochs,
        "passes over each batch (PPO epochs)");
  v.field("micro_batch_tokens", s.micro_batch_tokens,
        "packed tokens per forward/backward (gradient accumulation above it)");
  v.enum_field("compute_dtype", s.compute_dtype, kComputeDtypes,
        "`fp32` or `bf16` (bf16 compute, fp32 master weights)");
  v.field("head_gemm_bf16", s.head_gemm_bf16,
        "with `compute_dtype: bf16`, the actor's log-prob head multiplies in bf16 too "
        "(fp32 accumulation inside the GEMM, logits rounded to bf16 as eager autocast's "
        "lm_head; max, log-sum-exp and entropy in fp32). Off: the head's GEMMs in fp32. "
        "The head is most of the FLOPs of a small model with a 152k vocabulary");
  v.field("recompute", s.recompute,
        "per-layer activation recompute");
  v.field("seed", s.seed,
        "seeds sampling, shuffling and the built-in model");
  v.field("sft_steps", s.sft_steps,
        "supervised warm-up steps before RL (0: none)");
  v.field("sft_batch_size", s.sft_batch_size,
        "examples per SFT step");
  v.field("sft_lr", s.sft_lr,
        "SFT peak learning rate (cosine schedule)");
  v.field("critic_lr", s.critic_lr,
        "`ppo`: the critic's learning rate");
  v.device_field("device", s.device,
        "where the trainer runs (policy, reference, critic, optimizer state): `cpu`, "
        "`cuda` or `cuda:N`; under `aspen launch`, plain `cuda` is `cuda:LOCAL_RANK`");
  v.nested("lora", [&](auto& lora) {
    lora.field("rank", s.lora.rank,
        "LoRA rank r of the actor's adapters (PEFT's LoRA, src/aspen/model/lora.h); 0: full "
        "fine-tuning. With r > 0 only the adapters train (the base is frozen after the SFT "
        "warm-up), the reference policy is the base with the adapters off (no second copy), "
        "rollout instances receive the adapters only, and `final/` holds a PEFT adapter");
    lora.field("alpha", s.lora.alpha,
        "scaling numerator: the adapter adds (alpha / r) B A x");
    lora.field("dropout", s.lora.dropout,
        "dropout on the adapter's input, in the actor's update forward only");
    lora.names_field("targets", s.lora.targets,
        "projections that get adapters (PEFT's target_modules): any of q_proj, k_proj, "
        "v_proj, o_proj, gate_proj, up_proj, down_proj");
    lora.field("experts", s.lora.experts,
        "MoE models: the routed experts' projections get adapters too (one per expert)");
    lora.field("use_rslora", s.lora.use_rslora,
        "rank-stabilised scaling alpha / sqrt(r) instead of alpha / r");
    lora.field("export_merged", s.lora_export_merged,
        "also write the merged model (base + scaled B A) as a full HF checkpoint in "
        "`final/merged/`");
  });
}

template <typename Visitor>
void visit_fields(PipelineSection& s, Visitor& v) {
  v.enum_field("mode", s.mode, kPipelineModes,
        "both run the one iteration engine (src/aspen/pipeline/iteration_engine.h), "
        "in one process or across the ranks of `aspen launch`. `sync`: the "
        "synchronous baseline, η = 0 with whole-batch updates (each update trains "
        "exactly the groups its weights generated; `max_staleness` and "
        "`stream_updates` do not apply); `async`: ASP, η = `max_staleness`");
  v.field("threads", s.threads,
        "trainer's torch intra-op threads; 0: torch's default (all cores). 1 because "
        "on the demo's tiny model two OpenMP threads ran about 3x slower than one");
  v.field("max_staleness", s.max_staleness,
        "async: eta; a row generated by weights v trains at an update in v..v+eta (0 "
        "reproduces sync). 2 by default: `aspen bench pipeline` measured async/sync 1.13 "
        "at 1 against 1.53 at 2 (the rollout idled 27% at 1), and the demo at 2 with "
        "partial rollouts and TIS ended within 1 point of sync (docs/benchmarks.md). "
        "The bench's own workload runs 3 beside a 16-sequence decode batch "
        "(`rollout.max_num_seqs`: the queue is in deadline order, so the cap serves the "
        "groups the next update needs first): median 1.81 against 1.49 "
        "(docs/benchmarks.md, \"Deadline order\"); the default stays 2, the staleness "
        "whose convergence was measured");
  v.field("sync_every", s.sync_every,
        "publish weights to the rollout every N updates; must be <= `max_staleness` + "
        "1 (async) or 1 (sync)");
  v.field("stream_updates", s.stream_updates,
        "async: train each prompt group as soon as the batch may take it (stages and "
        "forward/backward at once, gradients accumulated as sums and divided at the "
        "one step) instead of waiting for the whole batch — removes the sorting "
        "bubble; applies to single-step updates with group-local advantages (grpo, "
        "dapo, dr_grpo, rloo) without a critic or KL-in-reward, otherwise the batch "
        "trains whole");
  v.field("instances", s.instances,
        "in one process: rollout instances (one thread and engine each); across ranks "
        "`placement.rollout.instances` counts them");
  v.enum_field("dispatch", s.dispatch, kDispatchPolicies,
        "`round_robin`, `least_requests` or `queue_aware` (least expected completion "
        "time; src/aspen/pipeline/dispatch_policy.h). The choice is a preference: an "
        "instance with nothing to run takes work dispatched elsewhere");
  v.auto_count_field("dispatch_chunk", s.dispatch_chunk,
        "samples per dispatch unit; 0 = whole groups (the prompt computed once per "
        "group), a divisor of `rollout.n` splits each group into chunks dispatched on "
        "their own (a long group spreads over instances; each sample keeps its seed, "
        "so the samples do not change); `auto`: halves of groups in async mode with "
        "more than one rollout instance (across ranks it cut the skewness bubble from "
        "0.15 to 0.03), whole groups otherwise (sync stays the baseline)");
  v.field("interrupt", s.interrupt,
        "async: in-flight requests on new weights continue (false) or are interrupted "
        "and resumed on the new weights");
  v.field("partial_rollout", s.partial_rollout,
        "async: partial rollouts (verl's `partial_rollout`, slime's APRIL). When a "
        "rollout instance switches to new weights while another instance is idle, each "
        "unit it generates under the older ones whose longest unfinished sample holds >= "
        "`partial_rollout_min_tokens` tokens is cut: its output so far (tokens, "
        "log-probs, versions) goes back to the dock and any instance resumes it "
        "(prompt + output prefilled under its weights, the sample's seed stream "
        "continued). Staleness counts from a row's oldest token. Not with "
        "`placement.rollout.tp` > 1");
  v.field("partial_rollout_min_tokens", s.partial_rollout_min_tokens,
        "partial rollouts cut only units with a sample this long (>= 1): a shorter one "
        "ends soon, and resuming costs a prefill of prompt + output");
  v.field("over_sample", s.over_sample,
        "over-sampling with abort of stragglers (slime's over-sampling, APRIL's abort), 0 "
        "to 1; 0: off. Admission takes ceil(f x `rollout.prompts_per_iteration`) more "
        "groups than the staleness bound; update i trains the oldest "
        "`prompts_per_iteration` scored groups of version >= i - η instead of waiting for "
        "the window's last groups, and once its batch is whole every group admitted below "
        "i + 1 - η that it did not take is aborted as soon as nobody holds it (queued, or "
        "scored and waiting; one being generated or scored finishes first) and its slot "
        "refilled with a new prompt. Removes the long tail's wait at the cost of the "
        "aborted work (metrics `aborted_groups`, `aborted_rows`) and a bias against long "
        "responses (measured: docs/simulate.md). Dispatches whole groups. Also in sync "
        "mode (η = 0)");
  v.field("rollout_threads", s.rollout_threads,
        "torch intra-op threads per rollout instance");
  v.cores_field("rollout_cores", s.rollout_cores,
        "cores the rollout instance threads are pinned to (instance i gets entry i "
        "mod length); empty: no pinning");
  v.cores_field("trainer_cores", s.trainer_cores,
        "cores the trainer thread is pinned to");
  v.field("instance_timeout_s", s.instance_timeout_s,
        "a rollout instance silent this long has failed; also the lease of the groups "
        "it generates (renewed while it lives)");
  v.enum_field("on_instance_failure", s.on_instance_failure, kFailurePolicies,
        "a failed rollout instance's groups are generated again by the others "
        "(`regenerate`), or the run stops with an error naming it (`stop`). Across "
        "ranks, start `aspen launch` with `--tolerate-exit` for the rollout ranks "
        "under `regenerate`");
  v.enum_field("weight_sync", s.weight_sync, kWeightSyncs,
        "what a weight publish moves to the rollout instances that fetch it from a "
        "trainer's warehouse: the `full` set, or (`delta`) the XOR of each changed "
        "version, zstd-compressed, from the version an instance holds, or the full set "
        "when that is smaller; the instance's weights equal the trainer's bit for bit "
        "either way. LoRA runs publish their adapters full, and colocated "
        "tensor-parallel instances take resharded shards, under both (docs/benchmarks.md, "
        "\"Delta weight sync\", has the measurements behind the default)");
}

template <typename Visitor>
void visit_fields(LoggingSection& s, Visitor& v) {
  v.field("eval_every", s.eval_every,
        "iterations between greedy evaluations (always before RL and at the end)");
  v.field("console", s.console,
        "print a progress line per iteration");
  v.field("trace", s.trace,
        "Chrome trace-event JSON (opens in Perfetto / chrome://tracing): a track per "
        "role and rollout instance with spans for generate steps, reward batches, "
        "trainer stages, publishes and waits; empty: none");
  v.field("tensorboard", s.tensorboard,
        "`aspen train` also writes the metrics to TensorBoard event files in "
        "`OUT/tensorboard/` (below)");
}

template <typename Visitor>
void visit_fields(CheckpointSection& s, Visitor& v) {
  v.field("every", s.every,
        "write a checkpoint every N iterations under `OUT/checkpoints/iter_NNNNNN` "
        "(policy HF dir, optimizer states, reference, critic, prompt "
        "order/RNG/counters); 0: none. `aspen train --resume OUT` continues from the "
        "newest one: in sync mode the metrics then equal an uninterrupted run's");
  v.field("keep_last", s.keep_last,
        "checkpoints kept; 0: all");
}

template <typename Visitor>
void visit_fields(Placement& s, Visitor& v) {
  v.enum_field("mode", s.mode, kPlacementModes,
        "`colocated`: every rank trains and serves rollout, time-sliced (optimizer "
        "state swapped out during rollout); `disaggregated`: the training ranks come "
        "first, the rollout ranks after them");
  v.nested("train", [&](auto& train) {
    train.field("dp", s.train_dp, "the training grid's data-parallel size");
    train.field("tp", s.train_tp, "the training grid's tensor-parallel size");
    train.field("ep", s.train_ep,
        "MoE models: expert parallelism inside the data-parallel trainers - groups of "
        "`train.ep` consecutive training ranks split each MoE layer's experts and "
        "exchange tokens by all-to-all, each rank still training its own rows; must "
        "divide `train.dp`. With `train.tp` > 1 it must equal `train.tp`: each TP group "
        "splits attention by heads and the experts, whole, over the same ranks. The "
        "rollout instances get the experts gathered after each update");
    train.field("pp", s.train_pp,
        "pipeline parallelism: the trainer's decoder layers split into `train.pp` "
        "contiguous stages, one rank each (embedding on the first, norm and head on the "
        "last), trained by 1F1B over the balanced micro-batches; at most the model's "
        "layers. A replica is `train.tp x train.pp` ranks, TP fastest; with `train.dp` "
        "replicas. With `train.ep` > 1 each stage's experts split over its EP group (EP "
        "inside DP: that stage of `train.ep` replicas). Not yet with `train.ep` > 1 "
        "under `train.tp` > 1, ppo with `train.ep` > 1, "
        "ppo with `train.tp` > 1, LoRA or routing replay in `aspen train` "
        "(refused at its start naming both keys; `aspen simulate` models any grid). The rollout instances get the "
        "stages' layers gathered after each update; colocated `rollout.tp` > 1 "
        "instances get their TP shards of every stage's layers from the resharder "
        "instead");
  });
  v.nested("rollout", [&](auto& rollout) {
    rollout.field("instances", s.rollout_instances,
        "rollout instances and the TP size of each; colocated needs `train.dp x "
        "train.tp x train.pp = rollout.instances x rollout.tp` and `rollout.tp` dividing or a "
        "multiple of `train.tp` (the resharder's layouts)");
    rollout.field("tp", s.rollout_tp, "the tensor-parallel size of each rollout instance");
    rollout.field("ep", s.rollout_ep,
        "MoE models: the expert-parallel size of each rollout instance - its ranks step "
        "one batch together, each holding num_experts / ep experts of every MoE layer "
        "and computing them for the tokens routed there, summed over the ranks (one "
        "all-reduce per layer); needs `rollout.tp: 1`. Instances then count `rollout.ep` "
        "ranks each in the grid equations above");
  });
  v.field("swap", s.swap,
        "colocated, sync mode or async with `pipeline.max_staleness: 0` (the trainer "
        "then waits for every batch): the trainer's optimizer moments and gradients "
        "(actor and critic) leave memory before each rollout — to a swap file on CPU, "
        "host memory on an accelerator — and come back before the update "
        "(bit-identical training, tested); each RL metrics line then reports "
        "`swapped_bytes`");
}

template <typename Visitor>
void visit_fields(SimulateSection& s, Visitor& v) {
  v.field("model", s.model,
        "`aspen simulate`: the simulated model - a preset (`qwen2.5-7b`, `qwen2.5-32b`, "
        "`qwen3-30b-a3b`), a `config.json` or a model directory; empty: `model.path`'s "
        "config, else the built-in model's shape");
  v.field("device", s.device,
        "the simulated device: `h100`, `h200`, `ascend_910b` or `cpu` (this machine, one "
        "core per device); its figures and their sources are in docs/simulate.md");
  v.field("devices", s.devices,
        "> 0 with `placement.mode: disaggregated`: the job's devices; the rollout takes "
        "what the trainers do not (`placement.rollout.instances` = (devices - train.dp x "
        "train.tp) / rollout.tp); 0: the placement as written");
  v.enum_field("baseline", s.baseline, kSimulateBaselines,
        "what the sync side runs on: `colocated` (the same number of devices, each "
        "training and serving rollout time-sliced: the usual synchronous setup) or "
        "`same` (this placement, in sync mode)");
  v.field("peak_tflops", s.peak_tflops, "dense bf16 TFLOP/s per device; 0: the preset's");
  v.field("memory_gb", s.memory_gb, "device memory (GB); 0: the preset's");
  v.field("memory_bandwidth_gbs", s.memory_bandwidth_gbs,
        "device memory bandwidth (GB/s); 0: the preset's");
  v.field("link_gbs", s.link_gbs,
        "per-device bandwidth inside a node (NVLink, HCCS; GB/s one way); 0: the preset's");
  v.field("network_gbs", s.network_gbs,
        "per-device bandwidth across nodes (InfiniBand, RoCE; GB/s one way); 0: the preset's");
  v.field("devices_per_node", s.devices_per_node, "devices per node; 0: the preset's");
  v.field("train_mfu", s.train_mfu,
        "achieved fraction of the peak in training and the trainer's forward passes; 0: the "
        "preset's");
  v.field("prefill_mfu", s.prefill_mfu,
        "achieved fraction of the peak in rollout prefill (and decode's compute side); 0: "
        "the preset's");
  v.field("decode_efficiency", s.decode_efficiency,
        "achieved fraction of the memory bandwidth in decode; 0: the preset's");
  v.field("step_overhead_ms", s.step_overhead_ms,
        "fixed milliseconds per rollout engine step (scheduling, sampling, launches); < 0: "
        "the preset's");
  v.field("memory_utilization", s.memory_utilization,
        "fraction of device memory for weights and KV cache (vLLM's "
        "gpu_memory_utilization)");
  v.field("length_median", s.length_median,
        "response lengths: the median of their log-normal distribution (tokens), capped at "
        "`rollout.max_tokens`; `rollout.long_tail_fraction` of the groups run to the cap");
  v.field("length_sigma", s.length_sigma,
        "the log-normal's sigma (0: every response `length_median` tokens)");
  v.field("prompt_tokens", s.prompt_tokens, "tokens per prompt");
  v.field("reward_ms", s.reward_ms, "verifier milliseconds per sample (one verifier per instance)");
  v.field("drain_on_update", s.drain_on_update,
        "the rollout without in-flight weight updates, for comparison: an instance stops "
        "taking groups once newer weights are published and loads them when its running "
        "ones have finished (false: in-flight, the engine's behaviour: new weights at the "
        "next step, running sequences continue)");
  v.field("delta_fraction", s.delta_fraction,
        "with `pipeline.weight_sync: delta`, the bytes an instance fetches per publish over "
        "the full set's, in (0, 1]; 0.104 is `aspen bench publish --delta --dtype bf16` at "
        "lr 1e-5 (9.65x fewer bytes; docs/benchmarks.md)");
  v.field("turns", s.turns,
        "model turns per trajectory (agentic RL): each sample's response splits into this "
        "many turns of near-equal length, with a tool call after each but the last; 1: "
        "single-turn");
  v.field("tool_latency_ms", s.tool_latency_ms,
        "the tool call's latency: the median of its log-normal, in milliseconds (seeded "
        "per group, sample and turn, so both sides wait the same)");
  v.field("tool_latency_sigma", s.tool_latency_sigma,
        "the tool latency log-normal's sigma (0: every call `tool_latency_ms`)");
  v.field("observation_tokens", s.observation_tokens,
        "tokens each tool result adds to the context (prefilled on its return, in the "
        "trained context, not trained); a waiting trajectory keeps its KV cache");
  v.field("replay", s.replay,
        "a run's `metrics.jsonl`: the simulated groups take its recorded groups' response "
        "lengths (`response_lengths`, cycled) instead of the log-normal and the long tail");
  v.field("calibration", s.calibration,
        "an `aspen bench pipeline --json` output: the `cpu` device's step and token costs are "
        "fitted to its sync side's recorded costs (docs/simulate.md)");
  v.field("micro_batches", s.micro_batches,
        "pipeline-parallel trainers (`aspen simulate --compare-pp`): micro-batches per "
        "optimizer step and DP rank, each pipeline's 1F1B bubble (pp - 1) / (m + pp - 1); "
        "0: ceil(the rank's tokens / `train.micro_batch_tokens`), as the trainer packs them");
  v.field("seed", s.seed, "seed of the response lengths");
}

}  // namespace aspen::config
