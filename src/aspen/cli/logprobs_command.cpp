// `aspen logprobs --model DIR [--lora DIR] [--dtype fp32|bf16] [--device cpu|cuda[:N]]`
//   stdin:  one {"tokens":[...]} per line
//   stdout: one {"logprobs":[...]} per line; entry i = log p(tokens[i+1] | tokens[0..i]),
//           n-1 entries, accumulated in fp32 whatever the compute dtype.
// A line longer than the model's context (max_position_embeddings) is an error naming it.
// Lines are scored one at a time and each result is flushed at once, so the command
// works as a pipe filter.
// --lora DIR scores with a PEFT LoRA adapter applied (cli/lora_option.h), unmerged.
#include <iostream>
#include <optional>

#include "aspen/cli/command.h"
#include "aspen/cli/device_option.h"
#include "aspen/cli/dtype_option.h"
#include "aspen/cli/imports.h"
#include "aspen/cli/lora_option.h"
#include "aspen/cli/threads_option.h"
#include "aspen/io/jsonl.h"
#include "aspen/io/model_dir.h"
#include "aspen/model/peft_lora.h"
#include "aspen/model/pretrained.h"
#include "aspen/parallel/compute_threads.h"
#include "aspen/parallel/device.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace logprobs_command {

struct LogprobsOptions {
  std::string model_dir;
  std::string dtype = "fp32";
  std::string device = "cpu";
  int threads = 0;
  std::string lora_dir;  // empty: no adapter
};

torch::Tensor parse_tokens(const nlohmann::json& line, const ModelConfig& config,
                           const std::string& location) {
  const int64_t vocab_size = config.vocab_size;
  check_input(line.is_object() && line.contains("tokens"), "expected {\"tokens\": [...]}",
              location);
  const auto& tokens = line.at("tokens");
  check_input(tokens.is_array(), "\"tokens\" must be an array of token ids", location);
  // Positions past the context have no trained RoPE angles: the scores would be
  // numbers without meaning, so the line is refused (vLLM refuses such a prompt too).
  const int64_t length = static_cast<int64_t>(tokens.size());
  check_input(length <= config.max_position_embeddings,
              std::to_string(length) + " tokens, more than the model's context of " +
                  std::to_string(config.max_position_embeddings) +
                  " (max_position_embeddings in config.json)",
              location, "split the sequence");
  std::vector<int64_t> ids;
  ids.reserve(tokens.size());
  for (const auto& token : tokens) {
    check_input(token.is_number_integer(), "token ids must be integers, got " + token.dump(),
                location);
    const int64_t id = token.get<int64_t>();
    check_input(id >= 0 && id < vocab_size,
                "token id " + std::to_string(id) + " outside the vocabulary [0, " +
                    std::to_string(vocab_size) + ")",
                location);
    ids.push_back(id);
  }
  return torch::tensor(ids, torch::kInt64);
}

int run_logprobs(const LogprobsOptions& options) {
  torch::NoGradGuard no_grad;
  set_compute_threads(options.threads, "--threads");
  const torch::Device device = device_from_option(options.device, "--device");
  check_model_dir(options.model_dir, "--model");
  std::optional<LoraAdapter> adapter;
  if (!options.lora_dir.empty()) {
    adapter = read_adapter_option(options.lora_dir, "--lora " + options.lora_dir);
  }
  QwenForCausalLM model =
      load_pretrained_model(options.model_dir, parse_compute_dtype(options.dtype), device);
  if (adapter) apply_peft_adapter(model, *adapter, options.lora_dir);
  model->eval();
  JsonlReader reader(std::cin, "stdin");
  nlohmann::json line;
  while (reader.next(line)) {
    const torch::Tensor ids = parse_tokens(line, model->config, reader.location());
    std::vector<float> logprobs;
    if (ids.numel() >= 2) {
      const torch::Tensor cu_seqlens =
          torch::tensor({int64_t{0}, ids.numel()}, torch::kInt64).to(device);
      const torch::Tensor result =
          model->token_logprobs(ids.to(device), cu_seqlens).logprobs.to(torch::kCPU).contiguous();
      logprobs.assign(result.data_ptr<float>(), result.data_ptr<float>() + result.numel());
    }
    write_jsonl(std::cout, nlohmann::json{{"logprobs", logprobs}});
  }
  return 0;
}

void setup(CLI::App& root) {
  auto options = std::make_shared<LogprobsOptions>();
  CLI::App* command = root.add_subcommand(
      "logprobs", "Per-token log p(next token) for {\"tokens\":[...]} lines on stdin");
  command->add_option("--model", options->model_dir, "HF model directory")->required();
  command->add_option("--dtype", options->dtype, "compute dtype: fp32 or bf16")
      ->capture_default_str();
  add_device_option(command, options->device);
  add_threads_option(command, options->threads);
  add_lora_option(command, options->lora_dir);
  on_run(command, [options] { return run_logprobs(*options); });
}

ASPEN_REGISTER_COMMAND(20, setup);

}  // namespace logprobs_command
}  // namespace aspen::cli
