#!/usr/bin/env python3
"""Reads the JSON files tools/anchors/run wrote into OUT_DIR and prints #15's ratios:

    decode (0.6B, per dtype): Aspen / llama.cpp for prefill (512 tokens) and for
        single-sequence decode; Aspen's aggregate decode at 32 sequences over its own
        single-sequence decode (32 + 32 tokens);
    training (per shape and dtype): Aspen tokens/s over eager packed and over eager
        padded, and over eager packed with denormals flushed (packed_ftz, the
        arithmetic setting Aspen runs with), and Aspen's MFU against the GEMM peak of
        that dtype; Aspen's bf16_head
        (the log-prob head's GEMMs in bf16 too) is compared with eager bf16 autocast.
"""
import glob
import json
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def grid_point(bench, parallel):
    return next(p for p in bench["grid"] if p["parallel"] == parallel)


def main():
    out = sys.argv[1]
    summary = {"decode": {}, "training": {}}
    for dtype in ("fp32", "bf16"):
        try:
            long = load(os.path.join(out, f"aspen-rollout-512-{dtype}.json"))
            short = load(os.path.join(out, f"aspen-rollout-32-{dtype}.json"))
            llama = load(os.path.join(out, f"llama-512-{dtype}.json"))
        except FileNotFoundError:
            continue
        one = grid_point(long, 1)
        summary["decode"][dtype] = {
            "aspen_prefill_tps": one["prefill_tps"], "llama_prefill_tps": llama["prefill_tps"],
            "prefill_ratio": one["prefill_tps"] / llama["prefill_tps"],
            "aspen_decode_tps": one["decode_tps"], "llama_decode_tps": llama["decode_tps"],
            "decode_ratio": one["decode_tps"] / llama["decode_tps"],
            "aspen_decode_tps_1_seq_32_32": grid_point(short, 1)["decode_tps"],
            "aspen_decode_tps_32_seq_32_32": grid_point(short, 32)["decode_tps"],
            "aggregate_32_over_1": grid_point(short, 32)["decode_tps"]
            / grid_point(short, 1)["decode_tps"],
        }
    for path in sorted(glob.glob(os.path.join(out, "aspen-train-*.json"))):
        shape = os.path.basename(path)[len("aspen-train-"):-len(".json")]
        aspen = load(path)
        for dtype, figures in aspen["dtypes"].items():
            row = {"aspen_tokens_per_second": figures["tokens_per_second"],
                   "aspen_mfu": figures["mfu"],
                   "gemm_peak_flops_per_second": figures["gemm_peak_flops_per_second"]}
            # bf16_head (the head's GEMMs in bf16 too) is what eager autocast does.
            eager_dtype = "bf16" if dtype == "bf16_head" else dtype
            for layout in ("packed", "padded", "packed_ftz"):
                eager_path = os.path.join(out, f"eager-train-{shape}-{layout}-{eager_dtype}.json")
                if os.path.exists(eager_path):
                    eager = load(eager_path)
                    row[f"eager_{layout}_tokens_per_second"] = eager["tokens_per_second"]
                    row[f"over_eager_{layout}"] = (figures["tokens_per_second"]
                                                   / eager["tokens_per_second"])
            summary["training"].setdefault(shape, {})[dtype] = row
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
