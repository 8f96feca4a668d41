#!/usr/bin/env python3
"""Writes the binary seed corpora of the fuzz targets whose inputs are hard to write
by hand (the dock wire, claims, safetensors files, checkpoint states), so that each
seed can be regenerated and reviewed: python3 fuzz/make_seeds.py. The formats are
those of dock/wire_format.h, dock/controller_protocol.cpp, dock/claim_codec.cpp and
io/safetensors.h; the fuzz targets' header comments describe how inputs are framed."""
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
TOKEN = b"fuzz-token"
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def write(target, name, data):
    os.makedirs(os.path.join(ROOT, target), exist_ok=True)
    with open(os.path.join(ROOT, target, name), "wb") as f:
        f.write(data)


def string(s):
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def strings(values):
    return struct.pack("<I", len(values)) + b"".join(string(v) for v in values)


def i64s(values):
    return struct.pack("<I", len(values)) + b"".join(struct.pack("<q", v) for v in values)


def i32s(values):
    return struct.pack("<I", len(values)) + b"".join(struct.pack("<i", v) for v in values)


def row_info(group, group_size, tokens, version, target=-1):
    return struct.pack("<qiqqi", group, group_size, tokens, version, target)


def tensor_frames(code, shape, data):
    return [struct.pack("<BB", code, len(shape)) + b"".join(struct.pack("<q", d) for d in shape),
            data]


def message(op, body=b"", tensors=()):
    header = b"ASPD" + struct.pack("<BBHH", 1, 0, op, len(TOKEN)) + TOKEN
    frames = [header, body]
    for t in tensors:
        frames += t
    out = struct.pack("<B", len(frames))
    for f in frames:
        out += struct.pack("<H", len(f)) + f
    return out


def claim_options(consumer, max_rows, min_rows, whole_groups=0, balance_ranks=1,
                  groups=(), required=I64_MIN):
    return (string(consumer) + struct.pack("<qqdBBqqid", max_rows, min_rows, 0.0, whole_groups,
                                           1, I64_MIN, I64_MAX, balance_ranks, 10.0)
            + i64s(list(groups)) + struct.pack("<iqB", -1, required, 1))


def dock_frames():
    allocate = message(4, struct.pack("<d", 0.0) + struct.pack("<I", 2)
                       + row_info(0, 2, 3, 0) + row_info(0, 2, 5, 0))
    register = message(2, string("tcp://127.0.0.1:5555"))
    put = message(32, i64s([0, 1]) + strings(["tokens", "reward"]), [
        tensor_frames(5, [3], struct.pack("<3q", 1, 2, 3)),
        tensor_frames(5, [5], struct.pack("<5q", 1, 2, 3, 4, 5)),
        tensor_frames(1, [], struct.pack("<f", 1.0)),
        tensor_frames(1, [], struct.pack("<f", 0.0))])
    publish = message(5, i64s([0, 1]) + strings(["tokens", "reward"]) + struct.pack("<i", 0))
    claim = message(6, claim_options("trainer", 2, 1, whole_groups=1, balance_ranks=2))
    get = message(33, i64s([0, 1]) + strings(["tokens"]))
    ack = message(7, struct.pack("<q", 1))
    erase = message(34, i64s([0, 1]))
    write("dock_frames", "schema", message(1))
    write("dock_frames", "metrics", message(9) + message(35))
    write("dock_frames", "lifecycle",
          allocate + register + put + publish + claim + get + ack + erase + message(9))
    write("dock_frames", "statuses", message(15, string("k") + string("v")) + message(16, string("")))
    # No elements, yet strides past int64: the decoder must refuse it before libtorch
    # computes them ("Stride calculation overflowed" escaped once).
    write("dock_frames", "stride_overflow",
          message(32, i64s([0]) + strings(["tokens"]), [tensor_frames(5, [0, 2**62, 2**62], b"")]))


def claim_codec():
    def claim(lease, consumer, columns, rows, ranks, imbalance=0.0):
        out = struct.pack("<q", lease) + string(consumer) + strings(columns)
        out += struct.pack("<I", len(rows))
        for rid, info, locations in rows:
            out += struct.pack("<q", rid) + info + i32s(locations)
        out += struct.pack("<I", len(ranks)) + b"".join(i64s(r) for r in ranks)
        return out + struct.pack("<dBqq", imbalance, 0, 0, 0)
    rows = [(0, row_info(7, 2, 11, 1), [0, 1]), (1, row_info(7, 2, 4, 1), [0, 1])]
    write("claim_codec", "empty", claim(0, "trainer", [], [], []))
    write("claim_codec", "balanced", claim(3, "trainer", ["tokens", "reward"], rows, [[0], [1]],
                                           0.25))
    write("claim_codec", "unbalanced", claim(4, "scorer", ["tokens"], rows, []))


def safetensors():
    def file(entries, metadata=None):
        header, data = {}, b""
        for name, dtype, shape, raw in entries:
            header[name] = {"dtype": dtype, "shape": shape,
                            "data_offsets": [len(data), len(data) + len(raw)]}
            data += raw
        if metadata:
            header["__metadata__"] = metadata
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        return struct.pack("<Q", len(text)) + text + data
    write("safetensors_reader", "two_tensors", file(
        [("w", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)),
         ("b", "BF16", [3], b"\x80\x3f\x00\x40\x40\x40")], {"format": "pt"}))
    write("safetensors_reader", "scalar_int", file([("step", "I64", [], struct.pack("<q", 9))]))
    write("safetensors_reader", "unaligned", file(
        [("flag", "BOOL", [1], b"\x01"), ("x", "F16", [2], b"\x00\x3c\x00\x40")]))


def checkpoint_state():
    seed = os.path.join(ROOT, "checkpoint_state", "state.json")
    rng = json.load(open(seed))["schedule"]["schedule"]["prompts"]["rng"]
    small = {"iteration": 2, "schedule": {
        "evals": {"initial": 0.25, "before": 0.5, "after": 0.75},
        "schedule": {"prompts": {"num_examples": 4, "rng": rng, "order": [2, 0, 3, 1],
                                 "cursor": 2, "next_group": 2, "open": [[0, 2], [1, 0]]},
                     "pending": [[1, 0]], "version": 2, "samples": 16, "trained_tokens": 300,
                     "consumed_groups": 1, "refilled_groups": 0, "kl_reward_coef": 0.01}}}
    write("checkpoint_state", "small.json", json.dumps(small).encode())
    # The schedules' form before the iteration engine: refused with its own message.
    before_engine = json.loads(json.dumps(small))
    engine = before_engine["schedule"]["schedule"]
    del engine["consumed_groups"], engine["refilled_groups"]
    engine["trained_groups"] = 1
    write("checkpoint_state", "before_engine.json", json.dumps(before_engine).encode())


if __name__ == "__main__":
    dock_frames()
    claim_codec()
    safetensors()
    checkpoint_state()
