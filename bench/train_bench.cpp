#include "bench/train_bench.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <random>

#include "aspen/io/model_dir.h"
#include "aspen/model/compute_dtype.h"
#include "aspen/model/moe_routing.h"
#include "aspen/model/pretrained.h"
#include "aspen/model/weights_init.h"
#include "aspen/parallel/compute_threads.h"
#include "aspen/parallel/device.h"
#include "aspen/train/actor.h"
#include "aspen/train/model_copy.h"
#include "aspen/train/recompute.h"
#include "aspen/util/error.h"
#include "aspen/util/memory_usage.h"
#include "aspen/util/seconds_since.h"
#include "bench/imports.h"
#include "bench/mfu_estimate.h"
#include "bench/op_profile.h"

namespace aspen::bench {
namespace {

using Clock = std::chrono::steady_clock;

ModelConfig bench_shape(const std::string& kind) {
  ModelConfig config;
  config.family = ModelFamily::kQwen3;
  config.vocab_size = 151936;
  config.hidden_size = 512;
  config.intermediate_size = 1536;
  config.num_hidden_layers = 8;
  config.num_attention_heads = 8;
  config.num_key_value_heads = 4;
  config.head_dim = 64;
  config.max_position_embeddings = 4096;
  config.tie_word_embeddings = true;
  check_input(kind == "qwen3" || kind == "qwen3_moe",
              "expected qwen3 or qwen3_moe, got \"" + kind + "\"", "aspen bench train --kind");
  // The same active MLP per token as the dense shape: top-2 of 8 experts of 768.
  return kind == "qwen3_moe" ? moe_variant(config, 8, 2) : config;
}

// Parameters of every matrix multiply a token goes through: the layers' linears and
// the head once. With `active_only`, a MoE layer's experts count k / E of their
// weights: the ones a token is routed to (the 6 * N * T rule for a sparse model).
int64_t matmul_parameters(QwenForCausalLM& model, bool active_only = false) {
  const MoeConfig& moe = model->config.moe;
  int64_t count = 0;
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    if (item.value().dim() == 2 && name.find("embed_tokens") == std::string::npos) {
      const bool expert = name.find(".mlp.experts.") != std::string::npos;
      count += expert && active_only
                   ? item.value().numel() * moe.num_experts_per_tok / moe.num_experts
                   : item.value().numel();
    }
  }
  return count + model->lm_head_weight().numel() *
                     (model->config.tie_word_embeddings ? 1 : 0);  // untied: counted above
}

// Waits for `device`'s queued kernels: a GPU timing read without it measures launches.
void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index() < 0 ? -1 : device.index());
}

// The GEMM FLOP/s of `dtype` on `device`: the best of 2048 x 2048 products (8192 on a
// GPU: 2048 leaves one idle) repeated for at least `min_seconds` (and 3 times). The
// best, because MFU divides by it: a peak read low in a slow moment of a shared
// machine would flatter the MFU (a best of 3 read 466 G against 648-683 G in one run).
double gemm_peak(torch::ScalarType dtype, double min_seconds, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  const int64_t n = device.is_cuda() ? 8192 : 2048;
  const torch::Tensor a = torch::randn({n, n}).to(device, dtype);
  const torch::Tensor b = torch::randn({n, n}).to(device, dtype);
  torch::mm(a, b);  // warm-up
  synchronize(device);
  double best = 1e30;
  const auto begin = Clock::now();
  for (int i = 0; i < 3 || seconds_since(begin) < min_seconds; ++i) {
    const auto start = Clock::now();
    torch::mm(a, b);
    synchronize(device);
    best = std::min(best, seconds_since(start));
  }
  return 2.0 * n * n * n / best;
}

// Timed updates bracketed by GEMM peak readings: peak, update, peak, update, ..., peak.
// Each update's MFU divides by the better of the two readings around it, so an update
// and its peak see the same machine: on this shared 2-core machine the bf16 peak moved
// from 0.56 to 1.93 TFLOP/s between runs minutes apart, and a peak read once per run
// paired a fast update with a slow peak or the other way round. Readings the update
// beats, or under `floor`, are re-read and then rejected (bench/mfu_estimate.h).
struct TimedUpdates {
  std::vector<double> seconds;  // per update
  MfuEstimate mfu;

  double mean_seconds() const {
    return std::accumulate(seconds.begin(), seconds.end(), 0.0) / static_cast<double>(seconds.size());
  }
};

constexpr double kPeakSeconds = 0.5;
constexpr int kPeakRereads = 2;

template <typename Update>
TimedUpdates time_updates(int steps, torch::ScalarType dtype, double update_flops, double floor,
                          const torch::Device& device, const Update& update) {
  TimedUpdates t{{}, MfuEstimate(update_flops, floor, kPeakRereads, [dtype, device] {
                   return gemm_peak(dtype, kPeakSeconds, device);
                 })};
  t.mfu.read_first_peak();
  for (int i = 0; i < steps; ++i) {
    const auto start = Clock::now();
    update();
    synchronize(device);
    t.seconds.push_back(seconds_since(start));
    t.mfu.add_update(t.seconds.back());
  }
  return t;
}

TrainBatch synthetic_batch(const TrainBenchOptions& options, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  TrainBatch batch;
  for (int64_t r = 0; r < options.rows; ++r) {
    std::vector<int64_t> prompt, response;
    for (int64_t t = 0; t < options.prompt_tokens; ++t) prompt.push_back(rng() % vocab);
    const int64_t low = std::max<int64_t>(1, options.response_tokens / 2);
    const int64_t length = low + static_cast<int64_t>(rng() % (options.response_tokens - low + 1));
    for (int64_t t = 0; t < length; ++t) response.push_back(rng() % vocab);
    batch.prompts.push_back(std::move(prompt));
    batch.responses.push_back(std::move(response));
  }
  std::vector<float> advantages;
  for (int64_t r = 0; r < options.rows; ++r) {
    const float sign = r % 2 == 0 ? 1.0f : -1.0f;
    for (size_t t = 0; t < batch.responses[r].size(); ++t) advantages.push_back(sign);
  }
  batch.token_columns[columns::kAdvantages] = torch::tensor(advantages);
  return batch;
}

double attention_flops(const TrainBatch& batch, const ModelConfig& config) {
  double sum_squares = 0.0;
  for (int64_t r = 0; r < batch.num_rows(); ++r) {
    const double len = static_cast<double>(batch.prompts[r].size() + batch.responses[r].size());
    sum_squares += len * len;
  }
  return 6.0 * config.num_hidden_layers * config.num_attention_heads * config.head_dim * sum_squares;
}

// MoE: how the batch routes, from one forward of the whole batch. Every expert with
// tokens runs one gate/up/down GEMM chain over them (model/qwen_moe_block.h) and the
// router one more GEMM; the dense model with the same active width runs 3 per layer.
nlohmann::json moe_routing_summary(QwenForCausalLM& model, const TrainBatch& batch) {
  std::vector<int64_t> ids, offsets = {0};
  for (int64_t r = 0; r < batch.num_rows(); ++r) {
    ids.insert(ids.end(), batch.prompts[r].begin(), batch.prompts[r].end());
    ids.insert(ids.end(), batch.responses[r].begin(), batch.responses[r].end());
    offsets.push_back(static_cast<int64_t>(ids.size()));
  }
  torch::NoGradGuard no_grad;
  MoeRoutingLog log;
  decoder_hidden(*model->model, torch::tensor(ids), torch::tensor(offsets), /*recompute=*/false,
                 &log);
  int64_t experts_hit = 0;
  double worst_imbalance = 0.0;
  for (const LayerRouting& layer : log.layers) {
    experts_hit += (layer.assignments > 0).sum().item<int64_t>();
    worst_imbalance = std::max(
        worst_imbalance, (layer.assignments.max() / layer.assignments.mean()).item<double>());
  }
  const int64_t layers = model->config.num_hidden_layers;
  const auto sparse = static_cast<int64_t>(log.layers.size());
  return {{"sparse_layers", sparse},
          {"experts_hit_per_sparse_layer",
           sparse > 0 ? static_cast<double>(experts_hit) / static_cast<double>(sparse) : 0.0},
          {"mlp_gemms_per_forward", 3 * (layers - sparse) + sparse + 3 * experts_hit},
          {"dense_mlp_gemms_per_forward", 3 * layers},
          {"router_max_over_mean_load", worst_imbalance},
          {"load_balancing_loss", load_balancing_loss(log).item<double>()}};
}

}  // namespace

nlohmann::json run_train_bench(const TrainBenchOptions& options) {
  check_input(options.rows >= 1 && options.prompt_tokens >= 1 && options.response_tokens >= 2,
              "--rows, --prompt-tokens must be >= 1 and --response-tokens >= 2",
              "aspen bench train");
  check_input(options.steps >= 1, "--steps must be >= 1", "aspen bench train");
  set_compute_threads(options.threads, "--threads");
  const torch::Device device = device_from_option(options.device, "--device");
  if (!options.model_dir.empty()) check_model_dir(options.model_dir, "--model");
  QwenForCausalLM master = options.model_dir.empty()
                               ? make_random_model(bench_shape(options.kind), 0)
                               : load_pretrained_model(options.model_dir);
  const ModelConfig& config = master->config;
  const TrainBatch base = synthetic_batch(options, config.vocab_size, 1);
  int64_t packed_tokens = 0;
  for (int64_t r = 0; r < base.num_rows(); ++r) {
    packed_tokens += base.prompts[r].size() + base.responses[r].size();
  }
  std::vector<int64_t> response_lengths;  // what tools/anchors/eager_grpo.py replays
  for (const auto& response : base.responses) {
    response_lengths.push_back(static_cast<int64_t>(response.size()));
  }
  int64_t parameters = 0;
  for (const auto& p : master->parameters()) parameters += p.numel();
  // The head runs on response positions only (train/policy_logprobs.h): the log-probs
  // of prompt tokens are never needed, so their logits are neither computed nor counted.
  const int64_t response_tokens = base.num_response_tokens();
  const int64_t head_parameters = master->lm_head_weight().numel();
  const int64_t layer_parameters = matmul_parameters(master, /*active_only=*/true) - head_parameters;
  const double head_flops = 6.0 * static_cast<double>(head_parameters) * response_tokens;
  const double update_flops = 6.0 * static_cast<double>(layer_parameters) * packed_tokens +
                              head_flops + attention_flops(base, config);

  nlohmann::json results = nlohmann::json::object();
  // The floor of a bf16 peak: the best fp32 reading of this run (bench/mfu_estimate.h),
  // from the fp32 updates when they ran first, else read once here.
  double fp32_peak = 0;
  for (const std::string& dtype_name : options.dtypes) {
    // "bf16_head": bf16 compute with the log-prob head's GEMMs in bf16 too.
    const bool bf16_head = dtype_name == "bf16_head";
    const torch::ScalarType dtype = parse_compute_dtype(bf16_head ? "bf16" : dtype_name, "--dtypes");
    ActorOptions actor_options;
    actor_options.trainer.compute_dtype = dtype;
    actor_options.head.gemm_in_input_dtype = bf16_head;
    actor_options.trainer.max_tokens_per_micro_batch = options.micro_batch_tokens;
    actor_options.trainer.optimizer.lr = 1e-6;
    ActorTrainer actor(copy_model(master, torch::kFloat, device, /*trainable=*/true),
                       actor_options);
    TrainBatch batch = base;
    batch.token_columns[columns::kOldLogprobs] = actor.compute_logprobs(batch).logprobs;
    ActorUpdateOptions update;
    actor.update(batch, update);  // warm-up: allocator, thread pools, the bf16 copy
    if (dtype != torch::kFloat && fp32_peak == 0) {
      fp32_peak = gemm_peak(torch::kFloat, kPeakSeconds, device);
    }
    reset_peak_rss();
    const TimedUpdates timed =
        time_updates(options.steps, dtype, update_flops, dtype == torch::kFloat ? 0.0 : fp32_peak,
                     device, [&] { actor.update(batch, update); });
    if (dtype == torch::kFloat) fp32_peak = std::max(fp32_peak, timed.mfu.best_peak());
    const double seconds = timed.mean_seconds();
    results[dtype_name] = {{"seconds_per_update", seconds},
                           {"update_seconds", timed.seconds},
                           {"tokens_per_second", packed_tokens / seconds},
                           {"flops_per_second", update_flops / seconds},
                           {"peak_rss_bytes", peak_rss_bytes()}};
    results[dtype_name].update(timed.mfu.to_json());
    if (!options.profile_dir.empty()) {
      std::filesystem::create_directories(options.profile_dir);
      const std::string path = options.profile_dir + "/train-" + dtype_name + ".trace.json";
      OpProfile profile;
      actor.update(batch, update);
      profile.save(path);
      results[dtype_name]["profile"] = path;
    }
  }
  nlohmann::json out = {
          {"model", options.model_dir.empty()
                        ? "random " + options.kind + " (hidden 512, 8 layers, vocab 151936)"
                        : options.model_dir},
          {"parameters", parameters},
          {"matmul_parameters", matmul_parameters(master)},
          {"active_matmul_parameters", matmul_parameters(master, /*active_only=*/true)},
          {"rows", options.rows},
          {"prompt_tokens", options.prompt_tokens},
          {"response_tokens",
           "uniform in [" + std::to_string(std::max<int64_t>(1, options.response_tokens / 2)) +
               ", " + std::to_string(options.response_tokens) + "]"},
          {"packed_tokens", packed_tokens},
          {"response_tokens_total", response_tokens},
          {"head_parameters", head_parameters},
          {"attention_flops_per_update", attention_flops(base, config)},
          {"response_lengths", response_lengths},
          {"threads", torch::get_num_threads()},
          {"device", device.str()},
          {"flops_per_update", update_flops},
          {"flops_formula",
           "6 * (active_matmul_parameters - head_parameters) * packed_tokens + 6 * "
           "head_parameters * response_tokens_total + 6 * layers * heads * head_dim * "
           "sum(row_length^2)"},
          {"dtypes", results}};
  if (config.is_moe()) out["moe"] = moe_routing_summary(master, base);
  return out;
}

}  // namespace aspen::bench
