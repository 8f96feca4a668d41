// `aspen bench train`: the actor update timed per dtype on an HF checkpoint written by
// transformers; the figures agree with the stated formula and the batch it describes.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "support/hf_reference.h"

namespace aspen::cli {
namespace {

using testing::run_command;

TEST(BenchTrain, ReportsThroughputFlopsAndMfuPerDtypeByTheStatedFormula) {
  const std::string model = testing::scratch_dir() + "/model";
  const std::vector<nlohmann::json> jobs = {
      testing::hf_make_job(model, {{"arch", "qwen3"}, {"vocab", 300}, {"seed", 1}})};
  ASSERT_TRUE(testing::run_hf_reference(jobs, testing::scratch_dir()).ok(jobs.size()));
  const auto result = run_command(testing::aspen_cli() + " bench train --model " + model +
                                  " --rows 3 --prompt-tokens 5 --response-tokens 8 --steps 2"
                                  " --threads 1 --dtypes fp32,bf16,bf16_head --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json bench = nlohmann::json::parse(result.out);
  EXPECT_EQ(bench["rows"], 3);
  EXPECT_EQ(bench["response_tokens"], "uniform in [4, 8]");
  const int64_t packed = bench["packed_tokens"];
  EXPECT_GE(packed, 3 * (5 + 4));
  EXPECT_LE(packed, 3 * (5 + 8));
  EXPECT_EQ(bench["response_lengths"].size(), 3u);
  // The head (300 x 64, untied) and every layer's linears; not the embedding.
  const int64_t parameters = bench["parameters"];
  EXPECT_EQ(bench["matmul_parameters"].get<int64_t>(), parameters - 300 * 64 - [&] {
    // 1-D parameters: 2 layers x (2 norms + q_norm + k_norm) + the final norm.
    return 2 * (2 * 64 + 2 * 24) + 64;
  }());
  // The head (untied here) on response positions only; every other linear on all.
  const int64_t head = bench["head_parameters"];
  EXPECT_EQ(head, 300 * 64);
  int64_t responses = 0;
  for (const auto& length : bench["response_lengths"]) responses += length.get<int64_t>();
  EXPECT_EQ(bench["response_tokens_total"].get<int64_t>(), responses);
  EXPECT_EQ(packed, 3 * 5 + responses);
  const double want_flops = 6.0 * (bench["matmul_parameters"].get<int64_t>() - head) * packed +
                            6.0 * head * responses +
                            bench["attention_flops_per_update"].get<double>();
  EXPECT_NEAR(bench["flops_per_update"].get<double>(), want_flops, 1e-9 * want_flops);
  for (const char* dtype : {"fp32", "bf16", "bf16_head"}) {
    const nlohmann::json& d = bench["dtypes"][dtype];
    const double seconds = d["seconds_per_update"];
    EXPECT_NEAR(d["tokens_per_second"].get<double>() * seconds, packed, 1e-6 * packed) << dtype;
    EXPECT_NEAR(d["flops_per_second"].get<double>() * seconds,
                bench["flops_per_update"].get<double>(), 1e-3 * bench["flops_per_update"].get<double>());
    // Each update's MFU divides by the better of the peak readings before and after it
    // (and, for bf16, at least the run's fp32 peak); the reported MFU is their median,
    // the reported peak the best reading. On this tiny model no update comes near the
    // peak, so none is re-read or rejected.
    const std::vector<double> updates = d["update_seconds"];
    const std::vector<double> peaks = d["gemm_peak_readings"];
    const std::vector<double> mfu = d["mfu_per_update"];
    ASSERT_EQ(updates.size(), 2u) << dtype;  // --steps 2
    ASSERT_EQ(peaks.size(), updates.size() + 1) << dtype;
    ASSERT_EQ(mfu.size(), updates.size()) << dtype;
    EXPECT_TRUE(d["mfu_rejected_updates"].empty()) << dtype;
    const double floor = d.value("gemm_peak_floor", 0.0);
    EXPECT_EQ(d.contains("gemm_peak_floor"), std::string(dtype) != "fp32") << dtype;
    EXPECT_NEAR(seconds, (updates[0] + updates[1]) / 2, 1e-9 * seconds) << dtype;
    for (size_t i = 0; i < updates.size(); ++i) {
      const double flops = bench["flops_per_update"].get<double>() / updates[i];
      EXPECT_LE(mfu[i], 1.0) << dtype;
      if (!d["gemm_peak_rereads"].empty()) continue;
      EXPECT_NEAR(mfu[i] * std::max({peaks[i], peaks[i + 1], floor}), flops, 1e-9 * flops) << dtype;
    }
    EXPECT_NEAR(d["mfu"].get<double>(), (mfu[0] + mfu[1]) / 2, 1e-12) << dtype;
    if (d["gemm_peak_rereads"].empty()) {
      EXPECT_EQ(d["gemm_peak_flops_per_second"].get<double>(),
                *std::max_element(peaks.begin(), peaks.end()))
          << dtype;
    }
    EXPECT_GT(d["peak_rss_bytes"].get<int64_t>(), 0);
  }
}

// --profile DIR: one more update per dtype under torch's profiler, a Chrome trace whose
// operators include the head's and the layers' GEMMs; the timings do not include it.
TEST(BenchTrain, ProfileWritesAnOperatorTracePerDtype) {
  const std::string model = testing::scratch_dir() + "/model";
  const std::vector<nlohmann::json> jobs = {
      testing::hf_make_job(model, {{"arch", "qwen3"}, {"vocab", 300}, {"seed", 1}})};
  ASSERT_TRUE(testing::run_hf_reference(jobs, testing::scratch_dir()).ok(jobs.size()));
  const std::string dir = testing::scratch_dir() + "/profile";
  const auto result = run_command(testing::aspen_cli() + " bench train --model " + model +
                                  " --rows 2 --prompt-tokens 4 --response-tokens 6 --steps 1"
                                  " --threads 1 --dtypes fp32 --profile " + dir + " --json");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json bench = nlohmann::json::parse(result.out);
  const std::string path = bench["dtypes"]["fp32"]["profile"];
  EXPECT_EQ(path, dir + "/train-fp32.trace.json");
  std::ifstream file(path);
  ASSERT_TRUE(file.good()) << path;
  const nlohmann::json trace = nlohmann::json::parse(file);
  int64_t gemms = 0;
  for (const auto& event : trace["traceEvents"]) {
    if (event.value("cat", "") != "cpu_op") continue;
    const std::string name = event["name"];
    if (name == "aten::mm" || name == "aten::addmm" || name == "aten::addmm_") ++gemms;
  }
  EXPECT_GT(gemms, 0) << "no GEMM in " << path;
}

}  // namespace
}  // namespace aspen::cli
