#include "aspen/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "aspen/train/imports.h"
#include "aspen/util/error.h"

namespace aspen::train {
namespace {
const double kPi = std::acos(-1.0);
}  // namespace

void LrScheduleOptions::validate() const {
  check_input(warmup_steps >= 0, "must be >= 0", "lr_schedule.warmup_steps");
  check_input(min_lr_ratio >= 0.0 && min_lr_ratio <= 1.0, "must be in [0, 1]",
              "lr_schedule.min_lr_ratio");
  if (kind == LrScheduleKind::kCosine) {
    check_input(total_steps >= warmup_steps, "must be >= warmup_steps for a cosine schedule",
                "lr_schedule.total_steps");
  }
}

double lr_factor(const LrScheduleOptions& options, int64_t step) {
  const int64_t warmup = options.warmup_steps;
  if (step < warmup) return static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (options.kind == LrScheduleKind::kConstant) return 1.0;
  const double span = static_cast<double>(std::max<int64_t>(1, options.total_steps - warmup));
  const double progress = std::clamp(static_cast<double>(step - warmup) / span, 0.0, 1.0);
  const double cosine = 0.5 * (1.0 + std::cos(kPi * progress));
  return options.min_lr_ratio + (1.0 - options.min_lr_ratio) * cosine;
}

}  // namespace aspen::train
