// The 1F1B (one forward, one backward) pipeline schedule, as pure functions of the
// number of stages p, this stage s and the number of micro-batches m: what each stage
// does in which order (one_f_one_b_order), and when, if every forward and backward
// takes one time slot and waits only for its input (pipeline_timeline).
//
// Stage s's order (Narayanan et al., PipeDream-Flush; Megatron-LM's
// forward_backward_pipelining_without_interleaving):
//   warm-up:   W = min(p - s - 1, m) forwards F0 .. F(W-1)
//   steady:    for k in [0, m - W): F(W + k), then B(k)
//   cool-down: B(m - W) .. B(m - 1)
// so stage s holds at most W + 1 <= p - s micro-batches' activations at once (not m,
// as with all forwards first), and the last stage backs each micro-batch up right after
// its forward. Dependencies: F(s, i) needs F(s - 1, i)'s output, B(s, i) needs
// B(s + 1, i)'s input gradient (and the stage's own F(s, i)).
//
// With equal slots the timeline lasts 2 (m + p - 1) slots and each stage idles in
// 2 (p - 1) of them: the bubble fraction (p - 1) / (m + p - 1).
//
// Thread safety: pure functions. Errors: aspen::Error for p < 1, s outside [0, p) or m < 1.
#pragma once

#include <cstdint>
#include <vector>

#include "aspen/train/imports.h"

namespace aspen::train {

enum class PipelineOp { kForward, kBackward };

struct PipelineStep {
  PipelineOp op = PipelineOp::kForward;
  int64_t micro_batch = 0;
  bool operator==(const PipelineStep& other) const {
    return op == other.op && micro_batch == other.micro_batch;
  }
};

// Stage `stage`'s steps, in the order it runs them (2 m steps).
std::vector<PipelineStep> one_f_one_b_order(int stages, int stage, int64_t micro_batches);

struct TimedStep {
  int64_t slot = 0;  // the time slot the step runs in
  PipelineStep step;
};

// Every stage's steps (one_f_one_b_order) with the earliest slot each can run in:
// after the stage's previous step and after the step it depends on (one slot each).
// [stage][k] = the stage's k-th step.
std::vector<std::vector<TimedStep>> pipeline_timeline(int stages, int64_t micro_batches);

}  // namespace aspen::train
