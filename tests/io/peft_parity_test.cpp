// io/peft_adapter against PEFT itself (tools/python/peft_oracle.py, peft 0.21.2 from
// tools/python/requirements-oracles.txt) on a tiny random HF Qwen3: PEFT loads what
// Aspen writes with no key missing or left over and the same values, rank, scaling and
// dropout; Aspen reads what PEFT writes with the names, shapes, values and scaling PEFT's
// live modules have. A missing peft fails the tests: they are the format's guarantee.
// Each test is one Python process (importing torch, transformers and peft: a few seconds).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "aspen/io/peft_adapter.h"
#include "aspen/io/safetensors.h"
#include "io_test_util.h"
#include "peft_adapter_test_util.h"
#include "support/hf_reference.h"

namespace aspen::io {
namespace {

using nlohmann::json;
using testing::kTinyQwen3;

json make_base_job(const std::string& dir) {
  return testing::hf_make_job(dir, kTinyQwen3.make_options());
}

// PEFT's live modules (a peft_oracle result's "modules") against `adapter`.
void expect_modules_match(const json& modules, const LoraAdapter& adapter) {
  std::vector<std::string> names;
  for (const auto& [name, module] : modules.items()) names.push_back(name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, adapter.adapted_modules());
  for (const auto& [name, module] : modules.items()) {
    SCOPED_TRACE(name);
    EXPECT_EQ(module["r"], adapter.config.rank);
    EXPECT_NEAR(module["scaling"].get<double>(), adapter.config.scaling(), 1e-12);
    EXPECT_NEAR(module["dropout"].get<double>(), adapter.config.dropout, 1e-12);
    const torch::Tensor& a = adapter.tensors.at(lora_a_name(name));
    const torch::Tensor& b = adapter.tensors.at(lora_b_name(name));
    EXPECT_EQ(module["in"], a.size(1));
    EXPECT_EQ(module["out"], b.size(0));
  }
}

void expect_tensors_equal(const std::map<std::string, torch::Tensor>& actual,
                          const std::map<std::string, torch::Tensor>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, tensor] : expected) {
    ASSERT_EQ(actual.count(name), 1u) << name;
    EXPECT_EQ(actual.at(name).scalar_type(), tensor.scalar_type()) << name;
    EXPECT_TRUE(torch::equal(actual.at(name), tensor)) << name;
  }
}

TEST(PeftParity, PeftLoadsAspensAdapterWithEveryKeyAndValue) {
  testing::TempDir dir;
  const std::string base = dir.file("base");
  LoraAdapterConfig all = testing::lora_config(
      4, 8.0, {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"});
  all.dropout = 0.05;
  LoraAdapterConfig rslora = testing::lora_config(2, 6.0, {"v_proj", "down_proj"});
  rslora.use_rslora = true;
  const std::vector<LoraAdapter> adapters = {testing::random_adapter(kTinyQwen3, all, 11),
                                             testing::random_adapter(kTinyQwen3, rslora, 12)};

  std::vector<json> jobs = {make_base_job(base)};
  for (size_t i = 0; i < adapters.size(); ++i) {
    const std::string adapter_dir = dir.file("aspen" + std::to_string(i));
    write_peft_adapter(adapter_dir, adapters[i]);
    jobs.push_back({{"op", "peft_load"},
                    {"base", base},
                    {"adapter", adapter_dir},
                    {"tensors_out", adapter_dir + ".loaded.safetensors"}});
  }
  const testing::HfReferenceRun run =
      testing::run_hf_reference(jobs, dir.file("scratch"), "peft_oracle.py");
  ASSERT_TRUE(run.ok(jobs.size())) << run.errors;

  for (size_t i = 0; i < adapters.size(); ++i) {
    SCOPED_TRACE("adapter " + std::to_string(i));
    const json& loaded = run.results[i + 1];
    EXPECT_EQ(loaded["missing"], json::array());
    EXPECT_EQ(loaded["unexpected"], json::array());
    for (const json& warning : loaded["warnings"]) {
      EXPECT_THAT(warning.get<std::string>(), ::testing::Not(::testing::HasSubstr("adapter keys")));
    }
    expect_modules_match(loaded["modules"], adapters[i]);
    expect_tensors_equal(
        load_safetensors(dir.file("aspen" + std::to_string(i)) + ".loaded.safetensors"),
        adapters[i].tensors);
  }
}

TEST(PeftParity, ReadsPeftsAdaptersAndRefusesItsDora) {
  testing::TempDir dir;
  const std::string base = dir.file("base");
  const json plain = {{"op", "peft_save"},      {"base", base},
                      {"out", dir.file("plain")}, {"r", 4},
                      {"alpha", 16},              {"dropout", 0.1},
                      {"targets", {"q_proj", "v_proj", "down_proj"}},
                      {"seed", 1},                {"tensors_out", dir.file("plain.safetensors")}};
  // A regex target, rank-stabilised scaling and bf16 weights.
  const json regex = {{"op", "peft_save"},        {"base", base},
                      {"out", dir.file("regex")}, {"r", 2},
                      {"alpha", 4},               {"target_regex", R"(.*\.(k_proj|up_proj))"},
                      {"rslora", true},           {"dtype", "bfloat16"},
                      {"seed", 2},                {"tensors_out", dir.file("regex.safetensors")}};
  const json dora = {{"op", "peft_save"},       {"base", base},
                     {"out", dir.file("dora")}, {"r", 2},
                     {"alpha", 4},              {"targets", {"o_proj"}},
                     {"dora", true},            {"tensors_out", dir.file("dora.safetensors")}};
  const std::vector<json> jobs = {make_base_job(base), plain, regex, dora};
  const testing::HfReferenceRun run =
      testing::run_hf_reference(jobs, dir.file("scratch"), "peft_oracle.py");
  ASSERT_TRUE(run.ok(jobs.size())) << run.errors;

  const LoraAdapter read_plain = read_peft_adapter(dir.file("plain"));
  EXPECT_EQ(read_plain.config.rank, 4);
  EXPECT_EQ(read_plain.config.alpha, 16.0);
  EXPECT_EQ(read_plain.config.dropout, 0.1);
  EXPECT_FALSE(read_plain.config.use_rslora);
  EXPECT_EQ(read_plain.config.target_modules,
            (std::vector<std::string>{"down_proj", "q_proj", "v_proj"}));
  EXPECT_EQ(read_plain.config.base_model, base);
  expect_modules_match(run.results[1]["modules"], read_plain);
  expect_tensors_equal(read_plain.tensors, load_safetensors(dir.file("plain.safetensors")));
  EXPECT_EQ(read_plain.tensors.at("model.layers.1.mlp.down_proj.lora_A.weight").sizes(),
            (std::vector<int64_t>{4, kTinyQwen3.intermediate}));
  EXPECT_EQ(read_plain.tensors.at("model.layers.1.mlp.down_proj.lora_B.weight").sizes(),
            (std::vector<int64_t>{kTinyQwen3.hidden, 4}));

  const LoraAdapter read_regex = read_peft_adapter(dir.file("regex"));
  EXPECT_TRUE(read_regex.config.use_rslora);
  EXPECT_EQ(read_regex.config.target_modules, (std::vector<std::string>{"k_proj", "up_proj"}));
  expect_modules_match(run.results[2]["modules"], read_regex);
  expect_tensors_equal(read_regex.tensors, load_safetensors(dir.file("regex.safetensors")));
  EXPECT_EQ(read_regex.tensors.begin()->second.scalar_type(), torch::kBFloat16);

  testing::expect_error([&] { read_peft_adapter(dir.file("dora")); },
                        {dir.file("dora") + "/adapter_config.json", "use_dora", "DoRA"});
}

}  // namespace
}  // namespace aspen::io
