// The BLAS library's own thread pool. torch's intra-op setting does not reach it:
// with OpenBLAS (pthreads build) every GEMM may fan out over all cores whatever
// at::set_num_threads says, which breaks per-role core budgets (a pinned trainer's
// BLAS workers spill onto the rollout's core).
// Thread safety: process-wide setting; call from one thread at set-up.
#pragma once

namespace aspen {

// Sets OpenBLAS' thread count when OpenBLAS is the loaded BLAS (found at run time,
// so other BLAS builds link and run unchanged). Returns whether it was applied.
bool set_blas_threads(int threads);
// OpenBLAS' current thread count, or 0 when OpenBLAS is not the loaded BLAS.
int blas_threads();

}  // namespace aspen
