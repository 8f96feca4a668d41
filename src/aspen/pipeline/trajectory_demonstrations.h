// Demonstrations for the supervised warm-up of a multi-turn run (rollout.environment):
// a task's demonstration turns (Task::demonstration_turns, tool calls in the Qwen format)
// played through a fresh environment of the run, so the warm-up sees exactly the
// contexts the rollout builds (trajectory_loop.h): the prompt as the template renders
// reset()'s conversation, each model turn closed by <|im_end|>, the environment's
// observations as observation_suffix() renders them.
//
// As segments of text (for training the built-in tokenizer, before any tokenizer
// exists) and as SFT examples, one per model turn: the context before the turn as the
// prompt, the turn's tokens (and <|im_end|>) as the answer; so only model tokens are
// trained on, as the RL loss mask does.
// Errors: aspen::Error naming the example when its environment fails on a demonstration
// (a task and environment that disagree are a bug, not a fault to train on).
// Thread safety: each call uses an environment of its own.
#pragma once

#include <string>
#include <vector>

#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/trajectory_environments.h"
#include "aspen/train/sft.h"

namespace aspen::pipeline {

struct DemonstrationSegment {
  std::string text;
  bool model = false;  // a model turn (with its closing <|im_end|>), else the environment's
};

std::vector<DemonstrationSegment> demonstration_segments(const TrajectoryEnvironments& envs,
                                                         const TaskExample& example,
                                                         const std::vector<std::string>& turns);

std::vector<SftExample> demonstration_sft_examples(
    const Tokenizer& tokenizer, const std::vector<DemonstrationSegment>& segments);

}  // namespace aspen::pipeline
