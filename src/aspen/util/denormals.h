// Denormal (subnormal) floats flushed to zero on this thread, and on the threads it
// creates afterwards (pthread_create copies the floating-point environment), as
// TensorFlow and XLA do on CPU by default and PyTorch does after
// torch.set_flush_denormal(True).
//
// Why: an operand below 2^-126 in fp32 or bf16 sends x86 cores through a microcode
// assist of about a hundred cycles per operation. Softmax gradients of peaked logits
// are full of them: p = exp(z - lse) under 2^-126 wherever z - lse < -87, scaled
// again by the loss's 1/tokens. On the 103M bench shape the log-prob head's two
// backward GEMMs ran at 60 GFLOP/s against 190 for the same shapes on normal data,
// and one fp32 update fell from 10.3 to 6.3 s with flushing (docs/benchmark-history.md,
// "Denormals"). Results change only where a value below 2^-126 (1.2e-38) becomes 0.
//
// x86-64: MXCSR's FTZ (results) and DAZ (inputs) bits; aarch64: FPCR.FZ (both).
// Elsewhere set_flush_denormals returns false and changes nothing.
// Thread safety: per thread. aspen's main() calls it first, before any thread pool
// exists, so that torch's, the BLAS library's and every role's threads inherit it.
#pragma once

namespace aspen {

// Sets (on = true) or clears flushing on the calling thread; false where unsupported.
bool set_flush_denormals(bool on);

// Whether the calling thread flushes denormals.
bool denormals_flushed();

}  // namespace aspen
