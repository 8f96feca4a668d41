// Run-time checks of the instruction sets Aspen's CPU kernels use. The kernels compile
// their AVX-512 loops with function target attributes, so the build needs no -march
// flag and the binary still runs (through torch's ops) on CPUs without them.
// Thread safety: each answer is computed once (a function-local static).
#pragma once

#include "aspen/kernels/imports.h"

namespace aspen::kernels {

// AVX-512 F, BW and VL: every AVX-512 server CPU since Skylake-SP has all three.
inline bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
  return has;
}

// The above and AVX512-BF16 (vdpbf16ps: pairs of bf16 products summed in fp32).
inline bool cpu_has_avx512_bf16() {
  static const bool has = cpu_has_avx512() && __builtin_cpu_supports("avx512bf16");
  return has;
}

}  // namespace aspen::kernels
