#include "aspen/tokenizer/chat_template.h"

#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "aspen/tokenizer/imports.h"
#include "aspen/tokenizer/python_json.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"
#include "aspen/util/strings.h"

namespace aspen::tokenizer {
namespace {

constexpr const char* kQwen25DefaultSystem =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
// Stands in for the default system prompt while a template is compared with known shapes.
constexpr const char* kDefaultPlaceholder = "@DEFAULT_SYSTEM@";

// --- Recognition --------------------------------------------------------------------------

// Undoes Jinja string-literal escapes (the Python subset templates use).
std::string unescape_jinja(const std::string& literal) {
  std::string out;
  for (size_t i = 0; i < literal.size(); ++i) {
    if (literal[i] != '\\' || i + 1 == literal.size()) {
      out += literal[i];
      continue;
    }
    const char next = literal[++i];
    switch (next) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      default:
        out += '\\';
        out += next;
        break;
    }
  }
  return out;
}

// Qwen2.5's tools branch prints the default system prompt again, as a literal of its own
// (`{{- 'You are Qwen, ...' }}`); every such literal becomes '@DEFAULT_SYSTEM@' too, so that
// recognition can require both branches to print the same prompt.
void replace_prompt_literals(const std::string& escaped, std::string& jinja) {
  for (const char quote : {'\'', '"'}) {
    const std::string literal = quote + escaped + quote;
    const std::string placeholder = std::string("'") + kDefaultPlaceholder + "'";
    for (size_t at = jinja.find(literal); at != std::string::npos;
         at = jinja.find(literal, at + placeholder.size())) {
      jinja.replace(at, literal.size(), placeholder);
    }
  }
}

// Finds the literal `<|im_start|>system\n...<|im_end|>\n` a Qwen2-style template prints
// when the conversation has no system message; returns its text and replaces it in
// `jinja` by kDefaultPlaceholder.
//
// A Jinja string literal is scanned by hand, one pass: std::regex (libstdc++) recurses
// once per character of a repeated group, and a template with a system prompt of a few
// thousand characters overflowed the stack (found by fuzz_chat_template; the regression
// test is ChatTemplateTest.ALongDefaultSystemPromptIsReadWithoutRecursion).
std::optional<std::string> take_default_system(std::string& jinja) {
  const std::string suffix = "<|im_end|>\\n";  // as the template spells it: \n escaped
  for (const char quote : {'\'', '"'}) {
    const std::string open = std::string(1, quote) + "<|im_start|>system\\n";
    for (size_t at = jinja.find(open); at != std::string::npos; at = jinja.find(open, at + 1)) {
      const size_t body = at + open.size();
      // The literal runs to the first quote that no backslash escapes.
      size_t end = body;
      while (end < jinja.size() && jinja[end] != quote) end += jinja[end] == '\\' ? 2 : 1;
      if (end >= jinja.size()) break;  // unterminated: no later literal can close either
      const size_t length = end - body;
      if (length <= suffix.size() || jinja.compare(end - suffix.size(), suffix.size(), suffix) != 0) {
        continue;
      }
      const size_t text_length = length - suffix.size();
      const std::string escaped = jinja.substr(body, text_length);
      jinja.replace(body, text_length, kDefaultPlaceholder);
      replace_prompt_literals(escaped, jinja);
      return unescape_jinja(escaped);
    }
  }
  return std::nullopt;
}

// Removes layout that does not change the rendered text: whitespace between tags (the Qwen
// templates trim it with `-`), the `-` markers themselves, quote style, and subscript vs
// attribute access. Literal text is compared without its spaces, which is still specific.
std::string normalise(const std::string& jinja) {
  std::string out;
  for (const char c : jinja) {
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    out += c == '"' ? '\'' : c;
  }
  const std::pair<const char*, const char*> rewrites[] = {
      {"{%-", "{%"}, {"-%}", "%}"},         {"{{-", "{{"},
      {"-}}", "}}"}, {"['role']", ".role"}, {"['content']", ".content"}};
  for (const auto& [from, to] : rewrites) {
    const std::string needle = from;
    for (size_t at = out.find(needle); at != std::string::npos; at = out.find(needle, at)) {
      out.replace(at, needle.size(), to);
    }
  }
  return out;
}

bool contains_all(const std::string& text, std::initializer_list<const char*> fragments) {
  for (const char* fragment : fragments) {
    if (text.find(fragment) == std::string::npos) return false;
  }
  return true;
}

constexpr const char* kChatMLTurn =
    "'<|im_start|>'+message.role+'\\n'+message.content+'<|im_end|>'+'\\n'";
constexpr const char* kGenerationPrompt =
    "{%ifadd_generation_prompt%}{{'<|im_start|>assistant\\n'}}";

// The tool sections, normalised. Both families print the same tools header after their
// own system-prompt part, and differ in how a tool call is spaced and when arguments that
// are a string are printed verbatim (qwen3) or through tojson (qwen2.5).
constexpr const char* kToolsHeader =
    R"(#Tools\n\nYoumaycalloneormorefunctionstoassistwiththeuserquery.\n\nYouareprovided)"
    R"(withfunctionsignatureswithin<tools></tools>XMLtags:\n<tools>'}}{%fortoolintools%})"
    R"({{'\n'}}{{tool|tojson}}{%endfor%}{{'\n</tools>\n\nForeachfunctioncall,returnajson)"
    R"(objectwithfunctionnameandargumentswithin<tool_call></tool_call>XMLtags:\n<tool_call>)"
    R"(\n{\'name\':<function-name>,\'arguments\':<args-json-object>}\n</tool_call><|im_end|>)"
    R"(\n'}}{%else%})";
constexpr const char* kQwen25ToolsSystem =
    R"({%iftools%}{{'<|im_start|>system\n'}}{%ifmessages[0].role=='system'%}{{messages[0].)"
    R"(content}}{%else%}{{'@DEFAULT_SYSTEM@'}}{%endif%}{{'\n\n)";
constexpr const char* kQwen3ToolsSystem =
    R"({%iftools%}{{'<|im_start|>system\n'}}{%ifmessages[0].role=='system'%}{{messages[0].)"
    R"(content+'\n\n'}}{%endif%}{{')";
constexpr const char* kQwen25ToolCalls =
    R"({%elifmessage.role=='assistant'%}{{'<|im_start|>'+message.role}}{%ifmessage.content%})"
    R"({{'\n'+message.content}}{%endif%}{%fortool_callinmessage.tool_calls%}{%iftool_call.)"
    R"(functionisdefined%}{%settool_call=tool_call.function%}{%endif%}{{'\n<tool_call>\n)"
    R"({'name':''}}{{tool_call.name}}{{'','arguments':'}}{{tool_call.arguments|tojson}}{{'})"
    R"(\n</tool_call>'}}{%endfor%}{{'<|im_end|>\n'}})";
constexpr const char* kQwen3ToolCalls =
    R"({%ifmessage.tool_calls%}{%fortool_callinmessage.tool_calls%}{%if(loop.firstand)"
    R"(content)or(notloop.first)%}{{'\n'}}{%endif%}{%iftool_call.function%}{%settool_call=)"
    R"(tool_call.function%}{%endif%}{{'<tool_call>\n{'name':''}}{{tool_call.name}}{{'',)"
    R"('arguments':'}}{%iftool_call.argumentsisstring%}{{tool_call.arguments}}{%else%}{{)"
    R"(tool_call.arguments|tojson}}{%endif%}{{'}\n</tool_call>'}}{%endfor%}{%endif%}{{'<|)"
    R"(im_end|>\n'}})";

bool is_plain_chatml(const std::string& n) {
  return n ==
         "{%formessageinmessages%}{{'<|im_start|>'+message.role+'\\n'+message.content+"
         "'<|im_end|>'+'\\n'}}{%endfor%}{%ifadd_generation_prompt%}{{'<|im_start|>assistant\\n'}}"
         "{%endif%}";
}

// Qwen2-Instruct: plain ChatML plus a default system turn; renders every role as a turn.
bool is_qwen2(const std::string& n) {
  return n ==
         "{%formessageinmessages%}{%ifloop.firstandmessages[0].role!='system'%}{{'<|im_start|>"
         "system\\n@DEFAULT_SYSTEM@<|im_end|>\\n'}}{%endif%}{{'<|im_start|>'+message.role+'\\n'+"
         "message.content+'<|im_end|>'+'\\n'}}{%endfor%}{%ifadd_generation_prompt%}{{'<|im_start|>"
         "assistant\\n'}}{%endif%}";
}

bool is_qwen25(const std::string& n) {
  return n.find("<think>") == std::string::npos &&
         contains_all(n, {"{%ifmessages[0].role=='system'%}{{'<|im_start|>system\\n'+messages[0]."
                          "content+'<|im_end|>\\n'}}{%else%}{{'<|im_start|>system\\n@DEFAULT_"
                          "SYSTEM@<|im_end|>\\n'}}",
                          "{%if(message.role=='user')or(message.role=='system'andnotloop.first)"
                          "or(message.role=='assistant'andnotmessage.tool_calls)%}",
                          kChatMLTurn,
                          "{{'\\n<tool_response>\\n'}}{{message.content}}"
                          "{{'\\n</tool_response>'}}",
                          kGenerationPrompt}) &&
         contains_all(
             n, {std::string(kQwen25ToolsSystem).append(kToolsHeader).c_str(), kQwen25ToolCalls});
}

bool is_qwen3(const std::string& n) {
  return n.find(kDefaultPlaceholder) == std::string::npos &&
         contains_all(
             n, {"{%ifmessages[0].role=='system'%}{{'<|im_start|>system\\n'+messages[0].content+"
                 "'<|im_end|>\\n'}}",
                 "{%if(message.role=='user')or(message.role=='system'andnotloop.first)%}",
                 kChatMLTurn, "ns.multi_step_tool", "{%setns.last_query_index=index%}",
                 "message.content.split('</think>')[-1].lstrip('\\n')",
                 "message.content.split('</think>')[0].rstrip('\\n').split('<think>')[-1]."
                 "lstrip('\\n')",
                 "{%ifloop.index0>ns.last_query_index%}{%ifloop.lastor(notloop.lastand"
                 "reasoning_content)%}{{'<|im_start|>'+message.role+'\\n<think>\\n'+"
                 "reasoning_content.strip('\\n')+'\\n</think>\\n\\n'+content.lstrip('\\n')}}"
                 "{%else%}{{'<|im_start|>'+message.role+'\\n'+content}}{%endif%}{%else%}"
                 "{{'<|im_start|>'+message.role+'\\n'+content}}{%endif%}",
                 "{{'\\n<tool_response>\\n'}}{{message.content}}{{'\\n</tool_response>'}}",
                 "{%ifadd_generation_prompt%}{{'<|im_start|>assistant\\n'}}{%ifenable_thinking"
                 "isdefinedandenable_thinkingisfalse%}{{'<think>\\n\\n</think>\\n\\n'}}"}) &&
         contains_all(
             n, {std::string(kQwen3ToolsSystem).append(kToolsHeader).c_str(), kQwen3ToolCalls});
}

// --- Rendering helpers (Python str semantics the templates rely on) -----------------------

std::string lstrip_newlines(const std::string& s) {
  const size_t start = s.find_first_not_of('\n');
  return start == std::string::npos ? std::string() : s.substr(start);
}

std::string rstrip_newlines(const std::string& s) {
  const size_t end = s.find_last_not_of('\n');
  return end == std::string::npos ? std::string() : s.substr(0, end + 1);
}

std::string turn(const std::string& role, const std::string& content) {
  return "<|im_start|>" + role + "\n" + content + "<|im_end|>\n";
}

void validate(const std::vector<ChatMessage>& messages) {
  check_input(!messages.empty(), "conversation has no messages", "chat template render");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    const std::string where = "chat message " + std::to_string(i);
    if (role == "system") {
      check_input(i == 0, "a system message may only be the first message", where);
    } else if (role != "user" && role != "assistant" && role != "tool") {
      throw Error("unknown role '" + role + "'", where,
                  "roles are system (first only), user, assistant and tool");
    }
    check_input(messages[i].tool_calls.empty() || role == "assistant",
                "a " + role + " message carries tool_calls", where,
                "only assistant messages make tool calls");
  }
}

bool has_tool_calls(const std::vector<ChatMessage>& messages) {
  for (const ChatMessage& message : messages) {
    if (!message.tool_calls.empty()) return true;
  }
  return false;
}

// The system turn of a conversation offered tools: `system_text` (the family's own part,
// up to the blank line) then the schemas, one tojson line each.
std::string tools_system_turn(const std::string& system_text,
                              const std::vector<nlohmann::ordered_json>& tools) {
  std::string out = "<|im_start|>system\n" + system_text +
                    "# Tools\n\nYou may call one or more functions to assist with the user "
                    "query.\n\nYou are provided with function signatures within "
                    "<tools></tools> XML tags:\n<tools>";
  for (const nlohmann::ordered_json& tool : tools) out += "\n" + python_json_dumps(tool);
  return out +
         "\n</tools>\n\nFor each function call, return a json object with function name and "
         "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
         "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";
}

// `verbatim_strings`: qwen3 prints arguments that are a string as they are (OpenAI's
// JSON text); qwen2.5 passes them through tojson like any value.
std::string tool_call_block(const ToolCall& call, bool verbatim_strings) {
  const std::string arguments = verbatim_strings && call.arguments.is_string()
                                    ? call.arguments.get<std::string>()
                                    : python_json_dumps(call.arguments);
  return "<tool_call>\n{\"name\": \"" + call.name + "\", \"arguments\": " + arguments +
         "}\n</tool_call>";
}

// Qwen2.5/Qwen3: consecutive tool results share one user turn.
void append_tool_response(const std::vector<ChatMessage>& messages, size_t i, std::string& out) {
  if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
  out += "\n<tool_response>\n" + messages[i].content + "\n</tool_response>";
  if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
}

std::string render_chatml(const std::vector<ChatMessage>& messages,
                          const std::optional<std::string>& default_system) {
  std::string out;
  if (default_system && messages[0].role != "system") out += turn("system", *default_system);
  for (const ChatMessage& message : messages) out += turn(message.role, message.content);
  return out;
}

std::string render_qwen25(const std::vector<ChatMessage>& messages,
                          const std::string& default_system,
                          const std::vector<nlohmann::ordered_json>& tools) {
  const bool has_system = messages[0].role == "system";
  const std::string& system = has_system ? messages[0].content : default_system;
  std::string out =
      tools.empty() ? turn("system", system) : tools_system_turn(system + "\n\n", tools);
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      append_tool_response(messages, i, out);
    } else if (m.role == "assistant" && !m.tool_calls.empty()) {
      out += "<|im_start|>assistant";
      if (!m.content.empty()) out += "\n" + m.content;
      for (const ToolCall& call : m.tool_calls) out += "\n" + tool_call_block(call, false);
      out += "<|im_end|>\n";
    } else {
      out += turn(m.role, m.content);
    }
  }
  return out;
}

std::string render_qwen3(const std::vector<ChatMessage>& messages,
                         const std::vector<nlohmann::ordered_json>& tools) {
  // The last user message that is a real query (not a wrapped tool response): assistant
  // turns after it belong to the current multi-step answer and keep their reasoning.
  size_t last_query = messages.size() - 1;
  for (size_t k = messages.size(); k-- > 0;) {
    const ChatMessage& m = messages[k];
    const bool tool_wrapped =
        starts_with(m.content, "<tool_response>") && ends_with(m.content, "</tool_response>");
    if (m.role == "user" && !tool_wrapped) {
      last_query = k;
      break;
    }
  }
  const bool has_system = messages[0].role == "system";
  std::string out;
  if (!tools.empty()) {
    out = tools_system_turn(has_system ? messages[0].content + "\n\n" : "", tools);
  } else if (has_system) {
    out = turn("system", messages[0].content);
  }
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      out += turn(m.role, m.content);
    } else if (m.role == "tool") {
      append_tool_response(messages, i, out);
    } else {  // assistant
      std::string content = m.content;
      std::string reasoning;
      const size_t close = m.content.find("</think>");
      if (close != std::string::npos) {
        const size_t last_close = m.content.rfind("</think>");
        content = lstrip_newlines(m.content.substr(last_close + 8));
        std::string before = rstrip_newlines(m.content.substr(0, close));
        const size_t open = before.rfind("<think>");
        if (open != std::string::npos) before = before.substr(open + 7);
        reasoning = lstrip_newlines(before);
      }
      out += "<|im_start|>assistant\n";
      const bool last = i + 1 == messages.size();
      if (i > last_query && (last || !reasoning.empty())) {
        out += "<think>\n" + rstrip_newlines(lstrip_newlines(reasoning)) + "\n</think>\n\n" +
               lstrip_newlines(content);
      } else {
        out += content;
      }
      for (size_t k = 0; k < m.tool_calls.size(); ++k) {
        if (k > 0 || !content.empty()) out += "\n";
        out += tool_call_block(m.tool_calls[k], true);
      }
      out += "<|im_end|>\n";
    }
  }
  return out;
}

}  // namespace

ChatTemplate ChatTemplate::from_template_text(const std::string& jinja, const std::string& source) {
  std::string text = jinja;
  std::optional<std::string> default_system = take_default_system(text);
  const std::string n = normalise(text);
  if (default_system) {
    if (is_qwen25(n) || is_qwen2(n)) {
      // Qwen2's template renders a tool message as an ordinary turn; keep that difference.
      return ChatTemplate(is_qwen25(n) ? Family::kQwen25 : Family::kChatML, default_system);
    }
  } else if (is_qwen3(n)) {
    return ChatTemplate(Family::kQwen3, std::nullopt);
  } else if (is_plain_chatml(n)) {
    return ChatTemplate(Family::kChatML, std::nullopt);
  }
  throw Error("unrecognised chat template", source,
              "aspen renders the ChatML, Qwen2/Qwen2.5 and Qwen3 templates; pass a built-in "
              "template name (chatml, qwen2.5, qwen3) if the model was trained with one");
}

ChatTemplate ChatTemplate::from_config(const std::string& path) {
  namespace fs = std::filesystem;
  const bool is_dir = fs::is_directory(path);
  const std::string config_path =
      is_dir ? (fs::path(path) / "tokenizer_config.json").string() : path;
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_file(config_path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("invalid JSON: ") + e.what(), config_path);
  }
  if (config.contains("chat_template")) {
    const auto& value = config["chat_template"];
    if (!value.is_string()) {
      throw Error("\"chat_template\" is not a string", config_path,
                  "named template lists are not supported; use a built-in template name");
    }
    return from_template_text(value.get<std::string>(), config_path);
  }
  // Newer transformers save the template next to the config instead of inside it.
  const fs::path jinja_path = fs::path(config_path).parent_path() / "chat_template.jinja";
  if (fs::exists(jinja_path)) {
    return from_template_text(read_file(jinja_path.string()), jinja_path.string());
  }
  throw Error("no \"chat_template\" in tokenizer config", config_path,
              "use a built-in template name (chatml, qwen2.5, qwen3)");
}

ChatTemplate ChatTemplate::builtin(const std::string& name) {
  if (name == "chatml") return ChatTemplate(Family::kChatML, std::nullopt);
  if (name == "qwen2.5") return ChatTemplate(Family::kQwen25, std::string(kQwen25DefaultSystem));
  if (name == "qwen3") return ChatTemplate(Family::kQwen3, std::nullopt);
  throw Error("unknown built-in chat template '" + name + "'", "chat template name",
              "choose chatml, qwen2.5 or qwen3");
}

std::string ChatTemplate::name() const {
  switch (family_) {
    case Family::kChatML:
      return "chatml";
    case Family::kQwen25:
      return "qwen2.5";
    case Family::kQwen3:
      return "qwen3";
  }
  return "chatml";
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt, bool enable_thinking,
                                 const std::vector<nlohmann::ordered_json>& tools) const {
  validate(messages);
  std::string out;
  switch (family_) {
    case Family::kChatML:
      check_input(tools.empty() && !has_tool_calls(messages),
                  "the chatml template has no tool format, but the conversation has tools or "
                  "tool calls",
                  "chat template render", "use a qwen2.5 or qwen3 template for tool calling");
      out = render_chatml(messages, default_system_);
      break;
    case Family::kQwen25:
      out = render_qwen25(messages, *default_system_, tools);
      break;
    case Family::kQwen3:
      out = render_qwen3(messages, tools);
      break;
  }
  if (add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (family_ == Family::kQwen3 && !enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

}  // namespace aspen::tokenizer
