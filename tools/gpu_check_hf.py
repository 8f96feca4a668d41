#!/usr/bin/env python3
"""The Python side of scripts/gpu-check: the model both benches run, the transformers
baseline, and the machine's measured roofs. Needs only torch and transformers (no hub,
no network): the model is random weights of a config built here.

  gpu_check_hf.py model DIR --shape qwen3-0.6b|tiny [--device D]
      writes DIR/config.json and DIR/model.safetensors (bf16): Qwen3-0.6B's published
      shape (or a tiny one, for the CPU rehearsal) with transformers' random init, so
      `aspen bench rollout --model DIR` and the baseline below run the same weights.
  gpu_check_hf.py bench DIR --device D --prompt-len P --gen-len G --parallel 1 64
      prints JSON: transformers generate (SDPA, bf16, the default dynamic cache) timed
      as `aspen bench rollout` times its grid (bench/rollout_bench.cpp): prefill = the
      best of two runs generating 1 token, decode = what a G-token run (best of two)
      took beyond it, over parallel * (G - 1) tokens; plus the device's measured memory
      bandwidth (a copy) and bf16 GEMM peak (torch.matmul), the roofs the plausibility
      checks of tools/gpu_check_summary.py divide by.
"""
import argparse
import json
import sys
import time

import torch

# Qwen3-0.6B's config.json as published (Qwen/Qwen3-0.6B), less the generation fields.
QWEN3_0_6B = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072,
    "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
    "head_dim": 128, "hidden_act": "silu", "max_position_embeddings": 40960,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000, "tie_word_embeddings": True,
    "attention_bias": False, "attention_dropout": 0.0, "use_sliding_window": False,
    "sliding_window": None, "max_window_layers": 28,
    "bos_token_id": 151643, "eos_token_id": 151645, "torch_dtype": "bfloat16",
}
# The rehearsal's shape: every kind of tensor of the real one, small enough for 2 cores.
TINY = dict(QWEN3_0_6B, vocab_size=2048, hidden_size=128, intermediate_size=256,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
            max_window_layers=2, max_position_embeddings=4096, bos_token_id=1,
            eos_token_id=2)
SHAPES = {"qwen3-0.6b": QWEN3_0_6B, "tiny": TINY}


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_model(args):
    from transformers import Qwen3Config, Qwen3ForCausalLM
    torch.manual_seed(0)
    config = Qwen3Config(**SHAPES[args.shape])
    device = torch.device(args.device)
    with device:  # initialised where it runs: 0.6B on one CPU core takes a while
        model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(args.dir, safe_serialization=True)
    print(json.dumps({"dir": args.dir, "shape": args.shape,
                      "parameters": sum(p.numel() for p in model.parameters())}))


def best_seconds(run, device, repeats):
    best = float("inf")
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        run()
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best


def memory_bandwidth(device):
    """Bytes per second of a device-to-device copy (read + write), the best of 5."""
    n = (1 << 30) if device.type == "cuda" else (1 << 27)
    src = torch.empty(n, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    dst.copy_(src)
    return 2 * n / best_seconds(lambda: dst.copy_(src), device, 5)


def gemm_peak(device):
    """bf16 FLOP/s of a square matmul, the best of 10: the sizes of aspen bench train's
    own peak reading (bench/train_bench.cpp), 8192 on a GPU, 2048 on a CPU."""
    n = 8192 if device.type == "cuda" else 2048
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    torch.matmul(a, b)
    return 2 * n ** 3 / best_seconds(lambda: torch.matmul(a, b), device, 10)


def generate_seconds(model, ids, tokens):
    """Seconds of one generate of exactly `tokens` new tokens (no end-of-sequence stop)."""
    mask = torch.ones_like(ids)
    synchronize(ids.device)
    start = time.perf_counter()
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=tokens,
                         min_new_tokens=tokens, do_sample=False, pad_token_id=0)
    synchronize(ids.device)
    seconds = time.perf_counter() - start
    if out.shape[1] != ids.shape[1] + tokens:
        raise RuntimeError(f"generate made {out.shape[1] - ids.shape[1]} tokens, not {tokens}")
    return seconds


def bench(args):
    import transformers
    from transformers import AutoModelForCausalLM
    device = torch.device(args.device)
    # dtype= is transformers >= 4.56's name (torch_dtype= before); the .to() makes bf16
    # certain whichever version the image has.
    model = AutoModelForCausalLM.from_pretrained(
        args.dir, dtype=torch.bfloat16, attn_implementation="sdpa")
    model = model.to(device=device, dtype=torch.bfloat16).eval()
    vocab = model.config.vocab_size
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    generator = torch.Generator().manual_seed(1)
    grid = []
    with torch.inference_mode():
        # Warm-up: kernels, allocator, generate's own first-call set-up.
        generate_seconds(model, torch.randint(3, vocab, (2, 16), generator=generator).to(device), 4)
        for parallel in args.parallel:
            ids = torch.randint(3, vocab, (parallel, args.prompt_len), generator=generator).to(device)
            prefill = min(generate_seconds(model, ids, 1) for _ in range(2))
            total = min(generate_seconds(model, ids, args.gen_len) for _ in range(2))
            grid.append({
                "prompt_len": args.prompt_len, "gen_len": args.gen_len, "parallel": parallel,
                "prefill_tps": parallel * args.prompt_len / prefill,
                "decode_tps": parallel * (args.gen_len - 1) / (total - prefill)
                              if total > prefill else None,
                "seconds": total})
    print(json.dumps({
        "engine": "transformers generate, sdpa, bf16, greedy",
        "transformers": transformers.__version__, "torch": torch.__version__,
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "threads": torch.get_num_threads(),
        "parameters": sum(p.numel() for p in model.parameters()),
        "embedding_parameters": model.get_input_embeddings().weight.numel(),
        "weight_bytes": weight_bytes,
        "memory_bandwidth_bytes_per_s": memory_bandwidth(device),
        "gemm_peak_bf16_flops_per_s": gemm_peak(device),
        "grid": grid}, indent=2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("model")
    m.add_argument("dir")
    m.add_argument("--shape", choices=sorted(SHAPES), required=True)
    m.add_argument("--device", default="cpu")
    b = sub.add_parser("bench")
    b.add_argument("dir")
    b.add_argument("--device", default="cpu")
    b.add_argument("--prompt-len", type=int, required=True)
    b.add_argument("--gen-len", type=int, required=True)
    b.add_argument("--parallel", type=int, nargs="+", required=True)
    args = parser.parse_args()
    if args.command == "bench" and args.gen_len < 2:
        sys.exit("gpu_check_hf.py bench: --gen-len must be >= 2 (decode is measured beyond "
                 "the first token)")
    make_model(args) if args.command == "model" else bench(args)


if __name__ == "__main__":
    main()
