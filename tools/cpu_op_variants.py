#!/usr/bin/env python3
"""Interleaved timings of CPU operator variants behind two choices in the kernels.

  gemm       the log-prob head's chunk GEMMs in each layout (kernels/logprob_chunks.cpp
             lays bf16 chunks out transposed because of these figures)
  attention  torch's CPU flash attention on bf16 against fp32 inputs, forward and
             backward (kernels/varlen_attention.cpp attends bf16 in fp32 because of them)

Each round runs every variant once, back to back, and the report is the median over
rounds of each variant's time divided by the reference variant's time in the same
round: this shared machine's speed drifts by up to 3x within minutes, and a ratio
taken within one round is what survives that.

Usage: tools/cpu_op_variants.py {gemm,attention} [--rounds N] [--threads T] [--dtype bf16|fp32]
Run it with the project's virtualenv's python (torch from PyPI).
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F


def interleaved(variants, rounds, reference):
    for f in variants.values():
        f()  # warm-up
    times = {name: [] for name in variants}
    for _ in range(rounds):
        for name, f in variants.items():
            start = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - start)
    ref = times[reference]
    return {name: (statistics.median([a / b for a, b in zip(t, ref)]), statistics.median(t))
            for name, t in times.items()}


def gemm_variants(dtype):
    tokens, hidden, rows = 1192, 512, 4096  # the 103M bench's response tokens, one chunk
    h = torch.randn(tokens, hidden, dtype=dtype)
    w = torch.randn(rows, hidden, dtype=dtype)
    g = torch.randn(tokens, rows, dtype=dtype)
    gt = g.t().contiguous()
    logits = torch.empty(tokens, rows, dtype=dtype)
    rows_grad = torch.empty(rows, hidden, dtype=dtype)
    return {
        "forward mm(h, W.t())": lambda: torch.mm(h, w.t(), out=logits),
        "forward transposed mm(W, h.t())": lambda: torch.mm(w, h.t()),
        "weight grad mm(g.t(), h)": lambda: torch.mm(g.t(), h, out=rows_grad),
        "weight grad mm(gT, h), gT row-major": lambda: torch.mm(gt, h, out=rows_grad),
        "hidden grad g @ W": lambda: g @ w,
        "hidden grad gT.t() @ W": lambda: gt.t() @ w,
        "transposing copy g -> gT": lambda: gt.copy_(g.t()),
    }, "forward mm(h, W.t())"


def attention_variants(_dtype):
    length, heads, kv_heads, dim = 213, 8, 4, 64  # one 103M bench row

    def fwd_bwd(dtype):
        q = torch.randn(1, heads, length, dim, dtype=dtype, requires_grad=True)
        k = torch.randn(1, kv_heads, length, dim, dtype=dtype, requires_grad=True)
        v = torch.randn(1, kv_heads, length, dim, dtype=dtype, requires_grad=True)
        grad = torch.randn(1, heads, length, dim, dtype=dtype)

        def run():
            F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).backward(grad)
        return run

    return {"fp32 forward+backward": fwd_bwd(torch.float32),
            "bf16 forward+backward": fwd_bwd(torch.bfloat16)}, "fp32 forward+backward"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["gemm", "attention"])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16",
                        help="the GEMMs' dtype (gemm only)")
    args = parser.parse_args()
    if args.rounds < 1 or args.threads < 1:
        parser.error("--rounds and --threads must be >= 1")
    torch.set_num_threads(args.threads)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    build = gemm_variants if args.what == "gemm" else attention_variants
    variants, reference = build(dtype)
    for name, (ratio, seconds) in interleaved(variants, args.rounds, reference).items():
        print(f"{ratio:6.2f}x  {seconds * 1e3:8.2f} ms  {name}")


if __name__ == "__main__":
    main()
