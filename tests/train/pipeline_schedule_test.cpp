// The 1F1B schedule (train/pipeline_schedule.h) against its definition, without
// threads or processes: each stage's order, and the slot table the dependencies give.
#include "aspen/train/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "aspen/util/error.h"

namespace aspen::train {
namespace {

// "F0 F1 B0 ..." for an order.
std::string render(const std::vector<PipelineStep>& order) {
  std::string text;
  for (const PipelineStep& step : order) {
    if (!text.empty()) text += " ";
    text += (step.op == PipelineOp::kForward ? "F" : "B") + std::to_string(step.micro_batch);
  }
  return text;
}

// One row per stage, one cell per slot: the step run there, "." for idle.
std::vector<std::string> render_timeline(const std::vector<std::vector<TimedStep>>& timeline) {
  int64_t slots = 0;
  for (const auto& stage : timeline) {
    for (const TimedStep& t : stage) slots = std::max(slots, t.slot + 1);
  }
  std::vector<std::string> rows;
  for (const auto& stage : timeline) {
    std::vector<std::string> cells(static_cast<size_t>(slots), ".");
    for (const TimedStep& t : stage) {
      cells[static_cast<size_t>(t.slot)] = render({t.step});
    }
    std::string row;
    for (const std::string& cell : cells) row += (row.empty() ? "" : " ") + cell;
    rows.push_back(row);
  }
  return rows;
}

TEST(PipelineSchedule, EachStageWarmsUpWithOneForwardPerLaterStageThenAlternates) {
  // p = 4, m = 6: stage s warms up with 3 - s forwards.
  EXPECT_EQ(render(one_f_one_b_order(4, 0, 6)), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(render(one_f_one_b_order(4, 1, 6)), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  EXPECT_EQ(render(one_f_one_b_order(4, 2, 6)), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(render(one_f_one_b_order(4, 3, 6)), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer micro-batches than stages: the warm-up is every forward.
  EXPECT_EQ(render(one_f_one_b_order(4, 0, 2)), "F0 F1 B0 B1");
  // One stage: forward and backward of each micro-batch in turn.
  EXPECT_EQ(render(one_f_one_b_order(1, 0, 3)), "F0 B0 F1 B1 F2 B2");
}

TEST(PipelineSchedule, TwoStagesFourMicroBatchesRunInTheOneFOneBSlotTable) {
  // Worked by hand from the definition: one slot per step, each waiting for its input.
  EXPECT_EQ(render_timeline(pipeline_timeline(2, 4)),
            (std::vector<std::string>{"F0 F1 . B0 F2 B1 F3 B2 . B3",
                                      ". F0 B0 F1 B1 F2 B2 F3 B3 ."}));
}

TEST(PipelineSchedule, TimelineHasTheOneFOneBBubbleAndBoundedActivations) {
  for (int p : {1, 2, 3, 4}) {
    for (int64_t m : {1, 2, 4, 7, 8}) {
      const auto timeline = pipeline_timeline(p, m);
      int64_t slots = 0;
      for (const auto& stage : timeline) slots = std::max(slots, stage.back().slot + 1);
      // 2 (m + p - 1) slots, of which each stage is busy 2 m: bubble (p-1)/(m+p-1).
      EXPECT_EQ(slots, 2 * (m + p - 1)) << "p " << p << " m " << m;
      for (int s = 0; s < p; ++s) {
        const auto& stage = timeline[static_cast<size_t>(s)];
        ASSERT_EQ(stage.size(), static_cast<size_t>(2 * m));
        // At most min(p - s, m) micro-batches' activations held at once.
        int64_t held = 0, peak = 0;
        for (const TimedStep& t : stage) {
          held += t.step.op == PipelineOp::kForward ? 1 : -1;
          peak = std::max(peak, held);
        }
        EXPECT_EQ(peak, std::min<int64_t>(p - s, m)) << "p " << p << " m " << m << " s " << s;
        // Dependencies: F(s, i) after F(s-1, i); B(s, i) after B(s+1, i) and F(s, i).
        for (const TimedStep& t : stage) {
          const bool forward = t.step.op == PipelineOp::kForward;
          const int peer = forward ? s - 1 : s + 1;
          if (peer >= 0 && peer < p) {
            for (const TimedStep& u : timeline[static_cast<size_t>(peer)]) {
              if (u.step == t.step) EXPECT_LT(u.slot, t.slot);
            }
          }
        }
      }
    }
  }
}

TEST(PipelineSchedule, RefusesAnEmptyPipelineOrStep) {
  EXPECT_THROW(one_f_one_b_order(0, 0, 4), Error);
  EXPECT_THROW(one_f_one_b_order(2, 2, 4), Error);
  EXPECT_THROW(one_f_one_b_order(2, 0, 0), Error);
  EXPECT_THROW(pipeline_timeline(2, 0), Error);
}

}  // namespace
}  // namespace aspen::train
