#include "aspen/rollout/model_runner.h"

#include <algorithm>

#include "aspen/kernels/small_batch_linear.h"
#include "aspen/rollout/imports.h"

namespace aspen::rollout {

ModelRunner::ModelRunner(QwenForCausalLM model, KvCache& cache, bool record_routing)
    : model_(std::move(model)), cache_(cache), record_routing_(record_routing && model_->config.is_moe()) {
  // One GEMM for q/k/v and one for gate/up in every step (model/fused_projection.h).
  model_->fuse_projections();
}

StepLogits ModelRunner::run(const SchedulerStep& step) {
  torch::NoGradGuard no_grad;
  const int64_t block_size = cache_.block_size();
  const int64_t num_sequences = static_cast<int64_t>(step.chunks.size());
  size_t max_blocks = 1;
  for (const auto& chunk : step.chunks)
    max_blocks = std::max(max_blocks, chunk.sequence->block_table.size());

  std::vector<int64_t> ids, positions, slots, query_start{0}, context_lens, last_rows;
  ids.reserve(step.num_tokens);
  positions.reserve(step.num_tokens);
  slots.reserve(step.num_tokens);
  torch::Tensor block_tables =
      torch::zeros({num_sequences, static_cast<int64_t>(max_blocks)}, torch::kInt32);
  auto tables = block_tables.accessor<int32_t, 2>();
  StepLogits result;
  for (int64_t b = 0; b < num_sequences; ++b) {
    const Sequence& sequence = *step.chunks[b].sequence;
    const int64_t first = sequence.num_computed_tokens;
    const int64_t end = first + step.chunks[b].num_new_tokens;
    for (int64_t p = first; p < end; ++p) {
      ids.push_back(sequence.tokens[p]);
      positions.push_back(p);
      slots.push_back(static_cast<int64_t>(sequence.block_table[p / block_size]) * block_size +
                      p % block_size);
    }
    for (size_t j = 0; j < sequence.block_table.size(); ++j) tables[b][j] = sequence.block_table[j];
    query_start.push_back(static_cast<int64_t>(ids.size()));
    context_lens.push_back(end);
    if (end == static_cast<int64_t>(sequence.tokens.size())) {
      last_rows.push_back(static_cast<int64_t>(ids.size()) - 1);
      result.chunk_indices.push_back(static_cast<size_t>(b));
    }
  }

  const torch::Device device = model_->lm_head_weight().device();
  auto to_device = [&](const std::vector<int64_t>& values) {
    return torch::tensor(values, torch::kInt64).to(device);
  };
  PagedBatch batch = cache_.batch_view();
  batch.slot_mapping = to_device(slots);
  batch.block_tables = block_tables.to(device);
  batch.query_start = to_device(query_start);
  batch.context_lens = to_device(context_lens);
  MoeRoutingLog routing;
  const torch::Tensor hidden = model_->forward_paged(to_device(ids), to_device(positions), batch,
                                                     record_routing_ ? &routing : nullptr);
  if (last_rows.empty()) return result;
  const torch::Tensor last = to_device(last_rows);
  if (record_routing_) {
    std::vector<torch::Tensor> per_layer;
    for (const LayerRouting& layer : routing.layers) per_layer.push_back(layer.experts.index_select(0, last));
    result.routed_experts = torch::stack(per_layer, /*dim=*/1).to(torch::kCPU, torch::kInt32);
  }
  const torch::Tensor rows = hidden.index_select(0, last);
  const torch::Tensor weight = model_->lm_head_weight();
  // The head is a quarter of a 0.6B model's bytes: at up to small_batch_max_rows rows
  // small_batch_linear streams it once (kernels/small_batch_linear.h).
  torch::Tensor logits = small_batch_linear(rows, weight);
  if (model_->tp.enabled()) {
    // Vocab-parallel head: rank r holds vocabulary rows [r V/t, (r+1) V/t); every TP
    // rank gathers the full logits so that all of them sample the same tokens.
    ProcessGroupHandle group = model_->tp.require_group("tensor-parallel rollout");
    logits = torch::cat(group.all_gather(logits.contiguous()), /*dim=*/1);
  }
  result.logits = logits.to(torch::kCPU, torch::kFloat32);
  return result;
}

}  // namespace aspen::rollout
