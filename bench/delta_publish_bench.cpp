#include "bench/delta_publish_bench.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "aspen/dock/weight_delta.h"
#include "aspen/model/weights_init.h"
#include "aspen/parallel/compute_threads.h"
#include "aspen/pipeline/weight_publisher.h"
#include "aspen/pipeline/weight_receiver.h"
#include "aspen/rollout/engine.h"
#include "aspen/train/optimizer.h"
#include "aspen/util/blas_threads.h"
#include "aspen/util/error.h"
#include "aspen/util/seconds_since.h"
#include "bench/imports.h"

namespace aspen::bench {
namespace {

using DeltaClock = std::chrono::steady_clock;

// One step of the trainer's AdamW on the next-token loss of random tokens.
void adamw_step(QwenForCausalLM& policy, Optimizer& optimizer, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> token(0, policy->config.vocab_size - 1);
  std::vector<int64_t> ids(16);
  for (int64_t& id : ids) id = token(rng);
  const torch::Tensor cu = torch::tensor(std::vector<int64_t>{0, 16}, torch::kInt64);
  (-policy->token_logprobs(torch::tensor(ids, torch::kInt64), cu).logprobs.mean()).backward();
  optimizer.step();
}

std::map<std::string, torch::Tensor> tensors_of(const WeightSet& set) {
  return {set.tensors.begin(), set.tensors.end()};
}

bool sets_equal(const WeightSet& a, const WeightSet& b) {
  if (a.version != b.version || a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    if (a.tensors[i].first != b.tensors[i].first ||
        !torch::equal(a.tensors[i].second, b.tensors[i].second)) {
      return false;
    }
  }
  return true;
}

// Elements whose bits differ (a sparse index would send each one's index and value).
int64_t changed_elements(const WeightSet& a, const WeightSet& b) {
  int64_t changed = 0;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const torch::Tensor& x = a.tensors[i].second;
    const torch::ScalarType bits = x.element_size() == 4 ? torch::kInt32 : torch::kInt16;
    changed += (x.contiguous().view(bits) != b.tensors[i].second.contiguous().view(bits))
                   .sum()
                   .item<int64_t>();
  }
  return changed;
}

int64_t elements(const WeightSet& set) {
  int64_t n = 0;
  for (const auto& entry : set.tensors) n += entry.second.numel();
  return n;
}

std::shared_ptr<const WeightSet> cast_set(const WeightSet& set, torch::ScalarType dtype) {
  auto out = std::make_shared<WeightSet>();
  out->version = set.version;
  for (const auto& [name, tensor] : set.tensors) out->tensors.emplace_back(name, tensor.to(dtype));
  return out;
}

// Sums of one dtype's stages over the measured steps.
struct DeltaTotals {
  int64_t steps = 0;
  int64_t set_bytes = 0, delta_bytes = 0, sparse_bytes = 0, changed = 0, elements = 0;
  double snapshot_s = 0, encode_s = 0, full_fetch_s = 0, full_load_s = 0;
  double delta_fetch_s = 0, apply_s = 0, delta_load_s = 0;
  bool exact = true;

  nlohmann::json result(bool loads) const {
    const double n = static_cast<double>(steps);
    nlohmann::json full = {{"bytes", set_bytes / steps}};
    nlohmann::json delta = {{"bytes", delta_bytes / steps},
                            {"encode_s", encode_s / n},
                            {"apply_s", apply_s / n}};
    if (loads) {
      full["snapshot_s"] = snapshot_s / n;
      delta["snapshot_s"] = snapshot_s / n;
      full["fetch_s"] = full_fetch_s / n;
      full["load_s"] = full_load_s / n;
      full["seconds"] = (snapshot_s + full_fetch_s + full_load_s) / n;
      delta["fetch_s"] = delta_fetch_s / n;
      delta["load_s"] = delta_load_s / n;
      delta["seconds"] = (snapshot_s + encode_s + delta_fetch_s + apply_s + delta_load_s) / n;
    }
    nlohmann::json out = {{"full", full},
                          {"delta", delta},
                          {"sparse_index_bytes", sparse_bytes / steps},
                          {"changed_fraction", static_cast<double>(changed) / static_cast<double>(elements)},
                          {"bytes_ratio", static_cast<double>(set_bytes) / static_cast<double>(delta_bytes)},
                          {"exact", exact}};
    if (loads) out["seconds_ratio"] = full["seconds"].get<double>() / delta["seconds"].get<double>();
    return out;
  }
};

// The fp32 publish of version `version` through the run's path, full and delta.
void measure_fp32(QwenForCausalLM& policy, RolloutEngine& engine,
                  PublishDocks& docks, WeightReceiver& receiver,
                  std::shared_ptr<const WeightSet>& previous, int64_t version, int zstd_level,
                  DeltaTotals& t) {
  auto start = DeltaClock::now();
  std::shared_ptr<const WeightSet> set = weight_set_of(policy, version);
  t.snapshot_s += seconds_since(start);
  start = DeltaClock::now();
  std::optional<WeightDelta> delta = encode_weight_delta(*previous, *set, zstd_level);
  t.encode_s += seconds_since(start);
  check_input(delta.has_value(), "consecutive sets differ in their tensors", "bench publish --delta");
  const int64_t changed = changed_elements(*previous, *set);
  t.changed += changed;
  t.elements += elements(*set);
  t.set_bytes += set->bytes();
  t.sparse_bytes += changed * (4 + 4);
  t.delta_bytes += std::min(delta->bytes(), set->bytes());
  if (delta->bytes() < set->bytes()) {
    docks.trainer->publish_weights(set, std::make_shared<const WeightDelta>(std::move(*delta)));
  } else {
    docks.trainer->publish_weights(set);
  }
  previous = set;

  start = DeltaClock::now();
  std::shared_ptr<const WeightSet> full = docks.instance_dock().latest_weights(docks.where, version - 1);
  t.full_fetch_s += seconds_since(start);
  check_input(full != nullptr && full->version == version, "no full set fetched", "bench publish --delta");
  start = DeltaClock::now();
  engine.load_weights(version, tensors_of(*full));
  t.full_load_s += seconds_since(start);
  full.reset();

  std::shared_ptr<const WeightSet> got = receiver.fetch(docks.instance_dock(), docks.where, version - 1);
  check_input(got != nullptr, "the receiver fetched nothing", "bench publish --delta");
  t.delta_fetch_s += receiver.last().fetch_s;
  t.apply_s += receiver.last().apply_s;
  // Checked before the load: the engine runs on the policy's own model (see the header).
  check_input(sets_equal(*got, *set), "the delta did not give version " + std::to_string(version) + " exactly",
              "bench publish --delta");
  start = DeltaClock::now();
  engine.load_weights(version, tensors_of(*got));
  t.delta_load_s += seconds_since(start);
  ++t.steps;
}

// The same weights cast to bf16: the codec alone.
void measure_bf16(const std::shared_ptr<const WeightSet>& fp32, std::shared_ptr<const WeightSet>& previous,
                  int zstd_level, DeltaTotals& t) {
  std::shared_ptr<const WeightSet> set = cast_set(*fp32, torch::kBFloat16);
  auto start = DeltaClock::now();
  WeightDelta delta = *encode_weight_delta(*previous, *set, zstd_level);
  t.encode_s += seconds_since(start);
  start = DeltaClock::now();
  std::shared_ptr<const WeightSet> applied = apply_weight_delta(delta, tensors_of(*previous));
  t.apply_s += seconds_since(start);
  t.exact = t.exact && sets_equal(*applied, *set);
  const int64_t changed = changed_elements(*previous, *set);
  t.changed += changed;
  t.elements += elements(*set);
  t.set_bytes += set->bytes();
  t.sparse_bytes += changed * (4 + 2);
  t.delta_bytes += std::min(delta.bytes(), set->bytes());
  ++t.steps;
  previous = set;
}

}  // namespace

nlohmann::json run_delta_publish_bench(const PublishBenchOptions& options) {
  options.validate();
  set_compute_threads(options.threads, "--threads");
  const ModelConfig config = publish_model_config(options);
  QwenForCausalLM policy = make_random_model(config, /*seed=*/0);
  const int64_t parameters = parameter_count(policy);
  PublishDocks docks(options.fetch == "remote");
  RolloutEngine engine(policy, publish_engine_config());
  WeightReceiver receiver(WeightSync::kDelta);
  std::mt19937 rng(0);
  int64_t version = 0;

  nlohmann::json runs = nlohmann::json::array();
  for (double lr : options.lrs) {
    OptimizerOptions adamw;
    adamw.lr = lr;
    Optimizer optimizer(policy->named_parameters(/*recurse=*/true).pairs(), adamw);
    for (int i = 0; i < options.warmup_steps; ++i) adamw_step(policy, optimizer, rng);
    const bool fp32 = options.delta_dtype == "fp32";
    std::shared_ptr<const WeightSet> previous;
    {
      torch::NoGradGuard no_grad;
      previous = weight_set_of(policy, ++version);
      if (fp32) {
        // The board restarts from a full set of the warmed-up policy, which the instance takes.
        docks.trainer->publish_weights(previous);
        std::shared_ptr<const WeightSet> got =
            receiver.fetch(docks.instance_dock(), docks.where, version - 1);
        check_input(got != nullptr, "the receiver fetched nothing", "bench publish --delta");
        engine.load_weights(version, tensors_of(*got));
      } else {
        previous = cast_set(*previous, torch::kBFloat16);
      }
    }
    DeltaTotals totals;
    for (int rep = 0; rep < options.reps; ++rep) {
      adamw_step(policy, optimizer, rng);
      torch::NoGradGuard no_grad;
      if (fp32) {
        measure_fp32(policy, engine, docks, receiver, previous, ++version, options.zstd_level, totals);
      } else {
        measure_bf16(weight_set_of(policy, ++version), previous, options.zstd_level, totals);
      }
    }
    check_input(totals.exact, "a delta did not give the published weights exactly",
                "bench publish --delta");
    runs.push_back({{"lr", lr}, {options.delta_dtype, totals.result(fp32)}});
  }
  nlohmann::json result;
  result["model"] = {{"source", "random qwen3"},
                     {"layers", options.num_layers},
                     {"hidden_size", options.hidden_size},
                     {"intermediate_size", options.intermediate_size},
                     {"vocab_size", options.vocab_size},
                     {"parameters", parameters},
                     {"optimizer", "AdamW (train/optimizer.h), clip 1.0, weight decay 0.01"},
                     {"warmup_steps", options.warmup_steps},
                     {"measured_steps", options.reps},
                     {"zstd_level", options.zstd_level},
                     {"dtype", options.delta_dtype},
                     {"fetch", options.fetch},
                     {"threads", at::get_num_threads()},
                     {"blas_threads", blas_threads()}};
  result["runs"] = runs;
  return result;
}

}  // namespace aspen::bench
