#include "aspen/pipeline/lora_policy.h"

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>

#include "aspen/io/peft_adapter.h"
#include "aspen/model/peft_lora.h"
#include "aspen/model/pretrained.h"
#include "aspen/pipeline/imports.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"
#include "aspen/util/log.h"

namespace aspen::pipeline {

void attach_policy_lora(const TrainConfig& config, RlSetup& setup) {
  const LoraOptions& options = config.train.lora;
  if (!options.enabled()) return;
  // Not under the generator's mutex: the draws inside attach_lora take it themselves.
  // The run's thread is the only one drawing at this point.
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  const at::Tensor saved = generator.get_state();
  generator.set_current_seed(config.train.seed);
  try {
    setup.model->attach_lora(options);
  } catch (...) {
    generator.set_state(saved);
    throw;
  }
  generator.set_state(saved);
  // The frozen base's q/k/v and gate/up as one GEMM each (model/fused_projection.h) -
  // usable by the update's forward too, as no base parameter wants a gradient. Always,
  // so a resumed run computes in the layout the uninterrupted run had: an evaluation
  // before RL fuses the policy it evaluates, and a resume skips that evaluation.
  setup.model->fuse_projections();
  int64_t adapter = 0, base = 0;
  for (const auto& [name, tensor] : setup.model->hf_state()) {
    (is_lora_parameter(name) ? adapter : base) += tensor.numel();
  }
  log_info("LoRA: rank ", options.rank, ", alpha ", options.alpha, ": ", adapter,
           " trainable adapter parameters on a frozen base of ", base, " (",
           100.0 * static_cast<double>(adapter) / static_cast<double>(base), "%)");
}

void export_lora_policy(const TrainConfig& config, const RlSetup& setup, const std::string& dir) {
  check_input(setup.model->has_lora(), "the policy has no LoRA adapters to export", dir);
  namespace fs = std::filesystem;
  const fs::path root(dir);
  auto write_model_dir = [&](const fs::path& where, SavedWeights weights) {
    save_pretrained_model(where.string(), setup.model, 0, weights);
    write_file_atomic((where / "tokenizer.json").string(), setup.tokenizer_json);
    for (const auto& [name, text] : setup.carried_files) {
      write_file_atomic((where / name).string(), text);
    }
  };
  write_model_dir(root / "base", SavedWeights::kBase);
  const LoraAdapter adapter =
      peft_adapter_of(*setup.model, fs::absolute(root / "base").string());
  write_peft_adapter(root, adapter);
  write_file_atomic((root / "tokenizer.json").string(), setup.tokenizer_json);
  for (const auto& [name, text] : setup.carried_files) {
    write_file_atomic((root / name).string(), text);
  }
  if (config.train.lora_export_merged) write_model_dir(root / "merged", SavedWeights::kMerged);
}

}  // namespace aspen::pipeline
