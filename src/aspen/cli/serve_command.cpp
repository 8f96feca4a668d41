// `aspen serve --model DIR [--host 127.0.0.1] [--port 8000] [--served-model-name NAME]
//   [--max-model-len N] [--kv-cache-mb MB | --kv-cache-fraction F] [--max-num-seqs N] [--threads N]
//   [--dtype fp32|bf16] [--device cpu|cuda[:N]] [--seed S] [--shutdown-grace-s 10]`
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
#include <sstream>
#include <thread>

#include "aspen/cli/imports.h"
#include "aspen/parallel/compute_threads.h"
#include "aspen/cli/command.h"
#include "aspen/cli/threads_option.h"
#include "aspen/cli/device_option.h"
#include "aspen/cli/generation_model.h"
#include "aspen/cli/kv_cache_option.h"
#include "aspen/io/model_dir.h"
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
};

// How long the server may take to close its connections once the grace period has
// ended and their requests were failed, before it exits regardless.
constexpr std::chrono::seconds kExitMargin{5};

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
  const auto generation = read_generation_config(options.model_dir);
  GenerationModel loaded = load_generation_model(
      {options.model_dir, options.dtype, options.kv_cache_mb, options.kv_cache_fraction}, device,
      generation);
  const std::shared_ptr<const Tokenizer>& tokenizer = loaded.tokenizer;
  loaded.engine.max_num_seqs = options.max_num_seqs;
  loaded.engine.max_model_len = options.max_model_len;
  loaded.engine.seed = options.seed;
  auto engine = std::make_unique<RolloutEngine>(loaded.model, loaded.engine, tokenizer);
  const EngineConfig& built = engine->config();
  const int64_t kv_tokens = built.num_blocks * built.block_size;
  if (options.max_model_len > 0) {
    check_input(options.max_model_len <= kv_tokens,
                "--max-model-len " + std::to_string(options.max_model_len) +
                    " does not fit the KV cache (" + std::to_string(kv_tokens) + " tokens)",
                "command line", "raise --kv-cache-mb");
  }

  ServeContext context;
  context.model_name = options.served_model_name.empty()
                           ? std::filesystem::path(options.model_dir).lexically_normal().filename().string()
                           : options.served_model_name;
  if (context.model_name.empty()) context.model_name = options.model_dir;
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
  ServerOptions server_options;
  server_options.host = options.host;
  server_options.port = options.port;
  OpenAiServer server(context, service, server_options);
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
    service.abort_all("server shutting down: the request did not finish within the " +
                      grace.str() + " s grace period (--shutdown-grace-s)");
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
            << (context.chat_template ? context.chat_template->name() : "off") << ")" << std::endl;
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
  on_run(command, [options] { return run_serve(*options); });
}

ASPEN_REGISTER_COMMAND(26, setup);

}  // namespace serve_command
}  // namespace aspen::cli
