#!/usr/bin/env python3
"""HF transformers as the reference for Aspen's Qwen2/Qwen3 models (CPU, fp32).

Subcommands:
  make --arch qwen2|qwen3|qwen3_moe|deepseek_v3 --out DIR [--tied|--untied] [--seed S]
       [sizes...] [--head causal_lm|seqcls --num-labels N --pad-token-id P]
       [--experts E --experts-per-tok K --moe-intermediate I --decoder-sparse-step S
        --mlp-only-layers 0,3 --norm-topk-prob]                      (qwen3_moe)
       [--experts E --experts-per-tok K --moe-intermediate I --q-lora-rank Q (0: none)
        --kv-lora-rank R --qk-nope-head-dim N --qk-rope-head-dim P --v-head-dim V
        --n-group G --topk-group K --routed-scaling-factor F --n-shared-experts S
        --first-k-dense-replace D --no-rope-interleave]              (deepseek_v3)
      Writes a tiny random Qwen2ForCausalLM / Qwen3ForCausalLM / Qwen3MoeForCausalLM /
      DeepseekV3ForCausalLM (whose router bias e_score_correction_bias is random too, so
      the biased choice matters) (or, with --head seqcls,
      Qwen2/Qwen3ForSequenceClassification: a reward model) with save_pretrained
      (config.json + model.safetensors).
  logprobs --model DIR
      stdin {"tokens": [...]} per line -> stdout {"logprobs": [...]}, entry i =
      log p(tokens[i+1] | tokens[..i]): the contract of `aspen logprobs`.
  greedy --model DIR --max-new-tokens N
      stdin {"tokens": [...]} per line -> stdout {"tokens": [...], "logprobs": [...],
      "margins": [...]}: N greedy tokens (EOS never stops them), the log-prob of each
      and the top1 - top2 logit gap at each step, so a caller can stop comparing at
      the first near-tie, where the argmax legitimately depends on rounding.
  score (run op only): {"op": "score", "model": DIR, "tokens": [...]} -> {"scores":
      [num_labels floats]}: a sequence-classification model's logits on one unpadded
      sequence (batch 1), pooled as transformers pools them.
  run
      stdin: one job per line, {"op": "make"|"logprobs"|"greedy"|"score", ...} with the
      options above as keys (e.g. {"op": "make", "arch": "qwen2", "out": DIR,
      "tied": true} or {"op": "logprobs", "model": DIR, "tokens": [...]});
      stdout: one result line per job, in order. Importing transformers costs
      seconds, so tests send all their jobs to one process.

Every model is evaluated in float32 (whatever dtype the checkpoint stores) with
eager attention, from full recomputation of each prefix (no KV cache): the plainest
path transformers has.
"""
import argparse
import json
import os
import sys

# Local directories only: never wait on the network (CI machines may have none).
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import (AutoModelForCausalLM, AutoModelForSequenceClassification,  # noqa: E402
                          Qwen2Config, Qwen2ForCausalLM, Qwen2ForSequenceClassification,
                          Qwen3Config, Qwen3ForCausalLM, Qwen3ForSequenceClassification,
                          Qwen3MoeConfig, Qwen3MoeForCausalLM, DeepseekV3Config,
                          DeepseekV3ForCausalLM)

# Progress bars and advice on stderr would bury a real error in a test's log.
transformers.utils.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

ARCHS = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM),
         "qwen3_moe": (Qwen3MoeConfig, Qwen3MoeForCausalLM),
         "deepseek_v3": (DeepseekV3Config, DeepseekV3ForCausalLM)}
CLASSIFIERS = {"qwen2": Qwen2ForSequenceClassification, "qwen3": Qwen3ForSequenceClassification}

# Stand-ins for HF's init (std 0.02, biases 0, norm weights 1), which gives almost
# uniform next-token distributions and leaves biases and norm weights without
# effect: a model that dropped them, or applied them twice, would still agree.
EMBEDDING_STD = 0.5  # embed_tokens and lm_head: peaked logits
LINEAR_STD = 0.15
BIAS_STD = 0.3
NORM_STD = 0.2  # norm weights are 1 + N(0, NORM_STD)


def make_config(args):
    config_class, _ = ARCHS[args.arch]
    options = dict(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=args.max_positions,
        rope_parameters=dict({"rope_type": "default", "rope_theta": args.rope_theta},
                             **json.loads(args.rope_scaling)),
        rms_norm_eps=args.rms_norm_eps,
        tie_word_embeddings=args.tied,
        bos_token_id=args.bos_token_id,
        eos_token_id=args.eos_token_id,
    )
    if args.head == "seqcls":
        options["num_labels"] = args.num_labels
        options["pad_token_id"] = args.pad_token_id
    if args.arch == "qwen3_moe":
        options["num_experts"] = args.experts
        options["num_experts_per_tok"] = args.experts_per_tok
        options["moe_intermediate_size"] = args.moe_intermediate
        options["decoder_sparse_step"] = args.decoder_sparse_step
        options["mlp_only_layers"] = [int(x) for x in args.mlp_only_layers.split(",") if x]
        options["norm_topk_prob"] = args.norm_topk_prob
    if args.arch == "deepseek_v3":
        options["n_routed_experts"] = args.experts
        options["num_experts_per_tok"] = args.experts_per_tok
        options["moe_intermediate_size"] = args.moe_intermediate
        options["norm_topk_prob"] = args.norm_topk_prob
        options["q_lora_rank"] = args.q_lora_rank or None
        options["kv_lora_rank"] = args.kv_lora_rank
        options["qk_nope_head_dim"] = args.qk_nope_head_dim
        options["qk_rope_head_dim"] = args.qk_rope_head_dim
        options["v_head_dim"] = args.v_head_dim
        options["n_group"] = args.n_group
        options["topk_group"] = args.topk_group
        options["routed_scaling_factor"] = args.routed_scaling_factor
        options["n_shared_experts"] = args.n_shared_experts
        options["first_k_dense_replace"] = args.first_k_dense_replace
        options["rope_interleave"] = args.rope_interleave
        options["attention_bias"] = args.attention_bias
        options["num_key_value_heads"] = args.heads
    if args.arch in ("qwen3", "qwen3_moe"):
        # Qwen3 states head_dim; the default makes it differ from hidden / heads,
        # which catches code that derives it.
        options["head_dim"] = args.head_dim
        options["attention_bias"] = args.attention_bias
    elif args.head_dim is not None and args.head_dim * args.heads != args.hidden:
        raise ValueError("qwen2 derives head_dim = hidden / heads; --head-dim must agree")
    return config_class(**options)


def randomize(model, seed):
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        # named_parameters() lists a tied lm_head once, as the embedding.
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if name.endswith("norm.weight"):
                param.copy_(1.0 + NORM_STD * noise)
            elif name.endswith(".bias"):
                param.copy_(BIAS_STD * noise)
            elif "embed_tokens" in name or name.startswith("lm_head") or name.startswith("score"):
                param.copy_(EMBEDDING_STD * noise)
            else:
                param.copy_(LINEAR_STD * noise)
        # DeepSeek-V3's router bias is a buffer: random, so that it changes choices.
        for name, buffer in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                buffer.copy_(BIAS_STD * torch.randn(buffer.shape, generator=generator))


def make(args):
    config = make_config(args)
    model_class = CLASSIFIERS[args.arch] if args.head == "seqcls" else ARCHS[args.arch][1]
    torch.manual_seed(args.seed)  # HF's own init runs first; randomize() replaces it all
    model = model_class(config)
    randomize(model, args.seed)
    if args.arch == "qwen2":
        # Qwen2's q/k/v always carry biases: the parity tests rely on them being live.
        for proj in ("q_proj", "k_proj", "v_proj"):
            bias = getattr(model.model.layers[0].self_attn, proj).bias
            if bias is None or not bias.abs().max() > 0:
                raise RuntimeError("qwen2 %s has no random bias; transformers changed?" % proj)
    model.to({"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype])
    model.save_pretrained(args.out)
    return {"made": args.out}


class Models:
    """Loaded models by directory, so a `run` session reads each checkpoint once."""

    def __init__(self):
        self._models = {}

    def get(self, directory, auto_class=AutoModelForCausalLM):
        if directory not in self._models:
            model = auto_class.from_pretrained(
                directory, dtype=torch.float32, attn_implementation="eager")
            self._models[directory] = model.eval()
        return self._models[directory]

    def forget(self, directory):
        self._models.pop(directory, None)


def check_tokens(model, tokens):
    vocab = model.config.vocab_size
    if not isinstance(tokens, list) or any(
            not isinstance(t, int) or not 0 <= t < vocab for t in tokens):
        raise ValueError("tokens must be a list of ids in [0, %d)" % vocab)


@torch.inference_mode()
def logits_of(model, tokens):
    """[len(tokens), V] fp32: the next-token logits after every prefix."""
    return model(torch.tensor([tokens])).logits[0].float()


@torch.inference_mode()
def logprobs(model, tokens):
    check_tokens(model, tokens)
    if len(tokens) < 2:
        return {"logprobs": []}
    log_probs = torch.log_softmax(logits_of(model, tokens)[:-1], dim=-1)
    targets = torch.tensor(tokens[1:]).unsqueeze(-1)
    return {"logprobs": log_probs.gather(-1, targets).squeeze(-1).tolist()}


@torch.inference_mode()
def greedy(model, tokens, max_new_tokens):
    check_tokens(model, tokens)
    if not tokens:
        raise ValueError("greedy needs a non-empty prompt")
    sequence, generated, token_logprobs, margins = list(tokens), [], [], []
    for _ in range(max_new_tokens):
        logits = logits_of(model, sequence)[-1]
        top = torch.topk(logits, 2)
        token = int(top.indices[0])
        generated.append(token)
        token_logprobs.append(float(torch.log_softmax(logits, dim=-1)[token]))
        margins.append(float(top.values[0] - top.values[1]))
        sequence.append(token)
    return {"tokens": generated, "logprobs": token_logprobs, "margins": margins}


@torch.inference_mode()
def score(model, tokens):
    check_tokens(model, tokens)
    if not tokens:
        raise ValueError("score needs a non-empty sequence")
    return {"scores": model(torch.tensor([tokens])).logits[0].float().tolist()}


def add_make_options(parser):
    parser.add_argument("--arch", choices=sorted(ARCHS), required=True)
    parser.add_argument("--out", required=True)
    tie = parser.add_mutually_exclusive_group()
    tie.add_argument("--tied", dest="tied", action="store_true", default=False,
                     help="lm_head is the embedding (tie_word_embeddings)")
    tie.add_argument("--untied", dest="tied", action="store_false")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocab", type=int, default=300)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--intermediate", type=int, default=96)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--head-dim", type=int, default=None,
                        help="qwen3 only (default 24, != hidden / heads)")
    parser.add_argument("--max-positions", type=int, default=4096)
    parser.add_argument("--rope-theta", type=float, default=None,
                        help="default 10000 for qwen2, 1000000 for qwen3")
    parser.add_argument("--rope-scaling", default="{}",
                        help='JSON merged into rope_parameters, e.g. {"rope_type": "yarn", '
                             '"factor": 4, "original_max_position_embeddings": 64}')
    parser.add_argument("--rms-norm-eps", type=float, default=1e-6)
    parser.add_argument("--bos-token-id", type=int, default=None)
    parser.add_argument("--eos-token-id", type=int, default=None)
    parser.add_argument("--attention-bias", action="store_true", default=False,
                        help="qwen3: q/k/v AND o_proj biases (qwen2 always has q/k/v ones)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                        help="dtype the weights are stored in")
    parser.add_argument("--head", choices=["causal_lm", "seqcls"], default="causal_lm",
                        help="seqcls: a sequence-classification (reward) model")
    parser.add_argument("--num-labels", type=int, default=1)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--experts-per-tok", type=int, default=2)
    parser.add_argument("--moe-intermediate", type=int, default=32)
    parser.add_argument("--decoder-sparse-step", type=int, default=1)
    parser.add_argument("--mlp-only-layers", default="",
                        help="comma-separated dense layer indices")
    parser.add_argument("--norm-topk-prob", action="store_true", default=False)
    parser.add_argument("--pad-token-id", type=int, default=None)
    parser.add_argument("--q-lora-rank", type=int, default=24, help="deepseek_v3; 0: none")
    parser.add_argument("--kv-lora-rank", type=int, default=32)
    parser.add_argument("--qk-nope-head-dim", type=int, default=16)
    parser.add_argument("--qk-rope-head-dim", type=int, default=8)
    parser.add_argument("--v-head-dim", type=int, default=12)
    parser.add_argument("--n-group", type=int, default=4)
    parser.add_argument("--topk-group", type=int, default=2)
    parser.add_argument("--routed-scaling-factor", type=float, default=2.5)
    parser.add_argument("--n-shared-experts", type=int, default=1)
    parser.add_argument("--first-k-dense-replace", type=int, default=1)
    parser.add_argument("--no-rope-interleave", dest="rope_interleave", action="store_false",
                        default=True)


def finish_make_args(args):
    if args.rope_theta is None:
        args.rope_theta = 10000.0 if args.arch == "qwen2" else 1000000.0
    if args.arch in ("qwen3", "qwen3_moe") and args.head_dim is None:
        args.head_dim = 24
    return args


def parser():
    root = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = root.add_subparsers(dest="command", required=True)
    add_make_options(sub.add_parser("make", help="write a tiny random model"))
    sub.add_parser("logprobs", help="per-token log-probs").add_argument("--model", required=True)
    greedy_parser = sub.add_parser("greedy", help="greedy continuation with margins")
    greedy_parser.add_argument("--model", required=True)
    greedy_parser.add_argument("--max-new-tokens", type=int, required=True)
    sub.add_parser("run", help="a stream of jobs, one result line each")
    return root


def make_args_from_job(job):
    """A `run` make job's keys, spelled as the options (dashes as underscores)."""
    argv = ["--arch", str(job["arch"]), "--out", str(job["out"])]
    for key, value in job.items():
        if key in ("op", "arch", "out"):
            continue
        if key == "tied":
            argv.append("--tied" if value else "--untied")
        elif isinstance(value, bool):  # a store_true flag
            if value:
                argv.append("--" + key.replace("_", "-"))
        else:
            argv += ["--" + key.replace("_", "-"), str(value)]
    make_parser = argparse.ArgumentParser(prog="hf_reference.py run: make")
    add_make_options(make_parser)
    return finish_make_args(make_parser.parse_args(argv))


def run_job(models, job):
    op = job.get("op")
    if op == "make":
        args = make_args_from_job(job)
        models.forget(args.out)
        return make(args)
    if op == "logprobs":
        return logprobs(models.get(job["model"]), job["tokens"])
    if op == "greedy":
        return greedy(models.get(job["model"]), job["tokens"], int(job["max_new_tokens"]))
    if op == "score":
        return score(models.get(job["model"], AutoModelForSequenceClassification), job["tokens"])
    raise ValueError("unknown op %r; expected make, logprobs, greedy or score" % op)


def serve(handle):
    """Answers each stdin JSON line with handle(request), one output line each, flushed
    at once so the process works as a pipe filter."""
    for number, text in enumerate(sys.stdin, 1):
        if not text.strip():
            continue
        try:
            result = handle(json.loads(text))
        except (ValueError, KeyError, TypeError) as error:  # JSONDecodeError is a ValueError
            sys.exit("hf_reference.py: stdin line %d: %s" % (number, error))
        print(json.dumps(result), flush=True)


def main():
    args = parser().parse_args()
    if args.command == "make":
        try:
            make(finish_make_args(args))
        except ValueError as error:
            sys.exit("hf_reference.py make: %s" % error)
    elif args.command == "run":
        models = Models()
        serve(lambda job: run_job(models, job))
    elif args.command == "logprobs":
        model = Models().get(args.model)
        serve(lambda request: logprobs(model, request["tokens"]))
    else:
        model = Models().get(args.model)
        serve(lambda request: greedy(model, request["tokens"], args.max_new_tokens))


if __name__ == "__main__":
    main()
