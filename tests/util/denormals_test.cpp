// set_flush_denormals: products below 2^-126 become 0 and denormal inputs read as 0, on
// the calling thread and on threads it creates afterwards; clearing restores IEEE
// gradual underflow. Each test restores the thread's mode (other tests share it).
#include "aspen/util/denormals.h"

#include <gtest/gtest.h>

#include <limits>
#include <thread>

namespace aspen {
namespace {

// volatile: the compiler must not fold the arithmetic at build time.
float times(float a, float b) {
  volatile float x = a;
  volatile float y = b;
  return x * y;
}

class Denormals : public ::testing::Test {
 protected:
  void SetUp() override { before_ = denormals_flushed(); }
  void TearDown() override { set_flush_denormals(before_); }
  bool before_ = false;
};

constexpr float kSmallestNormal = std::numeric_limits<float>::min();  // 2^-126

TEST_F(Denormals, FlushedResultsAndInputsAreZero) {
  if (!set_flush_denormals(true)) GTEST_SKIP() << "no flush-to-zero control on this CPU";
  EXPECT_TRUE(denormals_flushed());
  EXPECT_EQ(times(kSmallestNormal, 0.5f), 0.0f);  // FTZ: the result
  const float denormal = std::numeric_limits<float>::denorm_min() * 1024;  // a bit pattern
  EXPECT_EQ(times(denormal, 1.0f), 0.0f);  // DAZ: the input
  EXPECT_EQ(times(kSmallestNormal, 2.0f), 2 * kSmallestNormal);  // normals untouched
}

TEST_F(Denormals, ClearedGivesGradualUnderflow) {
  if (!set_flush_denormals(false)) GTEST_SKIP() << "no flush-to-zero control on this CPU";
  EXPECT_FALSE(denormals_flushed());
  EXPECT_EQ(times(kSmallestNormal, 0.5f), kSmallestNormal / 2);
  EXPECT_GT(times(kSmallestNormal, 0.5f), 0.0f);
}

TEST_F(Denormals, ThreadsCreatedAfterwardsInheritTheMode) {
  if (!set_flush_denormals(true)) GTEST_SKIP() << "no flush-to-zero control on this CPU";
  bool flushed = false;
  float product = 1.0f;
  std::thread([&] {
    flushed = denormals_flushed();
    product = times(kSmallestNormal, 0.5f);
  }).join();
  EXPECT_TRUE(flushed);
  EXPECT_EQ(product, 0.0f);
}

}  // namespace
}  // namespace aspen
