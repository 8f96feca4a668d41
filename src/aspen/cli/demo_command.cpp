// `aspen demo`: the built-in generation demo. Everything is made on the spot, so
// it needs no download: a byte-level BPE tokenizer trained on a small arithmetic
// corpus, a tiny random Qwen3-architecture model, and the rollout engine sampling
// a group of completions per prompt with their log-probs and policy versions.
// (The weights are random, so the text is too; the RL demo that teaches this
// model arithmetic is `aspen train` once the training issue lands.)
#include <chrono>
#include <iostream>

#include "aspen/cli/command.h"
#include "aspen/cli/imports.h"
#include "aspen/model/weights_init.h"
#include "aspen/rollout/engine.h"
#include "aspen/tokenizer/bpe_trainer.h"
#include "aspen/util/log.h"
#include "aspen/util/seconds_since.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace demo_command {

std::vector<std::string> arithmetic_corpus(int count) {
  std::vector<std::string> lines;
  uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((state >> 33) % 1000);
  };
  for (int i = 0; i < count; ++i) {
    const int a = next(), b = next();
    lines.push_back(std::to_string(a) + "+" + std::to_string(b) + "=" + std::to_string(a + b));
  }
  return lines;
}

int run_demo() {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  BpeTrainerOptions tokenizer_options;
  tokenizer_options.vocab_size = 400;
  tokenizer_options.special_tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::from_json(
      train_bpe_tokenizer(arithmetic_corpus(4000), tokenizer_options), "demo tokenizer"));

  ModelConfig config;
  config.family = ModelFamily::kQwen3;
  config.vocab_size = tokenizer->vocab_size();
  config.hidden_size = 128;
  config.intermediate_size = 384;
  config.num_hidden_layers = 4;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.head_dim = 32;
  config.max_position_embeddings = 512;
  config.tie_word_embeddings = true;
  QwenForCausalLM model = make_random_model(config, /*seed=*/7);
  int64_t parameters = 0;
  for (const auto& p : model->parameters()) parameters += p.numel();
  std::cout << "demo: tokenizer with " << tokenizer->vocab_size()
            << " ids, Qwen3-architecture model with " << parameters
            << " parameters (random weights)\n";

  EngineConfig engine_config;
  engine_config.eos_token_ids = {*tokenizer->token_to_id("<|endoftext|>")};
  RolloutEngine engine(model, engine_config, tokenizer);
  std::vector<GenerationRequest> requests;
  for (const std::string prompt : {"12+7=", "305+418=", "99+1="}) {
    GenerationRequest request;
    request.id = prompt;
    request.prompt = tokenizer->encode(prompt);
    request.params.temperature = 1.0;
    request.params.max_tokens = 12;
    request.params.seed = 1;
    request.n = 4;
    requests.push_back(request);
  }
  const auto completions = engine.generate(requests);
  for (const auto& c : completions) {
    double logprob = 0.0;
    for (float lp : c.logprobs) logprob += lp;
    std::cout << "  " << c.request_id << " sample " << c.sample_index << ": \"" << c.text
              << "\"  tokens=" << c.token_ids.size() << " sum_logprob=" << logprob
              << " finish=" << finish_reason_name(c.finish_reason) << "\n";
  }
  const auto& stats = engine.stats();
  const double seconds = seconds_since(start);
  std::cout << "demo: " << completions.size() << " completions, " << stats.generated_tokens
            << " tokens in " << stats.steps << " engine steps; group prompts computed once ("
            << stats.forks << " forks); " << seconds << " s in all\n";
  return 0;
}

void setup(CLI::App& root) {
  CLI::App* command = root.add_subcommand(
      "demo",
      "Generation on a random tiny model made on the spot (a smoke test of the rollout "
      "engine; the RL demo is aspen train with no config)");
  on_run(command, [] { return run_demo(); });
}

ASPEN_REGISTER_COMMAND(5, setup);

}  // namespace demo_command
}  // namespace aspen::cli
