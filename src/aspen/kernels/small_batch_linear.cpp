#include "aspen/kernels/small_batch_linear.h"

#include <ATen/Parallel.h>
#include <immintrin.h>
#include <torch/torch.h>

#include <cstdint>

#include "aspen/kernels/cpu_features.h"
#include "aspen/kernels/imports.h"

namespace aspen::kernels {
namespace {

// The element types: Elem = float, or bf16 as its bits.
struct Fp32Kernel {
  using Elem = float;
  static constexpr int64_t kLanes = 16;
  static constexpr int kMaxRows = 8;
  __attribute__((target("avx512f"))) static __m512 load(const float* p, int64_t n) {
    return n >= kLanes ? _mm512_loadu_ps(p)
                       : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
  }
  __attribute__((target("avx512f"))) static __m512 madd(__m512 acc, __m512 w, __m512 x) {
    return _mm512_fmadd_ps(w, x, acc);
  }
};

struct Bf16Kernel {
  using Elem = uint16_t;
  static constexpr int64_t kLanes = 32;
  // Past 4 input rows the dot products, not memory, bound this kernel (one vdpbf16ps
  // per row per 64 bytes of W), and torch's AMX GEMM reads W faster: at 8 rows the
  // kernel measured 0.5-0.7x of torch on the 0.6B shapes (`aspen bench linear`).
  static constexpr int kMaxRows = 4;
  __attribute__((target("avx512f,avx512bw"))) static __m512i load(const uint16_t* p, int64_t n) {
    return n >= kLanes ? _mm512_loadu_si512(p)
                       : _mm512_maskz_loadu_epi16(static_cast<__mmask32>((1ull << n) - 1), p);
  }
  // acc[i] += w[2i] x[2i] + w[2i+1] x[2i+1], products and sums in fp32.
  __attribute__((target("avx512f,avx512bw,avx512bf16"))) static __m512 madd(__m512 acc,
                                                                               __m512i w,
                                                                               __m512i x) {
    return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)x);
  }
};

// acc[r][m] += W[r, begin:begin+n] . x[m, begin:begin+n] (n <= kLanes; masked when
// n < kLanes). Inlined, fully unrolled over R and M, so the R*M accumulators live in
// registers (at -O2 GCC otherwise keeps the arrays on the stack: a load and a store
// per multiply-add).
template <typename Kernel, int R, int M>
__attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) inline void gemv_step(
    const typename Kernel::Elem* x, int64_t x_stride, const typename Kernel::Elem* w, int64_t k,
    int64_t begin, int64_t n, __m512 (&acc)[R][M]) {
  decltype(Kernel::load(x, n)) xv[M];
#pragma GCC unroll 16
  for (int m = 0; m < M; ++m) xv[m] = Kernel::load(x + m * x_stride + begin, n);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    // The same cache line of the next block's row: explicit prefetches cross the 4 KB
    // pages where the hardware streamer stops (a 1,024-wide bf16 row is half a page).
    _mm_prefetch(reinterpret_cast<const char*>(w + (r + R) * k + begin), _MM_HINT_T0);
    const auto wv = Kernel::load(w + r * k + begin, n);
#pragma GCC unroll 16
    for (int m = 0; m < M; ++m) acc[r][m] = Kernel::madd(acc[r][m], wv, xv[m]);
  }
}

// One block of R weight rows against M input rows: R*M independent fp32 accumulators
// over K, each weight vector loaded once and used M times.
template <typename Kernel, int R, int M>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void gemv_row_block(
    const typename Kernel::Elem* x, int64_t x_stride, const typename Kernel::Elem* w, int64_t k,
    float (&sums)[R][M]) {
  __m512 acc[R][M];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int m = 0; m < M; ++m) acc[r][m] = _mm512_setzero_ps();
  int64_t begin = 0;
  for (; begin + Kernel::kLanes <= k; begin += Kernel::kLanes) {
    gemv_step<Kernel, R, M>(x, x_stride, w, k, begin, Kernel::kLanes, acc);
  }
  if (begin < k) gemv_step<Kernel, R, M>(x, x_stride, w, k, begin, k - begin, acc);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int m = 0; m < M; ++m) {
      // Through memory rather than _mm512_reduce_add_ps, whose GCC 12 header reads an
      // undefined register (a -Wuninitialized warning in every user).
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, acc[r][m]);
      float sum = 0.f;
      for (float lane : lanes) sum += lane;
      sums[r][m] = sum;
    }
}

// y[m, n] = cast(sum_k x[m, k] w[n, k] + bias[n]) for n in [n_begin, n_end), R weight
// rows per block: 4 up to 4 input rows, 2 beyond (R*M accumulators + M inputs + the
// weight vector must fit AVX-512's 32 registers: 2 x 8 + 8 + 1 = 25).
template <typename Kernel, typename scalar_t, int M, int R = (M <= 4 ? 4 : 2)>
void gemv_rows(const scalar_t* x, int64_t x_stride, const scalar_t* w, const scalar_t* bias,
          scalar_t* y, int64_t y_stride, int64_t k, int64_t n_begin, int64_t n_end) {
  using Elem = typename Kernel::Elem;
  const auto* xe = reinterpret_cast<const Elem*>(x);
  auto store = [&](int64_t n, int m, float sum) {
    if (bias != nullptr) sum += static_cast<float>(bias[n]);
    y[m * y_stride + n] = static_cast<scalar_t>(sum);
  };
  int64_t n = n_begin;
  for (; n + R <= n_end; n += R) {
    float sums[R][M];
    gemv_row_block<Kernel, R, M>(xe, x_stride, reinterpret_cast<const Elem*>(w + n * k), k, sums);
    for (int r = 0; r < R; ++r)
      for (int m = 0; m < M; ++m) store(n + r, m, sums[r][m]);
  }
  for (; n < n_end; ++n) {
    float sums[1][M];
    gemv_row_block<Kernel, 1, M>(xe, x_stride, reinterpret_cast<const Elem*>(w + n * k), k, sums);
    for (int m = 0; m < M; ++m) store(n, m, sums[0][m]);
  }
}

template <typename Kernel, typename scalar_t>
void gemv_run(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
         torch::Tensor& y) {
  const int64_t m = x.size(0), k = x.size(1), n = weight.size(0);
  const scalar_t* xp = x.data_ptr<scalar_t>();
  const scalar_t* wp = weight.data_ptr<scalar_t>();
  const scalar_t* bp = bias.defined() ? bias.data_ptr<scalar_t>() : nullptr;
  scalar_t* yp = y.data_ptr<scalar_t>();
  const int64_t xs = x.stride(0);
  // Chunks of at least 64 rows: small layers stay on one thread, where a fork-join
  // would cost more than the rows.
  at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
    switch (m) {
      case 1: return gemv_rows<Kernel, scalar_t, 1>(xp, xs, wp, bp, yp, n, k, begin, end);
      case 2: return gemv_rows<Kernel, scalar_t, 2>(xp, xs, wp, bp, yp, n, k, begin, end);
      case 3: return gemv_rows<Kernel, scalar_t, 3>(xp, xs, wp, bp, yp, n, k, begin, end);
      case 4: return gemv_rows<Kernel, scalar_t, 4>(xp, xs, wp, bp, yp, n, k, begin, end);
    }
    if constexpr (Kernel::kMaxRows == 8) {
      switch (m) {
        case 5: return gemv_rows<Kernel, scalar_t, 5>(xp, xs, wp, bp, yp, n, k, begin, end);
        case 6: return gemv_rows<Kernel, scalar_t, 6>(xp, xs, wp, bp, yp, n, k, begin, end);
        case 7: return gemv_rows<Kernel, scalar_t, 7>(xp, xs, wp, bp, yp, n, k, begin, end);
        case 8: return gemv_rows<Kernel, scalar_t, 8>(xp, xs, wp, bp, yp, n, k, begin, end);
      }
    }
    TORCH_CHECK(false, "small_batch_linear: ", m, " rows past the kernel's ", Kernel::kMaxRows);
  });
}

bool linear_wants_gradient(const torch::Tensor& x, const torch::Tensor& weight,
                    const torch::Tensor& bias) {
  return torch::GradMode::is_enabled() &&
         (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()));
}

}  // namespace

int64_t small_batch_max_rows(torch::ScalarType dtype) {
  return dtype == torch::kFloat      ? Fp32Kernel::kMaxRows
         : dtype == torch::kBFloat16 ? Bf16Kernel::kMaxRows
                                     : 0;
}

bool small_batch_kernel_applies(const torch::Tensor& x, const torch::Tensor& weight,
                                const torch::Tensor& bias) {
  const auto dtype = x.scalar_type();
  const bool cpu_ok = dtype == torch::kFloat      ? cpu_has_avx512()
                      : dtype == torch::kBFloat16 ? cpu_has_avx512_bf16()
                                                  : false;
  return cpu_ok && x.device().is_cpu() && weight.device().is_cpu() && x.dim() == 2 &&
         x.size(0) >= 1 && x.size(0) <= small_batch_max_rows(dtype) && x.stride(1) == 1 &&
         weight.dim() == 2 && weight.is_contiguous() && weight.size(1) == x.size(1) &&
         weight.scalar_type() == dtype &&
         (!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0) &&
                              bias.is_contiguous() && bias.scalar_type() == dtype &&
                              bias.device().is_cpu())) &&
         !linear_wants_gradient(x, weight, bias);
}

torch::Tensor small_batch_linear(const torch::Tensor& x, const torch::Tensor& weight,
                                 const torch::Tensor& bias) {
  if (!small_batch_kernel_applies(x, weight, bias))
    return torch::nn::functional::linear(x, weight, bias);
  torch::Tensor y = torch::empty({x.size(0), weight.size(0)}, x.options());
  if (x.scalar_type() == torch::kFloat) {
    gemv_run<Fp32Kernel, float>(x, weight, bias, y);
  } else {
    gemv_run<Bf16Kernel, c10::BFloat16>(x, weight, bias, y);
  }
  return y;
}

}  // namespace aspen::kernels
