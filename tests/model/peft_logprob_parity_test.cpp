// LoRA adapters against PEFT itself (tools/python/peft_oracle.py, peft 0.21.2 from
// tools/python/requirements-oracles.txt) by what a model computes, both ways, on random
// Qwen3 and Qwen2 (attention biases) checkpoints:
//  - an adapter Aspen writes (write_peft_adapter of an attached model's lora_state()),
//    loaded with peft.PeftModel.from_pretrained(base, dir), gives the log-probs of
//    Aspen's model with that adapter attached, to 1e-4;
//  - an adapter PEFT writes (get_peft_model, save_pretrained), read and applied by
//    Aspen (read_peft_adapter, apply_peft_adapter), gives the log-probs of PEFT's live
//    model, to 1e-4.
// Adapters on all seven projections, alpha / r and rank-stabilised scaling, random A
// and B of std 0.3 (B is zero after PEFT's own init, which would hide a wrong B or
// scaling): they move the log-probs by far more than the tolerance, which is checked.
// The bases are Aspen-built checkpoints transformers loads as the same model
// (transformers_parity_test.cpp), so that one Python process answers every job.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/io/peft_adapter.h"
#include "aspen/model/peft_lora.h"
#include "aspen/model/pretrained.h"
#include "hf_parity_util.h"
#include "support/hf_reference.h"
#include "tiny_configs.h"

namespace aspen::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::aspen_logprobs;
using testing::count_logprobs;
using testing::max_logprob_diff;

constexpr double kPeftTolerance = 1e-4;
constexpr int64_t kPeftVocab = 300;
// An adapter must move some log-prob by this much, so that parity within kPeftTolerance
// cannot come from an adapter that is ignored.
constexpr double kPeftAdapterEffect = 100 * kPeftTolerance;
constexpr double kPeftAdapterStd = 0.3;

const std::vector<std::string> kPeftTargets = {"q_proj", "k_proj", "v_proj", "o_proj",
                                              "gate_proj", "up_proj", "down_proj"};

struct PeftBase {
  std::string arch;  // "qwen3", "qwen2"
  std::string dir;
};

// An adapter Aspen writes: attached to the base loaded from its directory, A and B
// drawn from `seed`.
struct AspenWrittenAdapter {
  std::string dir;
  QwenForCausalLM model{nullptr};
};

AspenWrittenAdapter write_aspen_adapter(const PeftBase& base, const LoraOptions& options, uint64_t seed,
                                 const std::string& dir) {
  AspenWrittenAdapter written{dir, load_pretrained_model(base.dir)};
  written.model->attach_lora(options);
  torch::manual_seed(seed);
  {
    torch::NoGradGuard no_grad;
    for (const auto& [name, param] : written.model->lora_state()) {
      param.copy_(kPeftAdapterStd * torch::randn(param.sizes()));
    }
  }
  const LoraAdapter adapter = peft_adapter_of(*written.model, base.dir);
  EXPECT_EQ(adapter.tensors.size(), 2 * kPeftTargets.size() * 2) << "2 layers, A and B";
  write_peft_adapter(dir, adapter);
  return written;
}

std::vector<json> peft_rows(const json& logprobs) {
  std::vector<json> rows;
  for (const json& row : logprobs) rows.push_back({{"logprobs", row}});
  return rows;
}

// Checks Aspen's `model` against PEFT's log-probs, and that its adapter matters.
void expect_peft_parity(QwenForCausalLM& model, const json& peft_logprobs, const std::string& what) {
  SCOPED_TRACE(what);
  const auto prompts = testing::parity_prompts(kPeftVocab);
  const auto got = aspen_logprobs(model, prompts);
  const double diff = max_logprob_diff(got, peft_rows(peft_logprobs));
  model->set_lora_enabled(false);
  const double effect = max_logprob_diff(aspen_logprobs(model, prompts), peft_rows(peft_logprobs));
  model->set_lora_enabled(true);
  std::printf("%s: max |aspen - peft| = %.3g over %zu log-probs (the adapter moves them by %.3g)\n",
              what.c_str(), diff, count_logprobs(got), effect);
  EXPECT_LE(diff, kPeftTolerance);
  EXPECT_GE(effect, kPeftAdapterEffect);
}

TEST(PeftLogprobParity, Qwen3AndQwen2AdaptersMatchPeftWithin1e4BothWays) {
  const std::string dir = testing::hf_parity_scratch_dir();
  const auto prompts = testing::parity_prompts(kPeftVocab);
  std::vector<PeftBase> bases;
  for (ModelConfig config :
       {testing::tiny_config(ModelFamily::kQwen3, /*tied=*/false, /*head_dim=*/12),
        testing::tiny_config(ModelFamily::kQwen2, /*tied=*/true, /*head_dim=*/8)}) {
    config.vocab_size = kPeftVocab;
    PeftBase base{config.model_type(), dir + "/" + config.model_type()};
    QwenForCausalLM built = testing::aspen_built_model(config, 41 + bases.size());
    save_pretrained_model(base.dir, built);
    bases.push_back(base);
  }

  LoraOptions plain;
  plain.rank = 4;
  plain.alpha = 8.0;
  plain.targets = kPeftTargets;
  LoraOptions rslora = plain;
  rslora.alpha = 6.0;
  rslora.use_rslora = true;
  rslora.dropout = 0.05;  // a training-time option: neither side applies it here

  // Aspen writes, PEFT loads.
  std::vector<AspenWrittenAdapter> aspen_adapters;
  std::vector<json> jobs;
  for (const PeftBase& base : bases) {
    for (const LoraOptions& options : {plain, rslora}) {
      const std::string name = base.arch + (options.use_rslora ? "_rslora" : "_plain");
      aspen_adapters.push_back(write_aspen_adapter(base, options, 51 + aspen_adapters.size(),
                                                   dir + "/aspen_" + name));
      jobs.push_back({{"op", "peft_logprobs"},
                      {"base", base.dir},
                      {"adapter", aspen_adapters.back().dir},
                      {"prompts", prompts}});
    }
  }
  // PEFT writes, Aspen loads: rslora on Qwen2 only.
  for (const PeftBase& base : bases) {
    jobs.push_back({{"op", "peft_save"},
                    {"base", base.dir},
                    {"out", dir + "/peft_" + base.arch},
                    {"r", 4},
                    {"alpha", 8},
                    {"targets", kPeftTargets},
                    {"rslora", base.arch == "qwen2"},
                    {"seed", 61 + (jobs.size())},
                    {"tensors_out", dir + "/peft_" + base.arch + ".safetensors"},
                    {"prompts", prompts}});
  }
  const testing::HfReferenceRun run =
      testing::run_hf_reference(jobs, dir + "/scratch", "peft_oracle.py");
  ASSERT_TRUE(run.ok(jobs.size())) << run.errors;

  for (size_t i = 0; i < aspen_adapters.size(); ++i) {
    expect_peft_parity(aspen_adapters[i].model, run.results[i]["logprobs"],
                  "Aspen's adapter " + aspen_adapters[i].dir + " in PEFT");
  }
  for (size_t b = 0; b < bases.size(); ++b) {
    const std::string adapter_dir = dir + "/peft_" + bases[b].arch;
    QwenForCausalLM model = load_pretrained_model(bases[b].dir);
    apply_peft_adapter(model, read_peft_adapter(adapter_dir), adapter_dir);
    EXPECT_EQ(model->lora_options.use_rslora, bases[b].arch == "qwen2");
    EXPECT_EQ(model->lora_options.targets.size(), kPeftTargets.size());
    expect_peft_parity(model, run.results[aspen_adapters.size() + b]["logprobs"],
                  "PEFT's adapter " + adapter_dir + " in Aspen");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace aspen::model
