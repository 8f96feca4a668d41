// SwapSpace: optimizer state and grads leave and return bit for bit, training after a
// swap equals training without one, RSS really drops on CPU, and the protocol and
// I/O errors are clear.
#include "aspen/parallel/swap_space.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "aspen/train/optimizer.h"
#include "aspen/util/error.h"
#include "aspen/util/memory_usage.h"

namespace aspen::parallel {

using namespace aspen::train;

namespace {

namespace fs = std::filesystem;
constexpr double kMB = 1024.0 * 1024.0;

// Same dtype, layout and bytes (torch::equal would call -0.0 and 0.0 equal).
bool bit_equal(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes() || a.strides() != b.strides())
    return false;
  torch::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

NamedTensors concat(NamedTensors a, const NamedTensors& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::map<std::string, torch::Tensor> snapshot(const NamedTensors& tensors) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, t] : tensors) out[name] = t.clone();
  return out;
}

// A small MLP (weights are decayed, biases not: both AdamW groups) and its optimizer.
struct Trainee {
  torch::nn::Sequential net{nullptr};
  std::unique_ptr<Optimizer> optimizer;

  Trainee() {
    torch::manual_seed(7);
    net = torch::nn::Sequential(torch::nn::Linear(8, 32), torch::nn::Tanh(),
                                torch::nn::Linear(32, 4));
    NamedTensors params;
    for (const auto& p : net->named_parameters()) params.emplace_back(p.key(), p.value());
    OptimizerOptions o;
    o.lr = 1e-2;
    o.weight_decay = 0.01;
    o.max_grad_norm = 1.0;
    optimizer = std::make_unique<Optimizer>(params, o);
  }

  void backward(int step) {
    torch::manual_seed(100 + step);
    torch::Tensor x = torch::randn({16, 8}), y = torch::randn({16, 4});
    torch::mse_loss(net->forward(x), y).backward();
  }
};

TEST(SwapSpace, OptimizerStateAndGradsRoundTripAndTrainingMatchesNoSwap) {
  Trainee swapped, reference;
  SwapSpace space;
  int step = 0;
  for (; step < 3; ++step) {
    swapped.backward(step);
    swapped.optimizer->step();
    reference.backward(step);
    reference.optimizer->step();
  }
  // Gradients of the next step exist, as during gradient accumulation across a rollout.
  swapped.backward(step);
  reference.backward(step);

  const NamedTensors out =
      concat(swapped.optimizer->state_tensors(), swapped.optimizer->grad_tensors());
  ASSERT_EQ(swapped.optimizer->state_tensors().size(), 8u);  // 4 params x (exp_avg, exp_avg_sq)
  ASSERT_EQ(swapped.optimizer->grad_tensors().size(), 4u);
  const auto before = snapshot(out);

  space.swap_out(out);
  EXPECT_TRUE(space.swapped_out());
  EXPECT_GT(space.file_bytes(), 0);
  for (const auto& [name, t] : out) EXPECT_EQ(t.numel(), 0) << name << " still holds data";

  space.swap_in();
  EXPECT_FALSE(space.swapped_out());
  // Identity: the optimizer hands out the very same tensor objects, restored.
  const NamedTensors back =
      concat(swapped.optimizer->state_tensors(), swapped.optimizer->grad_tensors());
  ASSERT_EQ(back.size(), out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(back[i].second.unsafeGetTensorImpl(), out[i].second.unsafeGetTensorImpl());
    EXPECT_TRUE(bit_equal(back[i].second, before.at(out[i].first))) << out[i].first;
  }

  swapped.optimizer->step();
  reference.optimizer->step();
  // Keep going with a swap in every "rollout" (after step(): grads are none, state only).
  for (++step; step < 7; ++step) {
    space.swap_out(swapped.optimizer->state_tensors());
    space.swap_in();
    swapped.backward(step);
    swapped.optimizer->step();
    reference.backward(step);
    reference.optimizer->step();
  }
  const auto a = swapped.net->named_parameters(), b = reference.net->named_parameters();
  for (const auto& p : a) EXPECT_TRUE(bit_equal(p.value(), b[p.key()])) << p.key();
}

TEST(SwapSpace, SwappingOutTwoHundredMegabytesOfStateLowersRss) {
  // One 5000x5000 fp32 matrix: AdamW keeps two 100 MB moments for it.
  torch::Tensor w = torch::zeros({5000, 5000}).requires_grad_(true);
  OptimizerOptions o;
  o.lr = 1e-3;
  Optimizer optimizer({{"w", w}}, o);
  w.mutable_grad() = torch::randn({5000, 5000});
  optimizer.step();
  const NamedTensors state = optimizer.state_tensors();
  const auto expected = snapshot(state);

  std::string path;
  {
    SwapSpace space;
    path = space.file_path();
    const int64_t rss_before = current_rss_bytes();
    space.swap_out(state);
    const int64_t rss_after = current_rss_bytes();
    const int64_t swapped = space.swapped_bytes();
    EXPECT_EQ(swapped, 2 * 5000 * 5000 * 4);
    ASSERT_TRUE(fs::exists(path));
    EXPECT_GE(static_cast<int64_t>(fs::file_size(path)), swapped);

    space.swap_in();
    const int64_t rss_back = current_rss_bytes();
    std::printf("[ swap RSS ] state %.1f MB: before swap_out %.1f MB, after %.1f MB "
                "(-%.1f MB), after swap_in %.1f MB\n",
                swapped / kMB, rss_before / kMB, rss_after / kMB,
                (rss_before - rss_after) / kMB, rss_back / kMB);
    RecordProperty("rss_drop_mb", std::to_string((rss_before - rss_after) / kMB));
    // Margins: other allocations may come and go; half the swapped bytes is the bar.
    EXPECT_GE(rss_before - rss_after, swapped / 2);
    EXPECT_GE(rss_back - rss_after, swapped / 2);
    EXPECT_EQ(fs::file_size(path), 0u);  // disk space returned after swap_in
    for (const auto& [name, t] : state) EXPECT_TRUE(bit_equal(t, expected.at(name))) << name;
    space.swap_out(state);  // destroyed while out: restores, then removes the file
  }
  EXPECT_FALSE(fs::exists(path));
  for (const auto& [name, t] : state) EXPECT_TRUE(bit_equal(t, expected.at(name))) << name;
}

TEST(SwapSpace, ManySmallTensorsAlsoLowerRss) {
  // 100 KiB tensors live in glibc's heap (below its mmap threshold). Swapping every other
  // one leaves holes that free() alone keeps resident; malloc_trim must return them.
  std::vector<torch::Tensor> all;
  for (int i = 0; i < 4000; ++i) all.push_back(torch::full({25600}, float(i)));
  NamedTensors half;
  for (int i = 0; i < 4000; i += 2) half.emplace_back("t" + std::to_string(i), all[i]);
  SwapSpace space;
  const int64_t rss_before = current_rss_bytes();
  space.swap_out(half);
  const int64_t rss_after = current_rss_bytes();
  std::printf("[ swap RSS ] %zu small tensors, %.1f MB: before %.1f MB, after %.1f MB (-%.1f MB)\n",
              half.size(), space.swapped_bytes() / kMB, rss_before / kMB, rss_after / kMB,
              (rss_before - rss_after) / kMB);
  EXPECT_GE(rss_before - rss_after, space.swapped_bytes() / 2);
  space.swap_in();
  for (int i = 0; i < 4000; i += 500) EXPECT_EQ(all[i][25599].item<float>(), float(i));
}

TEST(SwapSpace, SwapOutTwiceIsAnErrorAndSwapInWhenResidentIsANoOp) {
  torch::Tensor t = torch::arange(10, torch::kFloat);
  SwapSpace space;
  space.swap_in();  // nothing out: no-op
  EXPECT_EQ(t.numel(), 10);
  space.swap_out({{"t", t}});
  try {
    space.swap_out({{"t", t}});
    FAIL() << "expected aspen::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already swapped out"), std::string::npos) << e.what();
  }
  space.swap_in();
  space.swap_in();  // again: no-op
  EXPECT_TRUE(bit_equal(t, torch::arange(10, torch::kFloat)));
}

TEST(SwapSpace, UnwritableDirectoryIsAnErrorNamingIt) {
  const fs::path base = fs::temp_directory_path() / ("aspen_swap_test_" + std::to_string(getpid()));
  fs::create_directories(base);
  const fs::path not_a_dir = base / "plain_file";
  std::ofstream(not_a_dir) << "x";
  std::vector<std::string> bad = {not_a_dir.string(), (base / "missing").string()};
  if (geteuid() != 0) {  // root ignores permission bits
    fs::create_directories(base / "read_only");
    ::chmod((base / "read_only").c_str(), 0500);
    bad.push_back((base / "read_only").string());
  }
  for (const std::string& dir : bad) {
    SwapSpaceOptions options;
    options.directory = dir;
    try {
      SwapSpace space(options);
      ADD_FAILURE() << "expected aspen::Error for " << dir;
    } catch (const Error& e) {
      EXPECT_EQ(e.input(), dir);
      EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
    }
  }
  ::chmod((base / "read_only").c_str(), 0700);
  fs::remove_all(base);
}

TEST(SwapSpace, FailedWriteIsAnErrorNamingTheFileAndLeavesTensorsIntact) {
  // A file size limit makes the swap file "full" after 64 KiB (EFBIG instead of SIGXFSZ).
  struct rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  torch::Tensor t = torch::arange(256 * 1024, torch::kFloat);  // 1 MiB
  SwapSpace space;
  std::string message;
  try {
    space.swap_out({{"big", t}});
  } catch (const Error& e) {
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(message.find(space.file_path()), std::string::npos) << message;
  EXPECT_FALSE(space.swapped_out());
  EXPECT_TRUE(bit_equal(t, torch::arange(256 * 1024, torch::kFloat)));
}

TEST(SwapSpace, AliasesInsideTheSetStayAliased) {
  torch::Tensor base = torch::arange(12, torch::kFloat);
  torch::Tensor head = base.narrow(0, 0, 6), tail = base.narrow(0, 6, 6).view({2, 3});
  SwapSpace space;
  space.swap_out({{"base", base}, {"head", head}, {"tail", tail}});
  EXPECT_EQ(space.swapped_bytes(), 12 * 4);  // one storage, swapped once
  space.swap_in();
  EXPECT_TRUE(bit_equal(tail, torch::arange(6, 12, torch::kFloat).view({2, 3})));
  base.fill_(-1.0f);  // still one storage
  EXPECT_EQ(head[0].item<float>(), -1.0f);
  EXPECT_EQ(tail[1][2].item<float>(), -1.0f);
}

TEST(SwapSpace, AliasOutsideTheSetIsAnErrorAndLeavesTensorsIntact) {
  torch::Tensor base = torch::arange(8, torch::kFloat);
  torch::Tensor view = base.narrow(0, 2, 4);
  torch::Tensor other = torch::ones({3});
  SwapSpace space;
  try {
    space.swap_out({{"other", other}, {"view", view}});
    FAIL() << "expected aspen::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), "view");
  }
  EXPECT_FALSE(space.swapped_out());
  EXPECT_EQ(other.numel(), 3);
  EXPECT_EQ(view.numel(), 4);
}

TEST(SwapSpace, TensorModifiedWhileOutIsAnErrorOnSwapIn) {
  torch::Tensor t = torch::ones({4});
  SwapSpace space;
  space.swap_out({{"t", t}});
  t.resize_({4}).fill_(2.0f);  // misuse: wrote to a swapped-out tensor
  EXPECT_THROW(space.swap_in(), Error);
  EXPECT_TRUE(space.swapped_out());
  t.set_();  // undo the misuse so destruction can restore the original
}

TEST(SwapSpace, LeafParameterThatRequiresGradCanBeSwapped) {
  torch::Tensor p = torch::randn({3, 3}).requires_grad_(true);
  const torch::Tensor expected = p.detach().clone();
  SwapSpace space;
  space.swap_out({{"p", p}, {"undefined", torch::Tensor()}});
  space.swap_in();
  EXPECT_TRUE(p.requires_grad());
  EXPECT_TRUE(bit_equal(p.detach(), expected));
}

TEST(SwapSpace, CudaTensorsGoToHostMemoryAndBack) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::Tensor t = torch::randn({1024, 1024}, torch::kCUDA);
  const torch::Tensor expected = t.cpu();
  SwapSpace space;
  space.swap_out({{"t", t}});
  EXPECT_EQ(space.file_bytes(), 0);
  EXPECT_EQ(space.swapped_bytes(), 1024 * 1024 * 4);
  EXPECT_EQ(t.numel(), 0);
  space.swap_in();
  EXPECT_TRUE(t.is_cuda());
  EXPECT_TRUE(bit_equal(t.cpu(), expected));
}

}  // namespace
}  // namespace aspen::parallel
