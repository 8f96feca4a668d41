#!/usr/bin/env python3
"""Writes the random Qwen3-shaped checkpoints of #15 that Aspen and both anchors load.

    make_checkpoint.py --shape 0.6b|103m --out DIR [--seed S]

DIR becomes an HF model directory (config.json, model.safetensors in fp32) written by
transformers through tools/python/hf_reference.py's `make` (its random init: peaked
logits, norm weights away from 1), plus the real Qwen3 tokenizer files from
shared/fixtures/qwen3-tokenizer, so that llama.cpp's converter finds a vocabulary.

Shapes (all tied, vocabulary 151,936, rope theta 1e6 as Qwen3's):
    0.6b   Qwen3-0.6B: hidden 1024, 28 layers, 16/8 heads of 128, MLP 3072 (596M)
    103m   #15's small shape: hidden 512, 8 layers, 8/4 heads of 64, MLP 1536 (103M)
"""
import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHAPES = {
    "0.6b": dict(hidden=1024, layers=28, heads=16, kv_heads=8, head_dim=128, intermediate=3072),
    "103m": dict(hidden=512, layers=8, heads=8, kv_heads=4, head_dim=64, intermediate=1536),
}
VOCAB = 151936
EOS = 151645  # <|im_end|>


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    shape = SHAPES[args.shape]
    argv = [sys.executable, os.path.join(ROOT, "tools", "python", "hf_reference.py"), "make",
            "--arch", "qwen3", "--out", args.out, "--tied", "--seed", str(args.seed),
            "--vocab", str(VOCAB), "--max-positions", "40960", "--rope-theta", "1000000",
            "--eos-token-id", str(EOS)]
    for key, value in shape.items():
        argv += ["--" + key.replace("_", "-"), str(value)]
    subprocess.run(argv, check=True)
    tokenizer = os.path.join(os.path.dirname(ROOT), "shared", "fixtures", "qwen3-tokenizer")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokenizer, name), os.path.join(args.out, name))
    print(args.out)


if __name__ == "__main__":
    main()
