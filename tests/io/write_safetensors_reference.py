#!/usr/bin/env python3
"""Writes a safetensors file with the `safetensors` package, the format's reference
implementation, for Aspen's reader to be checked against.

Usage: write_safetensors_reference.py OUT_PATH   (run under tests/support/oracles.h's
python(), the virtualenv with the pinned safetensors and torch)

The tensors and values here are mirrored in safetensors_reference_test.cpp; change
both together. Every dtype Aspen reads is present, plus a 0-d tensor, an empty one
and an int64 beyond 2^53 (no float round trip may touch the bytes). torch tensors,
not numpy, because numpy has no bfloat16.
"""
import sys

import torch
from safetensors.torch import save_file

TENSORS = {
    "f32": torch.tensor([0.5, -1.0, 2.0, 3.25, -4.5, 1e-3], dtype=torch.float32).reshape(2, 3),
    "f16": torch.tensor([1.0, -0.5, 65504.0], dtype=torch.float16),
    "bf16": torch.tensor([1.0, -2.5, 0.15625, 256.0], dtype=torch.bfloat16).reshape(2, 2),
    "f64": torch.tensor([3.141592653589793, -1e300], dtype=torch.float64),
    "i64": torch.tensor([-9007199254740993, 0, 2**62], dtype=torch.int64),
    "i32": torch.tensor([-2147483648, 123456], dtype=torch.int32),
    "i16": torch.tensor([-32768, 32767], dtype=torch.int16),
    "i8": torch.tensor([-128, -1, 0, 127], dtype=torch.int8),
    "u8": torch.tensor([0, 128, 255], dtype=torch.uint8),
    "bool": torch.tensor([True, False, False, True]).reshape(2, 2),
    "scalar": torch.tensor(42.0, dtype=torch.float32),
    "empty": torch.zeros(0, 4, dtype=torch.float32),
}
METADATA = {"format": "pt", "writer": "python-reference"}


def main():
    save_file(TENSORS, sys.argv[1], metadata=METADATA)


if __name__ == "__main__":
    main()
