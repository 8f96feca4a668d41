#include "aspen/pipeline/trajectory_demonstrations.h"
#include "aspen/pipeline/imports.h"

#include "aspen/agent/observation_suffix.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {
namespace {

constexpr const char* kEndOfTurn = "<|im_end|>";

}  // namespace

std::vector<DemonstrationSegment> demonstration_segments(const TrajectoryEnvironments& envs,
                                                         const TaskExample& example,
                                                         const std::vector<std::string>& turns) {
  const std::string who = "demonstration of " + example.id;
  check_input(!turns.empty(), "has no turns", who);
  std::unique_ptr<agent::Environment> environment = envs.make_demonstration_environment
                                                        ? envs.make_demonstration_environment()
                                                        : envs.make_environment();
  const agent::ResetResult reset = environment->reset(envs.data_row(example));
  check_input(!reset.error, reset.error ? reset.error->message : "", who);
  std::vector<DemonstrationSegment> segments;
  segments.push_back({envs.chat_template->render(reset.messages, /*add_generation_prompt=*/true,
                                                 envs.loop.enable_thinking, reset.tools),
                      false});
  for (size_t i = 0; i < turns.size(); ++i) {
    segments.push_back({turns[i] + kEndOfTurn, true});
    const agent::StepResult step = environment->step(turns[i]);
    check_input(!step.error, step.error ? step.error->message : "", who);
    const bool last = i + 1 == turns.size();
    check_input(step.done == last,
                last ? "the environment did not end after the last turn"
                     : "the environment ended before turn " + std::to_string(i + 2),
                who);
    if (!last) {
      segments.push_back({agent::observation_suffix(*envs.chat_template, step.observations,
                                                    envs.loop.enable_thinking)
                              .rest,
                          false});
    }
  }
  return segments;
}

std::vector<SftExample> demonstration_sft_examples(
    const Tokenizer& tokenizer, const std::vector<DemonstrationSegment>& segments) {
  const auto end = tokenizer.token_to_id(kEndOfTurn);
  check_input(end.has_value(), "the tokenizer has no <|im_end|> token", "demonstrations");
  std::vector<int64_t> context;
  std::vector<SftExample> examples;
  for (const DemonstrationSegment& segment : segments) {
    std::vector<TokenId> tokens;
    if (segment.model) {
      // The turn's own tokens and the end-of-turn token the engine stops at.
      tokens = tokenizer.encode(segment.text.substr(0, segment.text.size() - std::string(kEndOfTurn).size()));
      tokens.push_back(*end);
      examples.push_back(SftExample{context, std::vector<int64_t>(tokens.begin(), tokens.end())});
    } else {
      tokens = tokenizer.encode(segment.text);
    }
    context.insert(context.end(), tokens.begin(), tokens.end());
  }
  return examples;
}

}  // namespace aspen::pipeline
