// RolloutEngine: one inference instance — continuous batching over a paged KV
// cache, sampling with log-probs, shared group prefixes, versioned weights.
//
// Usage: add_request() any time between steps; step() runs one scheduler step
// (a forward over every scheduled token) and returns the samples that finished
// in it; generate() runs a batch to completion.
//
// Groups: a request with n > 1 samples computes its prompt once, then forks into
// n sequences that share the prompt's full KV blocks (the partial last block is
// copied). Each sample j draws from its own seeded stream, so results do not
// depend on what else shares the batch, up to floating point: a batch of another
// size may run the GEMMs in another order, and on a large, flat vocabulary a draw
// that lands within ~1e-6 of a CDF boundary can then pick the neighbouring token
// (greedy decoding is unaffected short of exact near-ties). vLLM gives the same
// guarantee outside its batch-invariant mode.
//
// Padded vocabularies: with a tokenizer, ids past its vocabulary (rows a checkpoint
// pads its embedding with, as Qwen's do) are never sampled.
//
// Weight versions: load_weights(version, tensors) between steps: the whole policy, or,
// for a model with LoRA adapters, the adapters alone (adapter-only sync: the base is
// held once and never re-sent; the adapters apply unmerged, model/lora.h). Every generated
// token records the version that produced it. The prefix cache is reset on every
// switch. With interrupt_on_weight_update, in-flight sequences are recomputed
// (prompt + output so far) with the new weights and continue; otherwise they keep
// their cached KV and continue (the PipelineRL/AReaL trade-off: the KV of the earlier
// tokens stays as the older weights computed it, docs/design.md).
//
// Partial rollouts: cut_request() takes a request's unfinished samples out of the
// engine with their output so far; a request whose resume_from carries such an output
// continues it, on this engine or any other: prompt + output are prefilled under the
// weights loaded then, and the sample draws on from its seed stream where it stopped
// (a draw depends on (seed, output position), sampler.h), so only the recomputed KV
// differs from an uncut run.
//
// Thread safety: none. One thread drives an engine (the pipeline gives each
// instance its own thread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "aspen/model/qwen_model.h"
#include "aspen/rollout/imports.h"
#include "aspen/rollout/kv_cache.h"
#include "aspen/rollout/model_runner.h"
#include "aspen/rollout/sampling_params.h"
#include "aspen/rollout/scheduler.h"
#include "aspen/tokenizer/tokenizer.h"

namespace aspen::rollout {

struct EngineConfig {
  int64_t block_size = 16;
  int64_t num_blocks = 0;  // 0: derive from kv_cache_bytes
  int64_t kv_cache_bytes = 256LL << 20;
  int64_t max_num_seqs = 64;
  int64_t max_num_batched_tokens = 1024;
  int64_t max_model_len = 0;  // 0: the model's max_position_embeddings
  bool enable_prefix_caching = true;
  bool interrupt_on_weight_update = false;
  uint64_t seed = 0;                   // seeds unseeded requests
  std::vector<TokenId> eos_token_ids;  // finish a sample (unless ignore_eos)
  // MoE models: record each generated token's expert choices (Completion::routed_experts),
  // for comparing the trainer's routing with the rollout's. Turned off for a dense model.
  bool record_routed_experts = false;
  // Run the code path of a GPU wherever the model is: the gathered paged attention
  // (kernels/paged_attention.h), the device sampler (device_sampler.h) and, with
  // cuda_graphs, the decode graphs' padded steps (run eagerly off CUDA) instead of the
  // CPU's fused kernel and host sampler. Always the path on a GPU; on the CPU it is
  // how the tests check that path against the CPU one (slower there: a test switch).
  bool device_code_path = false;
  // On CUDA, pure decode steps replay CUDA graphs per batch bucket (decode_graphs.h)
  // where the model allows it (dense, no TP/YaRN/MLA/LoRA; otherwise a log line says why
  // not). false: every step launches its kernels eagerly, the fallback if a graph
  // misbehaves. No effect on the CPU.
  bool cuda_graphs = true;
};

// Output already generated for a sample (partial rollouts: what cut_request returned),
// its per-token fields parallel to tokens.
struct GeneratedPrefix {
  std::vector<TokenId> tokens;
  std::vector<float> logprobs;           // temperature-1 policy log-probs
  // Empty: not kept by the caller (the pipeline never reads them); the completion then
  // holds NaN for these tokens.
  std::vector<float> sampling_logprobs;
  std::vector<int64_t> policy_versions;
  std::vector<int32_t> routed_experts;  // as Completion::routed_experts; empty: none recorded
  bool empty() const { return tokens.empty(); }
};

struct GenerationRequest {
  std::string id;
  std::vector<TokenId> prompt;
  SamplingParams params;
  int64_t n = 1;  // samples of this prompt (a GRPO group)
  // Which samples of the prompt's group these n are: their seeds and
  // Completion::sample_index. Empty: 0..n-1. A group split over several engines
  // (or requests) gives each part its indices and gets exactly the samples the whole
  // group would have had.
  std::vector<int64_t> sample_indices;
  // Non-empty: the one sample (n must be 1) continues from this output: max_tokens
  // counts it, and the completion starts with it (see "Partial rollouts" above).
  GeneratedPrefix resume_from;
};

// One finished sample (or, from cut_request, an unfinished one: finish_reason kNone).
struct Completion {
  std::string request_id;
  int64_t request_index = 0;  // admission order within the engine
  int64_t sample_index = 0;
  std::vector<TokenId> prompt_token_ids;
  std::vector<TokenId> token_ids;
  std::vector<float> logprobs;           // temperature-1 policy log-probs of token_ids
  std::vector<float> sampling_logprobs;  // under the distribution sampled from
  std::vector<int64_t> policy_versions;  // per token
  // EngineConfig::record_routed_experts on a MoE model: per token, the experts each
  // sparse layer chose at the position that predicted it (sparse layers x k ids, in
  // layer order, most probable first), flattened; empty otherwise.
  std::vector<int32_t> routed_experts;
  std::string text;                      // decoded output (stop string cut) if a tokenizer is set
  FinishReason finish_reason = FinishReason::kNone;
  int64_t num_preemptions = 0;
};

// What a dispatcher needs to pick an instance.
struct QueueState {
  int64_t running = 0;  // sequences holding KV
  int64_t waiting = 0;  // samples not yet admitted (a group counts n)
  int64_t outstanding_tokens =
      0;  // prompt tokens to prefill + tokens still to generate (upper bound)
  int64_t free_blocks = 0;
  int64_t total_blocks = 0;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t scheduled_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
  int64_t forks = 0;
  double busy_seconds = 0.0;  // wall time spent inside steps that had work
};

class RolloutEngine {
 public:
  // `tokenizer` may be null; stop strings and Completion::text then are unavailable.
  RolloutEngine(QwenForCausalLM model, EngineConfig config,
                std::shared_ptr<const Tokenizer> tokenizer = nullptr);

  // Validates (aspen::Error naming the request id) and queues the request.
  void add_request(GenerationRequest request);
  std::vector<Completion> step();
  bool has_unfinished() const;
  // Drops an unfinished request (all its samples) and frees its KV blocks; no
  // Completion is returned for it. For a client that went away. Returns false when no
  // unfinished request has this id.
  bool abort_request(const std::string& request_id);
  // Partial rollouts: takes every unfinished sample of the request out of the engine,
  // releasing its KV blocks, and returns each as a Completion with finish_reason kNone
  // holding the output so far (none for a sample whose prompt is not computed yet), in
  // sample order. Samples that finished were returned by step() already. Unknown id:
  // an empty vector.
  std::vector<Completion> cut_request(const std::string& request_id);
  // The most output tokens any unfinished sample of the request holds; -1 when no
  // unfinished request has this id.
  int64_t longest_output(const std::string& request_id) const;
  // Adds all requests, steps until none is left; completions ordered by
  // (request admission, sample index).
  std::vector<Completion> generate(std::vector<GenerationRequest> requests);

  void load_weights(int64_t version, const std::map<std::string, torch::Tensor>& weights);
  int64_t policy_version() const { return version_; }

  // Called on the driving thread for every token appended to a sample, inside step()
  // (a streaming server forwards tokens as they come). `sample_index` is the one the
  // sample's Completion will carry; `logprob` its temperature-1 policy log-prob. The
  // listener must not call back into the engine.
  using TokenListener = std::function<void(const std::string& request_id, int64_t sample_index,
                                           TokenId token, float logprob)>;
  void set_token_listener(TokenListener listener) { token_listener_ = std::move(listener); }

  QueueState queue_state() const;
  const EngineStats& stats() const { return stats_; }
  // CUDA graphs captured so far (EngineConfig::cuda_graphs; 0 without them).
  int64_t decode_graphs_captured() const;
  const EngineConfig& config() const { return config_; }

 private:
  struct RequestRecord {
    GenerationRequest request;
    int64_t index;
    int64_t remaining_samples;
  };

  void fork_group(Sequence& parent, std::vector<Sequence*>& samples);
  std::vector<TokenId> suppressed_tokens(const Sequence& sequence) const;
  void append_token(Sequence& sequence, TokenId token, float policy_logprob,
                    float sampling_logprob);
  Completion to_completion(Sequence& sequence);

  EngineConfig config_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ModelRunner> runner_;
  std::map<int64_t, std::unique_ptr<RequestRecord>> requests_;  // by index, while unfinished
  std::mt19937_64 seed_stream_;
  std::vector<TokenId> padded_ids_;  // model vocabulary rows the tokenizer lacks
  int64_t next_request_index_ = 0;
  int64_t next_sequence_id_ = 0;
  int64_t version_ = 0;
  EngineStats stats_;
  TokenListener token_listener_;
};

}  // namespace aspen::rollout
