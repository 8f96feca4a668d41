#!/usr/bin/env python3
"""The PyTorch eager anchor of #15: one GRPO actor update as a user of plain PyTorch
and transformers writes it, timed on the same checkpoint and batch as
`aspen bench train --model DIR`.

    eager_grpo.py --model DIR --layout packed|padded --dtype fp32|bf16 --threads N
                  --prompt-tokens 64 --response-lengths 120,150,... [--steps 2]

The batch: one row per response length, a prompt of --prompt-tokens random ids and a
response of that length (seeded), advantages +-1, old log-probs equal to the current
policy's (ratio 1), as Aspen's bench builds it. The update: forward, the per-token
log-probs of the response tokens (log-softmax in fp32), the clipped token-mean GRPO
surrogate (epsilon 0.2), backward, gradient clipping at 1.0 and torch.optim.AdamW
(lr 1e-6) on fp32 weights.
    padded  the rows right-padded into one [rows, longest] batch with an attention mask,
            logits for every position (what a TRL-style loop does);
    packed  the rows concatenated into one sequence with per-row positions and a
            block-diagonal causal mask (SDPA), the head applied to response positions
            only (Aspen's packing, in eager PyTorch).
bf16: torch.autocast(bfloat16) around the forward, fp32 master weights and optimizer.
--flush-denormal: torch.set_flush_denormal(True) first, as Aspen's main() does
(src/aspen/util/denormals.h); off by default, as a user of plain PyTorch runs it.
Prints one JSON object: seconds_per_update, tokens_per_second (packed tokens: prompt +
response, as Aspen counts), peak_rss_bytes. One warm-up update, then --steps timed.
"""
import argparse
import json
import os
import resource
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

transformers.utils.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()
CLIP = 0.2


def make_batch(vocab, prompt_tokens, lengths, seed=1):
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for i, n in enumerate(lengths):
        ids = torch.randint(0, vocab, (prompt_tokens + n,), generator=generator)
        rows.append((ids, prompt_tokens, 1.0 if i % 2 == 0 else -1.0))
    return rows


def padded_logprobs(model, rows):
    longest = max(len(ids) for ids, _, _ in rows)
    input_ids = torch.zeros(len(rows), longest, dtype=torch.long)
    mask = torch.zeros(len(rows), longest, dtype=torch.long)
    for i, (ids, _, _) in enumerate(rows):
        input_ids[i, :len(ids)] = ids
        mask[i, :len(ids)] = 1
    logits = model(input_ids=input_ids, attention_mask=mask).logits
    out = []
    for i, (ids, prompt, _) in enumerate(rows):
        # Position t predicts token t + 1: responses start at `prompt`.
        lp = torch.log_softmax(logits[i, prompt - 1:len(ids) - 1].float(), dim=-1)
        out.append(lp.gather(-1, ids[prompt:].unsqueeze(-1)).squeeze(-1))
    return out


def packed_logprobs(model, rows):
    ids = torch.cat([r[0] for r in rows]).unsqueeze(0)
    positions = torch.cat([torch.arange(len(r[0])) for r in rows]).unsqueeze(0)
    total = ids.size(1)
    segment = torch.cat([torch.full((len(r[0]),), i) for i, r in enumerate(rows)])
    causal = torch.ones(total, total, dtype=torch.bool).tril()
    allowed = causal & (segment.unsqueeze(0) == segment.unsqueeze(1))
    # A 4D mask is taken as it is (additive, the compute dtype): no cross-row attention.
    dtype = torch.bfloat16 if torch.is_autocast_enabled("cpu") else torch.float32
    mask = torch.zeros(1, 1, total, total, dtype=dtype)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    hidden = model.model(input_ids=ids, position_ids=positions, attention_mask=mask)
    hidden = hidden.last_hidden_state[0]
    out, start = [], 0
    for row_ids, prompt, _ in rows:
        h = hidden[start + prompt - 1:start + len(row_ids) - 1]
        lp = torch.log_softmax(model.lm_head(h).float(), dim=-1)
        out.append(lp.gather(-1, row_ids[prompt:].unsqueeze(-1)).squeeze(-1))
        start += len(row_ids)
    return out


def update(model, optimizer, rows, layout, dtype):
    logprobs_of = packed_logprobs if layout == "packed" else padded_logprobs
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
        logprobs = logprobs_of(model, rows)
    losses = []
    for lp, (_, _, advantage) in zip(logprobs, rows):
        ratio = torch.exp(lp - lp.detach())  # old log-probs: the current policy's
        losses.append(-torch.min(ratio * advantage,
                                 ratio.clamp(1 - CLIP, 1 + CLIP) * advantage))
    loss = torch.cat(losses).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--layout", choices=["packed", "padded"], required=True)
    parser.add_argument("--dtype", choices=["fp32", "bf16"], required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--response-lengths", required=True,
                        help="comma-separated, one row each (aspen bench train prints them)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--flush-denormal", action="store_true",
                        help="flush denormals to zero (torch.set_flush_denormal) first")
    args = parser.parse_args()
    if args.flush_denormal and not torch.set_flush_denormal(True):
        raise SystemExit("--flush-denormal: not supported on this CPU")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32,
                                                 attn_implementation="sdpa")
    model.train()
    lengths = [int(n) for n in args.response_lengths.split(",")]
    rows = make_batch(model.config.vocab_size, args.prompt_tokens, lengths)
    tokens = sum(len(r[0]) for r in rows)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    update(model, optimizer, rows, args.layout, args.dtype)  # warm-up
    start = time.perf_counter()
    for _ in range(args.steps):
        update(model, optimizer, rows, args.layout, args.dtype)
    seconds = (time.perf_counter() - start) / args.steps
    print(json.dumps({"anchor": "pytorch eager", "layout": args.layout, "dtype": args.dtype,
                      "threads": torch.get_num_threads(), "torch": torch.__version__,
                      "flush_denormal": args.flush_denormal,
                      "packed_tokens": tokens, "seconds_per_update": seconds,
                      "tokens_per_second": tokens / seconds,
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                      * 1024}))


if __name__ == "__main__":
    main()
