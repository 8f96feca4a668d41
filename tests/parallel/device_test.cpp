// Device strings: parsed once, with errors that name the key; CUDA asked for where none
// is usable is an error at resolve time, never a silent fall-back to the CPU.
#include "aspen/parallel/device.h"

#include <gtest/gtest.h>

#include "aspen/util/error.h"

namespace aspen::parallel {
namespace {

TEST(DeviceSpec, ParsesCpuCudaAndCudaN) {
  EXPECT_FALSE(parse_device_spec("cpu", "k").cuda);
  const DeviceSpec cuda = parse_device_spec("cuda", "k");
  EXPECT_TRUE(cuda.cuda);
  EXPECT_FALSE(cuda.index.has_value());
  const DeviceSpec cuda3 = parse_device_spec("cuda:3", "k");
  EXPECT_TRUE(cuda3.cuda);
  EXPECT_EQ(cuda3.index, 3);
  for (const std::string text : {"cpu", "cuda", "cuda:0", "cuda:12"}) {
    EXPECT_EQ(parse_device_spec(text, "k").text(), text);
  }
}

TEST(DeviceSpec, MalformedStringsAreErrorsNamingTheKey) {
  for (const std::string text : {"", "gpu", "CUDA", "cuda:", "cuda:-1", "cuda:x", "cuda:1x",
                                 "cuda:123456", "cpu:0", " cpu"}) {
    try {
      parse_device_spec(text, "train.device");
      ADD_FAILURE() << "accepted \"" << text << "\"";
    } catch (const Error& e) {
      EXPECT_EQ(e.input(), "train.device") << text;
      EXPECT_NE(std::string(e.what()).find("cpu, cuda or cuda:N"), std::string::npos);
    }
  }
}

TEST(ResolveDevice, CpuIsAlwaysTheCpu) {
  EXPECT_EQ(resolve_device(parse_device_spec("cpu", "k"), 3, "k"), torch::Device(torch::kCPU));
}

TEST(ResolveDevice, CudaFollowsTheLocalRankOrFailsNamingTheKey) {
  const int count = cuda_device_count();
  if (count == 0) {
    try {
      resolve_device(parse_device_spec("cuda", "rollout.device"), 0, "rollout.device");
      ADD_FAILURE() << "cuda resolved without a CUDA device";
    } catch (const Error& e) {
      EXPECT_EQ(e.input(), "rollout.device");
      EXPECT_NE(e.problem().find("no CUDA device"), std::string::npos) << e.problem();
    }
    return;
  }
  EXPECT_EQ(resolve_device(parse_device_spec("cuda", "k"), count - 1, "k"),
            torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(count - 1)));
  EXPECT_EQ(resolve_device(parse_device_spec("cuda:0", "k"), count - 1, "k"),
            torch::Device(torch::kCUDA, 0));
  EXPECT_THROW(resolve_device(parse_device_spec("cuda:" + std::to_string(count), "k"), 0, "k"),
               Error);
}

}  // namespace
}  // namespace aspen::parallel
