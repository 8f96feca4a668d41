// `aspen serve --model DIR [--host 127.0.0.1] [--port 8000] [--served-model-name NAME]
//   [--max-model-len N] [--kv-cache-mb MB | --kv-cache-fraction F] [--max-num-seqs N] [--threads N]
//   [--dtype fp32|bf16] [--device cpu|cuda[:N]] [--seed S] [--shutdown-grace-s 10]
//   [--lora NAME=DIR ...]`
//
// An OpenAI-compatible HTTP server over the rollout engine (serve/openai_server.h):
// /v1/completions, /v1/chat/completions (with the model's chat template; refused when
// the model has none), /v1/models and /health. Concurrent requests share one
// continuously batched engine. Binds to loopback unless --host says otherwise: there is
// no authentication, so expose it only behind something that has.
//
// SIGINT or SIGTERM stops it: it stops accepting connections at once, lets the requests
// in progress finish for up to --shutdown-grace-s seconds (a second signal cuts that
// short), then fails those still running with a 503 and exits 0. 10 s by default, well
// inside Kubernetes' 30 s before it sends SIGKILL. Should a connection still hold on 5 s
// after that, it exits 1 regardless.
//
// Context: --max-model-len defaults to the model's max_position_embeddings, capped at
// what one sequence can hold in the KV cache (--kv-cache-mb), so every admitted request
// fits; a chat request without max_tokens generates up to the rest of that context.
// One request may ask for at most --max-num-seqs x max_model_len generated tokens in all
// (n x prompts x max_tokens): one full batch's worth (ServeContext::max_request_tokens).
//
// LoRA adapters (--lora NAME=DIR, repeatable; PEFT's directory format), as vLLM's
// --lora-modules: a request whose "model" is NAME is answered with that adapter; the
// base model keeps its served name; /v1/models lists both. Each adapter is its own
// model and engine over the base's weights, held once (model/shared_base.h), with its
// own KV cache: the KV budget (--kv-cache-mb or --kv-cache-fraction) is the server's,
// split evenly over the base's engine and the adapters' (docs/serve.md, "LoRA adapters").
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "aspen/cli/imports.h"
#include "aspen/parallel/compute_threads.h"
#include "aspen/cli/command.h"
#include "aspen/cli/threads_option.h"
#include "aspen/cli/device_option.h"
#include "aspen/cli/generation_model.h"
#include "aspen/cli/kv_cache_option.h"
#include "aspen/cli/lora_option.h"
#include "aspen/io/model_dir.h"
#include "aspen/model/peft_lora.h"
#include "aspen/model/shared_base.h"
#include "aspen/parallel/device.h"
#include "aspen/rollout/generation_defaults.h"
#include "aspen/serve/openai_server.h"

namespace aspen::cli {
// Named, not anonymous: the CLI is a unity build (one namespace per subcommand file).
namespace serve_command {

struct ServeOptions {
  std::string model_dir;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string served_model_name;
  int64_t max_model_len = 0;
  int64_t kv_cache_mb = 1024;
  std::optional<double> kv_cache_fraction;  // of the memory free after loading the model
  int64_t max_num_seqs = 64;
  int threads = 0;
  std::string dtype = "fp32";
  std::string device = "cpu";
  uint64_t seed = 0;
  double shutdown_grace_s = 10;
  std::vector<std::string> lora_specs;  // NAME=DIR each
};

// How long the server may take to close its connections once the grace period has
// ended and their requests were failed, before it exits regardless.
constexpr std::chrono::seconds kExitMargin{5};

// The name clients give for the base model.
std::string served_model_name(const ServeOptions& options) {
  if (!options.served_model_name.empty()) return options.served_model_name;
  const std::string name =
      std::filesystem::path(options.model_dir).lexically_normal().filename().string();
  return name.empty() ? options.model_dir : name;
}

std::optional<ChatTemplate> chat_template_of(const std::string& dir) {
  if (!std::filesystem::exists(std::filesystem::path(dir) / "tokenizer_config.json")) return {};
  try {
    return ChatTemplate::from_config(dir);
  } catch (const Error& error) {
    std::cerr << "aspen serve: /v1/chat/completions is off: " << error.problem() << "\n";
    return {};
  }
}

int run_serve(const ServeOptions& options) {
  check_input(options.port >= 0 && options.port <= 65535, "--port must be in [0, 65535]",
              "command line");
  check_input(options.max_num_seqs >= 1, "--max-num-seqs must be >= 1", "command line");
  check_input(options.max_model_len >= 0, "--max-model-len must be >= 0", "command line");
  check_input(std::isfinite(options.shutdown_grace_s) && options.shutdown_grace_s >= 0 &&
                  options.shutdown_grace_s <= 3600,
              "--shutdown-grace-s must be in [0, 3600] seconds", "command line");
  set_compute_threads(options.threads, "--threads");
  const torch::Device device = device_from_option(options.device, "--device");
  check_model_dir(options.model_dir, "--model");
  const auto generation = read_generation_config(options.model_dir);
  const std::string model_name = served_model_name(options);
  // Read (and checked) before the model's weights: bad --lora input fails at once.
  std::vector<AdapterOption> adapters = read_served_adapters(options.lora_specs, model_name);
  GenerationModel loaded = load_generation_model(
      {options.model_dir, options.dtype, options.kv_cache_mb, options.kv_cache_fraction}, device,
      generation);
  const std::shared_ptr<const Tokenizer>& tokenizer = loaded.tokenizer;
  loaded.engine.max_num_seqs = options.max_num_seqs;
  loaded.engine.max_model_len = options.max_model_len;
  loaded.engine.seed = options.seed;
  // One KV budget for the server, an equal share per engine (a fraction was measured
  // once, after the base was loaded: each engine taking it again would over-commit).
  loaded.engine.kv_cache_bytes /= static_cast<int64_t>(1 + adapters.size());
  // Built first: it fuses the base's projections, which the adapters' models then share.
  auto engine = std::make_unique<RolloutEngine>(loaded.model, loaded.engine, tokenizer);
  std::vector<std::unique_ptr<RolloutEngine>> adapter_engines;
  for (AdapterOption& adapter : adapters) {
    QwenForCausalLM model = share_base_weights(loaded.model);
    apply_peft_adapter(model, adapter.adapter, adapter.dir);
    adapter.adapter.tensors.clear();  // the model holds its copy
    adapter_engines.push_back(std::make_unique<RolloutEngine>(model, loaded.engine, tokenizer));
  }
  // Each shared model was first built with weights of its own on the CPU, freed as it
  // took the base's (model/shared_base.h). main() keeps freed memory for reuse
  // (util/allocator_tuning.h), which would leave a model's worth resident for good:
  // measured +516 MiB for one adapter on a 166M-parameter fp32 model, against +21 MiB
  // once returned (docs/serve.md, "LoRA adapters").
  if (!adapters.empty()) malloc_trim(0);
  const EngineConfig& built = engine->config();
  const int64_t kv_tokens = built.num_blocks * built.block_size;
  if (options.max_model_len > 0) {
    check_input(options.max_model_len <= kv_tokens,
                "--max-model-len " + std::to_string(options.max_model_len) +
                    " does not fit the KV cache (" + std::to_string(kv_tokens) + " tokens)",
                "command line", "raise --kv-cache-mb");
  }

  ServeContext context;
  context.model_name = model_name;
  for (const AdapterOption& adapter : adapters) {
    context.adapters.push_back({adapter.name, adapter.dir});
  }
  context.tokenizer = tokenizer;
  context.chat_template = chat_template_of(options.model_dir);
  context.max_model_len = std::min(built.max_model_len, kv_tokens);
  context.defaults = generation_defaults(generation);
  context.max_request_tokens = options.max_num_seqs * context.max_model_len;

  // SIGINT/SIGTERM are taken by one thread with sigwait (blocked everywhere else, set
  // before any thread starts), which stops the server outside signal context.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  EngineService service(std::move(engine));
  std::vector<std::unique_ptr<EngineService>> adapter_services;
  std::map<std::string, EngineService*> services_by_name;
  for (size_t i = 0; i < adapters.size(); ++i) {
    adapter_services.push_back(std::make_unique<EngineService>(std::move(adapter_engines[i])));
    services_by_name[adapters[i].name] = adapter_services.back().get();
  }
  ServerOptions server_options;
  server_options.host = options.host;
  server_options.port = options.port;
  OpenAiServer server(context, service, services_by_name, server_options);
  server.bind();
  std::atomic<bool> served{false};  // run() has returned
  std::thread watcher([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    if (served) return;
    std::cerr << "aspen serve: stopping (signal " << signal_number
              << "): no new connections; requests in progress have " << options.shutdown_grace_s
              << " s to finish (--shutdown-grace-s; a second signal ends them now)" << std::endl;
    server.stop_accepting();
    using Clock = std::chrono::steady_clock;
    const auto grace_end =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(options.shutdown_grace_s));
    bool again = false;
    while (!served && !again && Clock::now() < grace_end) {
      const timespec tick = {0, 100 * 1000 * 1000};
      again = sigtimedwait(&stop_signals, nullptr, &tick) > 0;
    }
    if (served) return;
    std::cerr << "aspen serve: failing the requests still in progress" << std::endl;
    std::ostringstream grace;
    grace << options.shutdown_grace_s;
    const std::string reason = "server shutting down: the request did not finish within the " +
                               grace.str() + " s grace period (--shutdown-grace-s)";
    service.abort_all(reason);
    for (const auto& adapter_service : adapter_services) adapter_service->abort_all(reason);
    // Time for the failed requests' answers to be written, then idle keep-alive
    // connections are closed too.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    server.end_connections();
    const auto exit_by = Clock::now() + kExitMargin;
    while (!served && Clock::now() < exit_by) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (served) return;
    std::cerr << "aspen serve: connections still open " << kExitMargin.count()
              << " s after their requests failed; exiting anyway" << std::endl;
    std::_Exit(1);
  });
  std::cerr << "aspen serve: " << context.model_name << " on http://" << options.host << ":"
            << server.bound_port() << " (max_model_len " << context.max_model_len << ", chat "
            << (context.chat_template ? context.chat_template->name() : "off") << ")";
  for (const ServedAdapter& adapter : context.adapters) {
    std::cerr << "; LoRA adapter " << adapter.name << " from " << adapter.path;
  }
  std::cerr << std::endl;
  server.run();
  served = true;
  // run() also returns if listening failed; make the watcher return in every case.
  pthread_kill(watcher.native_handle(), SIGTERM);
  watcher.join();
  return 0;
}

void setup(CLI::App& root) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* command =
      root.add_subcommand("serve", "OpenAI-compatible HTTP server over the rollout engine");
  command->add_option("--model", options->model_dir, "HF model directory")->required();
  command->add_option("--host", options->host, "address to listen on (no authentication)")
      ->capture_default_str();
  command->add_option("--port", options->port, "TCP port (0: any free port)")
      ->capture_default_str();
  command->add_option("--served-model-name", options->served_model_name,
                      "the model id clients name (default: the directory's name)");
  command->add_option("--max-model-len", options->max_model_len,
                      "prompt + generated tokens at most (0: the model's, capped by the KV cache)")
      ->capture_default_str();
  add_kv_cache_options(command, options->kv_cache_mb, options->kv_cache_fraction);
  command->add_option("--max-num-seqs", options->max_num_seqs, "sequences decoded at once")
      ->capture_default_str();
  add_threads_option(command, options->threads);
  command->add_option("--dtype", options->dtype, "compute dtype: fp32 or bf16")
      ->capture_default_str();
  add_device_option(command, options->device);
  command->add_option("--seed", options->seed, "seeds requests that give no seed")
      ->capture_default_str();
  command->add_option("--shutdown-grace-s", options->shutdown_grace_s,
                      "on SIGTERM/SIGINT, seconds requests in progress may take to finish "
                      "before they are failed")
      ->capture_default_str();
  add_served_lora_option(command, options->lora_specs);
  on_run(command, [options] { return run_serve(*options); });
}

ASPEN_REGISTER_COMMAND(26, setup);

}  // namespace serve_command
}  // namespace aspen::cli
