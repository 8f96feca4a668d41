#include "bench/rollout_bench.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "aspen/io/model_dir.h"
#include "aspen/io/model_shapes.h"
#include "aspen/model/compute_dtype.h"
#include "aspen/model/lora.h"
#include "aspen/model/pretrained.h"
#include "aspen/model/weights_init.h"
#include "aspen/parallel/compute_threads.h"
#include "aspen/parallel/device.h"
#include "aspen/rollout/engine.h"
#include "aspen/rollout/kv_budget.h"
#include "aspen/rollout/sampler.h"
#include "aspen/util/blas_threads.h"
#include "aspen/util/seconds_since.h"
#include "bench/imports.h"

namespace aspen::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<GenerationRequest> fixed_requests(int64_t count, int64_t prompt_len, int64_t gen_len,
                                              int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<GenerationRequest> requests;
  for (int64_t r = 0; r < count; ++r) {
    GenerationRequest request;
    for (int64_t t = 0; t < prompt_len; ++t)
      request.prompt.push_back(static_cast<TokenId>(rng() % vocab));
    request.params.max_tokens = gen_len;
    request.params.ignore_eos = true;
    request.params.seed = rng();
    requests.push_back(std::move(request));
  }
  return requests;
}

// KV: `kv_cache_mb` when given; otherwise exactly enough blocks for `parallel`
// sequences of `longest` tokens, so no workload preempts (a fixed 256 MiB held only
// ~1,200 fp32 tokens of Qwen3-0.6B, and 8 sequences thrashed).
EngineConfig bench_engine_config(int64_t parallel, int64_t batched_tokens, int64_t longest,
                                 int64_t kv_cache_mb) {
  EngineConfig config;
  config.max_num_seqs = parallel;
  config.max_num_batched_tokens = batched_tokens;
  if (kv_cache_mb > 0) {
    config.kv_cache_bytes = kv_cache_mb << 20;
  } else {
    config.num_blocks = parallel * ((longest + config.block_size - 1) / config.block_size) + 1;
  }
  config.enable_prefix_caching = false;  // random prompts: measure compute, not cache hits
  return config;
}

// Seconds to generate `requests`; `preemptions` (if given) gets the engine's count.
double time_generate(QwenForCausalLM& model, const EngineConfig& config,
                     std::vector<GenerationRequest> requests, int64_t* preemptions = nullptr) {
  RolloutEngine engine(model, config);
  const auto start = Clock::now();
  engine.generate(std::move(requests));
  const double seconds = seconds_since(start);
  if (preemptions) *preemptions = engine.stats().preemptions;
  return seconds;
}

nlohmann::json grid_point(QwenForCausalLM& model, int64_t prompt_len, int64_t gen_len,
                          int64_t parallel, int64_t kv_cache_mb) {
  const int64_t vocab = model->config.vocab_size;
  // All prompts are prefilled in one step, as batched-bench does.
  const EngineConfig config =
      bench_engine_config(parallel, parallel * prompt_len, prompt_len + gen_len, kv_cache_mb);
  // Prefill time: generating one token is the prefill plus one sampling. Each time is
  // the better of two runs: a single short run can catch a one-off stall (a first use
  // of a GEMM shape), and a prefill measured slower than the whole run made the decode
  // rate absurd.
  const auto best_of_two = [&](int64_t tokens, int64_t* preemptions) {
    const double first = time_generate(model, config,
                                       fixed_requests(parallel, prompt_len, tokens, vocab, 1),
                                       preemptions);
    return std::min(first, time_generate(model, config,
                                         fixed_requests(parallel, prompt_len, tokens, vocab, 1)));
  };
  const double prefill_seconds = best_of_two(1, nullptr);
  int64_t preemptions = 0;
  const double total_seconds = best_of_two(gen_len, &preemptions);
  // Decode time is what the whole run took beyond its prefill; none measurable: null.
  const nlohmann::json decode_tps =
      total_seconds > prefill_seconds
          ? nlohmann::json(static_cast<double>(parallel * (gen_len - 1)) /
                           (total_seconds - prefill_seconds))
          : nlohmann::json(nullptr);
  return {{"prompt_len", prompt_len},
          {"gen_len", gen_len},
          {"parallel", parallel},
          {"prefill_tps", static_cast<double>(parallel * prompt_len) / prefill_seconds},
          {"decode_tps", decode_tps},
          {"seconds", total_seconds},
          {"preemptions", preemptions}};
}

// Long-tail lengths: most responses short, a few at the cap (as RL rollouts are).
std::vector<GenerationRequest> long_tail_requests(int64_t count, int64_t vocab) {
  std::mt19937_64 rng(7);
  auto requests = fixed_requests(count, 32, 1, vocab, 3);
  for (auto& request : requests) {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    request.params.max_tokens = u < 0.85 ? 8 + static_cast<int64_t>(rng() % 24) : 160;
  }
  return requests;
}

nlohmann::json long_tail(QwenForCausalLM& model, int64_t count, int64_t parallel,
                         int64_t kv_cache_mb) {
  const auto requests = long_tail_requests(count, model->config.vocab_size);
  int64_t tokens = 0;
  for (const auto& r : requests) tokens += r.params.max_tokens;
  int64_t longest = 0;
  for (const auto& r : requests) {
    longest = std::max<int64_t>(longest, r.prompt.size() + r.params.max_tokens);
  }
  const EngineConfig config = bench_engine_config(parallel, 1024, longest, kv_cache_mb);
  const double continuous = time_generate(model, config, requests);
  // Static batching: the next batch starts only when every sequence of this one is done.
  double static_seconds = 0.0;
  for (size_t begin = 0; begin < requests.size(); begin += parallel) {
    const size_t end = std::min(requests.size(), begin + static_cast<size_t>(parallel));
    static_seconds += time_generate(
        model, config,
        std::vector<GenerationRequest>(requests.begin() + begin, requests.begin() + end));
  }
  const double continuous_tps = tokens / continuous;
  const double static_tps = tokens / static_seconds;
  return {{"requests", count},          {"parallel", parallel},
          {"generated_tokens", tokens}, {"continuous_tps", continuous_tps},
          {"static_tps", static_tps},   {"ratio", continuous_tps / static_tps}};
}

// See rollout_bench.h: "grid" with the adapters unmerged, then "grid_merged" with them
// merged into the model's weights (which the model keeps: the adapters are switched off
// afterwards, so the model computes W_base + s B A in its plain projections).
template <typename RunGrid>
nlohmann::json unmerged_vs_merged(QwenForCausalLM& model, const RolloutBenchOptions& options,
                                  const RunGrid& run_grid, nlohmann::json& result) {
  LoraOptions lora;
  lora.rank = options.lora_rank;
  lora.alpha = options.lora_alpha;
  lora.validate("aspen bench rollout --lora-rank/--lora-alpha");
  torch::manual_seed(1);
  model->attach_lora(lora);
  auto params = model->named_parameters(/*recurse=*/true);
  // (target weight, A, B) of every adapter; B drawn non-zero, as after training.
  struct Target {
    torch::Tensor weight, a, b, base;
  };
  std::vector<Target> targets;
  int64_t adapter_bytes = 0, base_copy_bytes = 0;
  for (const auto& [name, a] : model->lora_state()) {
    const std::string suffix = ".lora_A.weight";
    if (name.size() < suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string module = name.substr(0, name.size() - suffix.size());
    Target target{params[module + ".weight"], a, params[module + ".lora_B.weight"], {}};
    target.b.normal_(0.0, 0.02);
    adapter_bytes += (a.numel() + target.b.numel()) * a.element_size();
    targets.push_back(std::move(target));
  }
  result["grid"] = run_grid();

  // A merged instance keeps the base of every target (re-deriving it by subtracting the
  // previous version's B A drifts in floating point), and per publish restores it and
  // adds the new s B A.
  for (Target& target : targets) {
    target.base = target.weight.clone();
    base_copy_bytes += target.base.numel() * target.base.element_size();
  }
  const double scaling = lora.scaling();
  double merge_s = 0.0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = Clock::now();
    for (Target& target : targets) {
      target.weight.copy_(target.base);
      target.weight.add_(torch::mm(target.b, target.a).to(target.weight.scalar_type()), scaling);
    }
    const double seconds = seconds_since(start);
    merge_s = rep == 0 ? seconds : std::min(merge_s, seconds);
  }
  targets.clear();  // frees the base copy before the merged grid
  model->set_lora_enabled(false);
  result["grid_merged"] = run_grid();

  nlohmann::json ratios = nlohmann::json::array();
  for (size_t i = 0; i < result["grid"].size(); ++i) {
    const nlohmann::json& unmerged = result["grid"][i].at("decode_tps");
    const nlohmann::json& merged = result["grid_merged"][i].at("decode_tps");
    ratios.push_back(unmerged.is_null() || merged.is_null()
                         ? nlohmann::json(nullptr)
                         : nlohmann::json(unmerged.get<double>() / merged.get<double>()));
  }
  return {{"rank", lora.rank},
          {"alpha", lora.alpha},
          {"targets", lora.targets},
          {"adapter_bytes", adapter_bytes},
          {"base_copy_bytes", base_copy_bytes},
          {"merge_s", merge_s},
          {"decode_ratio", ratios}};
}

}  // namespace

nlohmann::json run_sampler_bench(int64_t vocab, int64_t rows, int repeats) {
  // Logits with Qwen3's vocabulary size: "flat" (N(0, 1): a random model, top-p 0.9
  // keeps most of the vocabulary) and "peaked" (N(0, 1) x 4: a trained model, top-p 0.9
  // keeps a small head).
  torch::manual_seed(0);
  const torch::Tensor noise = torch::randn({rows, vocab});
  struct Mode {
    const char* name;
    double temperature, top_p;
    int64_t top_k;
  };
  const Mode modes[] = {{"temperature 1", 1.0, 1.0, 0},
                        {"top_k 50", 1.0, 1.0, 50},
                        {"top_p 0.9", 1.0, 0.9, 0},
                        {"top_p 0.95 top_k 1000", 1.0, 0.95, 1000},
                        {"greedy", 0.0, 1.0, 0}};
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [shape, scale] : {std::pair<const char*, double>{"flat", 1.0}, {"peaked", 4.0}}) {
    const torch::Tensor logits = noise * scale;
    for (const Mode& mode : modes) {
      SamplingParams params;
      params.temperature = mode.temperature;
      params.top_p = mode.top_p;
      params.top_k = mode.top_k;
      std::vector<SamplingRow> batch;
      for (int64_t r = 0; r < rows; ++r) batch.push_back({&params, static_cast<uint64_t>(r), 0, {}});
      sample_tokens(logits, batch);  // warm-up
      const auto start = Clock::now();
      for (int i = 0; i < repeats; ++i) sample_tokens(logits, batch);
      out[shape][mode.name] = {{"us_per_row", 1e6 * seconds_since(start) / (repeats * rows)}};
    }
  }
  return {{"vocab", vocab}, {"rows", rows}, {"repeats", repeats}, {"modes", out}};
}

QwenForCausalLM make_bench_model(const std::string& kind, uint64_t seed) {
  check_input(kind == "qwen3" || kind == "qwen3_moe" || kind == "qwen3_0.6b",
              "expected qwen3, qwen3_moe or qwen3_0.6b, got \"" + kind + "\"",
              "aspen bench rollout --kind");
  ModelConfig config;
  if (kind == "qwen3_0.6b") {
    // Qwen3-0.6B's shape, random: a real-sized model without a download.
    config = qwen3_0_6b_shape();
    config.max_position_embeddings = 4096;
    return make_random_model(config, seed);
  }
  config.family = ModelFamily::kQwen3;
  config.vocab_size = 8192;
  config.hidden_size = 256;
  config.intermediate_size = 768;
  config.num_hidden_layers = 8;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.head_dim = 64;
  config.max_position_embeddings = 4096;
  config.tie_word_embeddings = true;
  // MoE: top-2 of 8 experts of 384, the dense model's active MLP per token.
  return make_random_model(kind == "qwen3_moe" ? moe_variant(config, 8, 2) : config, seed);
}

nlohmann::json run_rollout_bench(const RolloutBenchOptions& options) {
  set_compute_threads(options.threads, "--threads");
  torch::NoGradGuard no_grad;
  const torch::Device device = device_from_option(options.device, "--device");
  const torch::ScalarType dtype = parse_compute_dtype(options.dtype, "--dtype");
  if (!options.model_dir.empty()) check_model_dir(options.model_dir, "--model");
  QwenForCausalLM model = options.model_dir.empty()
                              ? make_bench_model(options.kind)
                              : load_pretrained_model(options.model_dir, dtype, device);
  model->to(device, dtype);
  int64_t parameters = 0;
  for (const auto& p : model->parameters()) parameters += p.numel();
  // A share of what is free now (the model loaded), turned into the MiB every workload gets.
  int64_t kv_cache_mb = options.kv_cache_mb;
  if (options.kv_cache_fraction > 0.0) {
    kv_cache_mb = kv_cache_bytes({0, options.kv_cache_fraction}, device, "--kv-cache-fraction") >> 20;
  }
  nlohmann::json result;
  result["model"] = {{"source", options.model_dir.empty() ? "random " + options.kind : options.model_dir},
                     {"parameters", parameters},
                     {"threads", at::get_num_threads()},
                     {"blas_threads", blas_threads()},
                     {"kv_cache", kv_cache_mb > 0
                                      ? std::to_string(kv_cache_mb) + " MiB"
                                      : std::string("sized to each workload")},
                     {"device", device.str()},
                     {"dtype", options.dtype}};
  // Warm-up: first calls pay for allocator and thread-pool start-up.
  time_generate(model, bench_engine_config(2, 256, 20, kv_cache_mb),
                fixed_requests(2, 16, 4, model->config.vocab_size, 0));
  const auto run_grid = [&] {
    nlohmann::json grid = nlohmann::json::array();
    for (int64_t prompt_len : options.prompt_lens) {
      for (int64_t gen_len : options.gen_lens) {
        for (int64_t parallel : options.parallel) {
          grid.push_back(grid_point(model, prompt_len, gen_len, parallel, kv_cache_mb));
        }
      }
    }
    return grid;
  };
  if (options.lora_rank > 0) {
    result["lora"] = unmerged_vs_merged(model, options, run_grid, result);
  } else {
    result["grid"] = run_grid();
  }
  if (options.long_tail_requests > 0) {
    result["long_tail"] = long_tail(model, options.long_tail_requests,
                                    options.long_tail_parallel, kv_cache_mb);
  }
  if (options.sampler) result["sampler"] = run_sampler_bench(151936, 16, 3);
  return result;
}

}  // namespace aspen::bench
