// The OpenAI request bodies: each field's meaning, the defaults, and a RequestError
// naming the field (with the HTTP status) for everything refused.
#include "aspen/serve/openai_request.h"

#include <gtest/gtest.h>

#include "support/oracles.h"

namespace aspen::serve {
namespace {

using nlohmann::json;

ServeContext context() {
  static const auto tokenizer =
      std::make_shared<const Tokenizer>(Tokenizer::from_file(testing::qwen3_tokenizer_json()));
  ServeContext context;
  context.model_name = "tiny";
  context.tokenizer = tokenizer;
  context.chat_template = ChatTemplate::builtin("qwen3");
  context.max_model_len = 64;
  context.defaults.temperature = 0.7;  // as if from generation_config.json
  context.defaults.top_p = 0.8;
  return context;
}

// The status and field of the RequestError `parse` throws.
template <typename Parse>
std::pair<int, std::string> refusal(Parse parse) {
  try {
    parse();
  } catch (const RequestError& error) {
    return {error.status(), error.input()};
  }
  return {0, "accepted"};
}

std::pair<int, std::string> completion_refusal(const json& body) {
  return refusal([&] { parse_completion_request(body, context()); });
}

TEST(OpenAiRequest, CompletionFieldsMapToSamplingParams) {
  const ServeRequest request = parse_completion_request(
      {{"model", "tiny"}, {"prompt", "Hello"}, {"max_tokens", 5}, {"temperature", 0.0},
       {"top_k", 4}, {"n", 3}, {"seed", 9}, {"stop", "x"}, {"stream", true},
       {"stream_options", {{"include_usage", true}}}, {"logprobs", 0}},
      context());
  EXPECT_EQ(request.endpoint, Endpoint::kCompletions);
  EXPECT_EQ(request.prompts, std::vector<std::vector<TokenId>>{context().tokenizer->encode("Hello")});
  EXPECT_EQ(request.params.max_tokens, 5);
  EXPECT_EQ(request.params.temperature, 0.0);
  EXPECT_EQ(request.params.top_p, 0.8);  // not given: generation_config.json's
  EXPECT_EQ(request.params.top_k, 4);
  EXPECT_EQ(request.n, 3);
  EXPECT_EQ(request.params.seed, 9u);
  EXPECT_EQ(request.params.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(request.stream);
  EXPECT_TRUE(request.include_usage);
  EXPECT_TRUE(request.logprobs);
}

TEST(OpenAiRequest, CompletionPromptsComeAsTextListsOrTokenIds) {
  const auto& tokenizer = *context().tokenizer;
  EXPECT_EQ(parse_completion_request({{"prompt", {"a b", "c"}}}, context()).prompts,
            (std::vector<std::vector<TokenId>>{tokenizer.encode("a b"), tokenizer.encode("c")}));
  EXPECT_EQ(parse_completion_request({{"prompt", {1, 2, 3}}}, context()).prompts,
            (std::vector<std::vector<TokenId>>{{1, 2, 3}}));
  EXPECT_EQ(parse_completion_request({{"prompt", {{1, 2}, {3}}}}, context()).prompts,
            (std::vector<std::vector<TokenId>>{{1, 2}, {3}}));
  // OpenAI's default of 16 tokens, cut to what the context leaves.
  EXPECT_EQ(parse_completion_request({{"prompt", "hi"}}, context()).params.max_tokens, 16);
}

TEST(OpenAiRequest, RefusalsNameTheFieldAndTheStatus) {
  using Refusal = std::pair<int, std::string>;
  EXPECT_EQ(completion_refusal({{"prompt", "x"}, {"temprature", 0}}), Refusal(400, "temprature"));
  EXPECT_EQ(completion_refusal({{"prompt", "x"}, {"model", "other"}}), Refusal(404, "model"));
  EXPECT_EQ(completion_refusal({{"model", "tiny"}}), Refusal(400, "prompt"));
  EXPECT_EQ(completion_refusal({{"prompt", "x"}, {"logprobs", 2}}), Refusal(400, "logprobs"));
  EXPECT_EQ(completion_refusal({{"prompt", "x"}, {"n", 0}}), Refusal(400, "n"));
  EXPECT_EQ(completion_refusal({{"prompt", "x"}, {"n", 2000}}), Refusal(400, "n"));
  EXPECT_EQ(completion_refusal({{"prompt", "x"}, {"max_tokens", 0}}), Refusal(400, "max_tokens"));
  EXPECT_EQ(completion_refusal({{"prompt", "x"}, {"max_tokens", 64}}), Refusal(400, "max_tokens"));
  EXPECT_EQ(completion_refusal({{"prompt", "x"}, {"temperature", "hot"}}),
            Refusal(400, "temperature"));
  EXPECT_EQ(completion_refusal({{"prompt", "x"}, {"temperature", -1}}), Refusal(400, "sampling"));
  EXPECT_EQ(completion_refusal({{"prompt", "x"}, {"stop", {1}}}), Refusal(400, "stop"));
  EXPECT_EQ(completion_refusal({{"prompt", {-1}}}), Refusal(400, "prompt"));
  EXPECT_EQ(completion_refusal({{"prompt", {200000}}}), Refusal(400, "prompt"));
  EXPECT_EQ(completion_refusal({{"prompt", ""}}), Refusal(400, "prompt"));
  std::string long_prompt;
  for (int i = 0; i < 100; ++i) long_prompt += " word" + std::to_string(i);
  EXPECT_EQ(completion_refusal({{"prompt", long_prompt}}), Refusal(400, "prompt"));
  EXPECT_EQ(completion_refusal({{"prompt", "x"}, {"presence_penalty", 0.5}}),
            Refusal(400, "presence_penalty"));
  EXPECT_EQ(completion_refusal({{"prompt", "x"}, {"echo", true}}), Refusal(400, "echo"));
  EXPECT_EQ(completion_refusal({{"prompt", "x"}, {"stream_options", {{"other", 1}}}}),
            Refusal(400, "stream_options.other"));
  EXPECT_EQ(completion_refusal(json::array()), Refusal(400, "body"));
  // Explicit nulls are "not given", as OpenAI's clients send them.
  EXPECT_EQ(completion_refusal({{"prompt", "x"}, {"max_tokens", nullptr}, {"seed", nullptr}}),
            Refusal(0, "accepted"));
}

TEST(OpenAiRequest, ChatRendersTheTemplateAndFillsTheContextByDefault) {
  const ServeRequest request = parse_chat_request(
      {{"messages", {{{"role", "system"}, {"content", "Be brief."}},
                     {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Hi"}}}}}}},
       {"chat_template_kwargs", {{"enable_thinking", false}}}},
      context());
  const std::string expected = ChatTemplate::builtin("qwen3").render(
      {{"system", "Be brief."}, {"user", "Hi"}}, /*add_generation_prompt=*/true,
      /*enable_thinking=*/false);
  ASSERT_EQ(request.prompts.size(), 1u);
  EXPECT_EQ(request.prompts[0], context().tokenizer->encode(expected));
  EXPECT_EQ(resolve_max_tokens(request, request.prompts[0].size(), context()),
            64 - static_cast<int64_t>(request.prompts[0].size()));
  EXPECT_EQ(parse_chat_request({{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                {"max_completion_tokens", 3}},
                               context())
                .params.max_tokens,
            3);
}

TEST(OpenAiRequest, ChatRefusalsNameTheField) {
  using Refusal = std::pair<int, std::string>;
  auto chat = [](const json& body) { return refusal([&] { parse_chat_request(body, context()); }); };
  EXPECT_EQ(chat({{"messages", json::array()}}), Refusal(400, "messages"));
  EXPECT_EQ(chat({{"messages", {{{"content", "Hi"}}}}}), Refusal(400, "messages[0]"));
  EXPECT_EQ(chat({{"messages", {{{"role", "user"}, {"content", 3}}}}}),
            Refusal(400, "messages[0].content"));
  EXPECT_EQ(chat({{"messages", {{{"role", "wizard"}, {"content", "Hi"}}}}}),
            Refusal(400, "messages"));
  EXPECT_EQ(chat({{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"top_logprobs", 2}}),
            Refusal(400, "top_logprobs"));
  EXPECT_EQ(chat({{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                  {"tools", {{{"type", "function"}}}}}),
            Refusal(400, "tools"));
  ServeContext no_template = context();
  no_template.chat_template.reset();
  EXPECT_EQ(refusal([&] {
              parse_chat_request({{"messages", {{{"role", "user"}, {"content", "Hi"}}}}},
                                 no_template);
            }),
            Refusal(400, "messages"));
}

TEST(OpenAiRequest, ToolsAndToolChoiceAreRefusedEvenWhenEmpty) {
  using Refusal = std::pair<int, std::string>;
  auto chat = [](const json& extra) {
    json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
    body.update(extra);
    return refusal([&] { parse_chat_request(body, context()); });
  };
  // A client sending tools expects tool calls parsed out of the reply, which this
  // server does not do: refusing is better than answering as if no tools were given.
  EXPECT_EQ(chat({{"tools", json::array()}}), Refusal(400, "tools"));
  EXPECT_EQ(chat({{"tool_choice", "none"}}), Refusal(400, "tool_choice"));
  EXPECT_EQ(chat({{"tool_choice", "auto"}, {"tools", json::array()}}).first, 400);
  EXPECT_EQ(chat({{"tools", nullptr}, {"tool_choice", nullptr}}), Refusal(0, "accepted"));
}

TEST(OpenAiRequest, ARequestMayAskForAtMostTheServersBoundOfGeneratedTokens) {
  using Refusal = std::pair<int, std::string>;
  ServeContext bounded = context();
  bounded.max_request_tokens = 100;  // as --max-num-seqs x max_model_len sets it
  auto completion = [&](const json& body) {
    return refusal([&] { parse_completion_request(body, bounded); });
  };
  EXPECT_EQ(completion({{"prompt", "x"}, {"max_tokens", 50}, {"n", 2}}), Refusal(0, "accepted"));
  EXPECT_EQ(completion({{"prompt", "x"}, {"max_tokens", 50}, {"n", 3}}), Refusal(400, "n"));
  EXPECT_EQ(completion({{"prompt", {"x", "y", "z"}}, {"max_tokens", 40}}), Refusal(400, "prompt"));
  // Chat without max_tokens asks for the whole rest of the context, per sample.
  auto chat = [&](int64_t n) {
    return refusal([&] {
      parse_chat_request({{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"n", n}}, bounded);
    });
  };
  EXPECT_EQ(chat(1), Refusal(0, "accepted"));
  EXPECT_EQ(chat(4), Refusal(400, "n"));
  try {
    parse_completion_request({{"prompt", "x"}, {"max_tokens", 50}, {"n", 3}}, bounded);
  } catch (const RequestError& error) {
    EXPECT_NE(error.problem().find("150"), std::string::npos) << error.problem();
    EXPECT_NE(error.problem().find("at most 100"), std::string::npos) << error.problem();
  }
}

// `aspen serve --lora NAME=DIR`: "model" picks the base or an adapter by its served name,
// as vLLM's --lora-modules; absent, the base answers; an unknown name is a 404 that
// lists what the server serves.
TEST(OpenAiRequest, TheModelFieldChoosesTheBaseOrAServedAdapter) {
  ServeContext with_adapters = context();
  with_adapters.adapters = {{"math", "/adapters/math"}, {"code", "/adapters/code"}};
  auto chosen = [&](const json& extra) {
    json body = {{"prompt", "x"}};
    body.update(extra);
    return parse_completion_request(body, with_adapters).model;
  };
  EXPECT_EQ(chosen(json::object()), "tiny");
  EXPECT_EQ(chosen({{"model", "tiny"}}), "tiny");
  EXPECT_EQ(chosen({{"model", "math"}}), "math");
  const json chat = {{"model", "code"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  EXPECT_EQ(parse_chat_request(chat, with_adapters).model, "code");
  try {
    parse_completion_request({{"prompt", "x"}, {"model", "maths"}}, with_adapters);
    FAIL() << "an unknown model was accepted";
  } catch (const RequestError& error) {
    EXPECT_EQ(error.status(), 404);
    EXPECT_EQ(error.input(), "model");
    EXPECT_NE(error.problem().find("`maths` does not exist"), std::string::npos) << error.problem();
    EXPECT_NE(error.problem().find("`tiny`, `math`, `code`"), std::string::npos) << error.problem();
  }
  // Without adapters an adapter's name is as unknown as any other.
  EXPECT_EQ(completion_refusal({{"prompt", "x"}, {"model", "math"}}).first, 404);
}

}  // namespace
}  // namespace aspen::serve
