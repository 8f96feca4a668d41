#!/usr/bin/env python3
"""The cheap half of keeping scripts/gpu-check from rotting (CTest `gpu_check_scripts`,
about a second); the full half is the rehearsal, scripts/gpu-check --rehearse
(docs/gpu.md, "Rehearsing the check"). Checks:

  1. scripts/gpu-check, gpu-bundle and gpu-rehearse parse (bash -n) and pass
     `shellcheck -S warning` (scripts/setup installs it; its absence is a failure);
  2. every library -dev package scripts/setup installs is in scripts/gpu-bundle's list,
     or in its setup_only list with a reason: a library added to the build but not to
     the bundle would fail the first configure on a GPU machine;
  3. tools/gpu_check_summary.py on made-up stage outputs: a plausible GPU run is "ok";
     a decode faster than the memory roofline, an MFU above 1, a failed cuda test, a
     stage that never ran, each make it not ok and name the failed check.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = ["scripts/gpu-check", "scripts/gpu-bundle", "scripts/gpu-rehearse"]
failures = []


def fail(message):
    failures.append(message)
    print("FAIL:", message)


def check_shell():
    for script in SCRIPTS:
        path = os.path.join(ROOT, script)
        result = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
        if result.returncode != 0:
            fail(f"{script} does not parse: {result.stderr.strip()}")
    if shutil.which("shellcheck") is None:
        fail("shellcheck is not installed (scripts/setup installs it)")
    result = subprocess.run(["shellcheck", "-S", "warning"] + [os.path.join(ROOT, s) for s in SCRIPTS],
                            capture_output=True, text=True)
    if result.returncode != 0:
        fail("shellcheck -S warning:\n" + result.stdout)


def setup_dev_packages():
    text = open(os.path.join(ROOT, "scripts/setup")).read()
    block = re.search(r"^packages=\((.*?)^\)", text, re.S | re.M)
    if block is None:
        fail("scripts/setup has no packages=( ... ) list")
        return []
    words = re.sub(r"#[^\n]*", "", block.group(1)).split()
    return [w for w in words if w.endswith("-dev")]


def check_packages():
    listing = subprocess.run([os.path.join(ROOT, "scripts/gpu-bundle"), "--list"],
                             capture_output=True, text=True, check=True).stdout.split("\n")
    known = {line.split()[1] for line in listing if line.strip()}
    for package in setup_dev_packages():
        if package not in known:
            fail(f"scripts/setup installs {package}, which scripts/gpu-bundle neither bundles "
                 "nor lists in setup_only")


def grid(decode_1, decode_n, prefill, n):
    return {"grid": [
        {"parallel": 1, "prefill_tps": prefill / n, "decode_tps": decode_1},
        {"parallel": n, "prefill_tps": prefill, "decode_tps": decode_n}]}


def write_run(logs, decode_1=150.0, mfu=0.4, failed_test=False, stages=None):
    """An H200-like run of the 0.6B shape: 1.2 GB of weights, 4.4 TB/s, 700 TFLOP/s."""
    os.makedirs(logs, exist_ok=True)
    names = stages or ["python", "bundle", "configure", "build", "model", "tests", "rollout",
                       "hf", "train", "pipeline"]
    with open(os.path.join(logs, "stages.tsv"), "w") as f:
        for name in names:
            f.write(f"{name}\tok\t1\t10\n")
    json.dump({"gpus": ["NVIDIA H200"], "torch": "2.11.0"},
              open(os.path.join(logs, "python.json"), "w"))
    cases = ['<testcase name="CudaRollout.A" status="run"/>',
             '<testcase name="CudaTraining.B" status="run"/>',
             '<testcase name="CudaRlLoop.C" status="%s"/>' % ("fail" if failed_test else "run"),
             '<testcase name="CudaCollectives.D" status="notrun"><skipped/></testcase>']
    open(os.path.join(logs, "ctest.xml"), "w").write(
        "<testsuite>" + "".join(cases) + "</testsuite>")
    hf = dict(grid(100.0, 3000.0, 60000.0, 64), weight_bytes=1_192_000_000,
              parameters=596_000_000, embedding_parameters=155_000_000,
              memory_bandwidth_bytes_per_s=4.4e12, gemm_peak_bf16_flops_per_s=7.0e14)
    json.dump(hf, open(os.path.join(logs, "hf.out"), "w"))
    json.dump(grid(decode_1, 5000.0, 80000.0, 64), open(os.path.join(logs, "rollout.out"), "w"))
    json.dump({"dtypes": {"bf16": {"mfu": mfu, "gemm_peak_flops_per_second": 6.5e14,
                                   "tokens_per_second": 1e5}}},
              open(os.path.join(logs, "train.out"), "w"))
    json.dump({"ratio": 1.4, "sync": {"effective_tps": 100.0}, "async": {"effective_tps": 140.0}},
              open(os.path.join(logs, "pipeline.out"), "w"))


def summarize(logs):
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tools/gpu_check_summary.py"),
                             logs, "gpu", "300"], capture_output=True, text=True)
    return json.loads(result.stdout), result.returncode


def check_summary():
    with tempfile.TemporaryDirectory() as tmp:
        write_run(os.path.join(tmp, "plausible"))
        summary, rc = summarize(os.path.join(tmp, "plausible"))
        if not summary["ok"] or rc != 0:
            fail(f"a plausible run is not ok: {summary['checks_failed']} {summary['stages_not_ok']}")
        # 4.4 TB/s over 1.192 GB of weights: at most ~3,690 single-sequence tokens/s.
        cases = {
            "roofline": (dict(decode_1=5000.0), "aspen decode, 1 sequence, under the memory roofline"),
            "mfu": (dict(mfu=1.3), "train MFU in (0, 1]"),
            "test": (dict(failed_test=True), "cuda tests"),
        }
        for case, (kwargs, check) in cases.items():
            write_run(os.path.join(tmp, case), **kwargs)
            summary, rc = summarize(os.path.join(tmp, case))
            if summary["ok"] or rc == 0 or check not in summary["checks_failed"]:
                fail(f"{case}: expected the check '{check}' to fail, got {summary['checks_failed']}")
        write_run(os.path.join(tmp, "short"), stages=["python", "bundle", "configure", "build"])
        summary, rc = summarize(os.path.join(tmp, "short"))
        if summary["ok"] or "model (not reached)" not in summary["stages_not_ok"]:
            fail(f"a run that stopped after the build is ok: {summary['stages_not_ok']}")


def main():
    check_shell()
    check_packages()
    check_summary()
    if failures:
        sys.exit(f"{len(failures)} failure(s)")
    print("gpu-check scripts: ok")


if __name__ == "__main__":
    main()
