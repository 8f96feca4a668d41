#include "aspen/pipeline/train_config.h"

#include <set>

namespace aspen {
namespace {

void check_one_of(const std::string& value, const std::set<std::string>& allowed,
                  const std::string& where) {
  if (allowed.count(value)) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw Error("unsupported value \"" + value + "\"", where, "use one of: " + list);
}

void check_positive(int64_t value, const std::string& where) {
  check_input(value > 0, "must be > 0, got " + std::to_string(value), where);
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
  s.finish();
  return m;
}

DataSection read_data(ConfigSection s) {
  DataSection d;
  d.task = s.get("task", d.task);
  check_one_of(d.task, {"arithmetic", "countdown", "jsonl"}, s.where("task"));
  const nlohmann::json demo_options = {{"digits", 2}, {"ops", {"+"}}};
  d.task_options = s.json("task_options", d.task == "arithmetic" ? demo_options : d.task_options);
  d.path = s.get("path", d.path);
  d.prompt_field = s.get("prompt_field", d.prompt_field);
  d.answer_field = s.get("answer_field", d.answer_field);
  d.verifier = s.get("verifier", d.verifier);
  d.verifier_options = s.json("verifier_options", d.verifier_options);
  d.chat_template = s.get("chat_template", d.chat_template);
  d.train_size = s.get("train_size", d.train_size);
  d.eval_size = s.get("eval_size", d.eval_size);
  d.seed = s.get("seed", d.seed);
  check_input(d.task != "jsonl" || !d.path.empty(), "a jsonl task needs data.path",
              s.where("path"));
  check_positive(d.train_size, s.where("train_size"));
  check_positive(d.eval_size, s.where("eval_size"));
  s.finish();
  return d;
}

AlgorithmSection read_algorithm(ConfigSection s) {
  AlgorithmSection a;
  a.name = s.get("name", a.name);
  check_one_of(a.name, {"grpo", "dr_grpo", "dapo", "rloo", "reinforce_pp", "reinforce_pp_baseline"},
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
  check_input(a.clip_ratio_low > 0 && a.clip_ratio_high > 0, "clip ratios must be > 0",
              s.where("clip_ratio_low"));
  check_input(a.clip_ratio_c == 0.0 || a.clip_ratio_c > 1.0, "dual-clip constant must be > 1",
              s.where("clip_ratio_c"));
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
  check_positive(r.n, s.where("n"));
  check_positive(r.prompts_per_iteration, s.where("prompts_per_iteration"));
  check_positive(r.max_tokens, s.where("max_tokens"));
  check_input(r.temperature > 0, "RL rollouts must sample: temperature must be > 0",
              s.where("temperature"));
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
  check_input(t.iterations >= 0, "must be >= 0", s.where("iterations"));
  check_input(t.lr > 0, "must be > 0", s.where("lr"));
  check_positive(t.epochs, s.where("epochs"));
  s.finish();
  return t;
}

PipelineSection read_pipeline(ConfigSection s) {
  PipelineSection p;
  p.mode = s.get("mode", p.mode);
  check_one_of(p.mode, {"sync"}, s.where("mode"));
  p.threads = s.get("threads", p.threads);
  s.finish();
  return p;
}

LoggingSection read_logging(ConfigSection s) {
  LoggingSection l;
  l.eval_every = s.get("eval_every", l.eval_every);
  l.console = s.get("console", l.console);
  s.finish();
  return l;
}

}  // namespace

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
  root.finish();
  return result;
}

nlohmann::json TrainConfig::as_json() const {
  return {{"model",
           {{"path", model.path},
            {"hidden_size", model.hidden_size},
            {"num_layers", model.num_layers},
            {"num_heads", model.num_heads},
            {"num_kv_heads", model.num_kv_heads},
            {"head_dim", model.head_dim},
            {"intermediate_size", model.intermediate_size},
            {"tokenizer_vocab", model.tokenizer_vocab}}},
          {"data",
           {{"task", data.task},
            {"task_options", data.task_options},
            {"path", data.path},
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
            {"overlong_buffer", algorithm.overlong_buffer}}},
          {"rollout",
           {{"n", rollout.n},
            {"prompts_per_iteration", rollout.prompts_per_iteration},
            {"max_tokens", rollout.max_tokens},
            {"temperature", rollout.temperature},
            {"top_p", rollout.top_p},
            {"top_k", rollout.top_k}}},
          {"train",
           {{"iterations", train.iterations},
            {"lr", train.lr},
            {"schedule", train.schedule},
            {"mini_batch_size", train.mini_batch_size},
            {"epochs", train.epochs},
            {"compute_dtype", train.compute_dtype},
            {"seed", train.seed},
            {"sft_steps", train.sft_steps},
            {"sft_lr", train.sft_lr}}},
          {"pipeline", {{"mode", pipeline.mode}, {"threads", pipeline.threads}}},
          {"logging", {{"eval_every", logging.eval_every}}}};
}

}  // namespace aspen
