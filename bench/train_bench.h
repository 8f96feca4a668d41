// `aspen bench train`: the actor update (the GRPO policy-gradient step: forward,
// backward and AdamW over packed micro-batches) on any HF model directory or, without
// one, on a 103M-parameter Qwen3 shape (hidden 512, 8 layers, 8 heads / 4 kv heads of
// 64, MLP 1536, vocabulary 151,936, tied), built on the spot with random weights;
// with kind "qwen3_moe" the same shape with every MLP a top-2 of 8 experts of width 768
// (the dense model's active MLP per token, 4x its MLP weights).
//
// The batch is synthetic: `rows` rows, each a `prompt_tokens` prompt and a response of
// a length drawn uniformly from [response_tokens / 2, response_tokens] (seeded), random
// token ids, advantages +-1 and old log-probs equal to the current policy's (ratio 1).
// Per compute dtype (fp32; bf16 = bf16 forward/backward on fp32 master weights, the
// log-prob head's GEMMs in fp32; bf16_head = the same with the head's GEMMs in bf16,
// train.head_gemm_bf16), after
// one warm-up update, `steps` updates are timed, and reported:
//   seconds_per_update the mean of update_seconds, one per timed update
//   tokens_per_second  packed tokens (prompt + response) per second of update
//   flops_per_second   by the formula below, over the same time
//   mfu                the median over the timed updates of one update's FLOP/s over
//                      the GEMM peak of that dtype read around it: the best torch::mm
//                      of 2048 x 2048 matrices on these threads (8192 x 8192 on a GPU,
//                      where 2048 is too small to fill it) over half a second,
//                      read before the first update and after each, an update divided
//                      by the better of its two readings (mfu_per_update lists them).
//                      A reading the update beats, or a bf16 reading under the run's
//                      fp32 peak (gemm_peak_floor), is re-read (gemm_peak_rereads); an
//                      update that still beats its peak is rejected
//                      (mfu_rejected_updates), so no MFU above 1 is reported; with every
//                      update rejected "mfu" is absent and "mfu_unavailable" says why
//                      (bench/mfu_estimate.h)
//   gemm_peak_flops_per_second  the best of those readings (gemm_peak_readings)
//   peak_rss_bytes     the process's peak resident memory during that dtype's updates
//   profile            with profile_dir: the trace of one more update (not timed)
// FLOPs of one update: 6 * N * T + 6 * L * H * D * sum over rows of len^2, with N the
// parameters of every matrix multiply a token passes (the head counted once even when
// tied, the embedding lookup not; of a MoE layer's experts the k of E a token is routed
// to: "active" parameters), T the packed tokens, and the second term the causal
// attention scores and mixing (QK^T and AV, 2 * H * D * len^2 forward per layer,
// backward twice that).
// MoE models add "moe": experts hit per sparse layer and the MLP GEMMs per forward
// against the dense model's 3 per layer, the worst layer's max/mean expert load, and
// the load-balancing loss, from one forward of the batch.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/imports.h"

namespace aspen::bench {

struct TrainBenchOptions {
  std::string model_dir;  // empty: the 103M Qwen3 shape
  std::string kind = "qwen3";  // without model_dir: qwen3 or qwen3_moe
  int64_t rows = 8;
  int64_t prompt_tokens = 64;
  int64_t response_tokens = 192;
  int steps = 2;
  int threads = 0;  // torch and BLAS threads; 0: as they are
  // cpu | cuda | cuda:N (parallel/device.h): where the actor and the GEMM peak run. On a
  // GPU every timing ends with a device synchronisation, so it counts the kernels.
  std::string device = "cpu";
  // fp32, bf16 (the head's GEMMs in fp32), bf16_head (the head's GEMMs in bf16 too)
  std::vector<std::string> dtypes = {"fp32", "bf16", "bf16_head"};
  int64_t micro_batch_tokens = 4096;
  // Non-empty: after the timed updates, one more per dtype under torch's profiler,
  // written to DIR/train-<dtype>.trace.json (bench/op_profile.h); not in the timings.
  std::string profile_dir;
};

nlohmann::json run_train_bench(const TrainBenchOptions& options);

}  // namespace aspen::bench
