// TaskExample: one prompt of an RL (or SFT) dataset, as every loader and built-in task
// produces it. The prompt is final text (any chat template already applied); the ground
// truth is opaque here and interpreted by the verifier it names.
// Value type; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "aspen/tasks/imports.h"

namespace aspen::tasks {

struct TaskExample {
  std::string id;               // unique within a dataset: "file.jsonl:12", "arithmetic:37+48"
  std::string prompt_text;      // exactly what the policy is conditioned on
  nlohmann::json ground_truth;  // verifier-specific (reward/verifier.h)
  std::string verifier;         // verifier kind for make_verifier: "math", "countdown", ...
};

enum class Split { kTrain, kEval };

// "train" / "eval".
inline const char* split_name(Split split) {
  return split == Split::kTrain ? "train" : "eval";
}

}  // namespace aspen::tasks
