// `aspen bench serve`: what sharing one continuously batched engine buys HTTP clients.
// The OpenAI-compatible server (serve/openai_server.h) runs in-process on loopback; the
// same set of /v1/completions requests is sent once one after another by a single
// client, then by `clients` concurrent clients, and both are timed end to end (HTTP,
// JSON, tokenizing, generation). Requests are sampled (temperature 1, a seed each) with
// ignore_eos, so every request generates exactly max_tokens and the two phases do the
// same work.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "bench/imports.h"

namespace aspen::bench {

struct ServeBenchOptions {
  std::string model_dir;  // required: an HF model directory with its tokenizer
  int clients = 8;
  int requests = 16;
  int max_tokens = 32;
  int threads = 0;  // torch and BLAS threads; 0: leave as they are
  int64_t kv_cache_mb = 512;
};

// {"model", "requests", "clients", "max_tokens", "sequential": {seconds,
//  tokens_per_second, latency_p50_s, latency_p90_s}, "concurrent": {...},
//  "throughput_ratio": concurrent / sequential tokens per second, "engine_steps": {...}}
nlohmann::json run_serve_bench(const ServeBenchOptions& options);

}  // namespace aspen::bench
