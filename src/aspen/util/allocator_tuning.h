// glibc malloc tuned for tensor workloads: every training step and decode step
// allocates and frees the same large buffers (a head chunk's [T, 4096] logits, a
// weight gradient of the vocabulary's size). With glibc's defaults, blocks over its
// mmap threshold (at most 32 MiB, adapted at run time) are mmapped and unmapped each
// time, and freed heap tops are trimmed back to the kernel, so every step pays fresh
// page faults and page zeroing: 9% of a bf16 update's profile on the 103M bench shape
// was exc_page_fault alone. keep_freed_memory_for_reuse() raises both thresholds so
// that freed blocks are reused (measured: docs/benchmark-history.md, "Actor update"), at the
// cost of a higher resident set after a peak. PyTorch's own CPU guidance reaches the
// same end with jemalloc or tcmalloc; this needs no extra library.
// A GLIBC_TUNABLES setting in the environment wins: the call then changes nothing.
// Thread safety: call once, first thing in main().
#pragma once

namespace aspen {

// Returns whether the thresholds were set (false under AddressSanitizer, whose
// allocator replaces glibc's and ignores mallopt).
bool keep_freed_memory_for_reuse();

}  // namespace aspen
