#include "aspen/config/train_config.h"

#include <cstdio>
#include <type_traits>

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>

#include "aspen/config/imports.h"
#include "aspen/config/trajectory_checks.h"
#include "aspen/config/train_config_fields.h"

namespace aspen::config {
namespace {

void check_one_of(const std::string& value, const std::set<std::string>& allowed,
                  const std::string& where) {
  if (allowed.count(value)) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw Error("unsupported value \"" + value + "\"", where, "use one of: " + list);
}

// An enum field read by its spellings (aspen::Error naming the field and listing the
// names for anything else).
template <typename E>
E read_enum(ConfigSection& s, const std::string& key, E fallback, const EnumNames<E>& names) {
  const std::string spelled = s.get(key, std::string(spelling(names, fallback)));
  std::set<std::string> allowed;
  for (const auto& [name, value] : names) {
    if (name == spelled) return value;
    allowed.insert(name);
  }
  check_one_of(spelled, allowed, s.where(key));
  return fallback;  // not reached: check_one_of threw
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

// A list of strings, e.g. [q_proj, v_proj].
std::vector<std::string> read_string_list(ConfigSection& s, const std::string& key,
                                          const std::vector<std::string>& fallback) {
  const nlohmann::json value = s.json(key, nlohmann::json(fallback));
  check_input(value.is_array(), "must be a list of names", s.where(key));
  std::vector<std::string> names;
  for (const auto& name : value) {
    check_input(name.is_string(), "must be a list of names, got " + name.dump(), s.where(key));
    names.push_back(name.get<std::string>());
  }
  return names;
}

// A count that may also be spelled `auto` (held as kDispatchChunkAuto); the field's
// own checks bound the number.
int64_t read_auto_count(ConfigSection& s, const std::string& key, int64_t fallback) {
  const nlohmann::json value =
      s.json(key, fallback == kDispatchChunkAuto ? nlohmann::json("auto") : nlohmann::json(fallback));
  if (value.is_string() && value.get<std::string>() == "auto") return kDispatchChunkAuto;
  check_input(value.is_number_integer(), "must be `auto` or an integer, got " + value.dump(),
              s.where(key));
  return value.get<int64_t>();
}

// ---- the three visitors of train_config_fields.h ----

// YAML -> section: each key read over the member's current value (its default).
class FieldReader {
 public:
  explicit FieldReader(ConfigSection& section) : s_(section) {}
  template <typename T>
  void field(const char* key, T& value, const char*) {
    value = s_.get(key, value);
  }
  template <typename E>
  void enum_field(const char* key, E& value, const EnumNames<E>& names, const char*) {
    value = read_enum(s_, key, value, names);
  }
  void json_field(const char* key, nlohmann::json& value, const char*) {
    value = s_.json(key, value);
  }
  void device_field(const char* key, DeviceSpec& value, const char*) {
    value = parse_device_spec(s_.get(key, value.text()), s_.where(key));
  }
  void cores_field(const char* key, std::vector<int>& value, const char*) {
    value = read_cores(s_, key);
  }
  void names_field(const char* key, std::vector<std::string>& value, const char*) {
    value = read_string_list(s_, key, value);
  }
  void auto_count_field(const char* key, int64_t& value, const char*) {
    value = read_auto_count(s_, key, value);
  }
  template <typename Visit>
  void nested(const char* key, Visit visit) {
    ConfigSection sub = s_.section(key);
    FieldReader reader(sub);
    visit(reader);
    sub.finish();
  }

 private:
  ConfigSection& s_;
};

// Section -> JSON, every key as a config file spells it.
class FieldWriter {
 public:
  explicit FieldWriter(nlohmann::json& out) : out_(out) {}
  template <typename T>
  void field(const char* key, const T& value, const char*) {
    out_[key] = value;
  }
  template <typename E>
  void enum_field(const char* key, E value, const EnumNames<E>& names, const char*) {
    out_[key] = spelling(names, value);
  }
  void json_field(const char* key, const nlohmann::json& value, const char*) { out_[key] = value; }
  void device_field(const char* key, const DeviceSpec& value, const char*) {
    out_[key] = value.text();
  }
  void cores_field(const char* key, const std::vector<int>& value, const char*) {
    out_[key] = value;
  }
  void names_field(const char* key, const std::vector<std::string>& value, const char*) {
    out_[key] = value;
  }
  void auto_count_field(const char* key, int64_t value, const char*) {
    out_[key] = value == kDispatchChunkAuto ? nlohmann::json("auto") : nlohmann::json(value);
  }
  template <typename Visit>
  void nested(const char* key, Visit visit) {
    nlohmann::json sub = nlohmann::json::object();
    FieldWriter writer(sub);
    visit(writer);
    out_[key] = std::move(sub);
  }

 private:
  nlohmann::json& out_;
};

// Section -> docs/config.md rows: | `key` | default | meaning |.
class FieldDocumenter {
 public:
  explicit FieldDocumenter(std::string& out, std::string prefix = "")
      : out_(out), prefix_(std::move(prefix)) {}
  void field(const char* key, const std::string& value, const char* meaning) {
    row(key, value.empty() ? "`\"\"`" : "`" + value + "`", meaning);
  }
  void field(const char* key, bool value, const char* meaning) {
    row(key, value ? "`true`" : "`false`", meaning);
  }
  void field(const char* key, double value, const char* meaning) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.15g", value);
    row(key, text, meaning);
  }
  template <typename T>
  void field(const char* key, const T& value, const char* meaning) {
    static_assert(std::is_integral_v<T>);
    row(key, std::to_string(value), meaning);
  }
  template <typename E>
  void enum_field(const char* key, E value, const EnumNames<E>& names, const char* meaning) {
    row(key, std::string("`") + spelling(names, value) + "`", meaning);
  }
  void json_field(const char* key, const nlohmann::json& value, const char* meaning) {
    row(key, "`" + value.dump() + "`", meaning);
  }
  void device_field(const char* key, const DeviceSpec& value, const char* meaning) {
    row(key, "`" + value.text() + "`", meaning);
  }
  void cores_field(const char* key, const std::vector<int>& value, const char* meaning) {
    row(key, "`" + nlohmann::json(value).dump() + "`", meaning);
  }
  void names_field(const char* key, const std::vector<std::string>& value, const char* meaning) {
    row(key, "`" + nlohmann::json(value).dump() + "`", meaning);
  }
  void auto_count_field(const char* key, int64_t value, const char* meaning) {
    row(key, value == kDispatchChunkAuto ? "`auto`" : std::to_string(value), meaning);
  }
  template <typename Visit>
  void nested(const char* key, Visit visit) {
    FieldDocumenter documenter(out_, prefix_ + key + ".");
    visit(documenter);
  }

 private:
  void row(const char* key, const std::string& value, const char* meaning) {
    out_ += "| `" + prefix_ + key + "` | " + value + " | " + meaning + " |\n";
  }
  std::string& out_;
  std::string prefix_;
};

// Reads `section`'s keys over its current values.
template <typename Section>
Section read_fields(ConfigSection& s, Section section) {
  FieldReader reader(s);
  visit_fields(section, reader);
  return section;
}

template <typename Section>
nlohmann::json write_fields(Section section) {
  nlohmann::json out = nlohmann::json::object();
  FieldWriter writer(out);
  visit_fields(section, writer);
  return out;
}

template <typename Section>
std::string documented_fields(Section section) {
  std::string rows;
  FieldDocumenter documenter(rows);
  visit_fields(section, documenter);
  return rows;
}

// The demo: 2-digit addition taught by a sloppy teacher that drops the units carry
// 60% of the time; the verifier-driven RL phase must beat the demonstrations.
DataSection data_defaults(TaskKind task) {
  DataSection d;
  d.task = task;
  if (task == TaskKind::kArithmetic) {
    d.task_options = {{"digits", 2}, {"ops", {"+"}}, {"teacher_carry_slip", 0.6}};
  }
  return d;
}

// DAPO's published defaults, which the keys given in the config override.
AlgorithmSection algorithm_defaults(AlgorithmName name) {
  AlgorithmSection a;
  a.name = name;
  if (name == AlgorithmName::kDapo) {
    a.clip_ratio_high = 0.28;
    a.dynamic_sampling = true;
    a.loss_agg = AggMode::kTokenMean;
  }
  return a;
}

ModelSection read_model(ConfigSection s) {
  ModelSection m = read_fields(s, ModelSection{});
  // The built-in model is made from nothing for demos and tests: every size positive,
  // and none past what a real checkpoint has (Qwen3-235B: hidden 4096, 94 layers).
  const std::pair<const char*, int64_t> sizes[] = {{"hidden_size", m.hidden_size},
                                                   {"num_layers", m.num_layers},
                                                   {"num_heads", m.num_heads},
                                                   {"num_kv_heads", m.num_kv_heads},
                                                   {"head_dim", m.head_dim},
                                                   {"intermediate_size", m.intermediate_size},
                                                   {"num_experts", m.num_experts},
                                                   {"num_experts_per_tok", m.num_experts_per_tok},
                                                   {"moe_intermediate_size", m.moe_intermediate_size},
                                                   {"tokenizer_vocab", m.tokenizer_vocab},
                                                   {"vocab_multiple", m.vocab_multiple}};
  for (const auto& [key, value] : sizes) {
    check_positive(value, s.where(key));
    check_at_most(value, int64_t{1} << 18, s.where(key),
                  "the built-in model is for demos; load a real one with model.path");
  }
  check_input(m.num_experts_per_tok <= m.num_experts,
              "must be at most model.num_experts (" + std::to_string(m.num_experts) + ")",
              s.where("num_experts_per_tok"));
  if (m.kind == BuiltinModelKind::kDeepseekV3) {
    // 4 expert groups of at least 2, 2 groups per token; a rope width head_dim / 2 that
    // is itself even.
    check_input(m.num_experts % 4 == 0 && m.num_experts >= 8,
                "must be a multiple of 4, at least 8, for deepseek_v3 (4 expert groups)",
                s.where("num_experts"));
    check_input(m.num_experts_per_tok <= m.num_experts / 2,
                "must be at most half of model.num_experts for deepseek_v3 (2 of 4 groups)",
                s.where("num_experts_per_tok"));
    check_input(m.head_dim % 4 == 0, "must be a multiple of 4 for deepseek_v3 (rope part head_dim / 2)",
                s.where("head_dim"));
  }
  s.finish();
  return m;
}

DataSection read_data(ConfigSection s) {
  // data.task first: task_options' default depends on it.
  DataSection d = read_fields(s, data_defaults(read_enum(s, "task", TaskKind::kArithmetic, kTaskKinds)));
  for (const auto& [key, value] :
       {std::pair<const char*, const std::string*>{"eval_path", &d.eval_path},
        {"id_field", &d.id_field},
        {"system_prompt", &d.system_prompt},
        {"verifier_field", &d.verifier_field}}) {
    check_input(d.task == TaskKind::kJsonl || value->empty(), "applies to data.task jsonl only",
                s.where(key));
  }
  check_input(d.task != TaskKind::kJsonl || !d.path.empty(), "a jsonl task needs data.path",
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
  // algorithm.name first: it presets other keys' defaults (dapo).
  AlgorithmSection a = read_fields(
      s, algorithm_defaults(read_enum(s, "name", AlgorithmName::kGrpo, kAlgorithmNames)));
  check_input(a.off_policy != OffPolicy::kTis || a.off_policy_cap > 0,
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
  check_non_negative(a.router_aux_loss_coef, s.where("router_aux_loss_coef"));
  check_non_negative(static_cast<double>(a.overlong_buffer), s.where("overlong_buffer"));
  check_non_negative(a.overlong_penalty, s.where("overlong_penalty"));
  check_non_negative(a.value_clip, s.where("value_clip"));
  check_non_negative(a.off_policy_cap, s.where("off_policy_cap"));
  const RolloutCorrectionSection& rc = a.rollout_correction;
  const std::string rc_where = s.where("rollout_correction");
  check_input(rc.rollout_is_threshold > 0, "must be > 0", rc_where + ".rollout_is_threshold");
  check_non_negative(rc.rollout_rs_threshold, rc_where + ".rollout_rs_threshold");
  check_non_negative(rc.rollout_rs_threshold_lower, rc_where + ".rollout_rs_threshold_lower");
  const double rs_upper =
      rc.rollout_rs_threshold > 0 ? rc.rollout_rs_threshold : rc.rollout_is_threshold;
  check_input(rc.rollout_rs_threshold_lower <= rs_upper,
              "must not exceed the upper bound (" + std::to_string(rs_upper) + ")",
              rc_where + ".rollout_rs_threshold_lower");
  check_input(!rc.bypass_mode || (rc.rollout_is == RolloutIsLevel::kNone &&
                                  rc.rollout_rs == RolloutRsLevel::kNone),
              "in bypass mode the proximal policy is the rollout's, so every ratio is 1",
              rc_where + ".bypass_mode", "set rollout_is and rollout_rs to none, or bypass_mode false");
  check_input(!rc.corrects() || a.off_policy == OffPolicy::kAuto || a.off_policy == OffPolicy::kNone,
              "algorithm.off_policy and algorithm.rollout_correction both set a correction",
              s.where("off_policy"),
              "drop off_policy (rollout_correction replaces it: tis C is rollout_is: token with "
              "rollout_is_threshold: C)");
  s.finish();
  return a;
}

RolloutSection read_rollout(ConfigSection s) {
  RolloutSection r = read_fields(s, RolloutSection{});
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
  check_input(r.kv_cache_fraction == 0.0 ||
                  (r.kv_cache_fraction > 0.0 && r.kv_cache_fraction <= 0.95),
              "must be 0 (use kv_cache_mb) or in (0, 0.95]", s.where("kv_cache_fraction"));
  check_positive(r.max_num_seqs, s.where("max_num_seqs"));
  check_positive(r.max_num_batched_tokens, s.where("max_num_batched_tokens"));
  const EnvironmentSection& e = r.environment;
  const std::string env = "environment.";
  check_positive(e.max_turns, s.where(env + "max_turns"));
  // Only with an environment: single-turn runs (the simulator's defaults: 16384-token
  // responses) never read it.
  check_input(!r.multi_turn() || e.max_trajectory_tokens >= r.max_tokens,
              "must be at least rollout.max_tokens (" + std::to_string(r.max_tokens) +
                  "): one whole turn",
              s.where(env + "max_trajectory_tokens"));
  check_input(e.tool_timeout_s > 0, "must be > 0", s.where(env + "tool_timeout_s"));
  check_positive(e.max_observation_bytes, s.where(env + "max_observation_bytes"));
  check_input(e.timeout_s > 0, "must be > 0", s.where(env + "timeout_s"));
  check_positive(e.threads, s.where(env + "threads"));
  for (const std::string& tool : e.tools) {
    check_one_of(tool, {"calculator", "python"}, s.where(env + "tools"));
  }
  check_input(e.kind != EnvironmentKind::kTools || !e.tools.empty(),
              "a tools environment needs at least one tool", s.where(env + "tools"));
  check_input(e.kind != EnvironmentKind::kCommand || !e.command.empty(),
              "a command environment needs its program", s.where(env + "command"));
  check_input(e.kind != EnvironmentKind::kHttp || !e.url.empty(),
              "an http environment needs its url", s.where(env + "url"));
  check_input(e.chat_template.empty() || e.chat_template == "qwen2.5" || e.chat_template == "qwen3",
              "must be qwen2.5, qwen3 or empty (the model's own), got " + e.chat_template,
              s.where(env + "chat_template"));
  check_positive(e.synthetic_turns, s.where(env + "synthetic_turns"));
  check_input(e.kind != EnvironmentKind::kSynthetic || e.synthetic_turns <= e.max_turns,
              "must be at most rollout.environment.max_turns (" + std::to_string(e.max_turns) +
                  "), which would end the trajectory first",
              s.where(env + "synthetic_turns"));
  check_input(std::isfinite(e.tool_latency_ms) && e.tool_latency_ms >= 0,
              "must be a number of milliseconds >= 0", s.where(env + "tool_latency_ms"));
  check_input(std::isfinite(e.tool_latency_sigma) && e.tool_latency_sigma >= 0,
              "must be >= 0 (0: every call waits the median)", s.where(env + "tool_latency_sigma"));
  check_positive(e.observation_tokens, s.where(env + "observation_tokens"));
  s.finish();
  return r;
}

TrainSection read_train(ConfigSection s) {
  TrainSection t = read_fields(s, TrainSection{});
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
  t.lora.validate(s.where("lora"));  // names train.lora.<field>
  s.finish();
  return t;
}

PipelineSection read_pipeline(ConfigSection s) {
  PipelineSection p = read_fields(s, PipelineSection{});
  check_input(p.dispatch_chunk >= 0 || p.dispatch_chunk == kDispatchChunkAuto,
              "must be `auto`, 0 (whole groups) or a divisor of rollout.n",
              s.where("dispatch_chunk"));
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
  check_positive(p.partial_rollout_min_tokens, s.where("partial_rollout_min_tokens"));
  check_input(p.over_sample >= 0.0 && p.over_sample <= 1.0,
              "must be in [0, 1] (a fraction of rollout.prompts_per_iteration; 0: off)",
              s.where("over_sample"));
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
  LoggingSection l = read_fields(s, LoggingSection{});
  check_input(l.eval_every >= 0, "must be >= 0 (0: before RL and at the end only)",
              s.where("eval_every"));
  s.finish();
  return l;
}

CheckpointSection read_checkpoint(ConfigSection s) {
  CheckpointSection c = read_fields(s, CheckpointSection{});
  check_input(c.every >= 0, "must be >= 0", s.where("every"));
  check_input(c.keep_last >= 0, "must be >= 0", s.where("keep_last"));
  s.finish();
  return c;
}

SimulateSection read_simulate(ConfigSection s) {
  SimulateSection c = read_fields(s, SimulateSection{});
  for (const auto& [key, value] :
       {std::pair<const char*, double>{"peak_tflops", c.peak_tflops}, {"memory_gb", c.memory_gb},
        {"memory_bandwidth_gbs", c.memory_bandwidth_gbs}, {"link_gbs", c.link_gbs},
        {"network_gbs", c.network_gbs}, {"train_mfu", c.train_mfu},
        {"prefill_mfu", c.prefill_mfu}, {"decode_efficiency", c.decode_efficiency},
        {"reward_ms", c.reward_ms}}) {
    check_input(std::isfinite(value) && value >= 0, "must be a finite number >= 0", s.where(key));
  }
  for (const auto& [key, value] : {std::pair<const char*, double>{"train_mfu", c.train_mfu},
                                   {"prefill_mfu", c.prefill_mfu},
                                   {"decode_efficiency", c.decode_efficiency}}) {
    check_input(value <= 1, "is a fraction of the peak: must be <= 1", s.where(key));
  }
  check_input(std::isfinite(c.step_overhead_ms), "must be finite", s.where("step_overhead_ms"));
  check_input(c.delta_fraction > 0 && c.delta_fraction <= 1, "must be in (0, 1]",
              s.where("delta_fraction"));
  check_input(c.memory_utilization > 0 && c.memory_utilization <= 1, "must be in (0, 1]",
              s.where("memory_utilization"));
  check_input(c.devices >= 0 && c.devices <= 1 << 20, "must be in [0, 2^20]", s.where("devices"));
  check_input(c.devices_per_node >= 0 && c.devices_per_node <= 1024, "must be in [0, 1024]",
              s.where("devices_per_node"));
  check_input(std::isfinite(c.length_median) && c.length_median >= 1, "must be >= 1 token",
              s.where("length_median"));
  check_input(std::isfinite(c.length_sigma) && c.length_sigma >= 0 && c.length_sigma <= 10,
              "must be in [0, 10]", s.where("length_sigma"));
  check_input(c.prompt_tokens >= 1 && c.prompt_tokens <= 1 << 24, "must be in [1, 2^24]",
              s.where("prompt_tokens"));
  check_input(c.micro_batches >= 0 && c.micro_batches <= 1 << 20,
              "must be in [0, 2^20] (0: from train.micro_batch_tokens)", s.where("micro_batches"));
  s.finish();
  return c;
}

Placement read_placement(ConfigSection s) {
  Placement p = read_fields(s, Placement{});
  check_input(!p.swap || p.mode == PlacementMode::kColocated,
              "swap needs mode colocated (nothing shares memory otherwise)", s.where("swap"));
  s.finish();
  // The grid's own consistency; the job's WORLD_SIZE is checked where ranks exist.
  const std::string section = s.where("");  // "source: placement."
  p.validate(p.world_size(), section.substr(0, section.size() - 1));
  return p;
}

}  // namespace

const char* name_of(TaskKind value) { return spelling(kTaskKinds, value); }
const char* name_of(BuiltinModelKind value) { return spelling(kBuiltinModelKinds, value); }
const char* name_of(AlgorithmName value) { return spelling(kAlgorithmNames, value); }
const char* name_of(AggMode value) { return spelling(kAggModes, value); }
const char* name_of(KlEstimator value) { return spelling(kKlEstimators, value); }
const char* name_of(KlControl value) { return spelling(kKlControls, value); }
const char* name_of(OffPolicy value) { return spelling(kOffPolicies, value); }
const char* name_of(LrScheduleKind value) { return spelling(kLrSchedules, value); }
const char* name_of(ComputeDtype value) { return spelling(kComputeDtypes, value); }
const char* name_of(DispatchPolicyKind value) { return spelling(kDispatchPolicies, value); }
const char* name_of(PipelineMode value) { return spelling(kPipelineModes, value); }
const char* name_of(InstanceFailurePolicy value) { return spelling(kFailurePolicies, value); }
const char* name_of(WeightSync value) { return spelling(kWeightSyncs, value); }
const char* name_of(EnvironmentKind value) { return spelling(kEnvironmentKinds, value); }
const char* name_of(EnvironmentErrorPolicy value) {
  return spelling(kEnvironmentErrorPolicies, value);
}
const char* name_of(AgentPrefixBreak value) { return spelling(kAgentPrefixBreaks, value); }
const char* name_of(SimulateBaseline value) { return spelling(kSimulateBaselines, value); }

int64_t dispatch_chunk(const TrainConfig& config, int64_t instances) {
  const int64_t n = config.rollout.n;
  if (config.pipeline.dispatch_chunk > 0) return config.pipeline.dispatch_chunk;
  if (config.pipeline.dispatch_chunk == 0 || config.pipeline.over_sample > 0) return n;
  if (config.pipeline.mode != PipelineMode::kAsync || instances <= 1) return n;
  for (int64_t chunk = (n + 1) / 2; chunk < n; ++chunk) {
    if (n % chunk == 0) return chunk;
  }
  return n;
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
  result.simulate = read_simulate(root.section("simulate"));
  root.finish();
  const bool async = result.pipeline.mode == PipelineMode::kAsync;
  if (result.algorithm.off_policy == OffPolicy::kAuto) {
    // algorithm.rollout_correction, when it corrects, is the correction.
    result.algorithm.off_policy = async && !result.algorithm.rollout_correction.corrects()
                                      ? OffPolicy::kDecoupled
                                      : OffPolicy::kNone;
  }
  check_input(!result.algorithm.rollout_correction.routing_replay ||
                  result.model.kind == BuiltinModelKind::kQwen3Moe || result.model.path.size() > 0,
              "routing replay needs a MoE model", config.source() + ": algorithm.rollout_correction.routing_replay");
  check_input(
      result.pipeline.dispatch_chunk <= 0 || result.rollout.n % result.pipeline.dispatch_chunk == 0,
      "must divide rollout.n (" + std::to_string(result.rollout.n) + ")",
      config.source() + ": pipeline.dispatch_chunk", "0 dispatches whole groups");
  // An abort drops a straggler's whole group: a group split over instances would leave
  // its other chunks' rows to finish for nothing.
  check_input(result.pipeline.over_sample == 0 || result.pipeline.dispatch_chunk <= 0 ||
                  result.pipeline.dispatch_chunk == result.rollout.n,
              "pipeline.over_sample aborts whole groups; a dispatch chunk of " +
                  std::to_string(result.pipeline.dispatch_chunk) + " samples splits them",
              config.source() + ": pipeline.dispatch_chunk",
              "use auto or 0 (whole groups) with pipeline.over_sample");
  // A TP instance's followers replay the leader's plan: it carries no cut units nor resumed outputs.
  check_input(!(result.pipeline.partial_rollout && result.placement.rollout_tp > 1),
              "partial rollouts need instances of one rank (placement.rollout.tp " +
                  std::to_string(result.placement.rollout_tp) + ")",
              config.source() + ": pipeline.partial_rollout",
              "set pipeline.partial_rollout=false or placement.rollout.tp=1");
  check_trajectories(result, config.source());
  check_input(!(async && result.placement.swap && result.pipeline.max_staleness > 0),
              "the async pipeline trains while the rollout runs, so the optimizer state cannot "
              "leave memory for the rollout (only with pipeline.max_staleness 0 does the "
              "trainer wait for each batch)",
              config.source() + ": placement.swap",
              "set placement.swap=false, pipeline.max_staleness=0 or pipeline.mode=sync");
  return result;
}

nlohmann::json TrainConfig::as_json() const {
  return {{"model", write_fields(model)},         {"data", write_fields(data)},
          {"algorithm", write_fields(algorithm)}, {"rollout", write_fields(rollout)},
          {"train", write_fields(train)},         {"pipeline", write_fields(pipeline)},
          {"logging", write_fields(logging)},     {"checkpoint", write_fields(checkpoint)},
          {"placement", write_fields(placement)}, {"simulate", write_fields(simulate)}};
}

const std::vector<std::string>& config_sections() {
  static const std::vector<std::string> sections = {"model",    "data",    "algorithm",
                                                    "rollout",  "train",   "pipeline",
                                                    "logging",  "checkpoint", "placement",
                                                    "simulate"};
  return sections;
}

std::string config_reference_markdown(const std::string& section) {
  // Defaults as a config without the key gets them (the demo task's options included).
  std::string rows;
  if (section == "model") rows = documented_fields(ModelSection{});
  if (section == "data") rows = documented_fields(data_defaults(TaskKind::kArithmetic));
  if (section == "algorithm") rows = documented_fields(AlgorithmSection{});
  if (section == "rollout") rows = documented_fields(RolloutSection{});
  if (section == "train") rows = documented_fields(TrainSection{});
  if (section == "pipeline") rows = documented_fields(PipelineSection{});
  if (section == "logging") rows = documented_fields(LoggingSection{});
  if (section == "checkpoint") rows = documented_fields(CheckpointSection{});
  if (section == "placement") rows = documented_fields(Placement{});
  if (section == "simulate") rows = documented_fields(SimulateSection{});
  return rows.empty() ? rows : "| key | default | meaning |\n|---|---|---|\n" + rows;
}

}  // namespace aspen::config
