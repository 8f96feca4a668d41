// Learning-rate schedule values at the steps that define it.
#include "aspen/train/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "aspen/util/error.h"

namespace aspen::train {
namespace {

TEST(LrSchedule, ConstantIsOneAfterWarmup) {
  LrScheduleOptions o;
  EXPECT_DOUBLE_EQ(lr_factor(o, 0), 1.0);
  EXPECT_DOUBLE_EQ(lr_factor(o, 1000), 1.0);
  o.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(lr_factor(o, 0), 0.25);
  EXPECT_DOUBLE_EQ(lr_factor(o, 3), 1.0);
  EXPECT_DOUBLE_EQ(lr_factor(o, 50), 1.0);
}

TEST(LrSchedule, CosineWarmupThenDecayToMinRatio) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kCosine;
  o.warmup_steps = 10;
  o.total_steps = 110;
  o.min_lr_ratio = 0.1;
  EXPECT_DOUBLE_EQ(lr_factor(o, 0), 0.1);   // (0 + 1) / 10
  EXPECT_DOUBLE_EQ(lr_factor(o, 4), 0.5);
  EXPECT_DOUBLE_EQ(lr_factor(o, 9), 1.0);
  EXPECT_DOUBLE_EQ(lr_factor(o, 10), 1.0);  // decay starts at its peak
  EXPECT_NEAR(lr_factor(o, 60), 0.1 + 0.9 * 0.5, 1e-12);  // halfway: cos(pi/2) = 0
  EXPECT_NEAR(lr_factor(o, 35), 0.1 + 0.9 * 0.5 * (1 + std::cos(std::acos(-1.0) * 0.25)), 1e-12);
  EXPECT_NEAR(lr_factor(o, 110), 0.1, 1e-12);
  EXPECT_NEAR(lr_factor(o, 500), 0.1, 1e-12);  // stays at the floor
}

TEST(LrSchedule, Validation) {
  LrScheduleOptions o;
  o.kind = LrScheduleKind::kCosine;
  o.warmup_steps = 5;
  o.total_steps = 3;
  EXPECT_THROW(o.validate(), Error);
  o.total_steps = 5;
  o.min_lr_ratio = 1.5;
  EXPECT_THROW(o.validate(), Error);
}

}  // namespace
}  // namespace aspen::train
