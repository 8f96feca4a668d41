// The http environment (agent/http_environment.h) against a real HTTP server on loopback
// (cpp-httplib's): episodes told apart by their id, the bearer token, and each fault (a
// slow service, 10 MB, garbage, an error status, nobody listening) as a per-trajectory
// error within the timeout.
#include "aspen/agent/http_environment.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "aspen/util/error.h"

namespace aspen::agent {
namespace {

using nlohmann::ordered_json;

// Counts the steps of each episode; the third ends it with reward = the row's "bonus".
class EnvironmentServer {
 public:
  EnvironmentServer() {
    server_.Post("/env", [this](const httplib::Request& request, httplib::Response& response) {
      const auto body = ordered_json::parse(request.body);
      std::lock_guard<std::mutex> lock(mutex_);
      authorization_ = request.get_header_value("Authorization");
      const std::string episode = body["episode"];
      ordered_json reply;
      if (body["op"] == "reset") {
        bonus_[episode] = body["row"]["bonus"];
        steps_[episode] = 0;
        reply = {{"messages", {{{"role", "user"}, {"content", "Episode " + episode}}}}};
      } else if (!steps_.count(episode)) {
        reply = {{"error", "unknown episode " + episode}};
      } else if (++steps_[episode] < 3) {
        reply = {{"observations", {{{"role", "tool"}, {"content", body["turn"]}}}},
                 {"done", false}};
      } else {
        reply = {{"done", true}, {"reward", bonus_[episode]}};
      }
      response.set_content(reply.dump(), "application/json");
    });
    // Resets well, then misbehaves on every step.
    const auto misbehave = [this](const std::string& path, httplib::Server::Handler on_step) {
      server_.Post(path, [on_step](const httplib::Request& request, httplib::Response& response) {
        if (ordered_json::parse(request.body)["op"] == "reset") {
          response.set_content("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}",
                               "application/json");
        } else {
          on_step(request, response);
        }
      });
    };
    // Answers only once released (or after 5 s): slower than any timeout under test,
    // whatever the machine's load, yet the test need not wait for it.
    misbehave("/slow", [this](const httplib::Request&, httplib::Response& response) {
      std::unique_lock<std::mutex> lock(mutex_);
      released_.wait_for(lock, std::chrono::seconds(5), [this] { return release_; });
      response.set_content("{\"done\": true, \"reward\": 1}", "application/json");
    });
    misbehave("/big", [](const httplib::Request&, httplib::Response& response) {
      response.set_content(std::string(10 << 20, 'x'), "application/json");
    });
    misbehave("/garbage", [](const httplib::Request&, httplib::Response& response) {
      response.set_content("<html>oops</html>", "text/html");
    });
    misbehave("/busy", [](const httplib::Request&, httplib::Response& response) {
      response.status = 503;
      response.set_content("overloaded", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~EnvironmentServer() {
    release();
    server_.stop();
    thread_.join();
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_ = true;
    released_.notify_all();
  }
  std::string authorization() {
    std::lock_guard<std::mutex> lock(mutex_);
    return authorization_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::map<std::string, double> bonus_;
  std::map<std::string, int> steps_;
  std::string authorization_;
  bool release_ = false;
  std::condition_variable released_;
};

HttpEnvironment environment(const std::string& url, double timeout_s = 10) {
  HttpEnvironmentOptions options;
  options.url = url;
  options.timeout_s = timeout_s;
  return HttpEnvironment(options);
}

TEST(HttpEnvironmentTest, InterleavedEpisodesKeepTheirOwnState) {
  EnvironmentServer server;
  HttpEnvironment first = environment(server.url("/env"));
  HttpEnvironment second = environment(server.url("/env"));
  const ResetResult a = first.reset({{"bonus", 0.5}});
  const ResetResult b = second.reset({{"bonus", -2}});
  ASSERT_FALSE(a.error);
  ASSERT_FALSE(b.error);
  EXPECT_NE(a.messages[0].content, b.messages[0].content);  // ids differ
  const StepResult echo = first.step("call the tool");
  EXPECT_FALSE(echo.done);
  ASSERT_EQ(echo.observations.size(), 1u);
  EXPECT_EQ(echo.observations[0].role, "tool");
  EXPECT_EQ(echo.observations[0].content, "call the tool");
  EXPECT_FALSE(second.step("x").done);
  EXPECT_FALSE(first.step("y").done);
  EXPECT_FALSE(second.step("x").done);
  EXPECT_EQ(first.step("z").reward, 0.5);
  EXPECT_EQ(second.step("x").reward, -2.0);
  // The episode is over on this side; the service's refusal is reported as such.
  EXPECT_EQ(first.step("again").error->fault, EnvironmentFault::kRefused);
}

TEST(HttpEnvironmentTest, SendsTheBearerTokenAndRefusesWhenItIsUnset) {
  EnvironmentServer server;
  HttpEnvironmentOptions options;
  options.url = server.url("/env");
  options.token_env = "ASPEN_TEST_ENVIRONMENT_TOKEN";
  HttpEnvironment env(options);
  unsetenv("ASPEN_TEST_ENVIRONMENT_TOKEN");
  const ResetResult unset = env.reset({{"bonus", 1}});
  ASSERT_TRUE(unset.error);
  EXPECT_EQ(unset.error->fault, EnvironmentFault::kRefused);
  EXPECT_NE(unset.error->message.find("ASPEN_TEST_ENVIRONMENT_TOKEN (token_env) is not set"),
            std::string::npos);
  setenv("ASPEN_TEST_ENVIRONMENT_TOKEN", "s3cret", 1);
  EXPECT_FALSE(env.reset({{"bonus", 1}}).error);
  EXPECT_EQ(server.authorization(), "Bearer s3cret");
  unsetenv("ASPEN_TEST_ENVIRONMENT_TOKEN");
}

// Resets, steps, and expects the step to fail with `fault` and a message holding `says`.
void expect_step_fault(HttpEnvironment env, EnvironmentFault fault, const std::string& says) {
  ASSERT_FALSE(env.reset({{"bonus", 1}}).error);
  const StepResult result = env.step("go");
  EXPECT_TRUE(result.done);
  EXPECT_FALSE(result.reward);
  ASSERT_TRUE(result.error);
  EXPECT_EQ(environment_fault_name(result.error->fault), environment_fault_name(fault));
  EXPECT_EQ(result.error->message.rfind("http environment http://", 0), 0u);
  EXPECT_NE(result.error->message.find(says), std::string::npos) << result.error->message;
  EXPECT_EQ(env.step("go").error->fault, EnvironmentFault::kRefused);
}

TEST(HttpEnvironmentTest, EachFaultEndsTheTrajectoryWithinTheTimeout) {
  EnvironmentServer server;
  const auto start = std::chrono::steady_clock::now();
  expect_step_fault(environment(server.url("/slow"), 0.1), EnvironmentFault::kTimeout,
                    "no whole reply within the timeout of 0.1 s");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 3.0);
  server.release();
  expect_step_fault(environment(server.url("/big")), EnvironmentFault::kOversized,
                    "a reply longer than 1048576 bytes");
  expect_step_fault(environment(server.url("/garbage")), EnvironmentFault::kGarbage,
                    "reply is not JSON");
  expect_step_fault(environment(server.url("/busy")), EnvironmentFault::kRefused,
                    "HTTP 503: overloaded");
}

TEST(HttpEnvironmentTest, NobodyListeningIsACrash) {
  // Port 1 (tcpmux) is closed on any machine these tests run on: connection refused.
  HttpEnvironment env = environment("http://127.0.0.1:1/env", 2);
  const ResetResult result = env.reset({{"bonus", 1}});
  ASSERT_TRUE(result.error);
  EXPECT_EQ(result.error->fault, EnvironmentFault::kCrash);
  EXPECT_NE(result.error->message.find("no reply ("), std::string::npos) << result.error->message;
  EXPECT_EQ(env.step("go").error->fault, EnvironmentFault::kRefused);
}

TEST(HttpEnvironmentTest, RefusesBadOptions) {
  EXPECT_THROW(environment("ftp://example.com/env"), Error);
  EXPECT_THROW(environment("http://"), Error);
  EXPECT_THROW(environment("http://127.0.0.1:8000/env", -1), Error);
}

}  // namespace
}  // namespace aspen::agent
