// FirstError keeps the first exception its workers report and rethrows it once.
#include "aspen/util/first_error.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace aspen {
namespace {

std::exception_ptr failure(const std::string& what) {
  return std::make_exception_ptr(std::runtime_error(what));
}

TEST(FirstError, RethrowsNothingWhenNothingWasRecorded) {
  FirstError errors;
  EXPECT_NO_THROW(errors.rethrow_if_any());
}

TEST(FirstError, RethrowsTheFirstRecordedExceptionAndDropsLaterOnes) {
  FirstError errors;
  errors.record(failure("first"));
  errors.record(failure("second"));
  try {
    errors.rethrow_if_any();
    FAIL() << "nothing rethrown";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "first");
  }
}

TEST(FirstError, KeepsExactlyOneOfManyThreadsFailures) {
  FirstError errors;
  std::vector<std::thread> workers;
  for (int t = 0; t < 8; ++t) {
    workers.emplace_back([&errors, t] { errors.record(failure("worker " + std::to_string(t))); });
  }
  for (std::thread& worker : workers) worker.join();
  std::string rethrown;
  for (int attempt = 0; attempt < 2; ++attempt) {  // the same one every time
    try {
      errors.rethrow_if_any();
    } catch (const std::runtime_error& e) {
      if (attempt == 0) rethrown = e.what();
      EXPECT_EQ(std::string(e.what()), rethrown);
    }
  }
  EXPECT_EQ(rethrown.rfind("worker ", 0), 0u) << rethrown;
}

}  // namespace
}  // namespace aspen
