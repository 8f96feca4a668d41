#include "bench/serve_bench.h"

#include <httplib.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "aspen/parallel/compute_threads.h"
#include "aspen/io/model_dir.h"
#include "aspen/model/pretrained.h"
#include "aspen/rollout/generation_defaults.h"
#include "aspen/serve/openai_server.h"
#include "aspen/util/error.h"
#include "aspen/util/mutex.h"
#include "aspen/util/seconds_since.h"
#include "bench/imports.h"

namespace aspen::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct PhaseResult {
  double seconds = 0;
  int64_t tokens = 0;
  std::vector<double> latencies;
};

double percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[static_cast<size_t>(q * (values.size() - 1) + 0.5)];
}

nlohmann::json phase_json(const PhaseResult& phase) {
  return {{"seconds", phase.seconds},
          {"tokens", phase.tokens},
          {"tokens_per_second", phase.tokens / phase.seconds},
          {"latency_p50_s", percentile(phase.latencies, 0.5)},
          {"latency_p90_s", percentile(phase.latencies, 0.9)}};
}

// Sends requests [0, count) over `clients` threads, each taking the next unsent one.
PhaseResult run_phase(int port, int clients, int count, int max_tokens) {
  PhaseResult result;
  result.latencies.assign(count, 0.0);
  std::vector<int64_t> tokens(count, 0);
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  struct Failure {
    Mutex mutex;
    std::string message GUARDED_BY(mutex);  // a failed request's answer
  } failure;
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      httplib::Client client("127.0.0.1", port);
      client.set_read_timeout(3600, 0);
      for (int i = next++; i < count; i = next++) {
        const nlohmann::json body = {{"prompt", "Request " + std::to_string(i) +
                                                    ": write a short story about a river."},
                                     {"max_tokens", max_tokens},
                                     {"temperature", 1.0},
                                     {"seed", i},
                                     {"ignore_eos", true}};
        const auto sent = Clock::now();
        const auto response = client.Post("/v1/completions", body.dump(), "application/json");
        result.latencies[i] = seconds_since(sent);
        if (!response || response->status != 200) {
          MutexLock lock(failure.mutex);
          failed = true;
          failure.message = response ? response->body : "no response";
          return;
        }
        tokens[i] = nlohmann::json::parse(response->body)["usage"]["completion_tokens"].get<int64_t>();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  if (failed) {
    MutexLock lock(failure.mutex);
    throw Error("a benchmark request failed: " + failure.message, "aspen bench serve");
  }
  result.seconds = seconds_since(start);
  for (int64_t t : tokens) result.tokens += t;
  return result;
}

// The engine's counters once it has generated `tokens` in all: its snapshot is taken
// between loop iterations, so it can trail the last response by one step.
EngineStats settled_stats(const EngineService& service, int64_t tokens) {
  for (int i = 0; i < 1000; ++i) {
    const EngineStats stats = service.snapshot().stats;
    if (stats.generated_tokens >= tokens) return stats;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return service.snapshot().stats;
}

}  // namespace

nlohmann::json run_serve_bench(const ServeBenchOptions& options) {
  check_input(!options.model_dir.empty(), "--model is required (an HF directory with its tokenizer)",
              "aspen bench serve");
  check_input(options.clients >= 1 && options.requests >= 1 && options.max_tokens >= 1,
              "--clients, --requests and --max-tokens must be >= 1", "aspen bench serve");
  set_compute_threads(options.threads, "--threads");
  check_model_dir(options.model_dir, "--model");
  auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::from_file(options.model_dir));
  QwenForCausalLM model = load_pretrained_model(options.model_dir);
  EngineConfig engine_config;
  engine_config.kv_cache_bytes = options.kv_cache_mb << 20;
  engine_config.eos_token_ids =
      model_eos_token_ids(model->config, read_generation_config(options.model_dir));
  auto engine = std::make_unique<RolloutEngine>(model, engine_config, tokenizer);
  ServeContext context;
  context.model_name = "bench";
  context.tokenizer = tokenizer;
  context.max_model_len =
      std::min(engine->config().max_model_len, engine->config().num_blocks * engine->config().block_size);
  EngineService service(std::move(engine));
  ServerOptions server_options;
  server_options.port = 0;
  OpenAiServer server(context, service, server_options);
  server.bind();
  std::thread serving([&] { server.run(); });

  const PhaseResult sequential = run_phase(server.bound_port(), 1, options.requests, options.max_tokens);
  const int64_t steps_before = settled_stats(service, sequential.tokens).steps;
  const PhaseResult concurrent =
      run_phase(server.bound_port(), options.clients, options.requests, options.max_tokens);
  const int64_t steps_after = settled_stats(service, sequential.tokens + concurrent.tokens).steps;
  server.stop();
  serving.join();

  const nlohmann::json sequential_json = phase_json(sequential);
  const nlohmann::json concurrent_json = phase_json(concurrent);
  return {{"model", options.model_dir},
          {"parameters", [&] {
             int64_t count = 0;
             for (const auto& p : model->parameters()) count += p.numel();
             return count;
           }()},
          {"requests", options.requests},
          {"clients", options.clients},
          {"max_tokens", options.max_tokens},
          {"threads", torch::get_num_threads()},
          {"sequential", sequential_json},
          {"concurrent", concurrent_json},
          {"throughput_ratio", concurrent_json["tokens_per_second"].get<double>() /
                                   sequential_json["tokens_per_second"].get<double>()},
          {"engine_steps", {{"sequential", steps_before}, {"concurrent", steps_after - steps_before}}}};
}

}  // namespace aspen::bench
