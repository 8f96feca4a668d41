// `aspen version --json`: what the build is and sees, checked against the torch of the
// oracle Python it was built from; and --device errors that name the option.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli_test_util.h"
#include "support/oracles.h"

namespace aspen::cli {
namespace {

std::vector<int> version_numbers(const std::string& text) {
  std::vector<int> numbers;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, '.') && numbers.size() < 3;) {
    numbers.push_back(std::atoi(part.c_str()));
  }
  return numbers;
}

TEST(VersionCommand, JsonNamesTheTorchItWasBuiltAgainstWithCudaCompiledIn) {
  const auto result = testing::run_command(testing::aspen_cli() + " version --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json v = nlohmann::json::parse(result.out);
  for (const char* key : {"aspen", "torch", "cuda_compiled", "cuda_available", "devices", "blas"}) {
    EXPECT_TRUE(v.contains(key)) << key;
  }
  EXPECT_GE(version_numbers(v["torch"].get<std::string>()), (std::vector<int>{2, 10}));
  EXPECT_TRUE(v["cuda_compiled"].get<bool>()) << "the build must use the CUDA-enabled torch";
  EXPECT_FALSE(v["blas"].get<std::string>().empty());
  ASSERT_TRUE(v["devices"].is_array());
  ASSERT_GE(v["devices"].size(), 1u);
  EXPECT_EQ(v["devices"][0]["type"], "cpu");
  EXPECT_EQ(v["cuda_available"].get<bool>(), v["devices"].size() > 1);

  // The same torch as the Python whose wheel CMake built against ("2.15.0+cu132").
  const auto python =
      testing::run_command(testing::python() + " -c 'import torch; print(torch.__version__)'");
  ASSERT_EQ(python.exit_code, 0) << python.err;
  EXPECT_EQ(python.out.rfind(v["torch"].get<std::string>(), 0), 0u)
      << "aspen: " << v["torch"] << ", python: " << python.out;
}

TEST(VersionCommand, PlainOutputIsForPeople) {
  const auto result = testing::run_command(testing::aspen_cli() + " version");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.rfind("aspen ", 0), 0u) << result.out;
  EXPECT_NE(result.out.find("torch "), std::string::npos);
}

TEST(DeviceOption, AnUnknownDeviceIsAnErrorNamingTheOption) {
  const auto result =
      testing::run_command(testing::aspen_cli() + " logprobs --model /nonexistent --device gpu");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("--device"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("cpu, cuda or cuda:N"), std::string::npos) << result.err;
}

TEST(DeviceOption, CudaWithoutAGpuIsAnErrorNotAFallback) {
  const auto version = testing::run_command(testing::aspen_cli() + " version --json");
  if (nlohmann::json::parse(version.out)["cuda_available"].get<bool>()) {
    GTEST_SKIP() << "a GPU is present: nothing to refuse";
  }
  const auto result = testing::run_command(
      testing::aspen_cli() + " generate --model /nonexistent --prompt hi --device cuda");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("--device"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("no CUDA device"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace aspen::cli
