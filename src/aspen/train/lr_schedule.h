// Learning-rate schedules, as a pure function of the optimizer step (0-based: the
// step about to be taken).
//   warmup (both kinds)  step < W:  lr * (step + 1) / W
//   constant             then lr
//   cosine               then p = (step - W) / max(1, S - W) clamped to [0, 1]:
//                        lr * (m + (1 - m) * 0.5 * (1 + cos(pi * p)))
// with W = warmup_steps, S = total_steps, m = min_lr_ratio. Warmup counts from
// (step + 1) so the first step already moves the weights (HF's schedule spends it at
// lr = 0); the decay reaches m * lr at step S and stays there.
// Thread safety: pure. Errors: validate() throws aspen::Error naming the option.
#pragma once

#include <cstdint>
#include <string>

#include "aspen/train/imports.h"

namespace aspen::train {

enum class LrScheduleKind { kConstant, kCosine };

struct LrScheduleOptions {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  int64_t warmup_steps = 0;    // >= 0
  int64_t total_steps = 0;     // >= warmup_steps (cosine only)
  double min_lr_ratio = 0.0;   // in [0, 1]

  void validate() const;
};

// Multiplier of the base learning rate at `step`.
double lr_factor(const LrScheduleOptions& options, int64_t step);

}  // namespace aspen::train
