#!/usr/bin/env python3
"""Sums a torch profiler Chrome trace (`aspen bench train --profile DIR`) by operator.

    tools/op_profile_summary.py TRACE.json [--top 30] [--shapes]

Prints, per operator name (with --shapes: per name and input shapes), the self time
(its duration less that of the operators it called, on the same thread), the total
time, the call count, and the share of the traced wall time. Self times add up to the
time the profiled threads spent inside operators; the rest of the wall time is outside
any (Aspen's own loops, the optimizer's bookkeeping, waiting).
"""
import argparse
import collections
import json


def self_times(events):
    """Per event, its duration minus its direct children's, by nesting on one thread."""
    by_thread = collections.defaultdict(list)
    for e in events:
        by_thread[e["tid"]].append(e)
    out = []
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # [event, children's duration]
        for e in thread_events:
            while stack and stack[-1][0]["ts"] + stack[-1][0]["dur"] <= e["ts"]:
                done, children = stack.pop()
                out.append((done, done["dur"] - children))
            if stack:
                stack[-1][1] += e["dur"]
            stack.append([e, 0.0])
        out.extend((done, done["dur"] - children) for done, children in stack)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--shapes", action="store_true", help="group by input shapes too")
    args = parser.parse_args()
    events = [e for e in json.load(open(args.trace))["traceEvents"]
              if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    if not events:
        raise SystemExit(f"{args.trace}: no cpu_op events")
    wall = max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)
    rows = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for e, own in self_times(events):
        key = e["name"]
        if args.shapes:
            key += " " + str(e.get("args", {}).get("Input Dims", ""))
        rows[key][0] += own
        rows[key][1] += e["dur"]
        rows[key][2] += 1
    total_self = sum(r[0] for r in rows.values())
    print(f"wall {wall / 1e6:.3f} s, self time in operators {total_self / 1e6:.3f} s")
    print(f"{'self s':>8} {'share':>6} {'total s':>8} {'calls':>6}  operator")
    for key, (own, total, calls) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(f"{own / 1e6:8.3f} {own / wall:6.1%} {total / 1e6:8.3f} {calls:6d}  {key}")


if __name__ == "__main__":
    main()
