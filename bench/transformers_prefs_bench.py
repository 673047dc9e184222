#!/usr/bin/env python3
"""The Hugging Face transformers side of scripts/gpu_bench.sh (issue 30): one training configuration per
process, timed the way zerofit_train_prefs is, written as a result record of bench/prefs_bench_table.py.
A benchmark only: zerofit never imports torch or transformers at run time.

  python3 bench/transformers_prefs_bench.py --task reward|dpo|sft --dtype bf16|amp --out FILE [--tiny]
      [--vocab V] [--seq T] [--checkpointing] [--warmup W] [--steps N] [--device cuda|cpu] [--id ID] [--dry-run]

What one step is (the same work as a zerofit_train_prefs step of the same shape):
  - reward: LlamaForSequenceClassification (num_labels 1, score read at the last token: no padding) over the
    pairs' chosen and rejected sequences in one forward; loss -log sigmoid(r_chosen - r_rejected).
  - dpo: LlamaForCausalLM policy and a frozen reference of the same shape (no_grad, eval); the sequence
    log-probability of each response (the second half of the sequence) under both from full-sequence logits,
    log-softmax in fp32 over the response positions; loss -log sigmoid(beta ((pc - rc) - (pr - rr))), beta 0.1.
  - sft: LlamaForCausalLM over 2 x pairs examples (the same sequences a reward step forwards); labels are the
    ids with -100 over the prompt (the first half), and the loss is the model's own (fp32 cross-entropy, the
    mean over the completion's tokens), as TRL's SFTTrainer computes it with completion_only_loss.
  - backward, global-norm clipping at 1.0 (zerofit clips at 1.0 too), torch.optim.AdamW(fused=True) step,
    zero_grad(set_to_none=True).
  Weights: bf16 (bf16 AdamW state), or amp: fp32 weights under torch.autocast(bfloat16). Attention: SDPA
  (attn_implementation="sdpa"; the record names the kernel the model reports). --checkpointing:
  gradient_checkpointing_enable(use_reentrant=False). Random token ids in [3, vocab), new ones each step.
Timing: torch.cuda.synchronize() around each step, the median over the steps after --warmup; device peak:
torch.cuda.max_memory_allocated() over the measured steps (reset_peak_memory_stats() after the warm-up).
An out-of-memory error is a record with status "oom", not a crash.
"""

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import traceback

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import prefs_bench_table as table  # noqa: E402  (the shapes; standard library only)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=("reward", "dpo", "sft"), required=True)
    p.add_argument("--dtype", choices=("bf16", "amp"), default="bf16")
    p.add_argument("--out", help="result record (JSON); required unless --dry-run")
    p.add_argument("--id", default="")
    p.add_argument("--tiny", action="store_true", help="the CPU rehearsal's shape")
    p.add_argument("--vocab", type=int, help="default: the shape's")
    p.add_argument("--seq", type=int, help="default: the shape's")
    p.add_argument("--checkpointing", action="store_true")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10, help="measured steps after the warm-up")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--beta", type=float, default=0.1)
    p.add_argument("--dry-run", action="store_true", help="print the configuration; import nothing")
    args = p.parse_args(argv)
    shape = dict(table.TINY_SHAPE if args.tiny else table.FULL_SHAPE)
    args.vocab = args.vocab or shape["vocab"]
    args.seq = args.seq or shape["seq"]
    args.shape = shape
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    if args.seq < 4 or args.vocab < 8:
        p.error("--seq must be >= 4 and --vocab >= 8")
    if not args.dry_run and not args.out:
        p.error("--out is required (unless --dry-run)")
    return args


def describe(args):
    s = args.shape
    return ("%s %s: %s, vocab %d, sequence %d, %d pairs, checkpointing %s, %d warm-up + %d measured steps on %s"
            % (args.id or "run", args.task, table.describe_shape(s), args.vocab, args.seq, s["pairs"],
               "on" if args.checkpointing else "off", args.warmup, args.steps, args.device))


def write(args, rec):
    rec.setdefault("id", args.id)
    with open(args.out, "w") as f:
        json.dump(rec, f, sort_keys=True)
        f.write("\n")
    print("transformers_prefs_bench: %s" % json.dumps(rec, sort_keys=True), flush=True)


def build_model(args, torch, transformers, causal):
    s = args.shape
    config = transformers.LlamaConfig(
        vocab_size=args.vocab, hidden_size=s["hidden"], intermediate_size=s["intermediate"],
        num_hidden_layers=s["layers"], num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"],
        head_dim=table.head_dim(s), hidden_act="silu", max_position_embeddings=args.seq, rms_norm_eps=1e-5,
        attention_bias=False, tie_word_embeddings=False, initializer_range=0.02, bos_token_id=1,
        eos_token_id=2, pad_token_id=0, num_labels=1, use_cache=False, attn_implementation="sdpa")
    auto = transformers.AutoModelForCausalLM if causal else transformers.AutoModelForSequenceClassification
    weights = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    # Built on the device (no copy on the host first) under the default dtype, which is what
    # from_pretrained's dtype argument sets too; .to() below makes sure of the dtype whatever the release.
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(weights)
    except (TypeError, RuntimeError):  # a release that takes no bf16 default: built in fp32, cast below
        pass
    try:
        with torch.device(args.device):
            try:
                model = auto.from_config(config, attn_implementation="sdpa")
            except TypeError:  # a release without the keyword: the config names SDPA already
                model = auto.from_config(config)
    finally:
        torch.set_default_dtype(previous)
    model.to(device=args.device, dtype=weights)
    return model


def attention_kernel(model):
    return str(getattr(model.config, "_attn_implementation", "unknown"))


def sequence_logps(model, ids, prompt):
    """Sum over the response positions [prompt, T) of log p(token | prefix), from full-sequence logits (as
    zerofit computes them); log-softmax in fp32 over the response positions only."""
    logits = model(input_ids=ids, use_cache=False).logits  # [B, T, V]
    pred = logits[:, prompt - 1:-1, :]  # position t predicts token t + 1
    logp = pred.float().log_softmax(-1)
    return logp.gather(-1, ids[:, prompt:].unsqueeze(-1)).squeeze(-1).sum(-1)


def run(args, torch, transformers):
    import torch.nn.functional as F

    torch.manual_seed(0)
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device")
    pairs, seq, vocab = args.shape["pairs"], args.seq, args.vocab
    dpo, sft = args.task == "dpo", args.task == "sft"
    policy = build_model(args, torch, transformers, causal=dpo or sft)
    reference = None
    if dpo:
        reference = build_model(args, torch, transformers, causal=True)
        reference.load_state_dict(policy.state_dict())
        reference.eval().requires_grad_(False)
    if args.checkpointing:
        policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if attention_kernel(policy) != "sdpa" and hasattr(policy, "set_attn_implementation"):
        policy.set_attn_implementation("sdpa")  # a release that ignored the config's choice
    policy.train()
    params = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.0, fused=cuda)
    # bf16 weights: no autocast; amp: fp32 weights, matmuls in bf16 (a fresh context each step).
    autocast = ((lambda: torch.autocast(device_type=args.device, dtype=torch.bfloat16)) if args.dtype == "amp"
                else contextlib.nullcontext)
    prompt = seq // 2

    def step():
        ids = torch.randint(3, vocab, (2 * pairs, seq), device=args.device)  # chosen rows, then rejected
        with autocast():
            if sft:
                labels = ids.clone()
                labels[:, :prompt] = -100  # the prompt is context, as completion_only_loss makes it
                loss = policy(input_ids=ids, labels=labels).loss
            elif dpo:
                pol = sequence_logps(policy, ids, prompt)
                with torch.no_grad():
                    ref = sequence_logps(reference, ids, prompt)
                h = (pol[:pairs] - ref[:pairs]) - (pol[pairs:] - ref[pairs:])
                loss = -F.logsigmoid(args.beta * h).mean()
            else:
                rewards = policy(input_ids=ids).logits.squeeze(-1).float()  # [2 pairs]
                loss = -F.logsigmoid(rewards[:pairs] - rewards[pairs:]).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    times = []
    for i in range(args.warmup + args.steps):
        if i == args.warmup and cuda:
            torch.cuda.reset_peak_memory_stats()
        sync()
        start = time.perf_counter()
        loss = step()
        sync()
        elapsed_ms = (time.perf_counter() - start) * 1e3
        if i >= args.warmup:
            times.append(elapsed_ms)
        print("step %d/%d  loss %.4f  %.1f ms" % (i + 1, args.warmup + args.steps, float(loss), elapsed_ms),
              flush=True)
    return {"status": "ok", "detail": "", "step_ms": statistics.median(times), "steps_measured": len(times),
            "pairs_per_step": pairs, "peak_bytes": torch.cuda.max_memory_allocated() if cuda else None,
            "attn": attention_kernel(policy),
            "versions": "torch %s, transformers %s" % (torch.__version__, transformers.__version__)}


def main(argv=None):
    args = parse_args(argv)
    print("transformers_prefs_bench: " + describe(args), flush=True)
    if args.dry_run:
        return 0
    try:
        import torch
        import transformers
    except ImportError as e:
        write(args, {"status": "skipped", "detail": "no torch/transformers (%s)" % e})
        return 0
    try:
        rec = run(args, torch, transformers)
    except Exception as e:  # noqa: BLE001  (a failed run is a row of the table, not a crash of the harness)
        traceback.print_exc()  # into the run's log
        name = type(e).__name__
        text = "%s: %s" % (name, str(e).splitlines()[0] if str(e) else "")
        status = "oom" if "OutOfMemory" in name or table.OOM_PATTERNS.search(str(e)) else "failed"
        write(args, {"status": status, "detail": text[:160]})
        return 1
    write(args, rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
