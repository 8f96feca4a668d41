// The bring-your-own-agent endpoint end to end: an agent program written with the
// official `openai` Python client (tests/serve/data/openai_agent.py), run by
// AgentProgram, holds a two-turn tool episode against an OpenAiServer with an
// AgentEndpoint over a tiny random Qwen3 model with the real Qwen3 tokenizer and
// template. The trajectory Aspen keeps is exactly the tokens the client saw (token
// text and log-prob, one by one) with the rendered tool message's tokens between the
// turns; keys, sessions, late and wrong-session calls are refused with their statuses
// and metrics.
#include "aspen/serve/agent_endpoint.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "aspen/agent/agent_program.h"
#include "aspen/model/weights_init.h"
#include "aspen/serve/openai_server.h"
#include "aspen/tokenizer/chat_message_json.h"
#include "support/oracles.h"
#include "support/tiny_model_configs.h"

namespace aspen::serve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr const char* kRunKey = "run-secret-1234";

std::shared_ptr<const Tokenizer> agent_test_tokenizer() {
  static const auto tokenizer =
      std::make_shared<const Tokenizer>(Tokenizer::from_file(testing::qwen3_tokenizer_json()));
  return tokenizer;
}

// A server for agents on a free loopback port, serving from a thread until destroyed.
class AgentServer {
 public:
  AgentServer() {
    const std::shared_ptr<const Tokenizer> tokenizer = agent_test_tokenizer();
    tokenizer_ = tokenizer;
    // The whole Qwen3 vocabulary (the chat template's tokens are in the prompt).
    ModelConfig config =
        testing::tiny_model_config(ModelFamily::kQwen3, {151936, 32, 48, 2, 4, 2, 8});
    config.tie_word_embeddings = true;
    QwenForCausalLM model = make_random_model(config, 3);
    EngineConfig engine;
    engine.num_blocks = 512;
    engine.block_size = 8;
    engine.max_num_seqs = 8;
    engine.max_model_len = 1024;
    engine.eos_token_ids = {151645};
    service_ =
        std::make_unique<EngineService>(std::make_unique<RolloutEngine>(model, engine, tokenizer));
    ServeContext context;
    context.model_name = "tiny";
    context.tokenizer = tokenizer;
    context.chat_template = ChatTemplate::from_config(testing::qwen3_tokenizer_dir());
    context.max_model_len = 1024;
    sessions_ = std::make_unique<AgentSessions>(tokenizer, PrefixBreak::kSplit);
    endpoint_ = std::make_unique<AgentEndpoint>(*sessions_, kRunKey);
    ServerOptions options;
    options.port = 0;
    options.agent = endpoint_.get();
    server_ = std::make_unique<OpenAiServer>(context, *service_, options);
    server_->bind();
    thread_ = std::thread([this] { server_->run(); });
  }
  ~AgentServer() {
    service_->abort_all("test over");
    server_->stop();
    thread_.join();
  }
  int port() const { return server_->bound_port(); }
  AgentSessions& sessions() { return *sessions_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }

  AgentProgramOptions program(const std::string& command) const {
    AgentProgramOptions options;
    options.command = command;
    options.base_url = "http://127.0.0.1:" + std::to_string(port()) + "/v1";
    options.api_key = kRunKey;
    options.timeout_s = 60;
    return options;
  }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::unique_ptr<EngineService> service_;
  std::unique_ptr<AgentSessions> sessions_;
  std::unique_ptr<AgentEndpoint> endpoint_;
  std::unique_ptr<OpenAiServer> server_;
  std::thread thread_;
};

std::string agent_command() {
  return testing::python() + " " + ASPEN_SOURCE_DIR + "/tests/serve/data/openai_agent.py";
}

std::string seen_path(const std::string& name) {
  return (fs::temp_directory_path() /
          ("aspen-agent-" + std::to_string(getpid()) + "-" + name + ".json"))
      .string();
}

ordered_json read_seen(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  fs::remove(path);
  return ordered_json::parse(text.str());
}

const std::vector<ordered_json> kAgentTools = {ordered_json::parse(R"({"type": "function",
  "function": {"name": "calculator", "description": "Exact arithmetic.",
  "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
  "required": ["expression"]}}})")};

// The prompt the template renders for the messages a call sent.
std::string rendered(const ordered_json& sent) {
  static const ChatTemplate chat = ChatTemplate::from_config(testing::qwen3_tokenizer_dir());
  return chat.render(chat_messages_from_json(sent, "sent"), true, true, kAgentTools);
}

TEST(AgentEndpoint, AnOpenAiClientEpisodeTrainsExactlyTheTokensItSawAndTheToolMessages) {
  AgentServer server;
  AgentProgram program(server.program(agent_command()), server.sessions());
  const std::string path = seen_path("episode");
  const AgentEpisode episode = program.run({{"question", "What is 123456789 * 987654321?"},
                                            {"seed", 11},
                                            {"max_tokens", 6},
                                            {"seen_path", path}});
  ASSERT_TRUE(episode.ok()) << episode.error;
  const ordered_json seen = read_seen(path);
  ASSERT_EQ(seen["errors"].size(), 0u) << seen["errors"].dump();
  ASSERT_EQ(seen["turns"].size(), 2u);
  EXPECT_EQ(episode.reward, 1.0);
  EXPECT_EQ(episode.turns, 2);
  EXPECT_EQ(episode.prefix_breaks, 0);
  int64_t calls_seen = 0;
  for (const auto& turn : seen["turns"])
    calls_seen += turn["message"].value("tool_calls", ordered_json::array()).size();
  EXPECT_EQ(episode.tool_calls, calls_seen);
  ASSERT_EQ(episode.segments.size(), 1u);
  const AgentSegment& segment = episode.segments[0];
  const Tokenizer& tokenizer = server.tokenizer();

  const std::string text1 = rendered(seen["turns"][0]["sent"]);
  EXPECT_EQ(segment.prompt, tokenizer.encode(text1));
  ASSERT_EQ(segment.turns(), 2);
  const auto begin = segment.response.begin();
  const size_t start2 = static_cast<size_t>(segment.turn_starts[1]);
  // Each turn's tokens are the ones the client was shown, with their log-probs.
  size_t at = 0;
  for (int turn = 0; turn < 2; ++turn) {
    const ordered_json& client = seen["turns"][turn];
    ASSERT_EQ(static_cast<size_t>(segment.turn_starts[turn]), at == 0 ? 0 : start2);
    ASSERT_FALSE(client["tokens"].empty());
    for (size_t i = 0; i < client["tokens"].size(); ++i, ++at) {
      ASSERT_LT(at, segment.response.size());
      EXPECT_EQ(tokenizer.decode({segment.response[at]}), client["tokens"][i].get<std::string>())
          << "turn " << turn << " token " << i;
      EXPECT_NEAR(segment.logprobs[at], client["logprobs"][i].get<double>(), 1e-5);
      EXPECT_EQ(segment.loss_mask[at], 1.0f);
    }
    if (turn == 0) {
      // Between the turns: the rendered tool message and generation prompt (mask 0).
      const std::vector<TokenId> turn1(begin, begin + static_cast<std::ptrdiff_t>(at));
      const std::string seen_by_engine = text1 + tokenizer.decode(turn1);
      const std::string text2 = rendered(seen["turns"][1]["sent"]);
      ASSERT_EQ(text2.compare(0, seen_by_engine.size(), seen_by_engine), 0);
      const std::vector<TokenId> environment =
          tokenizer.encode(text2.substr(seen_by_engine.size()));
      EXPECT_EQ(std::vector<TokenId>(begin + static_cast<std::ptrdiff_t>(at),
                                     begin + static_cast<std::ptrdiff_t>(start2)),
                environment);
      EXPECT_NE(text2.find("<tool_response>\n121932631112635269\n</tool_response>"),
                std::string::npos);
      for (; at < start2; ++at) EXPECT_EQ(segment.loss_mask[at], 0.0f);
    }
  }
  EXPECT_EQ(at, segment.response.size());
  const std::map<std::string, int64_t> metrics = server.sessions().metrics();
  EXPECT_EQ(metrics.at("agent_calls"), 2);
  EXPECT_EQ(metrics.at("agent_prefix_breaks"), 0);
}

TEST(AgentEndpoint, WrongSessionAndLateCallsAreRefusedAndCounted) {
  AgentServer server;
  AgentProgram program(server.program(agent_command()), server.sessions());
  const std::string wrong_path = seen_path("wrong");
  const AgentEpisode wrong = program.run({{"question", "Hi"},
                                          {"seed", 1},
                                          {"max_tokens", 2},
                                          {"seen_path", wrong_path},
                                          {"mode", "wrong_session"}});
  EXPECT_EQ(wrong.fault, AgentFault::kNoCalls);
  EXPECT_NE(wrong.error.find("no call with its session id"), std::string::npos) << wrong.error;
  EXPECT_EQ(read_seen(wrong_path)["errors"][0]["status"], 403);

  const std::string late_path = seen_path("late");
  const AgentEpisode late = program.run({{"question", "Hi"},
                                         {"seed", 1},
                                         {"max_tokens", 2},
                                         {"seen_path", late_path},
                                         {"mode", "late"}});
  EXPECT_EQ(late.fault, AgentFault::kNoCalls);
  const ordered_json seen = read_seen(late_path);
  EXPECT_EQ(seen["errors"][0]["status"], 409);
  EXPECT_NE(seen["errors"][0]["message"].get<std::string>().find("already printed its reward"),
            std::string::npos);
  const std::map<std::string, int64_t> metrics = server.sessions().metrics();
  EXPECT_EQ(metrics.at("agent_unknown_session_calls"), 1);
  EXPECT_EQ(metrics.at("agent_late_calls"), 1);
  EXPECT_EQ(program.metrics().at("agent_no_calls"), 2);
}

// The agent docs/agents.md shows, run as written there (any model name is the policy's).
// The random model calls no tool: one turn, and no answer in it.
TEST(AgentEndpoint, TheDocumentedAgentRunsAsWritten) {
  std::ifstream docs(std::string(ASPEN_SOURCE_DIR) + "/docs/agents.md");
  const std::string text((std::istreambuf_iterator<char>(docs)), std::istreambuf_iterator<char>());
  const size_t begin = text.find("```python\nimport json, os, sys\nimport openai\n\nTOOLS");
  ASSERT_NE(begin, std::string::npos) << "docs/agents.md lost its agent example";
  const size_t code = text.find('\n', begin) + 1;
  const std::string path =
      seen_path("documented").substr(0, seen_path("documented").size() - 5) + ".py";
  std::ofstream(path) << text.substr(code, text.find("```", code) - code);
  AgentServer server;
  AgentProgram program(server.program(testing::python() + " " + path), server.sessions());
  const AgentEpisode episode = program.run(
      {{"question", "What is 123456789 * 987654321?"}, {"answer", "121932631112635269"}});
  fs::remove(path);
  ASSERT_TRUE(episode.ok()) << episode.error;
  EXPECT_EQ(episode.turns, 1);
  EXPECT_EQ(episode.reward, 0.0);
}

// Thread-free: what begin() makes of a parsed request.
TEST(AgentEndpoint, ACallSamplesAsTheRunDoesAndGetsTheRoomItsSessionLeaves) {
  const std::shared_ptr<const Tokenizer> tokenizer = agent_test_tokenizer();
  ServeContext context;
  context.model_name = "policy";
  context.tokenizer = tokenizer;
  context.chat_template = ChatTemplate::from_config(testing::qwen3_tokenizer_dir());
  context.max_model_len = 4096;
  context.tool_calls = true;
  context.any_model_name = true;
  AgentSessions sessions(tokenizer, PrefixBreak::kSplit,
                         {/*max_turns=*/1, /*max_context_tokens=*/40});
  AgentEndpointOptions options;
  options.api_key = AgentSessions::random_secret();
  options.sampling = SamplingParams{};
  options.sampling->temperature = 0.9;
  options.sampling->top_p = 0.95;
  AgentEndpoint endpoint(sessions, options);
  EXPECT_NO_THROW(endpoint.authenticate("Bearer " + options.api_key));
  EXPECT_THROW(endpoint.authenticate(options.api_key), RequestError);
  const std::string session = sessions.open();
  auto parse = [&](const json& messages, int64_t max_tokens) {
    const json body = {{"model", "gpt-4o"}, {"messages", messages},     {"temperature", 0.1},
                       {"top_k", 5},        {"max_tokens", max_tokens}, {"user", session}};
    const ordered_json ordered = ordered_json::parse(body.dump());
    return parse_chat_request(body, context, &ordered);
  };
  ServeRequest request = parse({{{"role", "user"}, {"content", "Hi"}}}, 1000);
  EXPECT_EQ(request.model, "policy");
  endpoint.begin("", request, context);
  EXPECT_EQ(request.params.temperature, 0.9);
  EXPECT_EQ(request.params.top_p, 0.95);
  EXPECT_EQ(request.params.top_k, 0);
  const int64_t prompt = static_cast<int64_t>(request.prompts[0].size());
  ASSERT_LT(prompt, 40);
  EXPECT_EQ(request.params.max_tokens, 40 - prompt);  // the session's room, not 1000
  Completion turn;
  turn.token_ids = tokenizer->encode("Hello");
  turn.logprobs.assign(turn.token_ids.size(), -1.0f);
  turn.policy_versions.assign(turn.token_ids.size(), 0);
  endpoint.finish(session, turn);
  ServeRequest second = parse({{{"role", "user"}, {"content", "Hi"}},
                               {{"role", "assistant"}, {"content", "Hello"}},
                               {{"role", "user"}, {"content", "Again"}}},
                              4);
  try {
    endpoint.begin("", second, context);
    FAIL() << "a call past the turn limit was accepted";
  } catch (const RequestError& error) {
    EXPECT_EQ(error.status(), 409);
  }
  EXPECT_EQ(sessions.metrics().at("agent_turn_limit"), 1);
}

TEST(AgentEndpoint, RefusesRequestsWithoutTheKeyOrASessionWithClearErrors) {
  AgentServer server;
  const std::string session = server.sessions().open();
  httplib::Client client("127.0.0.1", server.port());
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 2}};
  auto post = [&](const std::string& path, const json& body, const httplib::Headers& headers) {
    const auto result = client.Post(path, headers, body.dump(), "application/json");
    return result ? std::make_pair(result->status, result->body) : std::make_pair(0, std::string());
  };
  const httplib::Headers key = {{"Authorization", std::string("Bearer ") + kRunKey}};
  EXPECT_EQ(post("/v1/chat/completions", chat, {}).first, 401);
  EXPECT_EQ(post("/v1/chat/completions", chat, {{"Authorization", "Bearer wrong"}}).first, 401);
  const auto no_session = post("/v1/chat/completions", chat, key);
  EXPECT_EQ(no_session.first, 400);
  EXPECT_NE(no_session.second.find("X-Aspen-Session"), std::string::npos);
  EXPECT_EQ(post("/v1/completions", {{"prompt", "Hi"}, {"user", session}}, key).first, 400);
  json with_tools = chat;
  with_tools["tools"] = kAgentTools;
  with_tools["stream"] = true;
  with_tools["user"] = session;
  EXPECT_EQ(post("/v1/chat/completions", with_tools, key).first, 400);
  json two = chat;
  two["n"] = 2;
  two["user"] = session;
  EXPECT_EQ(post("/v1/chat/completions", two, key).first, 400);
  // The header names the session as well as `user` does; a streamed call is recorded too.
  httplib::Headers by_header = key;
  by_header.emplace(kSessionHeader, session);
  json streamed = chat;
  streamed["stream"] = true;
  EXPECT_EQ(post("/v1/chat/completions", streamed, by_header).first, 200);
  const ClosedSession closed = server.sessions().close(session);
  EXPECT_EQ(closed.turns, 1);
  EXPECT_EQ(post("/v1/chat/completions", chat, by_header).first, 409);
  EXPECT_EQ(client.Get("/health")->status, 200);
}

}  // namespace
}  // namespace aspen::serve
