#include "aspen/train/update_steps.h"
#include "aspen/train/imports.h"

namespace aspen::train {

void for_each_update_step(TrainerDataParallel& data_parallel, const TrainBatch& batch,
                          const UpdateLoopOptions& options, torch::Device device,
                          const std::function<void(const UpdateStep&)>& step) {
  const int64_t global_rows = options.global_rows >= 0
                                  ? options.global_rows
                                  : data_parallel.global_rows(batch.num_rows());
  for (int64_t epoch = 0; epoch < options.epochs; ++epoch) {
    for (const auto& rows :
         data_parallel.mini_batches(batch.num_rows(), global_rows, options.mini_batch_size,
                                    options.shuffle, options.seed, epoch)) {
      UpdateStep plan;
      plan.epoch = epoch;
      plan.micro_batches =
          make_micro_batches(batch, rows, options.max_tokens_per_micro_batch, device);
      int64_t local_tokens = 0;
      plan.last_backward = plan.micro_batches.size();
      for (size_t i = 0; i < plan.micro_batches.size(); ++i) {
        // Model tokens only (loss mask): the token-mean denominator counts what trains.
        local_tokens += plan.micro_batches[i].num_loss_tokens;
        if (plan.micro_batches[i].num_response_tokens > 0) plan.last_backward = i;
      }
      const auto [tokens, mini_rows] =
          data_parallel.global_counts(local_tokens, static_cast<int64_t>(rows.size()));
      if (tokens == 0) continue;
      plan.global_tokens = tokens;
      plan.global_rows = mini_rows;
      step(plan);
    }
  }
}

}  // namespace aspen::train
