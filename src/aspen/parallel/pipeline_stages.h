// PipelineStages: where this process sits in a pipeline-parallel (PP) group - how many
// stages the model's decoder layers are split into, which one this rank runs, and the
// process group the stages exchange activations over (parallel/pipeline_p2p.h).
//
// Split (stage_layers): the L decoder layers go to the p stages in contiguous blocks of
// floor(L / p), the first L % p stages taking one more, so stage s runs layers
// [begin, end) and a hidden state visits the stages in order 0, 1, ..., p - 1. The
// model places the token embedding on the first stage and the final norm and the
// log-prob head on the last (model/qwen_model.h); with tied embeddings the last stage
// holds a second copy of the embedding as its head, and the two copies stay one
// parameter because their gradients are summed over {first, last} before the optimizer
// step (sum_tied_gradient), as Megatron does.
//
// Group ranks are stages: the group's rank s is stage s. size 1 (the default) means
// no pipeline: one stage holds everything and no message is ever sent.
//
// Thread safety: immutable after construction; collectives and p2p messages through the
// groups follow ProcessGroupHandle's rules (one thread per group).
// Errors: aspen::Error for an inconsistent context or fewer layers than stages.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <string>

#include "aspen/parallel/imports.h"
#include "aspen/parallel/process_group.h"

namespace aspen::parallel {

// Decoder layers [begin, end) of one stage.
struct LayerRange {
  int64_t begin = 0;
  int64_t end = 0;
  bool contains(int64_t layer) const { return layer >= begin && layer < end; }
  int64_t size() const { return end - begin; }
};

// The layers of `stage` when `num_layers` layers are split over `stages` (above).
// aspen::Error naming `what` unless 1 <= stages <= num_layers and 0 <= stage < stages:
// a stage without a layer would only forward messages.
LayerRange stage_layers(int64_t num_layers, int stages, int stage, const std::string& what);

struct PipelineStages {
  int size = 1;
  int stage = 0;
  std::optional<ProcessGroupHandle> group;  // engaged iff size > 1; rank = stage
  // {first stage, last stage} (their ranks 0 and 1), for the tied embedding's gradient.
  // Engaged on those two stages of an enabled context; other stages hold nothing.
  std::optional<ProcessGroupHandle> ends_group;

  // The context spanning every rank of `group` (size = group.world_size()). Collective
  // over `group` when it has more than one rank (it forms ends_group).
  static PipelineStages over(ProcessGroupHandle group);

  bool enabled() const { return size > 1; }
  bool first() const { return stage == 0; }
  bool last() const { return stage == size - 1; }
  LayerRange layers(int64_t num_layers, const std::string& what) const {
    return stage_layers(num_layers, size, stage, what);
  }

  // aspen::Error naming `what` unless 0 <= stage < size and the group is present
  // exactly when size > 1, with matching size and rank.
  void validate(const std::string& what) const;
  // The group of an enabled context (aspen::Error naming `what` if there is none).
  ProcessGroupHandle require_group(const std::string& what) const;

  // Tied embeddings: sums `gradient` (contiguous, same shape on both) over the first
  // and the last stage, in place. Both must call it, the middle stages must not; with
  // one stage it does nothing (the one parameter already has the whole gradient).
  void sum_tied_gradient(torch::Tensor& gradient) const;
};

}  // namespace aspen::parallel
