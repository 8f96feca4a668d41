// The data-parallel equivalence problem shared by the test (DP = 1 reference, in
// process) and aspen_dist_worker (DP = 2 ranks): a small MLP trained with the
// project's AdamW Optimizer on a weighted squared error whose weights play the role
// of per-row token counts. Rows are split unevenly across ranks (rank 0 gets fewer)
// to show that the global-denominator contract, not equal local batches, is what
// makes DP exact.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "aspen/train/optimizer.h"

namespace aspen::testing {

using namespace aspen::parallel;
using namespace aspen::train;

constexpr int64_t kGlobalRows = 8;

// Rows [begin, end) of the global batch owned by `rank` of `world`.
inline std::pair<int64_t, int64_t> dp_rows(int rank, int world) {
  if (world == 1) return {0, kGlobalRows};
  const int64_t first = 3;  // uneven on purpose (world == 2 only)
  return rank == 0 ? std::pair<int64_t, int64_t>{0, first}
                   : std::pair<int64_t, int64_t>{first, kGlobalRows};
}

using ParamsCallback = std::function<void(const NamedParams&)>;

// Runs `steps` AdamW steps, each over two micro-batches (two backwards accumulating
// into .grad); returns the final parameters. `global_sum` turns a local count into the
// global one; `before_last_backward` (e.g. GradientAllReducer::prepare_for_backward)
// runs before the step's last backward and `reduce_grads` after it (no-ops for DP = 1).
inline std::vector<torch::Tensor> run_dp_problem(int rank, int world, int steps,
                                                 const std::function<int64_t(int64_t)>& global_sum,
                                                 const ParamsCallback& before_last_backward,
                                                 const ParamsCallback& reduce_grads) {
  torch::manual_seed(1234);
  torch::nn::Sequential model(torch::nn::Linear(6, 16), torch::nn::Tanh(),
                              torch::nn::Linear(16, 3));
  NamedParams params;
  for (const auto& item : model->named_parameters()) params.emplace_back(item.key(), item.value());
  OptimizerOptions options;
  options.lr = 0.05;
  options.weight_decay = 0.01;
  options.max_grad_norm = 0.5;  // clipping must see the global gradient
  Optimizer optimizer(params, options);
  const auto [begin, end] = dp_rows(rank, world);
  for (int step = 0; step < steps; ++step) {
    torch::manual_seed(1000 + step);  // every rank draws the same global batch
    const torch::Tensor x = torch::randn({kGlobalRows, 6});
    const torch::Tensor y = torch::randn({kGlobalRows, 3});
    const torch::Tensor tokens = torch::randint(1, 6, {kGlobalRows}, torch::kInt64);
    const torch::Tensor local_tokens = tokens.slice(0, begin, end);
    const int64_t global_tokens = global_sum(local_tokens.sum().item<int64_t>());
    const int64_t middle = begin + (end - begin) / 2;
    for (const auto& [mb_begin, mb_end] : {std::pair{begin, middle}, std::pair{middle, end}}) {
      const torch::Tensor err =
          (model->forward(x.slice(0, mb_begin, mb_end)) - y.slice(0, mb_begin, mb_end))
              .pow(2)
              .sum(1);
      // Token-weighted mean over the GLOBAL batch: sum of local terms / global count.
      const torch::Tensor weights = tokens.slice(0, mb_begin, mb_end).to(torch::kFloat);
      const torch::Tensor loss = (err * weights).sum() / global_tokens;
      if (mb_end == end) before_last_backward(params);
      loss.backward();
    }
    reduce_grads(params);
    optimizer.step();
  }
  std::vector<torch::Tensor> out;
  for (const auto& [name, p] : params) out.push_back(p.detach().clone());
  return out;
}

}  // namespace aspen::testing
