#include "aspen/model/pretrained.h"

#include <filesystem>

#include "aspen/io/model_dir.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"

namespace aspen {
namespace {

std::string dtype_name(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat:
      return "float32";
    case torch::kBFloat16:
      return "bfloat16";
    case torch::kHalf:
      return "float16";
    default:
      throw Error("cannot save parameters of dtype " + std::string(c10::toString(dtype)),
                  "save_pretrained_model", "use float32, bfloat16 or float16");
  }
}

}  // namespace

QwenForCausalLM load_pretrained_model(const std::string& dir, torch::ScalarType dtype,
                                      torch::Device device) {
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  ModelConfig config = load_hf_config(config_path);
  QwenForCausalLM model(config);
  model->to(device, dtype);
  model->load_state(load_model_weights(dir), dir);
  return model;
}

void save_pretrained_model(const std::string& dir, const QwenForCausalLM& model,
                           int64_t max_shard_bytes) {
  ModelConfig config = model->config;
  config.torch_dtype = dtype_name(model->lm_head_weight().scalar_type());
  std::filesystem::create_directories(dir);
  save_model_weights(dir, model->hf_state(), max_shard_bytes);
  write_file_atomic((std::filesystem::path(dir) / "config.json").string(),
                    to_hf_config_json(config));
}

}  // namespace aspen
