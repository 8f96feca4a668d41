// Rollout benchmark, in the shape of llama.cpp's batched-bench: a sweep of prompt
// length x generation length x parallel sequences, reporting prefill and decode
// tokens/s, plus a long-tail workload comparing continuous batching against
// static batching (a batch admits new prompts only when all of it is done).
//
// Without a model directory it builds a random Qwen3-architecture model of about
// 10M parameters (make_bench_model), so it needs no download.
//
// With lora_rank > 0 (issue #38: a rollout instance applies LoRA's adapters unmerged,
// y = x W^T + s (x A^T) B^T, or merges them into W each version) the grid runs twice:
// "grid" on the model with rank-R adapters on all seven projections, applied unmerged
// (B drawn non-zero, as after training), and "grid_merged" on the same model with the
// adapters merged into its weights - the base model's speed. "lora" reports the decode
// tokens/s ratio per grid point (unmerged / merged) and what merging costs a merged
// instance per publish: merge_s, the best of 3 of W = W_base + s B A over every
// target (restoring from a kept base copy, the drift-free way; base_copy_bytes is that
// copy), and the adapters' bytes the instance receives either way.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/model/qwen_model.h"
#include "bench/imports.h"

namespace aspen::bench {

struct RolloutBenchOptions {
  std::string model_dir;  // empty: random ~10M-parameter Qwen3
  std::string kind = "qwen3";  // without model_dir: qwen3, qwen3_moe or qwen3_0.6b (make_bench_model)
  std::vector<int64_t> prompt_lens = {32, 128};
  std::vector<int64_t> gen_lens = {32, 128};
  std::vector<int64_t> parallel = {1, 4, 16};
  int64_t long_tail_requests = 48;
  int64_t long_tail_parallel = 8;
  int threads = 0;  // torch intra-op and BLAS threads; 0: leave as they are
  int64_t kv_cache_mb = 0;  // 0: each workload's KV cache sized to hold it whole
  double kv_cache_fraction = 0.0;  // > 0: this share of the memory free after loading
  std::string device = "cpu";  // cpu | cuda | cuda:N (parallel/device.h)
  std::string dtype = "fp32";  // the weights and compute: fp32 | bf16
  bool sampler = true;  // also time the sampler alone on Qwen's vocabulary
  int64_t lora_rank = 0;  // > 0: unmerged vs merged adapters (see above)
  double lora_alpha = 32.0;
};

// A random Qwen3-architecture model of about 10M parameters (vocab 8192).
// kind: "qwen3", or "qwen3_moe": the same shape with every MLP a top-2 of 8 experts
// of width 384 (moe_variant: the dense model's active MLP per token), or "qwen3_0.6b":
// Qwen3-0.6B's shape (28 layers, hidden 1024, 16/8 heads of 128, MLP 3072, vocab
// 151936, tied), random.
QwenForCausalLM make_bench_model(const std::string& kind = "qwen3", uint64_t seed = 0);

// {"model":{...},"grid":[{prompt_len,gen_len,parallel,prefill_tps,decode_tps,preemptions}],
//  "long_tail":{continuous_tps,static_tps,ratio,...} (unless long_tail_requests is 0),
//  "sampler":run_sampler_bench(151936, 16, 3) (unless sampler is false),
//  with lora_rank > 0 also "grid_merged" and "lora":{rank,alpha,targets,adapter_bytes,
//  base_copy_bytes,merge_s,decode_ratio:[unmerged/merged per grid point]}}
nlohmann::json run_rollout_bench(const RolloutBenchOptions& options);

// The sampler alone on [rows, vocab] random logits, flat and peaked, for each filtering
// mode: {"vocab","rows","repeats","modes":{"flat"|"peaked":{mode:{"us_per_row"}}}}.
nlohmann::json run_sampler_bench(int64_t vocab, int64_t rows, int repeats);

}  // namespace aspen::bench
