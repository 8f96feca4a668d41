#include "bench/linear_bench.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "aspen/kernels/small_batch_linear.h"
#include "aspen/util/seconds_since.h"
#include "bench/imports.h"

namespace aspen::bench {
namespace {

struct Shape {
  const char* name;
  int64_t n, k;
};

constexpr Shape kShapes[] = {
    {"qkv_proj", 4096, 1024}, {"o_proj", 1024, 2048},  {"gate_up_proj", 6144, 1024},
    {"down_proj", 1024, 3072}, {"lm_head", 151936, 1024},
};

// Median seconds per call of `call`, over 5 repeats of at least `repeat_seconds` each.
double median_seconds(const std::function<void()>& call, double repeat_seconds) {
  using Clock = std::chrono::steady_clock;
  call();  // warm-up: pages touched, primitives created
  std::vector<double> per_call;
  for (int repeat = 0; repeat < 5; ++repeat) {
    int64_t calls = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    do {
      call();
      ++calls;
      elapsed = seconds_since(start);
    } while (elapsed < repeat_seconds);
    per_call.push_back(elapsed / static_cast<double>(calls));
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace

nlohmann::json run_linear_bench(double min_seconds) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  nlohmann::json cases = nlohmann::json::array();
  const std::vector<int64_t> batch_rows = {1, 4, 8};
  const std::vector<torch::ScalarType> dtypes = {torch::kFloat, torch::kBFloat16};
  const double case_count =
      static_cast<double>(std::size(kShapes) * batch_rows.size() * dtypes.size());
  const double repeat_seconds = min_seconds / (case_count * 2) / 5;
  for (const Shape& shape : kShapes) {
    for (torch::ScalarType dtype : dtypes) {
      const torch::Tensor weight = (torch::randn({shape.n, shape.k}) * 0.02).to(dtype);
      for (int64_t m : batch_rows) {
        const torch::Tensor x = torch::randn({m, shape.k}).to(dtype);
        const double torch_s = median_seconds(
            [&] { torch::nn::functional::linear(x, weight); }, repeat_seconds);
        const double kernel_s =
            median_seconds([&] { small_batch_linear(x, weight); }, repeat_seconds);
        const double bytes = static_cast<double>(weight.numel() * weight.element_size());
        const double diff = (small_batch_linear(x, weight).to(torch::kFloat) -
                             torch::nn::functional::linear(x, weight).to(torch::kFloat))
                                .abs()
                                .max()
                                .item<double>();
        cases.push_back({{"shape", shape.name},
                         {"n", shape.n},
                         {"k", shape.k},
                         {"m", m},
                         {"dtype", dtype == torch::kFloat ? "fp32" : "bf16"},
                         {"torch_ms", torch_s * 1e3},
                         {"kernel_ms", kernel_s * 1e3},
                         {"speedup", torch_s / kernel_s},
                         {"torch_gb_per_s", bytes / torch_s / 1e9},
                         {"kernel_gb_per_s", bytes / kernel_s / 1e9},
                         {"kernel_applies", small_batch_kernel_applies(x, weight)},
                         {"max_abs_diff", diff}});
      }
    }
  }
  return {{"threads", at::get_num_threads()}, {"cases", cases}};
}

}  // namespace aspen::bench
