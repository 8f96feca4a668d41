#include "aspen/algo/value_loss.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "aspen/util/error.h"
#include "expect_tensor.h"

namespace aspen::algo {
namespace {

using testing::dvec;
using testing::expect_values;
using testing::scalar;

TEST(ValueLoss, ClippedSquaredErrorByHand) {
  // clip range 0.2, token-mean over 4 tokens.
  //  t0: v 1, v_old 0.5, R 2: v_clip = 0.7; l1 = 1, l2 = 1.69 -> 1.69 (clipped: grad 0)
  //  t1: v 2, v_old 2,   R 1: v_clip = 2;   l1 = l2 = 1              grad 2(v - R) = 2
  //  t2: v 0, v_old 0,   R 0.05:            l = 0.0025                grad 2(0 - 0.05) = -0.1
  //  t3: v 3, v_old 2,   R 0: v_clip = 2.2; l1 = 9, l2 = 4.84 -> 9    grad 2*3 = 6
  // loss = 0.5 * (1.69 + 1 + 0.0025 + 9)/4 = 1.4615625; grads * 0.5/4 = [0, 0.25, -0.0125, 0.75].
  PackedSeqs packed = PackedSeqs::from_lengths({3, 1});
  torch::Tensor v = dvec({1, 2, 0, 3}).requires_grad_(true);
  ValueLossResult r =
      value_loss(v, dvec({0.5, 2, 0, 2}), dvec({2, 1, 0.05, 0}), packed, 0.2, AggOptions{});
  EXPECT_NEAR(scalar(r.loss), 1.4615625, 1e-12);
  EXPECT_NEAR(scalar(r.clip_frac), 0.25, 1e-12);
  r.loss.backward();
  expect_values(v.grad(), {0, 0.25, -0.0125, 0.75}, 1e-12);

  // seq-mean-token-mean: 0.5 * ((1.69 + 1 + 0.0025)/3 + 9)/2 = 2.6718750
  AggOptions seq;
  seq.mode = AggMode::kSeqMeanTokenMean;
  EXPECT_NEAR(
      scalar(value_loss(v, dvec({0.5, 2, 0, 2}), dvec({2, 1, 0.05, 0}), packed, 0.2, seq).loss),
      0.5 * ((1.69 + 1 + 0.0025) / 3 + 9) / 2, 1e-12);
  EXPECT_THROW(value_loss(v, dvec({0.5, 2, 0, 2}), dvec({2, 1, 0.05, 0}), packed, -1, seq), Error);
}

}  // namespace
}  // namespace aspen::algo
