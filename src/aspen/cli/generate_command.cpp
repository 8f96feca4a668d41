// `aspen generate --model DIR (--prompt TEXT | --prompts FILE.jsonl) [--chat] [--n N]
//   [--max-tokens N] [--temperature T] [--top-p P] [--top-k K] [--min-p P] [--seed S]
//   [--threads N] [--lora DIR] [--json]`
//
// Runs the rollout engine over the prompts. Temperature 0 is greedy. A prompts
// file holds one {"prompt": "..."} or {"messages": [...]} per line; messages are
// always rendered with the model's chat template, a plain prompt only with --chat
// (as one user turn). Without --chat the text is tokenized as-is: no template, no
// special tokens added. Sampling defaults come from generation_config.json when the
// flag is not given (as vLLM does), else vLLM's defaults; --max-tokens defaults to 64.
// With --json each completion is one line:
//   {"prompt_index":i,"sample_index":j,"text":..,"token_ids":[..],"logprobs":[..],
//    "finish_reason":"stop"|"length"}
// where logprobs are the temperature-1 policy log-probs of token_ids.
// --lora DIR applies a PEFT LoRA adapter (cli/lora_option.h) unmerged: the model
// computes x W^T + scaling B A x, as PEFT and vLLM do with it.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "aspen/cli/imports.h"
#include "aspen/parallel/compute_threads.h"
#include "aspen/cli/command.h"
#include "aspen/cli/threads_option.h"
#include "aspen/cli/device_option.h"
#include "aspen/cli/generation_model.h"
#include "aspen/cli/kv_cache_option.h"
#include "aspen/cli/lora_option.h"
#include "aspen/io/jsonl.h"
#include "aspen/io/model_dir.h"
#include "aspen/model/peft_lora.h"
#include "aspen/parallel/device.h"
#include "aspen/rollout/engine.h"
#include "aspen/rollout/generation_defaults.h"
#include "aspen/tokenizer/chat_template.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace generate_command {

struct GenerateOptions {
  std::string model_dir;
  std::optional<std::string> prompt;
  std::optional<std::string> prompts_file;
  bool chat = false;
  int64_t n = 1;
  int64_t max_tokens = 64;
  std::optional<double> temperature, top_p, min_p;
  std::optional<int64_t> top_k;
  std::optional<int64_t> seed;  // >= 0; read signed so that -1 is refused, not wrapped
  std::string dtype = "fp32";
  std::string device = "cpu";
  int64_t kv_cache_mb = 512;
  std::optional<double> kv_cache_fraction;  // of the memory free after loading the model
  int threads = 0;  // torch intra-op and BLAS threads; 0: as they are
  std::string lora_dir;  // empty: no adapter
  bool json = false;
};

// One prompt as given: plain text or a conversation.
struct PromptInput {
  std::optional<std::string> text;
  std::vector<ChatMessage> messages;
};

std::vector<ChatMessage> parse_messages(const nlohmann::json& value, const std::string& location) {
  check_input(value.is_array() && !value.empty(), "\"messages\" must be a non-empty array",
              location);
  std::vector<ChatMessage> messages;
  for (const auto& message : value) {
    check_input(message.is_object() && message.contains("role") && message.contains("content") &&
                    message["role"].is_string() && message["content"].is_string(),
                "each message needs string \"role\" and \"content\"", location);
    messages.push_back({message["role"].get<std::string>(), message["content"].get<std::string>()});
  }
  return messages;
}

std::vector<PromptInput> read_prompts(const GenerateOptions& options) {
  std::vector<PromptInput> prompts;
  if (options.prompt) {
    prompts.push_back({options.prompt, {}});
    return prompts;
  }
  std::ifstream in(*options.prompts_file);
  check_input(static_cast<bool>(in), "cannot open prompts file", *options.prompts_file);
  JsonlReader reader(in, *options.prompts_file);
  nlohmann::json line;
  while (reader.next(line)) {
    check_input(line.is_object() && (line.contains("prompt") || line.contains("messages")),
                "expected {\"prompt\": \"...\"} or {\"messages\": [...]}", reader.location());
    if (line.contains("prompt")) {
      check_input(line["prompt"].is_string(), "\"prompt\" must be a string", reader.location());
      prompts.push_back({line["prompt"].get<std::string>(), {}});
    } else {
      prompts.push_back({std::nullopt, parse_messages(line["messages"], reader.location())});
    }
  }
  check_input(!prompts.empty(), "no prompts", *options.prompts_file);
  return prompts;
}

SamplingParams sampling_params(const GenerateOptions& options,
                               const std::optional<GenerationConfig>& generation) {
  SamplingParams params = generation_defaults(generation);
  params.max_tokens = options.max_tokens;
  if (options.seed) params.seed = static_cast<uint64_t>(*options.seed);
  if (options.temperature) params.temperature = *options.temperature;
  if (options.top_p) params.top_p = *options.top_p;
  if (options.top_k) params.top_k = *options.top_k;
  if (options.min_p) params.min_p = *options.min_p;
  params.validate("command line");
  return params;
}

int run_generate(const GenerateOptions& options) {
  check_input(options.prompt.has_value() != options.prompts_file.has_value(),
              "give exactly one of --prompt and --prompts", "command line");
  check_input(options.n >= 1, "--n must be >= 1", "command line");
  check_input(!options.seed || *options.seed >= 0,
              "--seed must be >= 0, got " + std::to_string(options.seed.value_or(0)),
              "command line", "leave it out for a random seed");
  set_compute_threads(options.threads, "--threads");
  // The device first: a GPU asked for but missing fails before any file is read.
  const torch::Device device = device_from_option(options.device, "--device");
  check_model_dir(options.model_dir, "--model");
  // The sampling flags next: a bad one fails before the model is loaded.
  const auto generation = read_generation_config(options.model_dir);
  const SamplingParams params = sampling_params(options, generation);
  const std::vector<PromptInput> prompts = read_prompts(options);
  std::optional<LoraAdapter> adapter;
  if (!options.lora_dir.empty()) {
    adapter = read_adapter_option(options.lora_dir, "--lora " + options.lora_dir);
  }
  GenerationModel loaded = load_generation_model(
      {options.model_dir, options.dtype, options.kv_cache_mb, options.kv_cache_fraction}, device,
      generation);
  if (adapter) apply_peft_adapter(loaded.model, *adapter, options.lora_dir);
  const std::shared_ptr<const Tokenizer>& tokenizer = loaded.tokenizer;
  loaded.engine.seed = static_cast<uint64_t>(options.seed.value_or(0));

  std::optional<ChatTemplate> chat_template;
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::string text;
    if (options.chat || !prompts[i].messages.empty()) {
      if (!chat_template) chat_template = ChatTemplate::from_config(options.model_dir);
      const auto messages = prompts[i].messages.empty()
                                ? std::vector<ChatMessage>{{"user", *prompts[i].text}}
                                : prompts[i].messages;
      text = chat_template->render(messages, /*add_generation_prompt=*/true);
    } else {
      text = *prompts[i].text;
    }
    GenerationRequest request;
    request.id = "prompt " + std::to_string(i);
    request.prompt = tokenizer->encode(text);
    request.params = params;
    if (params.seed) request.params.seed = *params.seed + i;  // distinct, reproducible per prompt
    request.n = options.n;
    requests.push_back(std::move(request));
  }

  RolloutEngine engine(loaded.model, loaded.engine, tokenizer);
  // Plain text: one prompt and one sample print the text alone; otherwise each
  // completion is labelled "[prompt P sample S]" (both 0-based, prompts in input order).
  const bool label = requests.size() > 1 || options.n > 1;
  for (const Completion& completion : engine.generate(std::move(requests))) {
    if (options.json) {
      write_jsonl(std::cout, {{"prompt_index", completion.request_index},
                              {"sample_index", completion.sample_index},
                              {"text", completion.text},
                              {"token_ids", completion.token_ids},
                              {"logprobs", completion.logprobs},
                              {"finish_reason", finish_reason_name(completion.finish_reason)}});
    } else {
      if (label) {
        std::cout << "[prompt " << completion.request_index << " sample " << completion.sample_index
                  << "] ";
      }
      std::cout << completion.text << "\n";
    }
  }
  return 0;
}

void setup(CLI::App& root) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* command =
      root.add_subcommand("generate", "Generate completions with the rollout engine");
  command->add_option("--model", options->model_dir, "HF model directory")->required();
  command->add_option("--prompt", options->prompt, "one prompt text");
  command->add_option("--prompts", options->prompts_file,
                      "JSONL of {\"prompt\"} or {\"messages\"}");
  command->add_flag("--chat", options->chat, "apply the model's chat template");
  command->add_option("--n", options->n, "samples per prompt")->capture_default_str();
  command->add_option("--max-tokens", options->max_tokens, "tokens per sample at most")
      ->capture_default_str();
  command->add_option("--temperature", options->temperature, "0 = greedy");
  command->add_option("--top-p", options->top_p, "nucleus sampling mass");
  command->add_option("--top-k", options->top_k,
                      "keep the k most likely tokens (0 or -1: off, as in vLLM)");
  command->add_option("--min-p", options->min_p, "keep tokens with p >= min_p * p_max");
  command->add_option("--seed", options->seed, "seed >= 0; prompt i uses seed + i");
  command->add_option("--dtype", options->dtype, "compute dtype: fp32 or bf16")
      ->capture_default_str();
  add_device_option(command, options->device);
  add_kv_cache_options(command, options->kv_cache_mb, options->kv_cache_fraction);
  add_threads_option(command, options->threads);
  add_lora_option(command, options->lora_dir);
  command->add_flag("--json", options->json, "one JSON object per completion");
  on_run(command, [options] { return run_generate(*options); });
}

ASPEN_REGISTER_COMMAND(25, setup);

}  // namespace generate_command
}  // namespace aspen::cli
