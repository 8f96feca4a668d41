// OpenAiServer over a real EngineService and socket, in-process with a tiny model: what
// the HTTP front does with clients that go away, with more long requests than the old
// worker pool had threads, and with bodies that are not valid JSON text. The engine's
// own accounting (EngineService::snapshot) shows whether abandoned work is freed.
#include "aspen/serve/openai_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "aspen/model/weights_init.h"
#include "model/tiny_configs.h"
#include "support/oracles.h"

namespace aspen::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::unique_ptr<RolloutEngine> tiny_engine(std::shared_ptr<const Tokenizer> tokenizer) {
  QwenForCausalLM model =
      make_random_model(testing::tiny_config(ModelFamily::kQwen3, /*tied=*/true, /*head_dim=*/8), 3);
  init_weights(model, 3, /*initializer_range=*/0.5);
  EngineConfig config;
  config.num_blocks = 1024;
  config.block_size = 8;
  config.max_num_seqs = 16;
  config.max_model_len = 4096;
  config.eos_token_ids = {0};
  return std::make_unique<RolloutEngine>(model, config, std::move(tokenizer));
}

// A server on a free loopback port, serving from a thread until destroyed.
class LiveServer {
 public:
  explicit LiveServer(ServerOptions options = {}) {
    static const auto tokenizer =
        std::make_shared<const Tokenizer>(Tokenizer::from_file(testing::qwen3_tokenizer_json()));
    service_ = std::make_unique<EngineService>(tiny_engine(tokenizer));
    ServeContext context;
    context.model_name = "tiny";
    context.tokenizer = tokenizer;
    context.max_model_len = 4096;
    options.port = 0;
    server_ = std::make_unique<OpenAiServer>(context, *service_, options);
    server_->bind();
    thread_ = std::thread([this] { server_->run(); });
  }
  ~LiveServer() {
    service_->abort_all("test over");
    server_->stop();
    thread_.join();
  }
  int port() const { return server_->bound_port(); }
  EngineService& service() { return *service_; }

 private:
  std::unique_ptr<EngineService> service_;
  std::unique_ptr<OpenAiServer> server_;
  std::thread thread_;
};

// A raw client connection that sends one POST and can then go away without reading.
class RawClient {
 public:
  RawClient(int port, const std::string& path, const std::string& body) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    const std::string request = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                                "Content-Type: application/json\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
    connected_ = connected_ && send(fd_, request.data(), request.size(), MSG_NOSIGNAL) ==
                                   static_cast<ssize_t>(request.size());
  }
  ~RawClient() { disconnect(); }
  bool connected() const { return connected_; }
  void disconnect() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// Polls `done` for up to `limit`; true if it held in time.
template <typename Done>
bool eventually(Done done, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

// A non-streaming request that keeps the engine busy for far longer than the test runs.
const std::string kLongRequest =
    json{{"prompt", {1, 2, 3}}, {"max_tokens", 3000}, {"n", 4}, {"ignore_eos", true}}.dump();

TEST(OpenAiServer, ClientsThatAbandonNonStreamingRequestsFreeTheirSlotsAndBlocks) {
  LiveServer server;
  // More long requests than the 64 threads of the old fixed worker pool.
  constexpr int kAbandoned = 70;
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < kAbandoned; ++i) {
    clients.push_back(std::make_unique<RawClient>(server.port(), "/v1/completions", kLongRequest));
    ASSERT_TRUE(clients.back()->connected());
  }
  ASSERT_TRUE(eventually([&] { return server.service().snapshot().in_flight == kAbandoned; },
                         std::chrono::seconds(10)))
      << server.service().snapshot().in_flight << " of " << kAbandoned << " requests admitted";
  const EngineService::Snapshot busy = server.service().snapshot();
  EXPECT_GT(busy.queue.running, 0);
  EXPECT_LT(busy.queue.free_blocks, busy.queue.total_blocks);

  // Every generation request holds a thread, and /health is still answered at once.
  httplib::Client probe("127.0.0.1", server.port());
  probe.set_read_timeout(2, 0);
  const auto health_start = Clock::now();
  const auto health = probe.Get("/health");
  ASSERT_TRUE(health) << "no answer from /health";
  EXPECT_EQ(health->status, 200);
  EXPECT_LT(Clock::now() - health_start, std::chrono::seconds(1));

  for (auto& client : clients) client->disconnect();
  EngineService::Snapshot idle;
  EXPECT_TRUE(eventually(
      [&] {
        idle = server.service().snapshot();
        return idle.in_flight == 0 && idle.queue.running == 0 && idle.queue.waiting == 0;
      },
      std::chrono::seconds(5)))
      << idle.in_flight << " requests still in flight";
  EXPECT_EQ(idle.queue.free_blocks, idle.queue.total_blocks);

  // The engine is free for the next client.
  probe.set_read_timeout(10, 0);
  const auto answer = probe.Post("/v1/completions",
                                 json{{"prompt", {1, 2}}, {"max_tokens", 3}}.dump(),
                                 "application/json");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200) << answer->body;
}

TEST(OpenAiServer, GenerationRequestsBeyondTheirShareOfConnectionsGetA503AndHealthStillAnswers) {
  ServerOptions options;
  options.max_connections = kConnectionsForProbes + 2;  // two generation requests at once
  LiveServer server(options);
  RawClient first(server.port(), "/v1/completions", kLongRequest);
  RawClient second(server.port(), "/v1/completions", kLongRequest);
  ASSERT_TRUE(eventually([&] { return server.service().snapshot().in_flight == 2; },
                         std::chrono::seconds(10)));
  httplib::Client probe("127.0.0.1", server.port());
  probe.set_read_timeout(2, 0);
  const auto refused = probe.Post("/v1/completions", kLongRequest, "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503) << refused->body;
  EXPECT_EQ(refused->get_header_value("Retry-After"), "1");
  EXPECT_NE(json::parse(refused->body)["error"]["message"].get<std::string>().find("busy"),
            std::string::npos);
  const auto health = probe.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST(OpenAiServer, AbortingAllRequestsAnswersTheirClientsWithA503) {
  LiveServer server;
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(10, 0);
  std::thread abort([&] {
    eventually([&] { return server.service().snapshot().in_flight == 1; }, std::chrono::seconds(5));
    server.service().abort_all("server shutting down");
  });
  const auto answer = client.Post("/v1/completions", kLongRequest, "application/json");
  abort.join();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 503);
  EXPECT_EQ(json::parse(answer->body)["error"]["message"], "server shutting down");
  EXPECT_TRUE(eventually([&] { return server.service().snapshot().queue.running == 0; },
                         std::chrono::seconds(2)));
}

TEST(OpenAiServer, BadBodyTextIsA400NamingTheProblem) {
  LiveServer server;
  httplib::Client client("127.0.0.1", server.port());
  const auto invalid_utf8 =
      client.Post("/v1/completions", std::string("{\"prompt\": \"a\xff\", \"max_tokens\": 2}"),
                  "application/json");
  ASSERT_TRUE(invalid_utf8);
  EXPECT_EQ(invalid_utf8->status, 400) << invalid_utf8->body;
  const json utf8_error = json::parse(invalid_utf8->body)["error"];
  EXPECT_EQ(utf8_error["type"], "BadRequestError");
  EXPECT_NE(utf8_error["message"].get<std::string>().find("UTF-8"), std::string::npos);

  const auto repeated = client.Post(
      "/v1/completions", R"({"prompt": [1, 2], "max_tokens": 2, "max_tokens": 300})",
      "application/json");
  ASSERT_TRUE(repeated);
  EXPECT_EQ(repeated->status, 400) << repeated->body;
  EXPECT_NE(json::parse(repeated->body)["error"]["message"].get<std::string>().find(
                "duplicate key \"max_tokens\""),
            std::string::npos)
      << repeated->body;
}

}  // namespace
}  // namespace aspen::serve
