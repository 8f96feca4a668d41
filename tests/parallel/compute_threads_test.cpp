// One --threads setting reaches torch's intra-op pool and the BLAS library's own pool
// (when the loaded BLAS is OpenBLAS, whose pool torch's setting does not reach); 0 keeps
// both; a negative count is refused naming the option.
#include "aspen/parallel/compute_threads.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <string>

#include "aspen/util/blas_threads.h"
#include "aspen/util/error.h"

namespace aspen::parallel {
namespace {

TEST(ComputeThreads, SetsTorchAndBlasPoolsTogetherAndZeroKeepsThem) {
  const int before = at::get_num_threads();
  set_compute_threads(1, "--threads");
  EXPECT_EQ(at::get_num_threads(), 1);
  if (blas_threads() != 0) EXPECT_EQ(blas_threads(), 1);
  set_compute_threads(2, "--threads");
  EXPECT_EQ(at::get_num_threads(), 2);
  if (blas_threads() != 0) EXPECT_EQ(blas_threads(), 2);
  set_compute_threads(0, "--threads");
  EXPECT_EQ(at::get_num_threads(), 2);
  set_compute_threads(before, "--threads");
}

TEST(ComputeThreads, ANegativeCountIsRefusedNamingTheOption) {
  try {
    set_compute_threads(-1, "--threads");
    FAIL() << "-1 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--threads"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aspen::parallel
