// `aspen serve`: the OpenAI-compatible server, driven by the official `openai` Python
// client (tools/python/openai_client_check.py) on a random-weight Qwen3 checkpoint written
// by transformers with the real Qwen3 tokenizer. Checked: the routes, greedy text equal to
// `aspen generate`'s, streaming (SSE) equal to the whole response, seeded sampling
// reproducible and independent of what shares the batch, stop strings, log-probs, OpenAI
// error shapes for bad requests with the server still serving, and a clean exit on
// SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "cli_test_util.h"
#include "support/hf_reference.h"
#include "support/oracles.h"
#include "tiny_adapter_dir.h"
#include "tiny_model_dir.h"

namespace aspen::cli {
namespace {

using testing::run_command;

std::string serve_model_dir() {
  nlohmann::json model = {{"arch", "qwen3"}, {"tied", true}, {"seed", 5}, {"vocab", 151936}};
  model["eos_token_id"] = 151645;
  return testing::hf_model_dir_with_qwen3_tokenizer(testing::scratch_dir() + "/model", model,
                                                     testing::scratch_dir());
}

// `aspen serve` in the background on a free port; killed (SIGTERM) by the destructor.
class ServerProcess {
 public:
  ServerProcess(const std::string& model_dir, const std::string& log,
                std::vector<std::string> extra_args = {})
      : log_(log) {
    std::vector<std::string> args = {"aspen", "serve", "--model", model_dir, "--port", "0",
                                      "--served-model-name", "tiny", "--kv-cache-mb", "64",
                                      "--threads", "1"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      freopen(log.c_str(), "w", stderr);
      execv(testing::aspen_cli().c_str(), argv.data());
      _exit(127);
    }
  }
  ~ServerProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // The port from the "on http://127.0.0.1:PORT" line; 0 if it never came.
  int wait_for_port() {
    const std::regex listening("on http://127\\.0\\.0\\.1:([0-9]+)");
    for (int i = 0; i < 600; ++i) {
      std::smatch match;
      const std::string log = testing::read_text(log_);
      if (std::regex_search(log, match, listening)) return std::stoi(match[1]);
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        reaped_ = true;
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return 0;
  }
  // SIGTERM, then the exit status (-1: did not exit within 20 s).
  int terminate() {
    kill(pid_, SIGTERM);
    for (int i = 0; i < 200; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

TEST(ServeCommand, TheOpenAiClientGetsCompletionsChatStreamsAndErrorsFromOneEngine) {
  const std::string model = serve_model_dir();
  const std::string log = testing::scratch_dir() + "/serve.log";
  ServerProcess server(model, log);
  const int port = server.wait_for_port();
  ASSERT_GT(port, 0) << testing::read_text(log);
  const std::string base_url = "http://127.0.0.1:" + std::to_string(port);

  const auto client = run_command("'" + testing::python() + "' '" +
                                  testing::oracle_script("openai_client_check.py") + "' " +
                                  base_url + " tiny");
  ASSERT_EQ(client.exit_code, 0) << client.err << testing::read_text(log);
  const nlohmann::json seen = nlohmann::json::parse(client.out);

  EXPECT_EQ(seen["health_status"], 200);
  EXPECT_EQ(seen["models"], nlohmann::json::array({"tiny"}));

  // Greedy text equals `aspen generate`'s on the same prompt.
  const auto generate = run_command(testing::aspen_cli() + " generate --model " + model +
                                    " --prompt 'Hello, my name is' --max-tokens 8 --temperature 0"
                                    " --json");
  ASSERT_EQ(generate.exit_code, 0) << generate.err;
  const nlohmann::json generated = nlohmann::json::parse(generate.out);
  const nlohmann::json& greedy = seen["greedy"];
  EXPECT_EQ(greedy["object"], "text_completion");
  EXPECT_EQ(greedy["text"], generated["text"]);
  EXPECT_EQ(greedy["finish_reason"], generated["finish_reason"]);
  EXPECT_EQ(greedy["usage"]["completion_tokens"], generated["token_ids"].size());
  EXPECT_EQ(greedy["usage"]["total_tokens"].get<int64_t>(),
            greedy["usage"]["prompt_tokens"].get<int64_t>() +
                greedy["usage"]["completion_tokens"].get<int64_t>());
  ASSERT_EQ(greedy["token_logprobs"].size(), generated["logprobs"].size());
  for (size_t i = 0; i < generated["logprobs"].size(); ++i) {
    EXPECT_NEAR(greedy["token_logprobs"][i].get<double>(), generated["logprobs"][i].get<double>(),
                1e-4);
  }

  // Streaming: the deltas add up to the whole response; usage comes last.
  EXPECT_EQ(seen["greedy_stream"]["text"], greedy["text"]);
  EXPECT_EQ(seen["greedy_stream"]["finish_reason"], greedy["finish_reason"]);
  EXPECT_GT(seen["greedy_stream"]["chunks"].get<int>(), 2);
  EXPECT_EQ(seen["greedy_stream"]["usage"], greedy["usage"]);

  EXPECT_EQ(seen["batch"]["indices"], nlohmann::json::array({0, 1, 2, 3}));

  // Chat: seeded sampling is reproducible, streamed or not; log-probs cover every token.
  const nlohmann::json& chat = seen["chat"];
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["roles"], nlohmann::json::array({"assistant", "assistant"}));
  EXPECT_EQ(chat["texts"], seen["chat_again"]["texts"]);
  EXPECT_EQ(chat["texts"], seen["chat_stream"]["texts"]);
  EXPECT_EQ(seen["chat_stream"]["roles"], chat["roles"]);
  EXPECT_EQ(chat["logprob_counts"][0].get<int64_t>() + chat["logprob_counts"][1].get<int64_t>(),
            chat["usage"]["completion_tokens"].get<int64_t>());

  if (seen.contains("stop")) {
    const std::string full = greedy["text"];
    const std::string stop = seen["stop"]["stop"];
    EXPECT_EQ(seen["stop"]["text"], full.substr(0, full.find(stop)));
    EXPECT_EQ(seen["stop"]["finish_reason"], "stop");
    EXPECT_EQ(seen["stop"]["stream_text"], seen["stop"]["text"]);
  }

  const nlohmann::json& errors = seen["errors"];
  EXPECT_EQ(errors["negative_temperature"]["status"], 400);
  EXPECT_EQ(errors["unknown_model"]["status"], 404);
  EXPECT_EQ(errors["top_logprobs"]["status"], 400);
  EXPECT_EQ(errors["top_logprobs"]["param"], "logprobs");
  EXPECT_EQ(errors["unknown_field"]["status"], 400);
  EXPECT_EQ(errors["unknown_field"]["param"], "temprature");
  EXPECT_EQ(errors["empty_messages"]["status"], 400);
  EXPECT_EQ(errors["empty_messages"]["param"], "messages");
  EXPECT_EQ(errors["too_long"]["status"], 400);

  // What shares the batch does not change a greedy request's tokens.
  EXPECT_EQ(seen["concurrent"]["results"], seen["concurrent"]["sequential"]);
  EXPECT_EQ(seen["after_errors_text"], greedy["text"]);

  EXPECT_EQ(server.terminate(), 0) << testing::read_text(log);
}

// `aspen bench serve`: both phases do the same work (every request exactly max_tokens)
// and report what they measured.
TEST(ServeCommand, TheBenchmarkSendsTheSameRequestsAloneAndConcurrently) {
  const std::string model = serve_model_dir();
  const auto bench = run_command(testing::aspen_cli() + " bench serve --model " + model +
                                 " --clients 3 --requests 5 --max-tokens 4 --threads 1 --json");
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  const nlohmann::json result = nlohmann::json::parse(bench.out);
  for (const char* phase : {"sequential", "concurrent"}) {
    EXPECT_EQ(result[phase]["tokens"], 5 * 4) << phase;
    EXPECT_GT(result[phase]["tokens_per_second"].get<double>(), 0) << phase;
    EXPECT_LE(result[phase]["latency_p50_s"].get<double>(),
              result[phase]["latency_p90_s"].get<double>());
  }
  EXPECT_GT(result["throughput_ratio"].get<double>(), 0);
  // One request at a time: one step per token (a prefill that samples, then decodes).
  EXPECT_EQ(result["engine_steps"]["sequential"], 5 * 4);
  // Sharing steps is likely here but timing-dependent; EngineService's tests pin it.
  EXPECT_LE(result["engine_steps"]["concurrent"].get<int64_t>(), 5 * 4);
}

// SIGTERM while a long non-streaming request runs: the server stops within the grace
// period plus the time to answer, the client gets a 503 naming the grace period, and
// the exit is clean.
TEST(ServeCommand, SigtermEndsALongNonStreamingRequestWithinTheGracePeriod) {
  const std::string model = serve_model_dir();
  const std::string log = testing::scratch_dir() + "/serve_grace.log";
  ServerProcess server(model, log, {"--shutdown-grace-s", "1"});
  const int port = server.wait_for_port();
  ASSERT_GT(port, 0) << testing::read_text(log);
  int status = 0;  // 0: no answer
  std::string body;
  std::thread client([&] {
    httplib::Client http("127.0.0.1", port);
    http.set_read_timeout(60, 0);
    // Far more tokens than fit in the test's time on a 151,936-token vocabulary.
    const auto answer = http.Post("/v1/completions",
                       nlohmann::json{{"prompt", "Hello"}, {"max_tokens", 4000}, {"n", 16},
                                      {"ignore_eos", true}}
                           .dump(),
                       "application/json");
    if (answer) {
      status = answer->status;
      body = answer->body;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the request is running
  const auto start = std::chrono::steady_clock::now();
  const int exit_code = server.terminate();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  client.join();
  EXPECT_EQ(exit_code, 0) << testing::read_text(log);
  EXPECT_LT(seconds, 1.0 + 2.0) << testing::read_text(log);  // the grace, and a margin
  EXPECT_EQ(status, 503) << body;
  EXPECT_NE(body.find("--shutdown-grace-s"), std::string::npos) << body;
}

TEST(ServeCommand, RefusesANegativeShutdownGraceWithAOneLineError) {
  const auto result = run_command(testing::aspen_cli() +
                                  " serve --model /nonexistent --shutdown-grace-s -1");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("--shutdown-grace-s"), std::string::npos) << result.err;
}

TEST(ServeCommand, RefusesAnOutOfRangePortWithAOneLineError) {
  const auto result = run_command(testing::aspen_cli() +
                                  " serve --model /nonexistent --port 70000");
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(result.err.find("--port"), std::string::npos) << result.err;
}

// `aspen serve --lora NAME=DIR` twice on the tiny model: each adapter answers by its
// name with its own adapter's greedy tokens (those of `aspen generate --lora`), the base
// keeps its name and its own outputs, /v1/models lists all three as vLLM does, and an
// unknown name is a 404 listing the served ones.
TEST(ServeCommand, LoraAdaptersAnswerByNameBesideTheBase) {
  const std::string dir = testing::scratch_dir();
  const std::string model = testing::write_tiny_model_dir(dir + "/model");
  const io::ModelConfig config =
      testing::tiny_config(io::ModelFamily::kQwen3, false, /*head_dim=*/8);
  testing::write_tiny_adapter_dir(dir + "/a", config, {"q_proj", "v_proj"}, 21);
  testing::write_tiny_adapter_dir(dir + "/b", config, {"gate_proj", "up_proj", "down_proj"}, 22,
                                  /*use_rslora=*/true);
  const std::string log = dir + "/serve.log";
  ServerProcess server(model, log, {"--lora", "a=" + dir + "/a", "--lora", "b=" + dir + "/b"});
  const int port = server.wait_for_port();
  ASSERT_GT(port, 0) << testing::read_text(log);
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(60, 0);

  const auto listed = http.Get("/v1/models");
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->status, 200) << listed->body;
  const nlohmann::json models = nlohmann::json::parse(listed->body)["data"];
  ASSERT_EQ(models.size(), 3u) << models.dump();
  EXPECT_EQ(models[0]["id"], "tiny");
  EXPECT_EQ(models[1]["id"], "a");
  EXPECT_EQ(models[1]["root"], dir + "/a");
  EXPECT_EQ(models[1]["parent"], "tiny");
  EXPECT_EQ(models[2]["id"], "b");

  std::map<std::string, std::string> texts;
  for (const std::string name : {"tiny", "a", "b"}) {
    const auto answer = http.Post("/v1/completions",
                                  nlohmann::json{{"model", name}, {"prompt", "abcab"},
                                                 {"max_tokens", 10}, {"temperature", 0},
                                                 {"logprobs", 0}, {"ignore_eos", true}}
                                      .dump(),
                                  "application/json");
    ASSERT_TRUE(answer) << name;
    ASSERT_EQ(answer->status, 200) << name << ": " << answer->body;
    const nlohmann::json body = nlohmann::json::parse(answer->body);
    EXPECT_EQ(body["model"], name);
    const nlohmann::json& choice = body["choices"][0];
    const auto generate = run_command(
        testing::aspen_cli() + " generate --model " + model +
        (name == "tiny" ? std::string() : " --lora " + dir + "/" + name) +
        " --prompt abcab --max-tokens 10 --temperature 0 --kv-cache-mb 4 --json");
    ASSERT_EQ(generate.exit_code, 0) << generate.err;
    const nlohmann::json generated = nlohmann::json::parse(generate.out);
    EXPECT_EQ(choice["text"], generated["text"]) << name;
    const nlohmann::json& logprobs = choice["logprobs"]["token_logprobs"];
    ASSERT_EQ(logprobs.size(), generated["logprobs"].size()) << name;
    for (size_t i = 0; i < logprobs.size(); ++i) {
      EXPECT_NEAR(logprobs[i].get<double>(), generated["logprobs"][i].get<double>(), 1e-4) << name;
    }
    texts[name] = choice["text"];
  }
  // Each adapter changes the model: the three answers are not one.
  EXPECT_NE(texts["a"], texts["tiny"]);
  EXPECT_NE(texts["b"], texts["tiny"]);

  const auto unknown = http.Post("/v1/completions",
                                 nlohmann::json{{"model", "c"}, {"prompt", "ab"}}.dump(),
                                 "application/json");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_NE(unknown->body.find("`c` does not exist"), std::string::npos) << unknown->body;
  EXPECT_NE(unknown->body.find("`tiny`, `a`, `b`"), std::string::npos) << unknown->body;
  EXPECT_EQ(server.terminate(), 0) << testing::read_text(log);
}

// Bad --lora input is one line naming the option as given, and the server never starts.
TEST(ServeCommand, BadLoraOptionsAreRefusedNamingThem) {
  const std::string dir = testing::scratch_dir();
  const std::string model = testing::write_tiny_model_dir(dir + "/model");
  const io::ModelConfig config =
      testing::tiny_config(io::ModelFamily::kQwen3, false, /*head_dim=*/8);
  testing::write_tiny_adapter_dir(dir + "/a", config, {"q_proj"}, 23);
  const io::ModelConfig wide =
      testing::tiny_config(io::ModelFamily::kQwen3, false, /*head_dim=*/12);
  testing::write_tiny_adapter_dir(dir + "/wide", wide, {"q_proj"}, 24);
  struct Case {
    std::string flags;
    std::string named;
  };
  const std::string a = dir + "/a";
  for (const Case& c : {
           Case{"--lora " + a, "--lora " + a + ": expected NAME=DIR"},
           Case{"--lora =" + a, "--lora =" + a + ": expected NAME=DIR"},
           Case{"--lora x=", "--lora x=: expected NAME=DIR"},
           Case{"--lora x=" + dir + "/none",
                "--lora x=" + dir + "/none: no such adapter directory"},
           Case{"--lora tiny=" + a, "--lora tiny=" + a + ": the name 'tiny' is the base model's"},
           Case{"--lora x=" + a + " --lora x=" + a, "the name 'x' is given to two adapters"},
           Case{"--lora x=" + dir + "/wide",
                dir + "/wide: weight \"model.layers.0.self_attn.q_proj.lora_B.weight\" has shape"},
       }) {
    const auto result = run_command("timeout 60 " + testing::aspen_cli() + " serve --model " +
                                    model + " --port 0 --served-model-name tiny --kv-cache-mb 8 " +
                                    c.flags);
    EXPECT_EQ(result.exit_code, 1) << c.flags << ": " << result.err;
    EXPECT_NE(result.err.find(c.named), std::string::npos) << c.flags << ": " << result.err;
    EXPECT_EQ(result.err.find('\n'), result.err.size() - 1) << "one line: " << result.err;
  }
}

}  // namespace
}  // namespace aspen::cli
