// A reward service over HTTP (reward/http_reward.h) against a real HTTP server on
// loopback (cpp-httplib's): batches in order, the bearer token from the environment,
// bounded concurrency, retries on 5xx and errors that name the URL.
#include "aspen/reward/http_reward.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "aspen/reward/verifier_registry.h"
#include "aspen/util/error.h"

namespace aspen::reward {
namespace {

// Scores 1 when the response contains the answer; records what it saw.
class RewardServer {
 public:
  RewardServer() {
    server_.Post("/score", [this](const httplib::Request& request, httplib::Response& response) {
      const int now = ++in_flight_;
      int seen = max_in_flight_.load();
      while (now > seen && !max_in_flight_.compare_exchange_weak(seen, now)) {
      }
      ++requests_;
      authorization_ = request.get_header_value("Authorization");
      if (failures_left_-- > 0) {
        --in_flight_;
        response.status = 503;
        response.set_content("busy", "text/plain");
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
      const nlohmann::json body = nlohmann::json::parse(request.body);
      nlohmann::json scores = nlohmann::json::array();
      for (const auto& input : body["inputs"]) {
        const bool hit = input["response"].get<std::string>().find(
                             input["answer"].get<std::string>()) != std::string::npos;
        scores.push_back(hit ? 1.0 : 0.0);
      }
      response.set_content(nlohmann::json{{"scores", scores}}.dump(), "application/json");
      --in_flight_;
    });
    server_.Post("/refuse", [this](const httplib::Request&, httplib::Response& response) {
      ++requests_;
      response.status = 400;
      response.set_content("{\"error\": \"inputs must be a list\"}", "application/json");
    });
    // Replies with a fixed body, whatever the batch: a service with a bug.
    server_.Post("/fixed", [this](const httplib::Request&, httplib::Response& response) {
      ++requests_;
      response.set_content(fixed_reply_, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    // Bound and listening already: connections queue until the accept loop runs.
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~RewardServer() {
    server_.stop();
    thread_.join();
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

  std::atomic<int> requests_{0}, in_flight_{0}, max_in_flight_{0}, failures_left_{0};
  int delay_ms_ = 0;
  std::string authorization_;
  std::string fixed_reply_;

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

HttpReward http_reward(nlohmann::json options) {
  return HttpReward(HttpRewardOptions::from_json(options));
}

TEST(HttpReward, ScoresBatchesInOrderWithTheBearerTokenFromTheEnvironment) {
  RewardServer server;
  setenv("ASPEN_TEST_REWARD_TOKEN", "s3cret", 1);
  HttpReward reward = http_reward({{"url", server.url("/score")},
                                   {"batch_size", 3},
                                   {"token_env", "ASPEN_TEST_REWARD_TOKEN"}});
  std::vector<RewardInput> inputs;
  std::vector<double> want;
  for (int i = 0; i < 10; ++i) {
    inputs.push_back({"p", i % 3 == 0 ? "it is 42" : "no", "42", {{"id", std::to_string(i)}}});
    want.push_back(i % 3 == 0 ? 1.0 : 0.0);
  }
  EXPECT_EQ(reward.score_batch(inputs), want);
  EXPECT_EQ(server.requests_.load(), 4);  // ceil(10 / 3)
  EXPECT_EQ(server.authorization_, "Bearer s3cret");
  unsetenv("ASPEN_TEST_REWARD_TOKEN");
  try {
    reward.score({"p", "r", "a"});
    FAIL() << "a missing token was not an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ASPEN_TEST_REWARD_TOKEN"), std::string::npos);
  }
}

TEST(HttpReward, KeepsAtMostConcurrencyRequestsInFlight) {
  RewardServer server;
  server.delay_ms_ = 100;
  HttpReward reward =
      http_reward({{"url", server.url("/score")}, {"batch_size", 1}, {"concurrency", 3}});
  const std::vector<double> scores = reward.score_batch(std::vector<RewardInput>(9, {"p", "a", "a"}));
  EXPECT_EQ(scores, std::vector<double>(9, 1.0));
  EXPECT_EQ(server.max_in_flight_.load(), 3);
}

TEST(HttpReward, RetriesAServiceThatIsBusy) {
  RewardServer server;
  server.failures_left_ = 2;
  HttpReward reward = http_reward({{"url", server.url("/score")}, {"retries", 2}});
  EXPECT_EQ(reward.score({"p", "42", "42"}), 1.0);
  EXPECT_EQ(server.requests_.load(), 3);
  server.failures_left_ = 5;
  try {
    reward.score({"p", "42", "42"});
    FAIL() << "retries were not bounded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("HTTP 503"), std::string::npos) << what;
    EXPECT_NE(what.find("3 attempts"), std::string::npos) << what;
    EXPECT_NE(what.find(server.url("/score")), std::string::npos) << what;
  }
}

TEST(HttpReward, ARefusedRequestIsNotRetriedAndQuotesTheReply) {
  RewardServer server;
  HttpReward reward = http_reward({{"url", server.url("/refuse")}, {"retries", 3}});
  try {
    reward.score({"p", "r", "a"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("HTTP 400"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("inputs must be a list"), std::string::npos);
  }
  EXPECT_EQ(server.requests_.load(), 1);
}

TEST(HttpReward, AReplyWithAnotherCountOfScoresIsAnErrorNotAShift) {
  RewardServer server;
  server.fixed_reply_ = "{\"scores\": [1, 0, 1]}";
  HttpReward reward = http_reward({{"url", server.url("/fixed")}, {"retries", 0}});
  try {
    reward.score_batch({{"p", "a", "x"}, {"p", "b", "x"}});
    FAIL() << "3 scores for 2 inputs were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 scores for 2 inputs"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(server.url("/fixed")), std::string::npos) << e.what();
  }
}

TEST(HttpReward, AScoreBeyondTheBoundIsAnErrorNamingTheValue) {
  RewardServer server;
  server.fixed_reply_ = "{\"scores\": [1e308]}";
  HttpReward reward = http_reward({{"url", server.url("/fixed")}, {"retries", 0}});
  try {
    reward.score({"p", "a", "x"});
    FAIL() << "a score of 1e308 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("score 1e+308 is outside [-1e6, 1e6]"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(server.url("/fixed")), std::string::npos) << e.what();
  }
}

TEST(HttpReward, NoServiceIsAnErrorNamingTheUrl) {
  // Port 9 (discard) on loopback: nothing listens there.
  HttpReward reward = http_reward(
      {{"url", "http://127.0.0.1:9/score"}, {"retries", 1}, {"timeout_s", 2}});
  try {
    reward.score({"p", "r", "a"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("http://127.0.0.1:9/score"), std::string::npos)
        << e.what();
  }
}

TEST(HttpReward, OptionsAreCheckedByName) {
  EXPECT_THROW(make_verifier("http", {{"url", "ftp://x"}}), Error);
  EXPECT_THROW(make_verifier("http", {{"url", "http://x"}, {"concurrency", 0}}), Error);
  EXPECT_THROW(make_verifier("http", {{"url", "http://x"}, {"retry", 1}}), Error);
}

}  // namespace
}  // namespace aspen::reward
