// `aspen bench publish`: what one weight publish costs, the full policy against LoRA's
// adapters only (issue #38), through the path an RL run takes:
//   snapshot  weight_set_of(policy)  (pipeline/weight_publisher.h: policy_weights clones
//             the full policy, or under LoRA its adapters alone)
//   publish   onto the trainer dock's weight board (its own warehouse)
//   fetch     an instance's TransferDock::latest_weights: "remote" = a rollout-only
//             rank's fetch over the warehouse's ZeroMQ service on loopback (the bytes
//             cross the wire); "local" = a colocated instance (the set itself, no copy)
//   load      RolloutEngine::load_weights (the whole policy via load_state; an
//             adapter-only set via load_lora_state, the base untouched)
// The model is a random Qwen3 of the given shape (default Qwen3-0.6B's: 28 layers,
// hidden 1024, 16/8 heads of 128, MLP 3072, vocab 151936, tied embeddings), fp32 as
// the run publishes. The full publish runs first on the model without adapters (a
// full fine-tuning run); then the same model gets rank-R adapters on all seven
// projections (B drawn non-zero, as after training) and publishes those.
// Memory: the instance's engine runs on the policy's own model object (one process;
// load_state copies every fetched tensor into its parameters exactly as a separate
// instance's would), so three copies of the full policy are alive at once (the model,
// the board's set, the fetched set: 7.2 GB at 0.6B); the measured peak RSS at 0.6B is
// 10.9 GB with --fetch remote (the wire's receive side adds its own buffers).
// Result JSON: {"model": {...}, "full": S, "adapter": S, "bytes_ratio", "seconds_ratio"}
// with S = {"tensors", "bytes", "snapshot_s", "fetch_s", "load_s", "seconds"}: the
// stages' mean over `reps` publishes after one warm-up; seconds = their sum.
// With --delta, run_delta_publish_bench (bench/delta_publish_bench.h) instead: full
// sets against deltas (pipeline.weight_sync) after real AdamW steps.
// Errors: aspen::Error naming the option for invalid options.
// Thread safety: call from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/dock/controller_protocol.h"
#include "aspen/dock/transfer_dock.h"
#include "aspen/io/hf_config.h"
#include "aspen/model/qwen_model.h"
#include "aspen/rollout/engine.h"
#include "bench/imports.h"

namespace aspen::bench {

struct PublishBenchOptions {
  int64_t hidden_size = 1024;
  int64_t intermediate_size = 3072;
  int64_t num_layers = 28;
  int64_t num_heads = 16;
  int64_t num_kv_heads = 8;
  int64_t head_dim = 128;
  int64_t vocab_size = 151936;
  int64_t lora_rank = 16;
  double lora_alpha = 32.0;
  std::string fetch = "remote";  // remote | local (see above)
  int reps = 3;
  int threads = 0;  // torch intra-op and BLAS threads; 0: leave as they are
  // --delta (bench/delta_publish_bench.h): learning rates, each with `reps` measured
  // AdamW steps after `warmup_steps`, and the delta's zstd level.
  bool delta = false;
  std::vector<double> lrs = {1e-6, 1e-5};
  int warmup_steps = 2;
  int zstd_level = 1;
  std::string delta_dtype = "fp32";  // fp32: the run's publish; bf16: the codec on a bf16 cast

  void validate() const;  // aspen::Error naming the option
};

nlohmann::json run_publish_bench(const PublishBenchOptions& options);

// The random Qwen3 of the options' shape (tied embeddings, as Qwen3-0.6B).
ModelConfig publish_model_config(const PublishBenchOptions& options);

// The bench policy's parameter count.
int64_t parameter_count(const QwenForCausalLM& policy);

// The engine a publish bench loads weights into: it never generates, so a KV cache of
// a few blocks and one sequence.
EngineConfig publish_engine_config();

// The trainer's dock (owning the warehouse the weights are published to) and an
// instance's view of it: a reader-only dock over ZeroMQ (remote) or the trainer's own
// dock (local, a colocated instance).
struct PublishDocks {
  std::unique_ptr<ControllerService> controller;
  std::unique_ptr<TransferDock> trainer;
  std::unique_ptr<TransferDock> reader;
  WarehouseId where = 0;

  explicit PublishDocks(bool remote);
  TransferDock& instance_dock() { return reader ? *reader : *trainer; }
};

}  // namespace aspen::bench
