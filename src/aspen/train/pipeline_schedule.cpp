#include "aspen/train/pipeline_schedule.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "aspen/train/imports.h"
#include "aspen/util/error.h"

namespace aspen::train {
namespace {

void check_shape(int stages, int64_t micro_batches) {
  check_input(stages >= 1, "needs at least one stage, got " + std::to_string(stages),
              "pipeline schedule");
  check_input(micro_batches >= 1,
              "needs at least one micro-batch, got " + std::to_string(micro_batches),
              "pipeline schedule");
}

}  // namespace

std::vector<PipelineStep> one_f_one_b_order(int stages, int stage, int64_t micro_batches) {
  check_shape(stages, micro_batches);
  check_input(stage >= 0 && stage < stages,
              "stage " + std::to_string(stage) + " is not in [0, " + std::to_string(stages) + ")",
              "pipeline schedule");
  const int64_t warmup = std::min<int64_t>(stages - stage - 1, micro_batches);
  std::vector<PipelineStep> order;
  order.reserve(static_cast<size_t>(2 * micro_batches));
  for (int64_t i = 0; i < warmup; ++i) order.push_back({PipelineOp::kForward, i});
  for (int64_t k = 0; k < micro_batches - warmup; ++k) {
    order.push_back({PipelineOp::kForward, warmup + k});
    order.push_back({PipelineOp::kBackward, k});
  }
  for (int64_t i = micro_batches - warmup; i < micro_batches; ++i) {
    order.push_back({PipelineOp::kBackward, i});
  }
  return order;
}

std::vector<std::vector<TimedStep>> pipeline_timeline(int stages, int64_t micro_batches) {
  check_shape(stages, micro_batches);
  std::vector<std::vector<TimedStep>> timeline(static_cast<size_t>(stages));
  std::vector<std::vector<PipelineStep>> orders;
  for (int s = 0; s < stages; ++s) orders.push_back(one_f_one_b_order(stages, s, micro_batches));
  // (stage, op, micro-batch) -> the slot after it ends.
  std::map<std::pair<int, std::pair<int, int64_t>>, int64_t> done;
  auto key = [](int s, const PipelineStep& step) {
    return std::make_pair(s, std::make_pair(static_cast<int>(step.op), step.micro_batch));
  };
  std::vector<size_t> next(static_cast<size_t>(stages), 0);
  std::vector<int64_t> free_at(static_cast<size_t>(stages), 0);
  size_t remaining = static_cast<size_t>(stages) * orders[0].size();
  while (remaining > 0) {
    bool progressed = false;
    for (int s = 0; s < stages; ++s) {
      const auto u = static_cast<size_t>(s);
      if (next[u] == orders[u].size()) continue;
      const PipelineStep& step = orders[u][next[u]];
      // The input this step waits for: the previous stage's forward, the next stage's
      // backward; the first stage's forward and the last stage's backward (whose own
      // forward came earlier in its order) wait for nothing else.
      int64_t ready = free_at[u];
      const bool forward = step.op == PipelineOp::kForward;
      const int peer = forward ? s - 1 : s + 1;
      if (peer >= 0 && peer < stages) {
        auto it = done.find(key(peer, step));
        if (it == done.end()) continue;
        ready = std::max(ready, it->second);
      }
      timeline[u].push_back({ready, step});
      done[key(s, step)] = ready + 1;
      free_at[u] = ready + 1;
      ++next[u];
      --remaining;
      progressed = true;
    }
    // 1F1B never deadlocks; this guards the loop against a broken order.
    check_input(progressed, "the stages' orders wait on each other", "pipeline schedule");
  }
  return timeline;
}

}  // namespace aspen::train
