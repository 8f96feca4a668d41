#!/usr/bin/env python3
"""Independent Qwen2/Qwen3 reference for Aspen's acceptance tests.

Written from the published formulas with numpy only (no Aspen code, no torch,
no transformers), so agreement with Aspen's C++ model is evidence that both
compute the same thing:

  write-checkpoint --family qwen2|qwen3 --out DIR --seed S [--tied|--untied]
      Writes an HF model directory (config.json + model.safetensors, BF16) of a
      tiny random model with the full 151,936-token Qwen vocabulary. Weights are
      drawn with large enough variance that next-token distributions are far from
      uniform (a uniform model would hide most bugs).
  logprobs --model DIR < tokens.jsonl > expected.jsonl
      For every stdin line {"tokens": [t0, ..., tn-1]} prints
      {"logprobs": [log p(t1|t0), ..., log p(tn-1|t0..tn-2)]} (n-1 entries),
      computed in float64 from the weights as stored.

Model (per HF modeling_qwen2.py / modeling_qwen3.py):
  x = embed[tokens]
  per layer: h = rms(x) * w_in; q,k,v = h W^T (+ b for Qwen2)
             Qwen3: q, k = rms(q) * q_norm, rms(k) * k_norm  (per head)
             rope (rotate_half, inv_freq = theta^(-2i/D)), causal softmax(q k^T / sqrt(D)) v
             with kv heads repeated (GQA); x += o_proj(attn)
             x += down(silu(gate(h2)) * up(h2)), h2 = rms(x) * w_post
  logits = rms(x) * w_norm @ head^T (head = embed when tie_word_embeddings)

safetensors (https://github.com/huggingface/safetensors): u64 LE header length,
JSON header {name: {dtype, shape, data_offsets}}, then the byte buffer.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

VOCAB = 151936


def tiny_config(family, tied):
    config = {
        "architectures": ["Qwen2ForCausalLM" if family == "qwen2" else "Qwen3ForCausalLM"],
        "model_type": family,
        "vocab_size": VOCAB,
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 4096,
        "rope_theta": 1000000.0 if family == "qwen3" else 10000.0,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "tie_word_embeddings": tied,
        "torch_dtype": "bfloat16",
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "rope_scaling": None,
        "use_sliding_window": False,
    }
    if family == "qwen3":
        config["head_dim"] = 24  # explicit, != hidden_size / heads = 16
        config["attention_bias"] = False
    return config


def head_dim(config):
    return config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])


# ---------------------------------------------------------------- safetensors

def to_bf16_bits(values):
    """float32 -> bfloat16 bit patterns, round to nearest even."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def from_bf16_bits(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def write_safetensors(path, tensors):
    """tensors: list of (name, float32 array); stored as BF16."""
    header, blobs, offset = {}, [], 0
    for name, array in tensors:
        blob = to_bf16_bits(array).tobytes()
        header[name] = {"dtype": "BF16", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for blob in blobs:
            out.write(blob)


def read_safetensors(path):
    dtypes = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "BF16": np.uint16}
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = np.frombuffer(data[begin:end], dtype=dtypes[info["dtype"]])
        if info["dtype"] == "BF16":
            raw = from_bf16_bits(raw)
        tensors[name] = raw.astype(np.float64).reshape(info["shape"])
    return tensors


# ------------------------------------------------------------------ checkpoint

def random_weights(config, seed):
    rng = np.random.default_rng(seed)
    c, inter = config["hidden_size"], config["intermediate_size"]
    h, k, d = config["num_attention_heads"], config["num_key_value_heads"], head_dim(config)
    bias = config["model_type"] == "qwen2" or config.get("attention_bias", False)

    def normal(shape, std):
        return rng.normal(0.0, std, size=shape).astype(np.float32)

    def norm_weight(n):  # around 1 but not 1, so a skipped multiply shows
        return (1.0 + normal((n,), 0.2)).astype(np.float32)

    weights = [("model.embed_tokens.weight", normal((config["vocab_size"], c), 0.5))]
    for i in range(config["num_hidden_layers"]):
        p = "model.layers.%d." % i
        weights.append((p + "input_layernorm.weight", norm_weight(c)))
        weights.append((p + "self_attn.q_proj.weight", normal((h * d, c), 0.15)))
        if bias:
            weights.append((p + "self_attn.q_proj.bias", normal((h * d,), 0.3)))
        weights.append((p + "self_attn.k_proj.weight", normal((k * d, c), 0.15)))
        if bias:
            weights.append((p + "self_attn.k_proj.bias", normal((k * d,), 0.3)))
        weights.append((p + "self_attn.v_proj.weight", normal((k * d, c), 0.15)))
        if bias:
            weights.append((p + "self_attn.v_proj.bias", normal((k * d,), 0.3)))
        weights.append((p + "self_attn.o_proj.weight", normal((c, h * d), 0.15)))
        if config["model_type"] == "qwen3":
            weights.append((p + "self_attn.q_norm.weight", norm_weight(d)))
            weights.append((p + "self_attn.k_norm.weight", norm_weight(d)))
        weights.append((p + "post_attention_layernorm.weight", norm_weight(c)))
        weights.append((p + "mlp.gate_proj.weight", normal((inter, c), 0.15)))
        weights.append((p + "mlp.up_proj.weight", normal((inter, c), 0.15)))
        weights.append((p + "mlp.down_proj.weight", normal((c, inter), 0.15)))
    weights.append(("model.norm.weight", norm_weight(c)))
    if not config["tie_word_embeddings"]:
        weights.append(("lm_head.weight", normal((config["vocab_size"], c), 0.5)))
    return weights


def write_checkpoint(args):
    tied = args.tied if args.tied is not None else args.family == "qwen2"
    config = tiny_config(args.family, tied)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write_safetensors(os.path.join(args.out, "model.safetensors"),
                      random_weights(config, args.seed))


# ------------------------------------------------------------------- forward

def rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def rope(x, theta):
    """x [L, heads, D]; position of row l is l."""
    length, dim = x.shape[0], x.shape[-1]
    inv_freq = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    angles = np.arange(length, dtype=np.float64)[:, None] * inv_freq[None, :]
    cos = np.concatenate([np.cos(angles)] * 2, axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(angles)] * 2, axis=-1)[:, None, :]
    rotated = np.concatenate([-x[..., dim // 2:], x[..., :dim // 2]], axis=-1)
    return x * cos + rotated * sin


def sequence_logprobs(config, w, tokens):
    eps, theta = config["rms_norm_eps"], config["rope_theta"]
    h, kv, d = config["num_attention_heads"], config["num_key_value_heads"], head_dim(config)
    length = len(tokens)
    x = w["model.embed_tokens.weight"][tokens]
    causal = np.triu(np.ones((length, length), dtype=bool), k=1)

    def linear(name, value):
        out = value @ w[name + ".weight"].T
        return out + w[name + ".bias"] if name + ".bias" in w else out

    for i in range(config["num_hidden_layers"]):
        p = "model.layers.%d." % i
        a = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = linear(p + "self_attn.q_proj", a).reshape(length, h, d)
        k = linear(p + "self_attn.k_proj", a).reshape(length, kv, d)
        v = linear(p + "self_attn.v_proj", a).reshape(length, kv, d)
        if config["model_type"] == "qwen3":
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q, theta), rope(k, theta)
        k = np.repeat(k, h // kv, axis=1)  # kv head j serves query heads j*g .. j*g+g-1
        v = np.repeat(v, h // kv, axis=1)
        scores = np.einsum("lhd,mhd->hlm", q, k) / np.sqrt(d)
        scores[:, causal] = -np.inf
        scores -= scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        attn = np.einsum("hlm,mhd->lhd", probs, v).reshape(length, h * d)
        x = x + linear(p + "self_attn.o_proj", attn)
        m = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = linear(p + "mlp.gate_proj", m)
        up = linear(p + "mlp.up_proj", m)
        x = x + linear(p + "mlp.down_proj", gate / (1.0 + np.exp(-gate)) * up)
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if config["tie_word_embeddings"] else w["lm_head.weight"]
    logits = x[:-1] @ head.T  # [L-1, V]: rows that have a next token
    top = logits.max(axis=-1, keepdims=True)
    lse = top[:, 0] + np.log(np.exp(logits - top).sum(axis=-1))
    return [float(logits[t, tokens[t + 1]] - lse[t]) for t in range(length - 1)]


def logprobs(args):
    with open(os.path.join(args.model, "config.json")) as f:
        config = json.load(f)
    weights = read_safetensors(os.path.join(args.model, "model.safetensors"))
    for line_number, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        tokens = json.loads(line)["tokens"]
        if any(not 0 <= t < config["vocab_size"] for t in tokens):
            sys.exit("stdin line %d: token id outside the vocabulary" % line_number)
        result = sequence_logprobs(config, weights, tokens) if len(tokens) > 1 else []
        print(json.dumps({"logprobs": result}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    write = sub.add_parser("write-checkpoint")
    write.add_argument("--family", choices=["qwen2", "qwen3"], required=True)
    write.add_argument("--out", required=True)
    write.add_argument("--seed", type=int, default=0)
    tie = write.add_mutually_exclusive_group()
    tie.add_argument("--tied", dest="tied", action="store_true", default=None,
                     help="tie lm_head to the embedding (default for qwen2)")
    tie.add_argument("--untied", dest="tied", action="store_false",
                     help="separate lm_head.weight (default for qwen3)")
    score = sub.add_parser("logprobs")
    score.add_argument("--model", required=True)
    args = parser.parse_args()
    write_checkpoint(args) if args.command == "write-checkpoint" else logprobs(args)


if __name__ == "__main__":
    main()
