// `aspen bench publish --delta`: what a weight publish moves and costs with full sets
// against deltas (pipeline.weight_sync, dock/weight_delta.h), after real AdamW steps of
// the trainer's optimizer (train/optimizer.h: fused AdamW, clipping at 1.0, weight
// decay 0.01) on a language-model loss, for each learning rate of the options. The
// model is the random Qwen3 of publish_bench.h's shape, trained in fp32.
//
// Per measured step (after the warm-up steps, which give AdamW's moments a history):
//   snapshot  weight_set_of(policy): the fp32 set the run publishes
//   encode    encode_weight_delta from the previous version's set
//   full      the instance's fetch of the full set (TransferDock::latest_weights, over
//             ZeroMQ for --fetch remote) and RolloutEngine::load_weights
//   delta     a WeightReceiver's fetch of the delta and its apply, then load_weights;
//             the applied set is checked equal to the published one (torch::equal on
//             every tensor; aspen::Error otherwise) before it is loaded: "exact"
//   bf16      (--dtype bf16 instead) the step's weights cast to bf16, what a bf16
//             publish would move (the run's engines compute in fp32, so this is the
//             codec alone): the set's bytes, the delta's, its encode and apply
//             seconds, exactness
//   sparse    what the alternative coding would move: an int32 index and the value of
//             every element whose bits changed (the changed fraction beside it)
// Result JSON: {"model": {...}, "runs": [{"lr", "fp32" (or "bf16"): {"full": S,
// "delta": S, "sparse_index_bytes", "changed_fraction", "bytes_ratio", "seconds_ratio"
// (fp32), "exact"}}]} with S the stages' means over the measured steps and
// "seconds" their sum per publish (full: snapshot + fetch + load; delta: snapshot +
// encode + fetch + apply + load).
// Memory: as in publish_bench.h the instance's engine runs on the policy's own model
// (load_weights copies the fetched set into it, which equals it bit for bit), so that
// the policy, its AdamW moments (two sets), the board's set, the receiver's set, one
// decoded or fetched set and the step's gradients fit in 24 GB at 0.6B. (A separate
// instance model, or the bf16 sets measured in the same process, passed 22 GB resident
// and the kernel killed it: hence --dtype.)
// Errors: aspen::Error naming the option; aspen::Error when a delta is not exact.
// Thread safety: call from one thread.
#pragma once

#include <nlohmann/json.hpp>

#include "bench/imports.h"
#include "bench/publish_bench.h"

namespace aspen::bench {

nlohmann::json run_delta_publish_bench(const PublishBenchOptions& options);

}  // namespace aspen::bench
