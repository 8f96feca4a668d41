// DecodeGraphs: CUDA graphs of the model's decode step, replayed instead of launching
// the step's ~1,900 kernels one by one (docs/gpu.md: at a 0.6B model the launches,
// not the GPU, bound a decode step). As vLLM does: one graph per batch bucket (powers
// of two up to max_num_seqs, and max_num_seqs) and, because the gathered attention's
// shapes follow the longest context, per context bucket (a power of two of cache
// blocks). A step pads its batch to the bucket; the padding rows read and write one
// scratch cache block that no sequence owns. Each graph has static inputs (one int64
// device buffer: ids, positions, slots, the attention's gather slots and query
// positions) filled per step by one non_blocking copy from pinned memory, then
// replayed; its static output is the [bucket, V] logits. Graphs share one memory pool:
// they never run concurrently, and each step's logits are sampled before the next
// replay.
//
// Captured lazily, on a bucket's first step (one eager warm-up, then the capture; the
// warm-up's and the replay's cache writes are the same values). Weights must be
// updated in place (load_state copies into the parameters); a parameter that moved to
// new storage (unfused, reloaded elsewhere) is noticed before the replay, and every
// graph is dropped and captured again.
//
// Which models: dense Qwen-style models on CUDA without tensor parallelism, YaRN, MLA
// or LoRA adapters (unsupported_reason says which); everything else, and every step
// that is not a pure decode step of at most max_num_seqs sequences, runs eagerly.
// Off CUDA nothing is captured: each bucket's padded step runs eagerly on its static
// inputs, so the CPU tests check the padding, the scratch block and the bucketing.
// Thread safety: none; owned by the runner.
#pragma once

#include <torch/types.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "aspen/kernels/paged_layout.h"
#include "aspen/model/qwen_model.h"
#include "aspen/rollout/imports.h"
#include "aspen/rollout/kv_cache.h"

namespace aspen::rollout {

class DecodeGraphs {
 public:
  // scratch_block: a block of `cache` the block pool never hands out.
  DecodeGraphs(QwenForCausalLM model, KvCache& cache, int64_t scratch_block, int64_t max_num_seqs);
  ~DecodeGraphs();

  // Empty when `model` can replay decode graphs; else why not (a sentence).
  // require_cuda = false: whether it could, were it on CUDA (the padded steps then run
  // eagerly: EngineConfig::device_code_path on the CPU).
  static std::string unsupported_reason(QwenForCausalLM& model, bool require_cuda = true);

  // The batch buckets for max_num_seqs: 1, 2, 4, ... below it, and it.
  static std::vector<int64_t> batch_buckets(int64_t max_num_seqs);

  // Whether this step replays a graph: every sequence has one new token, at most
  // max_num_seqs of them.
  bool covers(const PagedLayout& layout) const;

  // The step's logits [B, V] on the device (a view of the graph's static output, valid
  // until the next run), rows in the layout's sequence order. ids, positions, slots:
  // the step's B tokens as the runner lists them.
  torch::Tensor run(const std::vector<int64_t>& ids, const std::vector<int64_t>& positions,
                    const std::vector<int64_t>& slots, const PagedLayout& layout);

  // Buckets prepared so far (captured, on CUDA).
  int64_t graphs_captured() const { return static_cast<int64_t>(graphs_.size()); }

 private:
  struct Graph;
  Graph& graph_for(int64_t batch, int64_t blocks);
  torch::Tensor forward(Graph& graph);  // the padded step on graph's static inputs
  bool parameters_moved() const;

  QwenForCausalLM model_;
  KvCache& cache_;
  int64_t scratch_block_;
  std::vector<int64_t> buckets_;
  std::vector<const void*> parameter_pointers_;  // at capture: a replay needs them unmoved
  std::pair<unsigned long long, unsigned long long> pool_{0, 0};  // c10::cuda::MempoolId_t
  bool capture_ = false;  // on CUDA; elsewhere the padded steps run eagerly
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Graph>> graphs_;  // (batch, blocks)
};

}  // namespace aspen::rollout
