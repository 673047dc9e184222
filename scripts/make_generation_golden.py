#!/usr/bin/env python3
"""Writes a greedy-generation golden for zerofit's Generate (issue 32).

Builds a tiny Llama-family model with seeded weights from a config.json shape, saves model.safetensors and
config.json into OUT_DIR (so LlamaModelImpl::LoadWeights reads the same weights), runs transformers'
generate(do_sample=False) on fixed prompts, and writes OUT_DIR/golden.json:
  {"prompts": [[ids...], ...], "max_new_tokens": N, "eos_token_id": id or null,
   "completions": [[generated ids...], ...]}
Each prompt runs alone (no padding), in float32 with eager attention. Needs torch, transformers, safetensors.

  python3 scripts/make_generation_golden.py --config tiny_config.json --out /tmp/golden --max-new-tokens 8
"""
import argparse
import json
import os

import torch
import transformers

PROMPTS = [[1, 5, 9, 2], [7, 3], [11, 4, 6, 8, 10, 12], [2]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="config.json of a Llama/Mistral/Qwen2 causal LM (shapes)")
    ap.add_argument("--out", required=True, help="directory for model.safetensors, config.json, golden.json")
    ap.add_argument("--max-new-tokens", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    with open(args.config) as f:
        cfg_dict = json.load(f)
    config = transformers.AutoConfig.for_model(**cfg_dict)
    config.torch_dtype = "float32"
    config._attn_implementation = "eager"
    torch.manual_seed(args.seed)
    model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    with torch.no_grad():  # larger-than-init weights, so greedy paths are not all one token
        for name, p in model.named_parameters():
            p.copy_(1 + 0.2 * torch.randn_like(p) if name.endswith("norm.weight") else 0.3 * torch.randn_like(p))
    model.eval()
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)

    vocab = config.vocab_size
    prompts = [[t % vocab for t in p] for p in PROMPTS]
    completions = []
    for p in prompts:
        ids = torch.tensor([p], dtype=torch.long)
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=args.max_new_tokens, pad_token_id=config.pad_token_id or 0)
        completions.append(out[0, len(p):].tolist())
    golden = {"prompts": prompts, "max_new_tokens": args.max_new_tokens,
              "eos_token_id": config.eos_token_id, "completions": completions}
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    print(f"wrote {args.out}/golden.json: {completions}")


if __name__ == "__main__":
    main()
