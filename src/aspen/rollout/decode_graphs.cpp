#include "aspen/rollout/decode_graphs.h"

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "aspen/kernels/small_batch_linear.h"
#include "aspen/rollout/imports.h"

namespace aspen::rollout {

static_assert(std::is_same_v<std::pair<unsigned long long, unsigned long long>,
                             c10::cuda::MempoolId_t>,
              "DecodeGraphs::pool_ holds a c10::cuda::MempoolId_t");

// One bucket's step: `batch` rows padded, keys padded to `blocks` cache blocks.
// inputs (int64, static): ids [B] | positions [B] | slot_mapping [B] | slots [B * C] |
// query positions [B]; `paged` and `group` are views of them, built once.
struct DecodeGraphs::Graph {
  int64_t batch = 0, blocks = 0, context = 0;
  torch::Tensor inputs;
  torch::Tensor ids, positions, query_positions;
  PagedBatch paged;
  PagedGroup group;
  torch::Tensor logits;                        // [batch, V], the captured output
  std::unique_ptr<at::cuda::CUDAGraph> graph;  // null until captured; never off CUDA
};

namespace {

int64_t power_of_two_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

}  // namespace

DecodeGraphs::DecodeGraphs(QwenForCausalLM model, KvCache& cache, int64_t scratch_block,
                           int64_t max_num_seqs)
    : model_(std::move(model)),
      cache_(cache),
      scratch_block_(scratch_block),
      buckets_(batch_buckets(max_num_seqs)),
      capture_(model_->lm_head_weight().is_cuda()) {
  if (capture_) pool_ = at::cuda::graph_pool_handle();
  TORCH_CHECK(scratch_block >= 0 && scratch_block < cache.num_blocks(),
              "DecodeGraphs: scratch block ", scratch_block, " outside the cache");
}

DecodeGraphs::~DecodeGraphs() = default;

std::string DecodeGraphs::unsupported_reason(QwenForCausalLM& model, bool require_cuda) {
  const ModelConfig& config = model->config;
  if (require_cuda && !model->lm_head_weight().is_cuda()) return "the model is not on a CUDA device";
  if (config.is_moe()) return "MoE routing has data-dependent shapes";
  if (config.is_mla()) return "MLA's decode path is not captured";
  if (model->tp.enabled()) return "tensor parallelism (NCCL collectives) is not captured";
  if (config.rope_scaling.yarn) return "YaRN's frequencies come from the host";
  if (model->has_lora()) return "a LoRA adapter's on/off switch is read on the host";
  return "";
}

std::vector<int64_t> DecodeGraphs::batch_buckets(int64_t max_num_seqs) {
  std::vector<int64_t> buckets;
  for (int64_t b = 1; b < max_num_seqs; b *= 2) buckets.push_back(b);
  buckets.push_back(std::max<int64_t>(max_num_seqs, 1));
  return buckets;
}

bool DecodeGraphs::covers(const PagedLayout& layout) const {
  if (layout.sequences() == 0 || layout.sequences() > buckets_.back()) return false;
  for (int64_t b = 0; b < layout.sequences(); ++b) {
    if (layout.query_start[b + 1] - layout.query_start[b] != 1) return false;
  }
  return true;
}

bool DecodeGraphs::parameters_moved() const {
  size_t i = 0;
  for (const auto& parameter : model_->parameters()) {
    if (i >= parameter_pointers_.size() || parameter_pointers_[i++] != parameter.data_ptr())
      return true;
  }
  return i != parameter_pointers_.size();
}

DecodeGraphs::Graph& DecodeGraphs::graph_for(int64_t batch, int64_t blocks) {
  auto found = graphs_.find({batch, blocks});
  if (found != graphs_.end()) return *found->second;
  auto graph = std::make_unique<Graph>();
  Graph& g = *graph;
  g.batch = batch;
  g.blocks = blocks;
  g.context = blocks * cache_.block_size();
  const torch::TensorOptions long_options =
      torch::TensorOptions(torch::kLong).device(model_->lm_head_weight().device());
  g.inputs = torch::zeros({batch * (4 + g.context)}, long_options);
  g.ids = g.inputs.narrow(0, 0, batch);
  g.positions = g.inputs.narrow(0, batch, batch);
  g.query_positions = g.inputs.narrow(0, 3 * batch + batch * g.context, batch).view({batch, 1, 1});
  g.paged = cache_.batch_view();
  g.paged.slot_mapping = g.inputs.narrow(0, 2 * batch, batch);
  // Shapes only: the gathered path reads the group, not these.
  g.paged.block_tables = torch::zeros({batch, 1}, long_options);
  g.paged.query_start = torch::arange(batch + 1, long_options);
  g.paged.context_lens = torch::ones({batch}, long_options);
  g.paged.layout.max_blocks = 1;
  g.paged.layout.block_tables.assign(static_cast<size_t>(batch), scratch_block_);
  g.paged.layout.context_lens.assign(static_cast<size_t>(batch), 1);
  for (int64_t b = 0; b <= batch; ++b) g.paged.layout.query_start.push_back(b);
  g.group.members = batch;
  g.group.rows = 1;
  g.group.context = g.context;
  g.group.whole_step = true;
  g.group.query_rows = g.group.tokens = g.group.padded = g.ids;  // unused: whole_step
  g.group.slots = g.inputs.narrow(0, 3 * batch, batch * g.context);
  return *graphs_.emplace(std::make_pair(batch, blocks), std::move(graph)).first->second;
}

torch::Tensor DecodeGraphs::forward(Graph& g) {
  torch::NoGradGuard no_grad;
  g.group.mask = paged_attention_mask(g.query_positions, g.context,
                                      g.paged.key_caches.front().scalar_type());
  g.paged.groups = {g.group};
  const torch::Tensor hidden = model_->forward_paged(g.ids, g.positions, g.paged, /*log=*/nullptr);
  return small_batch_linear(hidden, model_->lm_head_weight());
}

torch::Tensor DecodeGraphs::run(const std::vector<int64_t>& ids,
                                const std::vector<int64_t>& positions,
                                const std::vector<int64_t>& slots, const PagedLayout& layout) {
  TORCH_CHECK(covers(layout), "DecodeGraphs::run: not a decode step it covers");
  const int64_t real = layout.sequences();
  const int64_t block_size = cache_.block_size();
  int64_t longest = 1;
  for (int64_t context : layout.context_lens) longest = std::max(longest, context);
  const int64_t batch = *std::lower_bound(buckets_.begin(), buckets_.end(), real);
  const int64_t blocks = power_of_two_at_least((longest + block_size - 1) / block_size);
  if (!graphs_.empty() && parameters_moved()) graphs_.clear();
  Graph& graph = graph_for(batch, blocks);
  const int64_t context = graph.context;

  // The step's inputs, padded: padding rows are token 0 at position 0 writing and
  // reading the scratch block's slot 0; a real row's keys past its context repeat its
  // last slot (masked out).
  const int64_t scratch = scratch_block_ * block_size;
  std::vector<int64_t> staged(static_cast<size_t>(batch * (4 + context)), 0);
  int64_t* ids_out = staged.data();
  int64_t* positions_out = ids_out + batch;
  int64_t* slot_mapping_out = positions_out + batch;
  int64_t* slots_out = slot_mapping_out + batch;
  int64_t* query_positions_out = slots_out + batch * context;
  for (int64_t b = 0; b < batch; ++b) {
    const bool is_real = b < real;
    ids_out[b] = is_real ? ids[b] : 0;
    positions_out[b] = is_real ? positions[b] : 0;
    slot_mapping_out[b] = is_real ? slots[b] : scratch;
    query_positions_out[b] = is_real ? layout.context_lens[b] - 1 : 0;
    const int64_t* table = layout.block_tables.data() + b * layout.max_blocks;
    for (int64_t p = 0; p < context; ++p) {
      if (!is_real) {
        slots_out[b * context + p] = scratch;
        continue;
      }
      const int64_t q = std::min(p, layout.context_lens[b] - 1);
      slots_out[b * context + p] = table[q / block_size] * block_size + q % block_size;
    }
  }
  if (!capture_) {
    // Off CUDA: the padded step, eagerly (how the tests check padding and bucketing).
    graph.inputs.copy_(torch::from_blob(staged.data(), {static_cast<int64_t>(staged.size())},
                                        torch::kLong));
    return forward(graph).narrow(0, 0, real);
  }
  torch::Tensor host = torch::empty({static_cast<int64_t>(staged.size())},
                                    torch::TensorOptions(torch::kLong).pinned_memory(true));
  std::memcpy(host.data_ptr<int64_t>(), staged.data(), staged.size() * sizeof(int64_t));
  graph.inputs.copy_(host, /*non_blocking=*/true);
  if (!graph.graph) {
    // Capture on a side stream after one eager warm-up there (lazy cuBLAS and
    // allocator set-up may not happen inside a capture).
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream();
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    at::cuda::CUDAEvent inputs_ready;
    inputs_ready.record(current);
    inputs_ready.block(side);
    graph.graph = std::make_unique<at::cuda::CUDAGraph>();
    {
      const c10::cuda::CUDAStreamGuard guard(side);
      forward(graph);
      graph.graph->capture_begin(pool_);
      graph.logits = forward(graph);
      graph.graph->capture_end();
    }
    at::cuda::CUDAEvent captured;
    captured.record(side);
    captured.block(current);
    parameter_pointers_.clear();
    for (const auto& parameter : model_->parameters())
      parameter_pointers_.push_back(parameter.data_ptr());
  }
  graph.graph->replay();
  return graph.logits.narrow(0, 0, real);
}

}  // namespace aspen::rollout
