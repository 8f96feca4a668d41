// ChatTemplate: recognition of real Qwen chat templates and the exact prompt text their
// Jinja renders. Expected strings are derived by hand from the template sources: the
// real Qwen3 tokenizer_config.json (shared/fixtures/qwen3-tokenizer) and the
// Qwen2.5-Instruct one below, evaluating each Jinja branch for the conversation at hand.
#include "aspen/tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "aspen/util/error.h"
#include "support/oracles.h"

namespace aspen::tokenizer {
namespace {

const std::string kQwen3ModelDir = testing::qwen3_tokenizer_dir();

// tokenizer_config.json "chat_template" of Qwen/Qwen2.5-*-Instruct (after JSON decoding).
const std::string kQwen25Template = R"({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)";

// Qwen2-Instruct's shorter template.
const std::string kQwen2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::string write_config(const std::string& name, const std::string& chat_template) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream out(path, std::ios::trunc);
  std::string escaped;
  for (const char c : chat_template) {
    if (c == '"' || c == '\\') escaped += '\\';
    if (c == '\n') {
      escaped += "\\n";
      continue;
    }
    escaped += c;
  }
  out << "{\"chat_template\": \"" << escaped << "\"}";
  return path.string();
}

ChatTemplate qwen3() {
  return ChatTemplate::from_config(kQwen3ModelDir);
}

TEST(ChatTemplateTest, RecognisesRealQwen3Config) {
  const ChatTemplate t = ChatTemplate::from_config(kQwen3ModelDir + "/tokenizer_config.json");
  EXPECT_EQ(t.family(), ChatTemplate::Family::kQwen3);
  EXPECT_EQ(t.name(), "qwen3");
  EXPECT_FALSE(t.default_system_prompt().has_value());
}

TEST(ChatTemplateTest, Qwen3SystemUserGenerationPrompt) {
  const std::vector<ChatMessage> chat = {{"system", "You are terse."}, {"user", "What is 2+2?"}};
  EXPECT_EQ(qwen3().render(chat, /*add_generation_prompt=*/true),
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(qwen3().render(chat, /*add_generation_prompt=*/true, /*enable_thinking=*/false),
            "<|im_start|>system\nYou are terse.<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // Without a system message Qwen3 injects none.
  EXPECT_EQ(qwen3().render({{"user", "Hi"}}, /*add_generation_prompt=*/false),
            "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplateTest, Qwen3StripsReasoningFromEarlierAssistantTurns) {
  const std::vector<ChatMessage> chat = {
      {"user", "Hi"},
      {"assistant", "<think>\nplan a greeting\n</think>\n\nHello!"},
      {"user", "2+2?"}};
  EXPECT_EQ(qwen3().render(chat, /*add_generation_prompt=*/true),
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, Qwen3KeepsReasoningOfFinalAnswer) {
  EXPECT_EQ(
      qwen3().render({{"user", "2+2?"}, {"assistant", "<think>\n\nadd them\n\n</think>\n\n\n4"}},
                     /*add_generation_prompt=*/false),
      "<|im_start|>user\n2+2?<|im_end|>\n"
      "<|im_start|>assistant\n<think>\nadd them\n</think>\n\n4<|im_end|>\n");
  // The last assistant turn always gets a think block, empty when it had no reasoning.
  EXPECT_EQ(qwen3().render({{"user", "2+2?"}, {"assistant", "4"}}, false),
            "<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>\n");
}

TEST(ChatTemplateTest, Qwen3ToolResponsesShareOneUserTurn) {
  const std::vector<ChatMessage> chat = {{"user", "Weather?"},
                                         {"assistant", "Calling tools."},
                                         {"tool", "sunny"},
                                         {"tool", "20C"},
                                         {"assistant", "It is sunny."}};
  EXPECT_EQ(qwen3().render(chat, false),
            "<|im_start|>user\nWeather?<|im_end|>\n"
            "<|im_start|>assistant\nCalling tools.<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n"
            "<tool_response>\n20C\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nIt is sunny.<|im_end|>\n");
}

TEST(ChatTemplateTest, Qwen25InjectsDefaultSystemPromptReadFromTemplate) {
  const ChatTemplate t = ChatTemplate::from_config(write_config("aspen_q25.json", kQwen25Template));
  EXPECT_EQ(t.family(), ChatTemplate::Family::kQwen25);
  ASSERT_TRUE(t.default_system_prompt().has_value());
  EXPECT_EQ(*t.default_system_prompt(),
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  EXPECT_EQ(t.render({{"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}}, true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
  // A given system prompt replaces the default; enable_thinking means nothing here.
  EXPECT_EQ(t.render({{"system", "S"}, {"user", "Hi"}}, true, /*enable_thinking=*/false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(t.render({{"user", "q"}, {"assistant", "a"}, {"tool", "r"}}, false),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nq<|im_end|>\n"
            "<|im_start|>assistant\na<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nr\n</tool_response><|im_end|>\n");
}

TEST(ChatTemplateTest, Qwen25MathDefaultPromptIsUnescaped) {
  // Qwen2.5-Math ships the same template with its own default system prompt.
  const std::string math =
      "Please reason step by step, and put your final answer within \\\\boxed{}.";
  std::string jinja = kQwen25Template;
  const std::string stock = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
  jinja = replace_once(jinja, stock, math);  // the tools branch
  jinja = replace_once(jinja, stock, math);  // the plain branch
  const ChatTemplate t = ChatTemplate::from_template_text(jinja, "qwen2.5-math");
  EXPECT_EQ(t.render({{"user", "1+1"}}, true),
            "<|im_start|>system\nPlease reason step by step, and put your final answer within "
            "\\boxed{}.<|im_end|>\n<|im_start|>user\n1+1<|im_end|>\n<|im_start|>assistant\n");
}

// Found by fuzz_chat_template: a default system prompt of some thousands of characters
// overflowed the stack in std::regex's recursive matcher. It is read in one pass now.
TEST(ChatTemplateTest, ALongDefaultSystemPromptIsReadWithoutRecursion) {
  std::string prompt;
  for (int i = 0; i < 4000; ++i) prompt += "Be helpful, brief and kind. ";  // 112,000 chars
  prompt += "It\\'s fine.";  // an escaped quote inside the literal
  std::string jinja = kQwen25Template;
  const std::string stock = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
  jinja = replace_once(jinja, stock, prompt);
  jinja = replace_once(jinja, stock, prompt);
  const ChatTemplate t = ChatTemplate::from_template_text(jinja, "long");
  ASSERT_TRUE(t.default_system_prompt().has_value());
  EXPECT_EQ(t.default_system_prompt()->size(), 4000 * 28 + 10);
  EXPECT_EQ(t.default_system_prompt()->substr(4000 * 28), "It's fine.");
}

TEST(ChatTemplateTest, Qwen2TemplateRendersToolAsPlainTurn) {
  const ChatTemplate t = ChatTemplate::from_template_text(kQwen2Template, "qwen2");
  EXPECT_EQ(*t.default_system_prompt(), "You are a helpful assistant.");
  EXPECT_EQ(t.render({{"user", "q"}, {"tool", "r"}}, true),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nq<|im_end|>\n<|im_start|>tool\nr<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, PlainChatMLTemplate) {
  const ChatTemplate t = ChatTemplate::from_template_text(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|im_start|>assistant\\n' }}{% endif %}",
      "chatml");
  EXPECT_EQ(t.family(), ChatTemplate::Family::kChatML);
  EXPECT_EQ(t.render({{"user", "Hi"}}, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, BuiltinsMatchRecognisedTemplates) {
  const std::vector<ChatMessage> chat = {
      {"user", "Hi"}, {"assistant", "<think>x</think>Yo"}, {"tool", "t"}, {"user", "More"}};
  EXPECT_EQ(ChatTemplate::builtin("qwen3").render(chat, true, false),
            qwen3().render(chat, true, false));
  EXPECT_EQ(ChatTemplate::builtin("qwen2.5").render(chat, true),
            ChatTemplate::from_template_text(kQwen25Template, "q25").render(chat, true));
  EXPECT_EQ(ChatTemplate::builtin("chatml").render({{"user", "Hi"}}, false),
            "<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_THROW(ChatTemplate::builtin("llama3"), Error);
}

TEST(ChatTemplateTest, UnrecognisedTemplateIsAnErrorNamingTheFile) {
  const std::string llama =
      "{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
      "'<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}{% endfor %}";
  const std::string path = write_config("aspen_llama_config.json", llama);
  try {
    ChatTemplate::from_config(path);
    FAIL() << "expected aspen::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unrecognised chat template"), std::string::npos)
        << e.what();
    EXPECT_EQ(e.input(), path);
  }
}

TEST(ChatTemplateTest, AlteredQwenTemplatesAreNotRecognised) {
  std::ifstream in(kQwen3ModelDir + "/tokenizer_config.json");
  const std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A Qwen3 template that puts something else in the non-thinking generation prompt.
  std::string changed = replace_once(config, "<think>\\\\n\\\\n</think>\\\\n\\\\n", "<think>\\\\n");
  const auto path = std::filesystem::temp_directory_path() / "aspen_qwen3_altered.json";
  std::ofstream(path) << changed;
  EXPECT_THROW(ChatTemplate::from_config(path.string()), Error);
  // A Qwen2.5 template that renders user turns differently.
  EXPECT_THROW(ChatTemplate::from_template_text(
                   replace_once(kQwen25Template, "'<|im_end|>' + '\\n'", "'<|im_end|>'"), "x"),
               Error);
}

TEST(ChatTemplateTest, MissingChatTemplateIsAnError) {
  const auto path = std::filesystem::temp_directory_path() / "aspen_no_template.json";
  std::ofstream(path) << "{\"eos_token\": \"<|im_end|>\"}";
  EXPECT_THROW(ChatTemplate::from_config(path.string()), Error);
}

TEST(ChatTemplateTest, RejectsBadRoles) {
  const ChatTemplate t = ChatTemplate::builtin("qwen3");
  EXPECT_THROW(t.render({}, true), Error);
  EXPECT_THROW(t.render({{"user", "a"}, {"system", "late"}}, true), Error);
  EXPECT_THROW(t.render({{"narrator", "a"}}, true), Error);
  EXPECT_NO_THROW(t.render({{"system", "s"}, {"user", "a"}}, true));
}

}  // namespace
}  // namespace aspen::tokenizer
