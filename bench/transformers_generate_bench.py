#!/usr/bin/env python3
"""The transformers side of zerofit's generation benchmark (issue 32): greedy `generate` with the static KV
cache on a model of a config.json's shape with seeded random weights, the same batch of random prompts every
run, `--new-tokens` tokens per sequence (min_new_tokens too, so no sequence stops early), the median over
`--reps` timed runs after `--warmup`. Writes one JSON record in the schema of zerofit_generation_bench.
A benchmark only: zerofit never imports torch or transformers at run time.

  python3 bench/transformers_generate_bench.py --config config.json [--batch B] [--prompt-len P]
      [--new-tokens N] [--reps R] [--warmup W] [--device cuda|cpu] [--dtype fp32|bf16] [--cache static|dynamic]
      [--out FILE]

Timing: torch.cuda.synchronize() before and after each run on a GPU. Attention: SDPA. This script calls no
torch.compile, but transformers' generate compiles the decode step itself when the cache is static (its
automatic compile on a GPU: the H200 run of 2026-11-27 logged torch._inductor at work), inside the warm-up
runs: the static row is transformers' compiled decode, --cache dynamic its eager one.
"""

import argparse
import json
import statistics
import sys
import time

sys.dont_write_bytecode = True


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="bf16")
    p.add_argument("--cache", choices=("static", "dynamic"), default="static")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    import torch
    import transformers

    with open(args.config) as f:
        cfg = json.load(f)
    config = transformers.AutoConfig.for_model(**cfg)
    config._attn_implementation = "sdpa"
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    torch.manual_seed(args.seed)
    model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=dtype).to(args.device).eval()
    g = torch.Generator().manual_seed(args.seed + 1)
    ids = torch.randint(3, config.vocab_size, (args.batch, args.prompt_len), generator=g).to(args.device)
    mask = torch.ones_like(ids)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    kwargs = dict(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=False,
                  pad_token_id=0, eos_token_id=None)
    if args.cache == "static":
        kwargs["cache_implementation"] = "static"
    times = []
    with torch.no_grad():
        for r in range(args.warmup + args.reps):
            sync()
            t0 = time.perf_counter()
            out = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
            sync()
            if r >= args.warmup:
                times.append((time.perf_counter() - t0) * 1e3)
    generated = (out.shape[1] - args.prompt_len) * args.batch
    median = statistics.median(times)
    record = {"impl": "transformers-" + args.cache, "device": args.device, "dtype": args.dtype,
              "batch": args.batch, "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
              "reps": args.reps, "median_ms": median, "tokens_per_s": generated / (median / 1e3),
              "transformers": transformers.__version__, "torch": torch.__version__}
    line = json.dumps(record)
    print(line)
    if args.out:
        with open(args.out, "w") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
