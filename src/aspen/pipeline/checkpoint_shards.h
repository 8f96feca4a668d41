// The tensor-parallel parts of a run checkpoint (pipeline/checkpoint.h): a model state
// split over a TP group - the actor's AdamW state, the frozen reference's weights -
// written by every TP rank of the first data-parallel replica as its own shards, and
// read back as any other layout holds it, by tensor name and shard metadata.
//
// A state directory (CHECKPOINT/actor_optimizer/, CHECKPOINT/reference/):
//   layout.json, tp-R-of-T.safetensors
//       parallel/sharded_checkpoint.h ("aspen-sharded-v1"): every tensor all TP ranks
//       hold, each rank's shard under the model's TP layout (model/tp_layout.h);
//       replicated tensors (norms, the router, step counters) in every rank's file
//   experts-RRRRR-of-TTTTT.safetensors
//       only under expert parallelism over the TP group (train.ep = train.tp): the
//       tensors TP rank R alone holds, whole, by name - its routed experts'
//   stage-SSSSS-of-PPPPP/
//       instead, when the tensor-parallel ranks are pipeline stages (train.pp > 1): each
//       stage's TP group writes the state of its stage's layers as above into its own
//       directory (stage_shards_dir; the tied embedding's state from the first stage
//       only), and a reader takes what it holds from all of them.
// A tensor's holding (parallel::ShardHolding) says how a rank holds it: its shard of
// the TP layout, or whole (size 1: without TP, or an expert-parallel rank's own
// expert). Writing needs the writer's holdings; reading takes the reader's, so a state
// written at TP 2 (x EP 2) reads at TP 1, 2 or 4, with or without EP: a tensor saved
// split and held whole is assembled, one saved whole and held split is cut.
// Errors: aspen::Error naming the directory or file (a tensor with no holding, an
// incomplete set of experts files, a tensor in two of them, sharded_checkpoint.h's).
// Thread safety: files only; one call per directory at a time.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aspen/model/qwen_model.h"
#include "aspen/parallel/sharded_checkpoint.h"
#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {

// How this rank holds the tensor of a name; nullopt: it does not hold it (another
// expert-parallel rank's expert, a parameter of another model).
using HoldingOf = std::function<std::optional<ShardHolding>(const std::string& name)>;

// `model`'s parameters by HF name (hf_state(), adapters included): whole without TP;
// under TP as its TP layout splits them, except the experts of an expert-parallel
// rank, whole on it alone.
HoldingOf parameter_holding(const QwenForCausalLM& model);
// The AdamW state of `model`'s parameters (train/optimizer.h names): moments as their
// parameter, a parameter's step as a replicated scalar (whole with a whole parameter),
// the step counter replicated.
HoldingOf optimizer_state_holding(const QwenForCausalLM& model);
// Every name, whole (a reader that splits later, e.g. load_state).
HoldingOf whole_holding();

// Writes TP rank `tp_rank` of `tp_size`'s `tensors` (as `holding` says it holds them)
// into `dir`: a split or replicated tensor as its shard, a whole one (held by this
// rank alone) into its experts file. Every TP rank of one group calls it.
void write_rank_shards(const std::string& dir,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const HoldingOf& holding, int tp_rank, int tp_size);

// Where stage `stage` of `stages` writes its shards under `dir` (above).
std::string stage_shards_dir(const std::string& dir, int stage, int stages);

// The tensors of `dir` this rank holds, as `holding` says it holds them (copies); of
// every stage directory when `dir` has them.
std::map<std::string, torch::Tensor> read_rank_shards(const std::string& dir,
                                                      const HoldingOf& holding);

// Whole tensors (a checkpoint written without TP) as `holding` says this rank holds
// them; names it does not hold are left out. `source` names them in errors.
std::map<std::string, torch::Tensor> as_held(const std::map<std::string, torch::Tensor>& whole,
                                             const HoldingOf& holding, const std::string& source);

}  // namespace aspen::pipeline
