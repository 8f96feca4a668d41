#include "aspen/rollout/model_runner.h"

#include <algorithm>

#include "aspen/kernels/packed_upload.h"
#include "aspen/kernels/paged_layout.h"
#include "aspen/kernels/small_batch_linear.h"
#include "aspen/rollout/imports.h"

namespace aspen::rollout {

ModelRunner::ModelRunner(QwenForCausalLM model, KvCache& cache, bool record_routing,
                         bool device_code_path)
    : model_(std::move(model)),
      cache_(cache),
      record_routing_(record_routing && model_->config.is_moe()),
      device_code_path_(device_code_path) {
  // One GEMM for q/k/v and one for gate/up in every step (model/fused_projection.h).
  model_->fuse_projections();
}

void ModelRunner::enable_decode_graphs(int64_t scratch_block, int64_t max_num_seqs) {
  graphs_ = std::make_unique<DecodeGraphs>(model_, cache_, scratch_block, max_num_seqs);
}

StepLogits ModelRunner::run(const SchedulerStep& step) {
  torch::NoGradGuard no_grad;
  const int64_t block_size = cache_.block_size();
  const int64_t num_sequences = static_cast<int64_t>(step.chunks.size());
  size_t max_blocks = 1;
  for (const auto& chunk : step.chunks)
    max_blocks = std::max(max_blocks, chunk.sequence->block_table.size());

  std::vector<int64_t> ids, positions, slots, last_rows;
  ids.reserve(step.num_tokens);
  positions.reserve(step.num_tokens);
  slots.reserve(step.num_tokens);
  PagedLayout layout;
  layout.query_start = {0};
  layout.max_blocks = static_cast<int64_t>(max_blocks);
  layout.block_tables.assign(static_cast<size_t>(num_sequences) * max_blocks, 0);
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
    std::copy(sequence.block_table.begin(), sequence.block_table.end(),
              layout.block_tables.begin() + b * layout.max_blocks);
    layout.query_start.push_back(static_cast<int64_t>(ids.size()));
    layout.context_lens.push_back(end);
    if (end == static_cast<int64_t>(sequence.tokens.size())) {
      last_rows.push_back(static_cast<int64_t>(ids.size()) - 1);
      result.chunk_indices.push_back(static_cast<size_t>(b));
    }
  }
  // Checked here, once per step: the attention of every layer trusts the host copy.
  layout.check(block_size, cache_.num_blocks(), static_cast<int64_t>(ids.size()));
  if (graphs_ && graphs_->covers(layout)) {
    result.logits = graphs_->run(ids, positions, slots, layout);
    return result;
  }

  // Everything the step needs on the device in one copy (kernels/packed_upload.h),
  // the gathered attention's indices included when the model is not on the CPU.
  const torch::Device device = model_->lm_head_weight().device();
  PackedUpload upload;
  const size_t ids_part = upload.add(ids), positions_part = upload.add(positions),
               slots_part = upload.add(slots),
               tables_part = upload.add(layout.block_tables, {num_sequences, layout.max_blocks}),
               starts_part = upload.add(layout.query_start),
               lens_part = upload.add(layout.context_lens), last_part = upload.add(last_rows);
  const std::vector<StagedPagedGroup> staged =
      device.is_cpu() && !device_code_path_ ? std::vector<StagedPagedGroup>{}
                                            : stage_paged_groups(layout, block_size, upload);
  upload.upload(device);
  PagedBatch batch = cache_.batch_view();
  batch.slot_mapping = upload.part(slots_part);
  batch.block_tables = upload.part(tables_part);
  batch.query_start = upload.part(starts_part);
  batch.context_lens = upload.part(lens_part);
  batch.layout = std::move(layout);
  batch.groups = resolve_paged_groups(staged, upload, batch.key_caches.front().scalar_type());
  MoeRoutingLog routing;
  const torch::Tensor hidden =
      model_->forward_paged(upload.part(ids_part), upload.part(positions_part), batch,
                            record_routing_ ? &routing : nullptr);
  if (last_rows.empty()) return result;
  const torch::Tensor last = upload.part(last_part);
  if (record_routing_) {
    std::vector<torch::Tensor> per_layer;
    for (const LayerRouting& layer : routing.layers) per_layer.push_back(layer.experts.index_select(0, last));
    result.routed_experts = torch::stack(per_layer, /*dim=*/1).to(torch::kCPU, torch::kInt32);
  }
  // A decode step completes every row: the head reads them all, no gather.
  const bool every_row = last_rows.size() == ids.size();
  const torch::Tensor rows = every_row ? hidden : hidden.index_select(0, last);
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
  // On a device the logits stay there: the device sampler (device_sampler.h) sends back
  // only the sampled ids and their log-probs.
  result.logits = device.is_cpu() ? logits.to(torch::kFloat32) : logits;
  return result;
}

}  // namespace aspen::rollout
