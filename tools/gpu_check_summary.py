#!/usr/bin/env python3
"""The one JSON summary of scripts/gpu-check, with a plausibility check per figure.

  gpu_check_summary.py LOGS_DIR MODE SECONDS     (MODE: gpu or cpu)

Reads what the stages left in LOGS_DIR: stages.tsv (name, status, seconds, limit),
python.json, bundle.out, ctest.xml, and the JSON the benches printed
(rollout.out: aspen bench rollout; hf.out: tools/gpu_check_hf.py bench; train.out:
aspen bench train; pipeline.out: aspen bench pipeline). Prints the summary and writes
it, with those JSONs under "raw", to LOGS_DIR/summary.json; exit 0 when every stage
passed and no check failed.

The checks, and why each bound holds:
  decode, one sequence: every decode step reads every weight once, so tokens/s is at
    most memory bandwidth / weight bytes (the measured copy bandwidth). Faster means the
    timing missed work (an unsynchronised GPU clock, a cached result): an error.
  decode, N sequences: a step still reads the weights once, and computes 2 FLOPs per
    parameter per token: at most N * bandwidth / weight bytes and GEMM peak / (2 * params).
  prefill: at most GEMM peak / (2 * non-embedding params) tokens/s (attention and the
    head only add work).
  The memory bounds are not binding for a model that fits in a CPU's cache (the
    rehearsal's tiny one): reported, marked "not_applicable".
  MFU: in (0, 1], and aspen's bf16 GEMM peak within a factor 2 of torch's in Python
    (both are a matmul on the same device; far apart, one of them is mistimed; on a
    GPU only: on a shared CPU one reading moves 3x minutes apart).
  pipeline ratio: both sides trained tokens (effective_tps > 0), ratio in [0.2, 5].
  tests: on a GPU the cuda tests ran (none skipped but the two-GPU one on one GPU) and
    none failed; in the CPU mode all of them skip and none fails.
"""
import json
import math
import os
import sys
import xml.etree.ElementTree as ET

CACHE_BYTES = 64 << 20  # a model under this may sit in a CPU's cache: no memory bound


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_stages(logs):
    stages = {}
    try:
        with open(os.path.join(logs, "stages.tsv")) as f:
            for line in f:
                name, status, seconds, limit = line.rstrip("\n").split("\t")
                stages[name] = {"status": status, "seconds": int(seconds), "limit": int(limit)}
    except OSError:
        pass
    return stages


def read_tests(logs):
    tests = {"passed": 0, "failed": 0, "skipped": 0, "failures": [], "skips": []}
    try:
        root = ET.parse(os.path.join(logs, "ctest.xml")).getroot()
    except (OSError, ET.ParseError):
        return None
    for case in root.iter("testcase"):
        name, status = case.get("name"), case.get("status")
        if case.find("skipped") is not None or status in ("notrun", "disabled"):
            tests["skipped"] += 1
            tests["skips"].append(name)
        elif status == "run" and case.find("failure") is None:
            tests["passed"] += 1
        else:
            tests["failed"] += 1
            tests["failures"].append(name)
    return tests


def cell(bench, parallel):
    for point in (bench or {}).get("grid", []):
        if point.get("parallel") == parallel:
            return point
    return None


class Checks:
    def __init__(self):
        self.items = []

    def add(self, name, ok, detail, applicable=True):
        status = "ok" if ok else "failed"
        if not applicable:
            status = "not_applicable"
        self.items.append({"name": name, "status": status, "detail": detail})

    def failed(self):
        return [c["name"] for c in self.items if c["status"] == "failed"]


def check_tests(checks, tests, mode, gpus):
    if tests is None:
        checks.add("cuda tests", False, "no CTest result (ctest.xml)")
        return
    if mode == "gpu":
        # The NCCL test needs two GPUs; with one it skips, and only it may.
        allowed = 1 if gpus < 2 else 0
        ok = tests["failed"] == 0 and tests["passed"] >= 1 and tests["skipped"] <= allowed
        checks.add("cuda tests", ok, f"{tests['passed']} passed, {tests['failed']} failed, "
                   f"{tests['skipped']} skipped on {gpus} GPU(s)")
    else:
        ok = tests["failed"] == 0 and tests["passed"] == 0 and tests["skipped"] >= 1
        checks.add("cuda tests", ok, f"without a GPU every one skips: {tests['skipped']} "
                   f"skipped, {tests['passed']} passed, {tests['failed']} failed")


def check_rollout(checks, engine, bench, roofs, parallel_n):
    """Bounds on one engine's single and N-sequence decode and its prefill."""
    weight_bytes, params, embed = roofs["weight_bytes"], roofs["parameters"], roofs["embedding"]
    bandwidth, peak = roofs["bandwidth"], roofs["gemm_peak"]
    memory_bound = weight_bytes >= CACHE_BYTES
    figures = {}
    one, many = cell(bench, 1), cell(bench, parallel_n)
    if one is None or many is None:
        checks.add(f"{engine} rollout", False, f"no grid cell for 1 and {parallel_n} sequences")
        return figures
    figures = {"decode_tps_1": one["decode_tps"], f"decode_tps_{parallel_n}": many["decode_tps"],
               f"prefill_tps_{parallel_n}": many["prefill_tps"]}
    limit_1 = bandwidth / weight_bytes
    d1 = one["decode_tps"]
    checks.add(f"{engine} decode, 1 sequence, under the memory roofline",
               d1 is not None and 0 < d1 <= 1.05 * limit_1,
               f"{d1} tokens/s against at most {limit_1:.1f} (bandwidth {bandwidth:.3g} B/s "
               f"/ weights {weight_bytes} B)", memory_bound)
    dn = many["decode_tps"]
    limit_n = min(parallel_n * limit_1 if memory_bound else math.inf, peak / (2 * params))
    checks.add(f"{engine} decode, {parallel_n} sequences, under the roofline",
               dn is not None and 0 < dn <= 1.05 * limit_n,
               f"{dn} tokens/s against at most {limit_n:.1f}")
    prefill = many["prefill_tps"]
    limit_p = peak / (2 * (params - embed))
    checks.add(f"{engine} prefill under the GEMM peak", 0 < prefill <= 1.05 * limit_p,
               f"{prefill:.1f} tokens/s against at most {limit_p:.1f} (bf16 peak {peak:.3g} "
               f"FLOP/s / 2 x {params - embed} non-embedding parameters)")
    return figures


def main():
    logs, mode, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    stages = read_stages(logs)
    python = read_json(os.path.join(logs, "python.json")) or {}
    bundle = read_json(os.path.join(logs, "bundle.out"))
    tests = read_tests(logs) if "tests" in stages else None
    rollout = read_json(os.path.join(logs, "rollout.out"))
    hf = read_json(os.path.join(logs, "hf.out"))
    train = read_json(os.path.join(logs, "train.out"))
    pipeline = read_json(os.path.join(logs, "pipeline.out"))
    checks = Checks()
    parallel_n = 64 if mode == "gpu" else 4

    if "tests" in stages:
        check_tests(checks, tests, mode, len(python.get("gpus", [])))
    rollout_figures = {}
    if hf:
        roofs = {"weight_bytes": hf["weight_bytes"], "parameters": hf["parameters"],
                 "embedding": hf["embedding_parameters"],
                 "bandwidth": hf["memory_bandwidth_bytes_per_s"],
                 "gemm_peak": hf["gemm_peak_bf16_flops_per_s"]}
        rollout_figures["transformers"] = check_rollout(checks, "transformers", hf, roofs, parallel_n)
        if rollout:
            rollout_figures["aspen"] = check_rollout(checks, "aspen", rollout, roofs, parallel_n)
            aspen, base = rollout_figures["aspen"], rollout_figures["transformers"]
            rollout_figures["aspen_over_transformers"] = {
                key: aspen[key] / base[key] for key in aspen
                if aspen.get(key) and base.get(key)}
    train_figures = None
    if train:
        bf16 = train["dtypes"].get("bf16", {})
        mfu = bf16.get("mfu")
        aspen_peak = bf16.get("gemm_peak_flops_per_second")
        train_figures = {"mfu_bf16": mfu, "mfu_unavailable": bf16.get("mfu_unavailable"),
                         "tokens_per_second": bf16.get("tokens_per_second"),
                         "gemm_peak_bf16_aspen": aspen_peak,
                         "gemm_peak_bf16_torch": hf["gemm_peak_bf16_flops_per_s"] if hf else None}
        checks.add("train MFU in (0, 1]", mfu is not None and 0 < mfu <= 1,
                   f"mfu {mfu} ({bf16.get('mfu_unavailable', '')})")
        if hf and aspen_peak:
            # Not on a shared CPU, where the same reading moves 3x minutes apart
            # (bench/train_bench.cpp, time_updates).
            ratio = aspen_peak / hf["gemm_peak_bf16_flops_per_s"]
            checks.add("aspen's bf16 GEMM peak agrees with torch's", 0.5 <= ratio <= 2,
                       f"aspen {aspen_peak:.3g} / torch {hf['gemm_peak_bf16_flops_per_s']:.3g} "
                       f"= {ratio:.2f}", applicable=mode == "gpu")
    pipeline_figures = None
    if pipeline:
        ratio = pipeline.get("ratio")
        sync_tps = pipeline["sync"]["effective_tps"]
        async_tps = pipeline["async"]["effective_tps"]
        pipeline_figures = {"ratio": ratio, "sync_effective_tps": sync_tps,
                            "async_effective_tps": async_tps}
        checks.add("pipeline ratio plausible", sync_tps > 0 and async_tps > 0 and
                   ratio is not None and 0.2 <= ratio <= 5,
                   f"async/sync = {ratio} ({async_tps} / {sync_tps} trained tokens/s)")

    stage_failures = [n for n, s in stages.items() if s["status"] not in ("ok", "reused")]
    expected = ["python", "bundle", "configure", "build", "model", "tests", "rollout", "hf",
                "train", "pipeline"]
    missing = [n for n in expected if n not in stages]
    summary = {
        "ok": not stage_failures and not missing and not checks.failed(),
        "mode": mode,
        "python_torch": python,
        "image": bundle,
        "stages": stages,
        "stages_not_ok": stage_failures + [f"{n} (not reached)" for n in missing],
        "tests": tests,
        "rollout": rollout_figures or None,
        "roofs": {"memory_bandwidth_bytes_per_s": hf["memory_bandwidth_bytes_per_s"],
                  "gemm_peak_bf16_flops_per_s": hf["gemm_peak_bf16_flops_per_s"],
                  "weight_bytes": hf["weight_bytes"]} if hf else None,
        "train": train_figures,
        "pipeline": pipeline_figures,
        "checks": checks.items,
        "checks_failed": checks.failed(),
        "seconds": seconds,
        "logs": logs,
    }
    # Stdout gets the summary alone (a remote run returns only its last 12,000
    # characters); summary.json beside the logs adds the benches' own JSON.
    with open(os.path.join(logs, "summary.json"), "w") as f:
        json.dump(dict(summary, raw={"rollout": rollout, "transformers": hf, "train": train,
                                     "pipeline": pipeline}), f, indent=2)
    print(json.dumps(summary, indent=1))
    sys.exit(0 if summary["ok"] else 1)


if __name__ == "__main__":
    main()
