// Loading a prompt dataset from JSON Lines into TaskExamples (GSM8K/MATH-style files, or
// verl-style rows whose prompt is a chat-message array).
//
// Each line is an object. Field names are dotted paths into it ("reward_model.ground_truth").
//   prompt_field   a string (one user turn) or an array of {"role", "content"} messages
//   answer_field   any JSON value, copied into ground_truth unchanged
//   id_field       optional; a string or integer id. Default "<source>:<line>"
//   verifier_field optional per-line verifier kind; default `verifier`
// With a chat template, a string prompt becomes [system?, user] and is rendered with the
// generation prompt; a message array gets `system_prompt` inserted only when it has no
// system message of its own. Without a template, a string prompt is used verbatim
// (preceded by `system_prompt` and a newline when one is set) and a message array is an
// error: there is no way to render it faithfully.
// Errors: aspen::Error naming "<source>: line N" and the field for malformed JSON, a
// missing or mistyped field, or a duplicate id.
// Thread safety: stateless functions; the template is only read.
#pragma once

#include <istream>
#include <string>
#include <vector>

#include "aspen/tasks/imports.h"
#include "aspen/tasks/task_example.h"
#include "aspen/tokenizer/chat_template.h"

namespace aspen::tasks {

struct JsonlDatasetOptions {
  std::string prompt_field = "prompt";
  std::string answer_field = "answer";
  std::string id_field;       // empty: ids are "<source>:<line>"
  std::string system_prompt;  // empty: none
  std::string verifier = "math";
  std::string verifier_field;   // empty: every line uses `verifier`
  bool enable_thinking = true;  // passed to ChatTemplate::render (qwen3 only)
};

// `chat_template` may be null (raw prompts). Throws aspen::Error naming `path` when the
// file cannot be read.
std::vector<TaskExample> load_jsonl_dataset(const std::string& path,
                                            const JsonlDatasetOptions& options,
                                            const ChatTemplate* chat_template);

// The same from a stream; `source` names it in ids and errors.
std::vector<TaskExample> read_jsonl_dataset(std::istream& in, const std::string& source,
                                            const JsonlDatasetOptions& options,
                                            const ChatTemplate* chat_template);

}  // namespace aspen::tasks
