#!/usr/bin/env python3
"""PEFT (peft from PyPI, tools/python/requirements-oracles.txt) as the reference for
Aspen's LoRA adapter format (src/aspen/io/peft_adapter.h).

  run
      stdin: one job per line; stdout: one result line per job, in order. Besides
      hf_reference.py's ops (make, logprobs, greedy, score: see its docstring), so that
      one process makes the base model and then uses it:

      {"op": "peft_load", "base": DIR, "adapter": DIR, "tensors_out": FILE}
          peft.PeftModel.from_pretrained(base, adapter), the user's call. Result:
          {"missing": [...], "unexpected": [...], "warnings": [...], "modules": {...}}:
          the adapter keys PEFT's own load reported missing or unexpected (from a second
          load_adapter of the same directory, which returns them; from_pretrained only
          warns), the warnings from_pretrained raised, and per adapted module (the base
          model's module name) what PEFT built: {"r", "scaling", "dropout", "in", "out"}.
          FILE (safetensors) gets the adapter's weights as loaded into the live modules,
          named "<module>.lora_A.weight" / "<module>.lora_B.weight".
      {"op": "peft_save", "base": DIR, "out": DIR, "r": R, "alpha": A, "dropout": P,
       "targets": ["q_proj", ...] | "target_regex": "REGEX", "rslora": bool,
       "dora": bool, "dtype": "float32"|"bfloat16", "seed": S, "tensors_out": FILE}
          get_peft_model(base, LoraConfig(...)), A and B set to random N(0, 0.3^2) (B is
          zero after PEFT's init, which would hide a swapped A/B), then save_pretrained(out).
          Result {"modules": {...}} as above; FILE gets the live weights as above.
          With "prompts": [[ids...], ...] also "logprobs": per prompt, hf_reference's
          logprobs of the live PeftModel that wrote the adapter (in "dtype").
      {"op": "peft_logprobs", "base": DIR, "adapter": DIR, "prompts": [[ids...], ...]}
          peft.PeftModel.from_pretrained(base, adapter) in eval mode; result
          {"logprobs": [[...], ...]}: per prompt, each token's log-prob given its prefix
          (hf_reference's logprobs op on the PeftModel).

The base is loaded afresh for each job (PEFT wraps the model in place) in float32.
"""
import json
import os
import sys
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local directories only

import torch  # noqa: E402
from peft import LoraConfig, PeftModel, get_peft_model  # noqa: E402
from peft.tuners.lora import LoraLayer  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

import hf_reference  # noqa: E402  (beside this file)

ADAPTER = "default"  # PEFT's adapter name, which its saved keys leave out
WEIGHT_STD = 0.3


def load_base(directory):
    return AutoModelForCausalLM.from_pretrained(
        directory, dtype=torch.float32, attn_implementation="eager").eval()


def lora_layers(model, adapter):
    """(module name in the base model, LoraLayer) for each module carrying `adapter`."""
    for name, module in model.base_model.model.named_modules():
        if isinstance(module, LoraLayer) and adapter in module.lora_A:
            yield name, module


def describe(model, adapter):
    modules = {}
    for name, layer in lora_layers(model, adapter):
        dropout = layer.lora_dropout[adapter]
        modules[name] = {
            "r": layer.r[adapter],
            "scaling": layer.scaling[adapter],
            "dropout": dropout.p if isinstance(dropout, torch.nn.Dropout) else 0.0,
            "in": layer.in_features,
            "out": layer.out_features,
        }
    return modules


def live_tensors(model, adapter):
    tensors = {}
    for name, layer in lora_layers(model, adapter):
        tensors[name + ".lora_A.weight"] = layer.lora_A[adapter].weight.detach().clone()
        tensors[name + ".lora_B.weight"] = layer.lora_B[adapter].weight.detach().clone()
    return tensors


def peft_load(job):
    base = load_base(job["base"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = PeftModel.from_pretrained(base, job["adapter"])
    again = model.load_adapter(job["adapter"], adapter_name="again")
    save_file(live_tensors(model, ADAPTER), job["tensors_out"])
    return {"missing": list(again.missing_keys), "unexpected": list(again.unexpected_keys),
            "warnings": [str(w.message) for w in caught], "modules": describe(model, ADAPTER)}


def prompt_logprobs(model, prompts):
    model.eval()  # no adapter dropout: the model as it is evaluated
    return [hf_reference.logprobs(model, tokens)["logprobs"] for tokens in prompts]


def peft_logprobs(job):
    model = PeftModel.from_pretrained(load_base(job["base"]), job["adapter"])
    return {"logprobs": prompt_logprobs(model, job["prompts"])}


def peft_save(job):
    base = load_base(job["base"])
    targets = job["target_regex"] if "target_regex" in job else list(job["targets"])
    config = LoraConfig(r=int(job["r"]), lora_alpha=job["alpha"],
                        lora_dropout=float(job.get("dropout", 0.0)), target_modules=targets,
                        use_rslora=bool(job.get("rslora", False)),
                        use_dora=bool(job.get("dora", False)), task_type="CAUSAL_LM")
    model = get_peft_model(base, config)
    generator = torch.Generator().manual_seed(int(job.get("seed", 0)))
    with torch.no_grad():
        for _, layer in lora_layers(model, ADAPTER):
            for weight in (layer.lora_A[ADAPTER].weight, layer.lora_B[ADAPTER].weight):
                weight.copy_(WEIGHT_STD * torch.randn(weight.shape, generator=generator))
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[job.get("dtype", "float32")]
    model.to(dtype)
    model.save_pretrained(job["out"])
    save_file(live_tensors(model, ADAPTER), job["tensors_out"])
    result = {"modules": describe(model, ADAPTER)}
    if "prompts" in job:
        result["logprobs"] = prompt_logprobs(model, job["prompts"])
    return result


def run_job(models, job):
    op = job.get("op")
    if op == "peft_load":
        return peft_load(job)
    if op == "peft_save":
        return peft_save(job)
    if op == "peft_logprobs":
        return peft_logprobs(job)
    return hf_reference.run_job(models, job)


def main():
    if sys.argv[1:] != ["run"]:
        sys.exit("usage: peft_oracle.py run  (jobs on stdin; see the docstring)")
    models = hf_reference.Models()
    hf_reference.serve(lambda job: run_job(models, job))


if __name__ == "__main__":
    main()
