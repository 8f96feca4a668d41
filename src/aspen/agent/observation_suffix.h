// observation_suffix: the text a chat template renders between the end of an assistant
// turn's content and the start of the next assistant turn's content - the end-of-turn
// marker, the observation messages (tool responses, user messages) and the generation
// prompt - exactly as it renders them inside the whole conversation. Appending its
// tokens after the tokens the engine generated continues the context without
// re-rendering or re-tokenizing anything the model wrote (environment.h, token contract).
//
// For the Qwen templates after tool responses:
//   end_of_turn = "<|im_end|>"
//   rest        = "\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n"
//                 "<|im_start|>assistant\n"        (qwen3 without thinking: + the empty
//                                                   "<think>\n\n</think>\n\n" block)
// When the engine stopped on the end-of-turn token it already holds it: append the
// tokens of `rest` only; otherwise (a stop string, a length cut) those of text().
//
// How: the template renders a probe conversation (a user message, an assistant turn
// whose content is a marker, then the observations) with the generation prompt, and the
// suffix is everything after the marker. What the templates put there depends only on
// the observations and on an assistant turn preceding them, never on earlier content
// (tests/agent/observation_suffix_test.cpp checks that prompt + turns + suffixes equal
// the render of the whole episode, for qwen2.5 and qwen3, tool and user observations).
//
// Contract: `observations` is non-empty, each "tool" or "user"; anything else throws
// aspen::Error. Throws aspen::Error too when the template does not close an assistant
// turn with "<|im_end|>" (no such template is recognised today).
// Thread safety: a pure function of its arguments.
#pragma once

#include <string>
#include <vector>

#include "aspen/agent/imports.h"
#include "aspen/tokenizer/chat_template.h"

namespace aspen::agent {

struct ObservationSuffix {
  std::string end_of_turn;  // the marker that closes the assistant turn
  std::string rest;         // the observations and the next generation prompt
  std::string text() const { return end_of_turn + rest; }
};

ObservationSuffix observation_suffix(const ChatTemplate& chat_template,
                                     const std::vector<ChatMessage>& observations,
                                     bool enable_thinking = true);

}  // namespace aspen::agent
