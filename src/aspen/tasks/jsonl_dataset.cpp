#include "aspen/tasks/jsonl_dataset.h"

#include <fstream>
#include <unordered_set>

#include "aspen/io/jsonl.h"
#include "aspen/tasks/imports.h"
#include "aspen/util/error.h"

namespace aspen::tasks {
namespace {

// The value at dotted `path` in `row`, or nullptr when any step is missing.
const nlohmann::json* find_path(const nlohmann::json& row, const std::string& path) {
  const nlohmann::json* node = &row;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string key = path.substr(start, dot == std::string::npos ? path.npos : dot - start);
    if (!node->is_object()) return nullptr;
    auto it = node->find(key);
    if (it == node->end()) return nullptr;
    node = &*it;
    if (dot == std::string::npos) return node;
    start = dot + 1;
  }
}

const nlohmann::json& require_field(const nlohmann::json& row, const std::string& field,
                                    const std::string& where) {
  const nlohmann::json* value = find_path(row, field);
  check_input(value != nullptr, "missing field \"" + field + "\"", where,
              "set the dataset's field names to match the file");
  return *value;
}

std::vector<ChatMessage> read_messages(const nlohmann::json& array, const std::string& where) {
  std::vector<ChatMessage> messages;
  for (const nlohmann::json& m : array) {
    check_input(
        m.is_object() && m.contains("role") && m["role"].is_string() && m.contains("content") &&
            m["content"].is_string(),
        "each chat message must be {\"role\": string, \"content\": string}, got " + m.dump(),
        where);
    messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  check_input(!messages.empty(), "empty chat message array", where);
  return messages;
}

std::string render_prompt(const nlohmann::json& prompt, const std::string& where,
                          const JsonlDatasetOptions& options, const ChatTemplate* chat_template) {
  check_input(prompt.is_string() || prompt.is_array(),
              "prompt must be a string or an array of chat messages, got " + prompt.dump(), where);
  if (chat_template == nullptr) {
    check_input(prompt.is_string(), "a chat-message prompt needs a chat template", where,
                "pass a chat template, or give the prompt as plain text");
    std::string text = prompt.get<std::string>();
    return options.system_prompt.empty() ? text : options.system_prompt + "\n" + text;
  }
  std::vector<ChatMessage> messages;
  if (prompt.is_string()) {
    messages.push_back({"user", prompt.get<std::string>()});
  } else {
    messages = read_messages(prompt, where);
  }
  if (!options.system_prompt.empty() && messages.front().role != "system") {
    messages.insert(messages.begin(), {"system", options.system_prompt});
  }
  try {
    return chat_template->render(messages, /*add_generation_prompt=*/true, options.enable_thinking);
  } catch (const Error& e) {
    throw Error(e.problem(), where, e.hint());
  }
}

}  // namespace

std::vector<TaskExample> read_jsonl_dataset(std::istream& in, const std::string& source,
                                            const JsonlDatasetOptions& options,
                                            const ChatTemplate* chat_template) {
  JsonlReader reader(in, source);
  std::vector<TaskExample> examples;
  std::unordered_set<std::string> ids;
  nlohmann::json row;
  while (reader.next(row)) {
    const std::string line = reader.location();
    check_input(row.is_object(), "expected a JSON object, got " + row.dump(), line);
    TaskExample example;
    example.prompt_text = render_prompt(require_field(row, options.prompt_field, line),
                                        line + ": " + options.prompt_field, options, chat_template);
    example.ground_truth = require_field(row, options.answer_field, line);
    // A null answer would score every response 0: a row no verifier can grade.
    check_input(!example.ground_truth.is_null(), "the answer is null",
                line + ": " + options.answer_field, "every row needs an answer to verify against");

    if (options.id_field.empty()) {
      example.id = source + ":" + std::to_string(reader.line_number());
    } else {
      const nlohmann::json& id = require_field(row, options.id_field, line);
      check_input(id.is_string() || id.is_number_integer(),
                  "id must be a string or an integer, got " + id.dump(),
                  line + ": " + options.id_field);
      example.id = id.is_string() ? id.get<std::string>() : id.dump();
    }
    check_input(ids.insert(example.id).second, "duplicate id \"" + example.id + "\"", line);

    example.verifier = options.verifier;
    if (!options.verifier_field.empty()) {
      const nlohmann::json* verifier = find_path(row, options.verifier_field);
      if (verifier != nullptr) {
        check_input(verifier->is_string(), "verifier must be a string, got " + verifier->dump(),
                    line + ": " + options.verifier_field);
        example.verifier = verifier->get<std::string>();
      }
    }
    examples.push_back(std::move(example));
  }
  return examples;
}

std::vector<TaskExample> load_jsonl_dataset(const std::string& path,
                                            const JsonlDatasetOptions& options,
                                            const ChatTemplate* chat_template) {
  std::ifstream in(path, std::ios::binary);
  check_input(in.good(), "cannot open dataset file", path, "check the path");
  return read_jsonl_dataset(in, path, options, chat_template);
}

}  // namespace aspen::tasks
