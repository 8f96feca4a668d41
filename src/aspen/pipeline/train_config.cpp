#include "aspen/pipeline/train_config.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>

namespace aspen {
namespace {

void check_one_of(const std::string& value, const std::set<std::string>& allowed,
                  const std::string& where) {
  if (allowed.count(value)) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw Error("unsupported value \"" + value + "\"", where, "use one of: " + list);
}

// An enum field read by its spelled names (aspen::Error naming the field and listing
// the names for anything else).
template <typename E>
E read_enum(ConfigSection& s, const std::string& key, E fallback,
            const std::vector<std::pair<std::string, E>>& names) {
  std::string spelled;
  for (const auto& [name, value] : names) {
    if (value == fallback) spelled = name;
  }
  spelled = s.get(key, spelled);
  std::set<std::string> allowed;
  for (const auto& [name, value] : names) {
    if (name == spelled) return value;
    allowed.insert(name);
  }
  check_one_of(spelled, allowed, s.where(key));
  return fallback;  // not reached: check_one_of threw
}

const std::vector<std::pair<std::string, PipelineMode>> kPipelineModes = {
    {"sync", PipelineMode::kSync}, {"async", PipelineMode::kAsync}};
const std::vector<std::pair<std::string, PlacementMode>> kPlacementModes = {
    {"colocated", PlacementMode::kColocated}, {"disaggregated", PlacementMode::kDisaggregated}};
const std::vector<std::pair<std::string, InstanceFailurePolicy>> kFailurePolicies = {
    {"regenerate", InstanceFailurePolicy::kRegenerate}, {"stop", InstanceFailurePolicy::kStop}};

template <typename E>
const char* spelling(const std::vector<std::pair<std::string, E>>& names, E value) {
  for (const auto& [name, v] : names) {
    if (v == value) return name.c_str();
  }
  return "?";
}

void check_positive(int64_t value, const std::string& where) {
  check_input(value > 0, "must be > 0, got " + std::to_string(value), where);
}

void check_non_negative(double value, const std::string& where) {
  check_input(value >= 0, "must be >= 0, got " + std::to_string(value), where);
}

// Bounds on sizes that only a typo reaches, so that it is an error instead of an
// allocation of terabytes or an hour of generating examples.
void check_at_most(int64_t value, int64_t bound, const std::string& where, const std::string& why) {
  check_input(value <= bound,
              "is " + std::to_string(value) + ", above the bound " + std::to_string(bound), where,
              why);
}

int cores_here() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// A list of CPU core indices, e.g. [0] or [0, 1].
std::vector<int> read_cores(ConfigSection& s, const std::string& key) {
  const nlohmann::json value = s.json(key, nlohmann::json::array());
  check_input(value.is_array(), "must be a list of core indices", s.where(key));
  std::vector<int> cores;
  for (const auto& core : value) {
    check_input(core.is_number_integer() && core.get<int64_t>() >= 0,
                "must be a list of core indices >= 0", s.where(key));
    check_input(core.get<int64_t>() < cores_here(),
                "core " + std::to_string(core.get<int64_t>()) +
                    " does not exist: this machine has " + std::to_string(cores_here()) +
                    " cores (0.." + std::to_string(cores_here() - 1) + ")",
                s.where(key));
    cores.push_back(core.get<int>());
  }
  return cores;
}

ModelSection read_model(ConfigSection s) {
  ModelSection m;
  m.path = s.get("path", m.path);
  m.hidden_size = s.get("hidden_size", m.hidden_size);
  m.num_layers = s.get("num_layers", m.num_layers);
  m.num_heads = s.get("num_heads", m.num_heads);
  m.num_kv_heads = s.get("num_kv_heads", m.num_kv_heads);
  m.head_dim = s.get("head_dim", m.head_dim);
  m.intermediate_size = s.get("intermediate_size", m.intermediate_size);
  m.tokenizer_vocab = s.get("tokenizer_vocab", m.tokenizer_vocab);
  m.vocab_multiple = s.get("vocab_multiple", m.vocab_multiple);
  // The built-in model is made from nothing for demos and tests: every size positive,
  // and none past what a real checkpoint has (Qwen3-235B: hidden 4096, 94 layers).
  const std::pair<const char*, int64_t> sizes[] = {{"hidden_size", m.hidden_size},
                                                   {"num_layers", m.num_layers},
                                                   {"num_heads", m.num_heads},
                                                   {"num_kv_heads", m.num_kv_heads},
                                                   {"head_dim", m.head_dim},
                                                   {"intermediate_size", m.intermediate_size},
                                                   {"tokenizer_vocab", m.tokenizer_vocab},
                                                   {"vocab_multiple", m.vocab_multiple}};
  for (const auto& [key, value] : sizes) {
    check_positive(value, s.where(key));
    check_at_most(value, int64_t{1} << 18, s.where(key),
                  "the built-in model is for demos; load a real one with model.path");
  }
  s.finish();
  return m;
}

DataSection read_data(ConfigSection s) {
  DataSection d;
  d.task = s.get("task", d.task);
  check_one_of(d.task, {"arithmetic", "countdown", "jsonl"}, s.where("task"));
  // The demo: 2-digit addition taught by a sloppy teacher that drops the units carry
  // 60% of the time; the verifier-driven RL phase must beat the demonstrations.
  const nlohmann::json demo_options = {{"digits", 2}, {"ops", {"+"}}, {"teacher_carry_slip", 0.6}};
  d.task_options = s.json("task_options", d.task == "arithmetic" ? demo_options : d.task_options);
  d.path = s.get("path", d.path);
  d.eval_path = s.get("eval_path", d.eval_path);
  d.prompt_field = s.get("prompt_field", d.prompt_field);
  d.answer_field = s.get("answer_field", d.answer_field);
  d.id_field = s.get("id_field", d.id_field);
  d.system_prompt = s.get("system_prompt", d.system_prompt);
  d.verifier = s.get("verifier", d.verifier);
  d.verifier_options = s.json("verifier_options", d.verifier_options);
  d.verifier_field = s.get("verifier_field", d.verifier_field);
  d.chat_template = s.get("chat_template", d.chat_template);
  d.enable_thinking = s.get("enable_thinking", d.enable_thinking);
  for (const auto& [key, value] :
       {std::pair<const char*, const std::string*>{"eval_path", &d.eval_path},
        {"id_field", &d.id_field},
        {"system_prompt", &d.system_prompt},
        {"verifier_field", &d.verifier_field}}) {
    check_input(d.task == "jsonl" || value->empty(), "applies to data.task jsonl only",
                s.where(key));
  }

  d.train_size = s.get("train_size", d.train_size);
  d.eval_size = s.get("eval_size", d.eval_size);
  d.seed = s.get("seed", d.seed);
  check_input(d.task != "jsonl" || !d.path.empty(), "a jsonl task needs data.path",
              s.where("path"));
  check_positive(d.train_size, s.where("train_size"));
  check_positive(d.eval_size, s.where("eval_size"));
  // Examples are held in memory (built-in tasks generate them up front).
  check_at_most(d.train_size, 10'000'000, s.where("train_size"),
                "examples are held in memory; 10M is more than any RL run here draws");
  check_at_most(d.eval_size, 1'000'000, s.where("eval_size"),
                "every evaluation generates one greedy answer per example");
  s.finish();
  return d;
}

AlgorithmSection read_algorithm(ConfigSection s) {
  AlgorithmSection a;
  a.name = s.get("name", a.name);
  check_one_of(a.name,
               {"grpo", "dr_grpo", "dapo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "ppo"},
               s.where("name"));
  if (a.name == "dapo") {  // DAPO's published defaults, overridable below
    a.clip_ratio_high = 0.28;
    a.dynamic_sampling = true;
    a.loss_agg = "token-mean";
  }
  a.clip_ratio_low = s.get("clip_ratio_low", a.clip_ratio_low);
  a.clip_ratio_high = s.get("clip_ratio_high", a.clip_ratio_high);
  a.clip_ratio_c = s.get("clip_ratio_c", a.clip_ratio_c);
  a.loss_agg = s.get("loss_agg", a.loss_agg);
  check_one_of(a.loss_agg, {"token-mean", "seq-mean-token-mean", "seq-mean-token-sum"},
               s.where("loss_agg"));
  a.kl_coef = s.get("kl_coef", a.kl_coef);
  a.kl_estimator = s.get("kl_estimator", a.kl_estimator);
  check_one_of(a.kl_estimator, {"k1", "kl", "k2", "mse", "k3", "low_var_kl", "abs"},
               s.where("kl_estimator"));
  a.entropy_coef = s.get("entropy_coef", a.entropy_coef);
  a.dynamic_sampling = s.get("dynamic_sampling", a.dynamic_sampling);
  a.overlong_buffer = s.get("overlong_buffer", a.overlong_buffer);
  a.overlong_penalty = s.get("overlong_penalty", a.overlong_penalty);
  a.gamma = s.get("gamma", a.gamma);
  a.lambda = s.get("lambda", a.lambda);
  a.value_clip = s.get("value_clip", a.value_clip);
  a.kl_in_reward = s.get("kl_in_reward", a.kl_in_reward);
  a.kl_ctrl = s.get("kl_ctrl", a.kl_ctrl);
  check_one_of(a.kl_ctrl, {"fixed", "adaptive"}, s.where("kl_ctrl"));
  a.kl_reward_coef = s.get("kl_reward_coef", a.kl_reward_coef);
  a.kl_target = s.get("kl_target", a.kl_target);
  a.kl_horizon = s.get("kl_horizon", a.kl_horizon);
  a.off_policy = s.get("off_policy", a.off_policy);
  check_one_of(a.off_policy, {"auto", "none", "decoupled", "tis"}, s.where("off_policy"));
  a.off_policy_cap = s.get("off_policy_cap", a.off_policy_cap);
  check_input(a.off_policy != "tis" || a.off_policy_cap > 0,
              "truncated importance sampling needs a cap > 0", s.where("off_policy_cap"));
  check_input(a.gamma > 0 && a.gamma <= 1, "must be in (0, 1]", s.where("gamma"));
  check_input(a.lambda >= 0 && a.lambda <= 1, "must be in [0, 1]", s.where("lambda"));
  check_input(a.kl_reward_coef >= 0, "must be >= 0", s.where("kl_reward_coef"));
  check_input(a.kl_target > 0, "must be > 0", s.where("kl_target"));
  check_input(a.kl_horizon > 0, "must be > 0", s.where("kl_horizon"));
  check_input(a.clip_ratio_low > 0 && a.clip_ratio_high > 0, "clip ratios must be > 0",
              s.where("clip_ratio_low"));
  check_input(a.clip_ratio_c == 0.0 || a.clip_ratio_c > 1.0, "dual-clip constant must be > 1",
              s.where("clip_ratio_c"));
  check_non_negative(a.kl_coef, s.where("kl_coef"));
  check_non_negative(a.entropy_coef, s.where("entropy_coef"));
  check_non_negative(static_cast<double>(a.overlong_buffer), s.where("overlong_buffer"));
  check_non_negative(a.overlong_penalty, s.where("overlong_penalty"));
  check_non_negative(a.value_clip, s.where("value_clip"));
  check_non_negative(a.off_policy_cap, s.where("off_policy_cap"));
  s.finish();
  return a;
}

RolloutSection read_rollout(ConfigSection s) {
  RolloutSection r;
  r.n = s.get("n", r.n);
  r.prompts_per_iteration = s.get("prompts_per_iteration", r.prompts_per_iteration);
  r.max_tokens = s.get("max_tokens", r.max_tokens);
  r.temperature = s.get("temperature", r.temperature);
  r.top_p = s.get("top_p", r.top_p);
  r.top_k = s.get("top_k", r.top_k);
  r.kv_cache_mb = s.get("kv_cache_mb", r.kv_cache_mb);
  r.max_num_seqs = s.get("max_num_seqs", r.max_num_seqs);
  r.max_num_batched_tokens = s.get("max_num_batched_tokens", r.max_num_batched_tokens);
  r.long_tail_fraction = s.get("long_tail_fraction", r.long_tail_fraction);
  r.device = parse_device_spec(s.get("device", r.device.text()), s.where("device"));
  check_input(r.long_tail_fraction >= 0 && r.long_tail_fraction <= 1, "must be in [0, 1]",
              s.where("long_tail_fraction"));
  check_positive(r.n, s.where("n"));
  check_positive(r.prompts_per_iteration, s.where("prompts_per_iteration"));
  check_positive(r.max_tokens, s.where("max_tokens"));
  check_input(r.temperature > 0, "RL rollouts must sample: temperature must be > 0",
              s.where("temperature"));
  check_input(r.top_p > 0 && r.top_p <= 1, "must be in (0, 1]", s.where("top_p"));
  check_input(r.top_k >= 0, "must be >= 0 (0: no top-k)", s.where("top_k"));
  check_positive(r.kv_cache_mb, s.where("kv_cache_mb"));
  check_positive(r.max_num_seqs, s.where("max_num_seqs"));
  check_positive(r.max_num_batched_tokens, s.where("max_num_batched_tokens"));
  s.finish();
  return r;
}

TrainSection read_train(ConfigSection s) {
  TrainSection t;
  t.iterations = s.get("iterations", t.iterations);
  t.lr = s.get("lr", t.lr);
  t.schedule = s.get("schedule", t.schedule);
  check_one_of(t.schedule, {"constant", "cosine"}, s.where("schedule"));
  t.warmup_steps = s.get("warmup_steps", t.warmup_steps);
  t.min_lr_ratio = s.get("min_lr_ratio", t.min_lr_ratio);
  t.weight_decay = s.get("weight_decay", t.weight_decay);
  t.grad_clip = s.get("grad_clip", t.grad_clip);
  t.mini_batch_size = s.get("mini_batch_size", t.mini_batch_size);
  t.epochs = s.get("epochs", t.epochs);
  t.micro_batch_tokens = s.get("micro_batch_tokens", t.micro_batch_tokens);
  t.compute_dtype = s.get("compute_dtype", t.compute_dtype);
  check_one_of(t.compute_dtype, {"fp32", "bf16"}, s.where("compute_dtype"));
  t.recompute = s.get("recompute", t.recompute);
  t.seed = s.get("seed", t.seed);
  t.sft_steps = s.get("sft_steps", t.sft_steps);
  t.sft_batch_size = s.get("sft_batch_size", t.sft_batch_size);
  t.sft_lr = s.get("sft_lr", t.sft_lr);
  t.critic_lr = s.get("critic_lr", t.critic_lr);
  t.device = parse_device_spec(s.get("device", t.device.text()), s.where("device"));
  check_input(t.critic_lr > 0, "must be > 0", s.where("critic_lr"));
  check_input(t.iterations >= 0, "must be >= 0", s.where("iterations"));
  check_input(t.lr > 0, "must be > 0", s.where("lr"));
  check_positive(t.epochs, s.where("epochs"));
  check_non_negative(static_cast<double>(t.warmup_steps), s.where("warmup_steps"));
  check_input(t.min_lr_ratio >= 0 && t.min_lr_ratio <= 1, "must be in [0, 1]",
              s.where("min_lr_ratio"));
  check_non_negative(t.weight_decay, s.where("weight_decay"));
  check_non_negative(t.grad_clip, s.where("grad_clip"));
  check_input(t.mini_batch_size >= 0, "must be >= 0 (0: the whole batch)",
              s.where("mini_batch_size"));
  check_positive(t.micro_batch_tokens, s.where("micro_batch_tokens"));
  check_input(t.sft_steps >= 0, "must be >= 0 (0: no SFT warm-up)", s.where("sft_steps"));
  check_positive(t.sft_batch_size, s.where("sft_batch_size"));
  check_input(t.sft_lr > 0, "must be > 0", s.where("sft_lr"));
  s.finish();
  return t;
}

PipelineSection read_pipeline(ConfigSection s) {
  PipelineSection p;
  p.mode = read_enum(s, "mode", p.mode, kPipelineModes);
  p.threads = s.get("threads", p.threads);
  p.max_staleness = s.get("max_staleness", p.max_staleness);
  p.sync_every = s.get("sync_every", p.sync_every);
  p.stream_updates = s.get("stream_updates", p.stream_updates);
  p.instances = s.get("instances", p.instances);
  p.dispatch = s.get("dispatch", p.dispatch);
  p.dispatch_chunk = s.get("dispatch_chunk", p.dispatch_chunk);
  check_input(p.dispatch_chunk >= 0, "must be >= 0 (0: whole groups)", s.where("dispatch_chunk"));
  check_one_of(p.dispatch, {"round_robin", "least_requests", "queue_aware"}, s.where("dispatch"));
  p.interrupt = s.get("interrupt", p.interrupt);
  p.rollout_threads = s.get("rollout_threads", p.rollout_threads);
  p.rollout_cores = read_cores(s, "rollout_cores");
  p.trainer_cores = read_cores(s, "trainer_cores");
  p.instance_timeout_s = s.get("instance_timeout_s", p.instance_timeout_s);
  p.on_instance_failure =
      read_enum(s, "on_instance_failure", p.on_instance_failure, kFailurePolicies);
  check_input(std::isfinite(p.instance_timeout_s) && p.instance_timeout_s >= 1.0,
              "must be a number of seconds >= 1", s.where("instance_timeout_s"));
  check_input(p.threads >= 0, "must be >= 0", s.where("threads"));
  check_input(p.max_staleness >= 0, "must be >= 0", s.where("max_staleness"));
  // More threads than cores only oversubscribe (1000 OpenMP threads spin for minutes).
  const std::string oversubscribed = "this machine has " + std::to_string(cores_here()) +
                                     " cores; more threads than 4x that " +
                                     "only oversubscribe them";
  check_at_most(p.threads, 4 * cores_here(), s.where("threads"), oversubscribed);
  check_at_most(p.rollout_threads, 4 * cores_here(), s.where("rollout_threads"), oversubscribed);
  // The dock holds (eta + 3) batches of rows; published asynchronous RL uses eta <= 8.
  check_at_most(p.max_staleness, 64, s.where("max_staleness"),
                "rows up to 64 versions stale are far outside any off-policy correction's range");
  check_at_most(p.instances, 1024, s.where("instances"),
                "each instance is a thread with its own model copy and KV cache");
  check_positive(p.sync_every, s.where("sync_every"));
  check_positive(p.instances, s.where("instances"));
  check_positive(p.rollout_threads, s.where("rollout_threads"));
  // Sync mode is the engine at eta = 0 whatever max_staleness says.
  const int64_t eta = p.mode == PipelineMode::kAsync ? p.max_staleness : 0;
  check_input(p.sync_every <= eta + 1,
              "must be <= max_staleness + 1 (1 in sync mode): rows from weights older than "
              "that could not be trained within the staleness bound",
              s.where("sync_every"));
  s.finish();
  return p;
}

LoggingSection read_logging(ConfigSection s) {
  LoggingSection l;
  l.eval_every = s.get("eval_every", l.eval_every);
  l.console = s.get("console", l.console);
  l.trace = s.get("trace", l.trace);
  l.tensorboard = s.get("tensorboard", l.tensorboard);
  check_input(l.eval_every >= 0, "must be >= 0 (0: before RL and at the end only)",
              s.where("eval_every"));
  s.finish();
  return l;
}

CheckpointSection read_checkpoint(ConfigSection s) {
  CheckpointSection c;
  c.every = s.get("every", c.every);
  c.keep_last = s.get("keep_last", c.keep_last);
  check_input(c.every >= 0, "must be >= 0", s.where("every"));
  check_input(c.keep_last >= 0, "must be >= 0", s.where("keep_last"));
  s.finish();
  return c;
}

Placement read_placement(ConfigSection s) {
  Placement p;
  p.mode = read_enum(s, "mode", p.mode, kPlacementModes);
  p.swap = s.get("swap", p.swap);
  check_input(!p.swap || p.mode == PlacementMode::kColocated,
              "swap needs mode colocated (nothing shares memory otherwise)", s.where("swap"));
  ConfigSection train = s.section("train");
  p.train_dp = train.get("dp", p.train_dp);
  p.train_tp = train.get("tp", p.train_tp);
  train.finish();
  ConfigSection rollout = s.section("rollout");
  p.rollout_instances = rollout.get("instances", p.rollout_instances);
  p.rollout_tp = rollout.get("tp", p.rollout_tp);
  rollout.finish();
  s.finish();
  // The grid's own consistency; the job's WORLD_SIZE is checked where ranks exist.
  const std::string section = s.where("");  // "source: placement."
  p.validate(p.world_size(), section.substr(0, section.size() - 1));
  return p;
}

}  // namespace

const char* name_of(PipelineMode mode) {
  return spelling(kPipelineModes, mode);
}
const char* name_of(InstanceFailurePolicy policy) {
  return spelling(kFailurePolicies, policy);
}

int64_t dispatch_chunk(const TrainConfig& config) {
  return config.pipeline.dispatch_chunk > 0 ? config.pipeline.dispatch_chunk : config.rollout.n;
}

TrainConfig parse_train_config(Config& config) {
  ConfigSection root = config.root();
  TrainConfig result;
  result.model = read_model(root.section("model"));
  result.data = read_data(root.section("data"));
  result.algorithm = read_algorithm(root.section("algorithm"));
  result.rollout = read_rollout(root.section("rollout"));
  result.train = read_train(root.section("train"));
  result.pipeline = read_pipeline(root.section("pipeline"));
  result.logging = read_logging(root.section("logging"));
  result.checkpoint = read_checkpoint(root.section("checkpoint"));
  result.placement = read_placement(root.section("placement"));
  root.finish();
  const bool async = result.pipeline.mode == PipelineMode::kAsync;
  if (result.algorithm.off_policy == "auto") {
    result.algorithm.off_policy = async ? "decoupled" : "none";
  }
  check_input(
      result.pipeline.dispatch_chunk == 0 || result.rollout.n % result.pipeline.dispatch_chunk == 0,
      "must divide rollout.n (" + std::to_string(result.rollout.n) + ")",
      config.source() + ": pipeline.dispatch_chunk", "0 dispatches whole groups");
  check_input(!(async && result.placement.swap && result.pipeline.max_staleness > 0),
              "the async pipeline trains while the rollout runs, so the optimizer state cannot "
              "leave memory for the rollout (only with pipeline.max_staleness 0 does the "
              "trainer wait for each batch)",
              config.source() + ": placement.swap",
              "set placement.swap=false, pipeline.max_staleness=0 or pipeline.mode=sync");
  return result;
}

nlohmann::json TrainConfig::as_json() const {
  return {
      {"model",
       {{"path", model.path},
        {"hidden_size", model.hidden_size},
        {"num_layers", model.num_layers},
        {"num_heads", model.num_heads},
        {"num_kv_heads", model.num_kv_heads},
        {"head_dim", model.head_dim},
        {"intermediate_size", model.intermediate_size},
        {"tokenizer_vocab", model.tokenizer_vocab},
        {"vocab_multiple", model.vocab_multiple}}},
      {"data",
       {{"task", data.task},
        {"task_options", data.task_options},
        {"path", data.path},
        {"eval_path", data.eval_path},
        {"prompt_field", data.prompt_field},
        {"answer_field", data.answer_field},
        {"id_field", data.id_field},
        {"system_prompt", data.system_prompt},
        {"verifier", data.verifier},
        {"verifier_options", data.verifier_options},
        {"verifier_field", data.verifier_field},
        {"chat_template", data.chat_template},
        {"enable_thinking", data.enable_thinking},
        {"train_size", data.train_size},
        {"eval_size", data.eval_size},
        {"seed", data.seed}}},
      {"algorithm",
       {{"name", algorithm.name},
        {"clip_ratio_low", algorithm.clip_ratio_low},
        {"clip_ratio_high", algorithm.clip_ratio_high},
        {"clip_ratio_c", algorithm.clip_ratio_c},
        {"loss_agg", algorithm.loss_agg},
        {"kl_coef", algorithm.kl_coef},
        {"kl_estimator", algorithm.kl_estimator},
        {"entropy_coef", algorithm.entropy_coef},
        {"dynamic_sampling", algorithm.dynamic_sampling},
        {"overlong_buffer", algorithm.overlong_buffer},
        {"overlong_penalty", algorithm.overlong_penalty},
        {"gamma", algorithm.gamma},
        {"lambda", algorithm.lambda},
        {"value_clip", algorithm.value_clip},
        {"kl_in_reward", algorithm.kl_in_reward},
        {"kl_ctrl", algorithm.kl_ctrl},
        {"kl_reward_coef", algorithm.kl_reward_coef},
        {"kl_target", algorithm.kl_target},
        {"kl_horizon", algorithm.kl_horizon},
        {"off_policy", algorithm.off_policy},
        {"off_policy_cap", algorithm.off_policy_cap}}},
      {"rollout",
       {{"n", rollout.n},
        {"prompts_per_iteration", rollout.prompts_per_iteration},
        {"max_tokens", rollout.max_tokens},
        {"temperature", rollout.temperature},
        {"top_p", rollout.top_p},
        {"top_k", rollout.top_k},
        {"kv_cache_mb", rollout.kv_cache_mb},
        {"max_num_seqs", rollout.max_num_seqs},
        {"max_num_batched_tokens", rollout.max_num_batched_tokens},
        {"long_tail_fraction", rollout.long_tail_fraction},
        {"device", rollout.device.text()}}},
      {"train",
       {{"iterations", train.iterations},
        {"lr", train.lr},
        {"schedule", train.schedule},
        {"warmup_steps", train.warmup_steps},
        {"min_lr_ratio", train.min_lr_ratio},
        {"weight_decay", train.weight_decay},
        {"grad_clip", train.grad_clip},
        {"mini_batch_size", train.mini_batch_size},
        {"epochs", train.epochs},
        {"micro_batch_tokens", train.micro_batch_tokens},
        {"compute_dtype", train.compute_dtype},
        {"recompute", train.recompute},
        {"seed", train.seed},
        {"sft_steps", train.sft_steps},
        {"sft_batch_size", train.sft_batch_size},
        {"sft_lr", train.sft_lr},
        {"critic_lr", train.critic_lr},
        {"device", train.device.text()}}},
      {"pipeline",
       {{"mode", name_of(pipeline.mode)},
        {"threads", pipeline.threads},
        {"max_staleness", pipeline.max_staleness},
        {"sync_every", pipeline.sync_every},
        {"stream_updates", pipeline.stream_updates},
        {"instances", pipeline.instances},
        {"dispatch", pipeline.dispatch},
        {"dispatch_chunk", pipeline.dispatch_chunk},
        {"interrupt", pipeline.interrupt},
        {"rollout_threads", pipeline.rollout_threads},
        {"rollout_cores", pipeline.rollout_cores},
        {"trainer_cores", pipeline.trainer_cores},
        {"instance_timeout_s", pipeline.instance_timeout_s},
        {"on_instance_failure", name_of(pipeline.on_instance_failure)}}},
      {"logging",
       {{"eval_every", logging.eval_every},
        {"console", logging.console},
        {"trace", logging.trace},
        {"tensorboard", logging.tensorboard}}},
      {"checkpoint", {{"every", checkpoint.every}, {"keep_last", checkpoint.keep_last}}},
      {"placement",
       {{"mode", name_of(placement.mode)},
        {"swap", placement.swap},
        {"train", {{"dp", placement.train_dp}, {"tp", placement.train_tp}}},
        {"rollout", {{"instances", placement.rollout_instances}, {"tp", placement.rollout_tp}}}}}};
}

}  // namespace aspen
