// The threads a process computes with: torch's intra-op pool AND the BLAS library's own
// pool, set together, because torch's setting does not reach OpenBLAS' pool
// (util/blas_threads.h) and a memory-bound GEMM on 2 cores must use both, while tiny
// ops run faster on one. Every command that runs a model takes one --threads option
// that lands here (cli/threads_option.h); aspen train sets its roles' threads from the
// config (pipeline.threads, pipeline.rollout_threads) through the same pools.
// Errors: aspen::Error naming `where` for a negative count.
// Thread safety: process-wide settings; call from one thread at set-up.
#pragma once

#include <string>

#include "aspen/parallel/imports.h"

namespace aspen::parallel {

// threads > 0: both pools get that many; 0: both stay as they are.
void set_compute_threads(int threads, const std::string& where);

}  // namespace aspen::parallel
