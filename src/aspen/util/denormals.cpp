#include "aspen/util/denormals.h"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace aspen {
namespace {

#if defined(__x86_64__) || defined(__i386__)
constexpr unsigned kFlushBits = 0x8040;  // MXCSR bit 15: flush to zero; bit 6: denormals are zero
#elif defined(__aarch64__)
constexpr uint64_t kFlushBits = uint64_t{1} << 24;  // FPCR.FZ

uint64_t read_fpcr() {
  uint64_t value;
  asm volatile("mrs %0, fpcr" : "=r"(value));
  return value;
}
#endif

}  // namespace

bool set_flush_denormals(bool on) {
#if defined(__x86_64__) || defined(__i386__)
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(on ? csr | kFlushBits : csr & ~kFlushBits);
  return true;
#elif defined(__aarch64__)
  const uint64_t fpcr = read_fpcr();
  const uint64_t next = on ? fpcr | kFlushBits : fpcr & ~kFlushBits;
  asm volatile("msr fpcr, %0" : : "r"(next));
  return true;
#else
  (void)on;
  return false;
#endif
}

bool denormals_flushed() {
#if defined(__x86_64__) || defined(__i386__)
  return (_mm_getcsr() & kFlushBits) == kFlushBits;
#elif defined(__aarch64__)
  return (read_fpcr() & kFlushBits) != 0;
#else
  return false;
#endif
}

}  // namespace aspen
