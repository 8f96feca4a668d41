// AdamW against hand computation, parameter groups, clipping, non-finite skip and
// exact save/resume.
#include "aspen/train/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "aspen/util/error.h"

namespace aspen::train {
namespace {

torch::Tensor leaf(std::vector<double> values, std::vector<int64_t> shape) {
  return torch::tensor(values, torch::kDouble).reshape(shape).requires_grad_(true);
}

void set_grad(torch::Tensor& p, std::vector<double> values) {
  p.mutable_grad() = torch::tensor(values, torch::kDouble).reshape(p.sizes());
}

TEST(Optimizer, AdamWTwoStepsMatchHandComputation) {
  torch::Tensor w = leaf({1.0, -2.0}, {1, 2});  // a matrix: decayed
  torch::Tensor b = leaf({0.5, 0.25}, {2});     // a bias: not decayed
  OptimizerOptions o;
  o.lr = 0.1;
  o.weight_decay = 0.1;
  o.max_grad_norm = 0.0;
  Optimizer opt({{"layer.weight", w}, {"layer.bias", b}}, o);

  const double lr = 0.1, wd = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  const std::vector<double> g1 = {0.5, -1.0}, g2 = {0.1, 0.3};
  const std::vector<double> gb1 = {2.0, -0.5}, gb2 = {-1.0, 1.0};
  auto expected = [&](double p, double ga, double gb, bool decay, int steps) {
    double m = 0, v = 0;
    const double grads[2] = {ga, gb};
    for (int t = 1; t <= steps; ++t) {
      const double g = grads[t - 1];
      if (decay) p *= 1 - lr * wd;
      m = b1 * m + (1 - b1) * g;
      v = b2 * v + (1 - b2) * g * g;
      const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
      p -= lr / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + eps);
    }
    return p;
  };

  set_grad(w, g1);
  set_grad(b, gb1);
  StepResult r1 = opt.step();
  EXPECT_FALSE(r1.skipped);
  EXPECT_DOUBLE_EQ(r1.lr, 0.1);
  EXPECT_NEAR(w[0][0].item<double>(), expected(1.0, g1[0], 0, true, 1), 1e-12);
  EXPECT_NEAR(w[0][1].item<double>(), expected(-2.0, g1[1], 0, true, 1), 1e-12);
  EXPECT_NEAR(b[0].item<double>(), expected(0.5, gb1[0], 0, false, 1), 1e-12);
  // First AdamW step is lr * sign(g) plus the decay: 1 * 0.99 - 0.1.
  EXPECT_NEAR(w[0][0].item<double>(), 0.89, 1e-7);

  set_grad(w, g2);
  set_grad(b, gb2);
  opt.step();
  EXPECT_NEAR(w[0][0].item<double>(), expected(1.0, g1[0], g2[0], true, 2), 1e-12);
  EXPECT_NEAR(w[0][1].item<double>(), expected(-2.0, g1[1], g2[1], true, 2), 1e-12);
  EXPECT_NEAR(b[0].item<double>(), expected(0.5, gb1[0], gb2[0], false, 2), 1e-12);
  EXPECT_NEAR(b[1].item<double>(), expected(0.25, gb1[1], gb2[1], false, 2), 1e-12);
  EXPECT_EQ(opt.step_count(), 2);
}

// The fused one-pass step (at::_fused_adamw_) against torch::optim::AdamW's composed
// one, in fp32, over three steps with decay on the matrix only: the same trajectory to
// fp32 rounding, and the state where state_tensors() says it is.
TEST(Optimizer, Fp32StepsEqualTorchsComposedAdamW) {
  torch::manual_seed(3);
  torch::Tensor w = torch::randn({16, 8}).requires_grad_(true);
  torch::Tensor b = torch::randn({8}).requires_grad_(true);
  torch::Tensor w_ref = w.detach().clone().requires_grad_(true);
  torch::Tensor b_ref = b.detach().clone().requires_grad_(true);
  OptimizerOptions o;
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  o.max_grad_norm = 0.0;
  Optimizer opt({{"layer.weight", w}, {"layer.bias", b}}, o);
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{w_ref}, options(o.weight_decay));
  groups.emplace_back(std::vector<torch::Tensor>{b_ref}, options(0.0));
  torch::optim::AdamW reference(groups, torch::optim::AdamWOptions(o.lr));
  for (int step = 0; step < 3; ++step) {
    const torch::Tensor gw = torch::randn({16, 8});
    const torch::Tensor gb = torch::randn({8});
    w.mutable_grad() = gw.clone();
    b.mutable_grad() = gb.clone();
    w_ref.mutable_grad() = gw.clone();
    b_ref.mutable_grad() = gb.clone();
    opt.step();
    reference.step();
    EXPECT_TRUE(torch::allclose(w, w_ref, 1e-6, 1e-7)) << "step " << step;
    EXPECT_TRUE(torch::allclose(b, b_ref, 1e-6, 1e-7)) << "step " << step;
  }
  EXPECT_FALSE(w.detach().equal(w_ref.detach().clone().zero_()));  // it moved
  const NamedParams state = opt.state_tensors();
  ASSERT_EQ(state.size(), 4u);
  const auto& ref_state =
      static_cast<torch::optim::AdamWParamState&>(*reference.state().at(w_ref.unsafeGetTensorImpl()));
  EXPECT_EQ(state[0].first, "layer.weight.exp_avg");
  EXPECT_TRUE(torch::allclose(state[0].second, ref_state.exp_avg(), 1e-6, 1e-8));
  EXPECT_TRUE(torch::allclose(state[1].second, ref_state.exp_avg_sq(), 1e-6, 1e-10));
  EXPECT_EQ(ref_state.step(), 3);
}

TEST(Optimizer, ClipGradNormReturnsPreClipNormAndScalesToMax) {
  torch::Tensor a = leaf({0.0, 0.0}, {2});
  torch::Tensor c = leaf({0.0}, {1});
  set_grad(a, {3.0, 4.0});
  set_grad(c, {12.0});
  EXPECT_NEAR(clip_grad_norm({a, c}, 1.0), 13.0, 1e-12);
  EXPECT_NEAR(global_grad_norm({a, c}), 13.0 / (13.0 + 1e-6), 1e-12);
  EXPECT_NEAR(a.grad()[0].item<double>(), 3.0 / (13.0 + 1e-6), 1e-12);
  // Under the threshold nothing changes.
  EXPECT_NEAR(clip_grad_norm({a, c}, 5.0), 13.0 / (13.0 + 1e-6), 1e-12);
  EXPECT_NEAR(c.grad()[0].item<double>(), 12.0 / (13.0 + 1e-6), 1e-12);
}

TEST(Optimizer, NonFiniteGradientSkipsTheStep) {
  torch::Tensor w = leaf({1.0, 2.0}, {1, 2});
  OptimizerOptions o;
  o.lr = 0.1;
  Optimizer opt({{"w", w}}, o);
  set_grad(w, {std::nan(""), 1.0});
  StepResult r = opt.step();
  EXPECT_TRUE(r.skipped);
  EXPECT_FALSE(std::isfinite(r.grad_norm));
  EXPECT_EQ(opt.step_count(), 0);
  EXPECT_DOUBLE_EQ(w[0][0].item<double>(), 1.0);
  EXPECT_FALSE(w.grad().defined());  // cleared for the next step
}

// Runs steps [from, to) of a fixed gradient sequence.
void run_steps(Optimizer& opt, std::vector<torch::Tensor>& params, int from, int to) {
  for (int s = from; s < to; ++s) {
    for (size_t i = 0; i < params.size(); ++i) {
      torch::Tensor g = torch::sin(torch::arange(params[i].numel(), torch::kDouble) * (s + 1) +
                                   static_cast<double>(i))
                            .reshape(params[i].sizes());
      params[i].mutable_grad() = g;
    }
    opt.step();
  }
}

TEST(Optimizer, SaveLoadResumeEqualsUninterrupted) {
  OptimizerOptions o;
  o.lr = 0.05;
  o.max_grad_norm = 1.0;
  o.schedule.kind = LrScheduleKind::kCosine;
  o.schedule.warmup_steps = 2;
  o.schedule.total_steps = 6;
  auto make = [] {
    return std::vector<torch::Tensor>{leaf({0.1, 0.2, 0.3, 0.4}, {2, 2}),
                                      leaf({-0.5, 0.5}, {2})};
  };
  auto named = [](std::vector<torch::Tensor>& p) {
    return NamedParams{{"w", p[0]}, {"norm.weight", p[1]}};
  };
  std::vector<torch::Tensor> ref = make();
  Optimizer ref_opt(named(ref), o);
  run_steps(ref_opt, ref, 0, 5);

  const std::string path =
      (std::filesystem::temp_directory_path() / "aspen_optimizer_resume_test.safetensors").string();
  std::vector<torch::Tensor> first = make();
  {
    Optimizer opt(named(first), o);
    run_steps(opt, first, 0, 3);
    opt.save(path);
  }
  std::vector<torch::Tensor> resumed;
  for (auto& p : first) resumed.push_back(p.detach().clone().requires_grad_(true));
  Optimizer opt(named(resumed), o);
  opt.load(path);
  EXPECT_EQ(opt.step_count(), 3);
  EXPECT_DOUBLE_EQ(opt.next_lr(), o.lr * lr_factor(o.schedule, 3));
  run_steps(opt, resumed, 3, 5);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(torch::equal(resumed[i], ref[i])) << i;
  std::filesystem::remove(path);
}

// Expert parallelism's case: two optimizers over different parameters (a rank holding
// "w", another holding "norm.weight") each write their own state; a third optimizer
// holding both takes each parameter's state by name and continues bit-identically.
TEST(Optimizer, StateByNameRestoresIntoADifferentSetOfParameters) {
  OptimizerOptions o;
  o.lr = 0.05;
  o.max_grad_norm = 0.0;  // the two halves' norms differ from the whole's
  std::vector<torch::Tensor> ref{leaf({0.1, 0.2, 0.3, 0.4}, {2, 2}), leaf({-0.5, 0.5}, {2})};
  Optimizer ref_opt({{"w", ref[0]}, {"norm.weight", ref[1]}}, o);
  run_steps(ref_opt, ref, 0, 5);

  std::vector<torch::Tensor> w{leaf({0.1, 0.2, 0.3, 0.4}, {2, 2})};
  std::vector<torch::Tensor> norm{leaf({-0.5, 0.5}, {2})};
  Optimizer w_opt({{"w", w[0]}}, o);
  Optimizer norm_opt({{"norm.weight", norm[0]}}, o);
  // The sequence run_steps gives each parameter by its index in the whole.
  for (int s = 0; s < 3; ++s) {
    w[0].mutable_grad() = torch::sin(torch::arange(4, torch::kDouble) * (s + 1)).reshape({2, 2});
    norm[0].mutable_grad() = torch::sin(torch::arange(2, torch::kDouble) * (s + 1) + 1.0);
    w_opt.step();
    norm_opt.step();
  }
  std::map<std::string, torch::Tensor> state;
  for (auto& [name, t] : w_opt.checkpoint_state()) state[name] = t;
  for (auto& [name, t] : norm_opt.checkpoint_state([](const std::string& n) {
         return n == "norm.weight";
       })) {
    state[name] = t;
  }
  EXPECT_EQ(state.at("w.step").item<int64_t>(), 3);
  EXPECT_EQ(state.at("optimizer.step_count").item<int64_t>(), 3);

  std::vector<torch::Tensor> resumed{w[0].detach().clone().requires_grad_(true),
                                     norm[0].detach().clone().requires_grad_(true)};
  Optimizer opt({{"w", resumed[0]}, {"norm.weight", resumed[1]}}, o);
  opt.restore_state(state, "two shares");
  run_steps(opt, resumed, 3, 5);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(torch::equal(resumed[i], ref[i])) << i;
}

// A sharded checkpoint splits each entry like the parameter it belongs to: every name
// checkpoint_state() writes maps back to its parameter, moments shaped like it.
TEST(Optimizer, EveryCheckpointStateEntryNamesItsParameter) {
  OptimizerOptions o;
  o.max_grad_norm = 0.0;
  std::vector<torch::Tensor> params{leaf({0.1, 0.2, 0.3, 0.4}, {2, 2}), leaf({-0.5, 0.5}, {2})};
  Optimizer opt({{"model.layers.0.mlp.down_proj.weight", params[0]}, {"norm.weight", params[1]}},
                o);
  run_steps(opt, params, 0, 1);
  int shaped = 0;
  for (const auto& [name, tensor] : opt.checkpoint_state()) {
    const auto owner = state_entry_owner(name);
    if (name == "optimizer.step_count") {
      EXPECT_FALSE(owner.has_value());
      continue;
    }
    ASSERT_TRUE(owner.has_value()) << name;
    EXPECT_TRUE(owner->parameter == "model.layers.0.mlp.down_proj.weight" ||
                owner->parameter == "norm.weight")
        << name << " -> " << owner->parameter;
    const torch::Tensor& param = owner->parameter == "norm.weight" ? params[1] : params[0];
    EXPECT_EQ(owner->shaped, tensor.sizes() == param.sizes() && tensor.dim() > 0) << name;
    shaped += owner->shaped ? 1 : 0;
  }
  EXPECT_EQ(shaped, 4);  // exp_avg and exp_avg_sq of both
  EXPECT_EQ(state_entry_owner("w.max_exp_avg_sq")->parameter, "w");
  EXPECT_FALSE(state_entry_owner("w").has_value());
  EXPECT_FALSE(state_entry_owner(".step").has_value());
}

TEST(Optimizer, StateWithoutStepCounterOrWithAWrongShapeIsRefusedNamingIt) {
  torch::Tensor w = leaf({1.0, 2.0}, {1, 2});
  Optimizer opt({{"w", w}}, {});
  std::map<std::string, torch::Tensor> state{{"w.step", torch::tensor(int64_t{1})},
                                             {"w.exp_avg", torch::zeros({2})},
                                             {"w.exp_avg_sq", torch::zeros({2})}};
  try {
    opt.restore_state(state, "shard.safetensors");
    FAIL() << "no step counter accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shard.safetensors"), std::string::npos) << e.what();
  }
  state["optimizer.step_count"] = torch::tensor(int64_t{1});
  try {
    opt.restore_state(state, "shard.safetensors");
    FAIL() << "a [2] moment accepted for a [1, 2] parameter";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("w.exp_avg"), std::string::npos) << e.what();
  }
  state.erase("w.exp_avg_sq");
  state["w.exp_avg"] = torch::zeros({1, 2});
  EXPECT_THROW(opt.restore_state(state, "shard.safetensors"), Error);  // partial state
}

// Checkpoints written before the named format (a torch archive of torch::optim::AdamW's
// own serialization and the step counter) still resume.
TEST(Optimizer, LoadsTheTorchArchiveOfEarlierCheckpoints) {
  OptimizerOptions o;
  o.lr = 0.05;
  std::vector<torch::Tensor> ref{leaf({0.1, 0.2, 0.3, 0.4}, {2, 2}), leaf({-0.5, 0.5}, {2})};
  Optimizer ref_opt({{"w", ref[0]}, {"norm.weight", ref[1]}}, o);
  run_steps(ref_opt, ref, 0, 4);

  std::vector<torch::Tensor> first{leaf({0.1, 0.2, 0.3, 0.4}, {2, 2}), leaf({-0.5, 0.5}, {2})};
  const std::string path =
      (std::filesystem::temp_directory_path() / "aspen_optimizer_legacy_test.pt").string();
  {
    // The same groups the Optimizer builds: decayed matrices first, then the rest.
    torch::optim::AdamW adamw(
        {torch::optim::OptimizerParamGroup(
             {first[0]}, std::make_unique<torch::optim::AdamWOptions>(
                             torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay))),
         torch::optim::OptimizerParamGroup(
             {first[1]},
             std::make_unique<torch::optim::AdamWOptions>(
                 torch::optim::AdamWOptions(o.lr).weight_decay(0.0)))},
        torch::optim::AdamWOptions(o.lr));
    Optimizer opt({{"w", first[0]}, {"norm.weight", first[1]}}, o);
    run_steps(opt, first, 0, 2);
    // Move its state into a plain AdamW over the same tensors and archive it the old way.
    std::map<std::string, torch::Tensor> s;
    for (auto& [name, t] : opt.checkpoint_state()) s[name] = t;
    for (size_t i = 0; i < first.size(); ++i) {
      const std::string n = i == 0 ? "w" : "norm.weight";
      auto st = std::make_unique<torch::optim::AdamWParamState>();
      st->step(s.at(n + ".step").item<int64_t>());
      st->exp_avg(s.at(n + ".exp_avg").clone());
      st->exp_avg_sq(s.at(n + ".exp_avg_sq").clone());
      adamw.state()[first[i].unsafeGetTensorImpl()] = std::move(st);
    }
    torch::serialize::OutputArchive archive, adamw_archive;
    adamw.save(adamw_archive);
    archive.write("adamw", adamw_archive);
    archive.write("step_count", torch::tensor(int64_t{2}));
    archive.save_to(path);
  }
  std::vector<torch::Tensor> resumed{first[0].detach().clone().requires_grad_(true),
                                     first[1].detach().clone().requires_grad_(true)};
  Optimizer opt({{"w", resumed[0]}, {"norm.weight", resumed[1]}}, o);
  opt.load(path);
  EXPECT_EQ(opt.step_count(), 2);
  run_steps(opt, resumed, 2, 4);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_TRUE(torch::equal(resumed[i], ref[i])) << i;
  std::filesystem::remove(path);
}

TEST(Optimizer, LoadOfMissingFileIsAnError) {
  torch::Tensor w = leaf({1.0}, {1, 1});
  Optimizer opt({{"w", w}}, {});
  EXPECT_THROW(opt.load("/nonexistent/aspen/optimizer.pt"), Error);
}

}  // namespace
}  // namespace aspen::train
