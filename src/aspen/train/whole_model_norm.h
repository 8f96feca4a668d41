// Gradient clipping by the norm of the WHOLE model on a rank that holds only part of
// it: tensor-parallel shards, expert-parallel experts, one pipeline stage, or a grid of
// them (PP x TP, PP x EP, PP x DP).
//
// Each parameter's squared gradient norm is divided by its copies - how many ranks of
// the grid hold the same values - and the per-rank sums are all-reduced over the groups
// that hold DIFFERENT parts, in a fixed order: first the TP group (or, without TP, the EP
// group of a trainer whose EP ranks have their own tokens), then the pipeline group
// (which links the corresponding TP / EP ranks of the stages). After the first
// reduction every rank of a stage holds that stage's sum, so the second gives the whole
// model's on every rank.
//   TP: copies_of(the parameter's shard spec) (model/tp_layout.h; replicated parameters
//       count t times). EP (tokens not replicated): an expert once, everything else
//       ep.size times. With TP and EP together the EP group is the TP group (EP over TP,
//       replicated tokens): the TP rule alone.
//   PP: the stages hold disjoint parameters, except a tied embedding when
//       `tied_embedding_on_stages`: the first and the last stage both hold it (with the
//       same, summed gradient: train/pipeline_runner.h), so each counts twice.
// Data parallelism is not a part of the grid here: after the DP all-reduce every DP rank
// holds the same gradients, so its own grid's norm is already the model's.
// Without TP, EP and PP nothing is set: the optimizer's own (local) norm is the model's.
// Collectives: one all-reduce per group and optimizer step, on every rank of the grid.
#pragma once

#include "aspen/model/qwen_model.h"
#include "aspen/parallel/expert_parallel.h"
#include "aspen/parallel/pipeline_stages.h"
#include "aspen/parallel/tensor_parallel.h"
#include "aspen/train/imports.h"
#include "aspen/train/optimizer.h"

namespace aspen::train {

void set_whole_model_clip_norm(Optimizer& optimizer, const ModelConfig& config,
                               const TensorParallel& tp, const ExpertParallel& ep,
                               const PipelineStages& pp, bool tied_embedding_on_stages);

}  // namespace aspen::train
