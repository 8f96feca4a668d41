#!/usr/bin/env python3
"""The table of docs/simulate.md: the seeds' dense settings (examples/simulate/*.yaml)
on 64 and 128 H200s and Ascend 910Bs, each with the rollout:train split and then eta
swept by `aspen simulate --sweep`. Prints markdown; the raw JSON goes to OUT_DIR.

  tools/simulate/seeds_table.py ./build/aspen [OUT_DIR] [extra key=value ...]
"""
import json
import os
import subprocess
import sys

aspen = sys.argv[1]
out_dir = sys.argv[2] if len(sys.argv) > 2 else "/tmp/aspen_seeds_table"
extra = sys.argv[3:]
os.makedirs(out_dir, exist_ok=True)

# model -> (config, train TP, trainer DP values per device count, rollout TP per device)
SETTINGS = {
    "qwen2.5-7b": ("examples/simulate/qwen2.5-7b.yaml", 4, {64: [4, 6, 8, 10, 12], 128: [8, 12, 16, 20, 24]},
                   {"h200": 1, "ascend_910b": 1}),
    "qwen2.5-32b": ("examples/simulate/qwen2.5-32b.yaml", 8, {64: [2, 3, 4, 5, 6], 128: [4, 6, 8, 10, 12]},
                    {"h200": 2, "ascend_910b": 4}),
}


def simulate(args):
    result = subprocess.run([aspen, "simulate", *args], check=True, capture_output=True, text=True)
    return json.loads(result.stdout)


def fmt(x, digits=3):
    return f"{x:.{digits}f}"


rows = []
for model, (config, train_tp, dps, rollout_tps) in SETTINGS.items():
    for device, rollout_tp in rollout_tps.items():
        for devices, dp_values in dps.items():
            base = [config, f"simulate.device={device}", f"simulate.devices={devices}",
                    f"placement.rollout.tp={rollout_tp}", *extra]
            # Any instance count: simulate.devices derives it from the split.
            # The split at eta 1 (whatever eta the example file recommends).
            split = simulate(base + ["pipeline.max_staleness=1",
                                     f"--sweep=placement.train.dp={','.join(map(str, dp_values))}"])
            best_dp = split["best_async"]["value"]
            eta = simulate(base + [f"placement.train.dp={best_dp}", "--sweep=pipeline.max_staleness=0,1,2,4"])
            best_eta = eta["best_async"]["value"]
            final = simulate(base + [f"placement.train.dp={best_dp}", f"pipeline.max_staleness={best_eta}"])
            name = f"{model}_{device}_{devices}"
            for label, data in (("split", split), ("eta", eta), ("final", final)):
                with open(os.path.join(out_dir, f"{name}_{label}.json"), "w") as f:
                    json.dump(data, f, indent=1)
            sync, asy = final["sync"], final["async"]
            train_devices = int(best_dp) * train_tp
            rows.append("| " + " | ".join([
                model, device, str(devices),
                f"{train_devices}:{devices - train_devices}", best_eta,
                f"{sync['effective_tps']:.0f}", f"{asy['effective_tps']:.0f}", f"**{final['ratio']:.2f}**",
                f"{sync['seconds_per_step']:.0f} / {asy['seconds_per_step']:.0f}",
                f"{fmt(sync['bubbles']['trainer_idle'], 2)} / {fmt(asy['bubbles']['trainer_idle'], 2)}",
                f"{fmt(sync['bubbles']['rollout_idle'], 2)} / {fmt(asy['bubbles']['rollout_idle'], 2)}",
                f"{fmt(sync['bubbles']['skewness'], 2)} / {fmt(asy['bubbles']['skewness'], 2)}",
                f"{fmt(sync['bubbles']['sorting'], 2)} / {fmt(asy['bubbles']['sorting'], 2)}",
                ", ".join(f"{r['value']}: {r['ratio']:.2f}" for r in split["rows"]),
                ", ".join(f"{r['value']}: {r['ratio']:.2f}" for r in eta["rows"]),
            ]) + " |")
            print(rows[-1], flush=True)

print()
print("| model | device | devices | train:rollout | eta | sync tok/s | async tok/s | ratio | s/step sync / async "
      "| trainer idle | rollout idle | skewness | sorting | ratio by train.dp | ratio by eta |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for row in rows:
    print(row)
