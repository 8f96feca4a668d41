#!/usr/bin/env python3
"""The llama.cpp anchor of #15: prefill and single-sequence greedy decode on a GGUF of
the same checkpoint `aspen bench rollout --model DIR` loads.

    llama_bench.py --gguf FILE --threads N --prompt-len 512 --gen-len 32 [--seed S]

The prompt is --prompt-len random token ids (seeded; the text does not matter to the
speed); prefill is one llama_decode of it (n_batch = the prompt), decode then feeds
back the argmax token --gen-len times, one llama_decode each, as Aspen's engine does
for one sequence. Prints one JSON object: prefill_tps, decode_tps, the threads and the
GGUF's file type. Runs with llama-cpp-python built by tools/anchors/setup.
"""
import argparse
import json
import random
import time

import llama_cpp
import numpy as np


def next_token(llm):
    """Greedy: the argmax of the last evaluated token's logits (llama_get_logits; the
    bindings keep no copy unless every position's logits are asked for)."""
    logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
    return int(np.argmax(logits))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--prompt-len", type=int, default=512)
    parser.add_argument("--gen-len", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    llm = llama_cpp.Llama(model_path=args.gguf, n_ctx=args.prompt_len + args.gen_len + 8,
                          n_batch=args.prompt_len, n_ubatch=args.prompt_len,
                          n_threads=args.threads, n_threads_batch=args.threads,
                          verbose=False)
    rng = random.Random(args.seed)
    vocab = llm.n_vocab()
    prompt = [rng.randrange(0, min(vocab, 151643)) for _ in range(args.prompt_len)]
    # Warm-up: the first decode pays for buffer allocation.
    llm.eval(prompt[:8])
    llm.reset()
    start = time.perf_counter()
    llm.eval(prompt)
    prefill = time.perf_counter() - start
    token = next_token(llm)
    start = time.perf_counter()
    for _ in range(args.gen_len):
        llm.eval([token])
        token = next_token(llm)
    decode = time.perf_counter() - start
    print(json.dumps({"anchor": "llama.cpp", "llama_cpp_python": llama_cpp.__version__,
                      "gguf": args.gguf, "threads": args.threads,
                      "prompt_len": args.prompt_len, "gen_len": args.gen_len,
                      "prefill_tps": args.prompt_len / prefill,
                      "decode_tps": args.gen_len / decode}))


if __name__ == "__main__":
    main()
