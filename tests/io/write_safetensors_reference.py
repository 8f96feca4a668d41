#!/usr/bin/env python3
"""Writes a safetensors file with nothing but the standard library, following the
published format (huggingface/safetensors README), as an independent program for
Aspen's reader to be checked against.

Usage: write_safetensors_reference.py OUT_PATH

The tensors and values here are mirrored in safetensors_reference_test.cpp; change
both together. Layout choices follow the reference writer: tensors sorted by
descending dtype size then name, header space-padded to a multiple of 8. The JSON
uses Python's default separators (with spaces) and "__metadata__" last, which the
format allows and a reader must accept.
"""
import json
import struct
import sys


def bf16_bytes(values):
    # bfloat16 is the top half of an IEEE float32; these values are exact in it.
    out = b""
    for v in values:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        out += struct.pack("<H", bits >> 16)
    return out


# name -> (dtype, shape, little-endian bytes)
TENSORS = {
    "f32": ("F32", [2, 3], struct.pack("<6f", 0.5, -1.0, 2.0, 3.25, -4.5, 1e-3)),
    "f16": ("F16", [3], struct.pack("<3e", 1.0, -0.5, 65504.0)),
    "bf16": ("BF16", [2, 2], bf16_bytes([1.0, -2.5, 0.15625, 256.0])),
    "f64": ("F64", [2], struct.pack("<2d", 3.141592653589793, -1e300)),
    "i64": ("I64", [3], struct.pack("<3q", -9007199254740993, 0, 2**62)),
    "i32": ("I32", [2], struct.pack("<2i", -2147483648, 123456)),
    "i16": ("I16", [2], struct.pack("<2h", -32768, 32767)),
    "i8": ("I8", [4], struct.pack("<4b", -128, -1, 0, 127)),
    "u8": ("U8", [3], bytes([0, 128, 255])),
    "bool": ("BOOL", [2, 2], bytes([1, 0, 0, 1])),
    "scalar": ("F32", [], struct.pack("<f", 42.0)),
    "empty": ("F32", [0, 4], b""),
}
METADATA = {"format": "pt", "writer": "python-reference"}
DTYPE_SIZE = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "F16": 2, "BF16": 2, "I16": 2,
              "I8": 1, "U8": 1, "BOOL": 1}


def main():
    order = sorted(TENSORS, key=lambda n: (-DTYPE_SIZE[TENSORS[n][0]], n))
    header = {}
    data = b""
    for name in order:
        dtype, shape, raw = TENSORS[name]
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header["__metadata__"] = METADATA
    text = json.dumps(header).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(sys.argv[1], "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(data)


if __name__ == "__main__":
    main()
