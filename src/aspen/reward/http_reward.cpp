#include "aspen/reward/http_reward.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <thread>

#include "aspen/reward/imports.h"
#include "aspen/reward/json_options.h"
#include "aspen/util/bounded_json.h"
#include "aspen/util/error.h"
#include "aspen/util/first_error.h"

namespace aspen::reward {
namespace {

std::string quote(const std::string& body) {
  return body.size() > 200 ? body.substr(0, 200) + "..." : body;
}

// The scores of a 200 reply for `count` inputs; aspen::Error naming `where` otherwise.
std::vector<double> parse_scores(const std::string& body, size_t count, const std::string& where) {
  nlohmann::json reply;
  try {
    reply = parse_json_bounded(body, where, 64);
  } catch (const Error&) {
    throw Error("reply is not JSON: " + quote(body), where);
  }
  std::vector<double> scores;
  const auto take = [&](const nlohmann::json& value) {
    check_input(value.is_number() && std::isfinite(value.get<double>()),
                "a score is not a finite number: " + quote(value.dump()), where);
    check_input(std::fabs(value.get<double>()) <= kMaxRewardMagnitude,
                "score " + value.dump() + " is outside [-1e6, 1e6]", where,
                "rewards are bounded so that their means stay finite (docs/rewards.md)");
    scores.push_back(value.get<double>());
  };
  if (reply.is_object() && reply.contains("scores") && reply["scores"].is_array()) {
    for (const auto& value : reply["scores"]) take(value);
  } else if (reply.is_object() && reply.contains("results") && reply["results"].is_array()) {
    for (const auto& result : reply["results"]) {
      check_input(result.is_object() && result.contains("score"),
                  "a result has no \"score\": " + quote(result.dump()), where);
      take(result["score"]);
    }
  } else {
    throw Error("reply holds neither \"scores\" nor \"results\": " + quote(body), where,
                "reply {\"scores\": [number, ...]}, one per input");
  }
  check_input(scores.size() == count,
              std::to_string(scores.size()) + " scores for " + std::to_string(count) + " inputs",
              where);
  return scores;
}

}  // namespace

HttpRewardOptions HttpRewardOptions::from_json(const nlohmann::json& options) {
  JsonOptions reader(options, "verifier options (http)");
  HttpRewardOptions parsed;
  parsed.url = reader.string("url", "");
  parsed.timeout_s = reader.number("timeout_s", parsed.timeout_s);
  parsed.retries = static_cast<int>(reader.integer("retries", parsed.retries));
  parsed.concurrency = static_cast<int>(reader.integer("concurrency", parsed.concurrency));
  parsed.batch_size = static_cast<int>(reader.integer("batch_size", parsed.batch_size));
  parsed.token_env = reader.string("token_env", "");
  reader.check_no_unknown_keys();
  check_input(parsed.url.rfind("http://", 0) == 0 || parsed.url.rfind("https://", 0) == 0,
              "\"" + parsed.url + "\" is not an http:// or https:// URL", reader.path("url"));
  check_input(std::isfinite(parsed.timeout_s) && parsed.timeout_s > 0 &&
                  parsed.timeout_s <= 86400,
              "must be in (0, 86400] seconds", reader.path("timeout_s"));
  check_input(parsed.retries >= 0 && parsed.retries <= 20, "must be in [0, 20]",
              reader.path("retries"));
  check_input(parsed.concurrency >= 1 && parsed.concurrency <= 256, "must be in [1, 256]",
              reader.path("concurrency"));
  check_input(parsed.batch_size >= 1 && parsed.batch_size <= 1'000'000,
              "must be in [1, 1000000]", reader.path("batch_size"));
  return parsed;
}

HttpReward::HttpReward(HttpRewardOptions options) : options_(std::move(options)) {
  const size_t scheme_end = options_.url.find("://") + 3;
  const size_t path_start = options_.url.find('/', scheme_end);
  origin_ = options_.url.substr(0, path_start);
  path_ = path_start == std::string::npos ? "/" : options_.url.substr(path_start);
  check_input(origin_.size() > scheme_end, "no host in \"" + options_.url + "\"",
              "verifier options (http).url");
}

double HttpReward::score(const RewardInput& input) const { return score_batch({input})[0]; }

std::vector<double> HttpReward::post_batch(const std::vector<RewardInput>& inputs, size_t begin,
                                           size_t end) const {
  nlohmann::json items = nlohmann::json::array();
  for (size_t i = begin; i < end; ++i) items.push_back(external_reward_request(inputs[i]));
  // Model output need not be valid UTF-8: replace what is not.
  const std::string body = nlohmann::json{{"inputs", items}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::string where = "reward service " + options_.url;
  httplib::Headers headers;
  if (!options_.token_env.empty()) {
    const char* token = std::getenv(options_.token_env.c_str());
    check_input(token != nullptr && *token != '\0',
                "environment variable " + options_.token_env + " (token_env) is not set", where);
    headers.emplace("Authorization", std::string("Bearer ") + token);
  }
  httplib::Client client(origin_);
  const auto timeout = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::duration<double>(options_.timeout_s));
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  std::string last_problem;
  for (int attempt = 0; attempt <= options_.retries; ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250) * (1 << std::min(attempt - 1, 8)));
    }
    const httplib::Result result = client.Post(path_, headers, body, "application/json");
    if (!result) {
      last_problem = "no reply (" + httplib::to_string(result.error()) + ")";
      continue;
    }
    if (result->status == 200) return parse_scores(result->body, end - begin, where);
    last_problem = "HTTP " + std::to_string(result->status) + ": " + quote(result->body);
    const bool transient = result->status >= 500 || result->status == 429;
    if (!transient) throw Error(last_problem, where, "the service refused the request");
  }
  throw Error(last_problem + " (" + std::to_string(options_.retries + 1) + " attempts)", where);
}

std::vector<double> HttpReward::score_batch(const std::vector<RewardInput>& inputs) const {
  std::vector<double> scores(inputs.size(), 0.0);
  if (inputs.empty()) return scores;
  const size_t size = static_cast<size_t>(options_.batch_size);
  const size_t batches = (inputs.size() + size - 1) / size;
  std::atomic<size_t> next{0};
  FirstError errors;
  const auto work = [&] {
    for (size_t b = next++; b < batches; b = next++) {
      const size_t begin = b * size;
      const size_t end = std::min(inputs.size(), begin + size);
      try {
        const std::vector<double> part = post_batch(inputs, begin, end);
        std::copy(part.begin(), part.end(), scores.begin() + static_cast<std::ptrdiff_t>(begin));
      } catch (...) {
        errors.record(std::current_exception());
        next = batches;  // the others stop taking batches
      }
    }
  };
  const size_t threads = std::min(batches, static_cast<size_t>(options_.concurrency));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  errors.rethrow_if_any();
  return scores;
}

}  // namespace aspen::reward
