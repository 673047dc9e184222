#!/usr/bin/env python3
"""The plan, the results and the table of scripts/gpu_bench.sh (issue 30): zerofit_train_prefs against Hugging
Face transformers on the same Llama shapes. Standard library only, so that it runs (and is tested by
tests/tools/prefs_bench_table_test.py) on machines without torch; the transformers side is
bench/transformers_prefs_bench.py, which writes the same result records.

Subcommands (each prints to stdout; the driver calls them, a person may too):
  plan   [--tiny] [--only IDS]                 the runs, one per line: id impl task dtype vocab seq ckpt offload
                                               dpu (the delayed update's first step, -1: off) fused (1, or 0:
                                               --fused-kernels off) optim (adamw_torch, or adamw_8bit: 8-bit
                                               AdamW moments)
  record --id ID --rc RC --log LOG --out FILE [--jsonl FILE] [--warmup W] [--pairs P] [--deadline S]
         [--skip REASON]                       one run's result record (JSON): a zerofit metrics JSONL summed
                                               up, or why the run has none (OOM, deadline, exit status, skip)
  data   --dir DIR --vocab V --seq T [--tiny] [--train-pairs N]
                                               a zerofit --data directory of the shape with random token ids
  table  --results DIR [--tiny] [--only IDS] [--peak-tflops F] [--device TEXT] [--steps N] [--warmup W]
         [--offload-threads N]
                                               the markdown table of every planned run's record

A result record: {"id", "status": "ok" | "oom" | "timeout" | "failed" | "skipped", "detail", "step_ms"
(median over the measured steps), "steps_measured", "pairs_per_step", "peak_bytes" (device, allocated; null
when the device has no such figure), "attn" (the attention kernel, transformers only)}.
"""

import argparse
import json
import os
import re
import statistics
import sys

# The shapes of issue 30. "vocab"/"seq" are the reward and DPO rows'; "large_vocab" the 128k-vocabulary DPO
# row's, "long_seq" the activation-checkpointing row's. --tiny scales everything down for a CPU rehearsal
# (hidden 64, 2 layers, sequence 64): it proves the harness, nothing about speed.
FULL_SHAPE = {"hidden": 2048, "layers": 16, "heads": 32, "kv_heads": 16, "intermediate": 5504,
              "vocab": 4096, "large_vocab": 128256, "seq": 1024, "long_seq": 4096, "pairs": 8}
TINY_SHAPE = {"hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "intermediate": 176,
              "vocab": 4096, "large_vocab": 16384, "seq": 64, "long_seq": 128, "pairs": 8}


class Run:
    """One row of the table: one process. `peer` names the transformers run a zerofit row is compared with;
    `base` the zerofit run an offload row's step is compared with (issue 30: offload at most 1.3x on-device).
    `dpu`: the optimizer step from which the delayed parameter update runs (offload rows; None: off).
    `fused`: zerofit's fused RMSNorm, SwiGLU and rotary kernels (False: --fused-kernels off, the lean pieces).
    `optim`: zerofit's --optim (adamw_8bit: 8-bit AdamW moments, bitsandbytes' AdamW8bit)."""

    def __init__(self, id, impl, task, dtype, label, vocab="vocab", seq="seq", ckpt=False, offload=False,
                 peer=None, dpu=None, base=None, fused=True, optim="adamw_torch"):
        self.id, self.impl, self.task, self.dtype, self.label = id, impl, task, dtype, label
        self.vocab_key, self.seq_key, self.ckpt, self.offload, self.peer = vocab, seq, ckpt, offload, peer
        self.dpu, self.base, self.fused, self.optim = dpu, base, fused, optim

    def vocab(self, shape):
        return shape[self.vocab_key]

    def seq(self, shape):
        return shape[self.seq_key]


# dtype: bf16 = bf16 weights (zerofit: bf16 compute with fp32 master weights in the optimizer; transformers:
# bf16 weights and bf16 AdamW state), amp = fp32 weights under bf16 autocast (transformers only). In the order
# they run: the most wanted first, so that a deadline around the whole benchmark cuts the least wanted.
RUNS = [
    Run("hf-reward-bf16", "hf", "reward", "bf16", "transformers LlamaForSequenceClassification, bf16 weights"),
    Run("zf-reward-bf16", "zf", "reward", "bf16", "zerofit reward, bf16, ZeRO-2 W=1", peer="hf-reward-bf16"),
    # What the fused RMSNorm, SwiGLU and rotary kernels bring: the same run on the lean pieces' LibTorch operations.
    Run("zf-reward-bf16-unfused", "zf", "reward", "bf16",
        "zerofit reward, bf16, without the fused RMSNorm/SwiGLU/rotary kernels", fused=False, peer="hf-reward-bf16",
        base="zf-reward-bf16"),
    Run("zf-reward-bf16-offload", "zf", "reward", "bf16", "zerofit reward, bf16, optimizer offload",
        offload=True, peer="hf-reward-bf16", base="zf-reward-bf16"),
    Run("zf-reward-bf16-offload-dpu", "zf", "reward", "bf16",
        "zerofit reward, bf16, optimizer offload, delayed parameter update from step 1", offload=True, dpu=1,
        peer="hf-reward-bf16", base="zf-reward-bf16"),
    # 8-bit AdamW moments: the device peak they save and what the 8-bit step costs against fp32 moments.
    Run("zf-reward-bf16-8bit", "zf", "reward", "bf16", "zerofit reward, bf16, 8-bit AdamW moments (adamw_8bit)",
        peer="hf-reward-bf16", base="zf-reward-bf16", optim="adamw_8bit"),
    # 8-bit moments in host memory with offload: what the 8-bit CPU step (AVX-512 where the host has it) costs
    # against fp32 offload's.
    Run("zf-reward-bf16-8bit-offload", "zf", "reward", "bf16",
        "zerofit reward, bf16, optimizer offload, 8-bit AdamW moments in host memory", offload=True,
        peer="hf-reward-bf16", base="zf-reward-bf16-offload", optim="adamw_8bit"),
    Run("hf-dpo-bf16", "hf", "dpo", "bf16", "transformers DPO (LlamaForCausalLM policy + reference), bf16"),
    Run("zf-dpo-bf16", "zf", "dpo", "bf16", "zerofit DPO, bf16", peer="hf-dpo-bf16"),
    # SFT (the usual first stage): 2 x pairs examples a step, so that a step holds the same 16 sequences as the
    # reward and DPO rows and pairs/s compares with theirs; the loss is the mean over the completion's tokens
    # (the second half of each sequence), transformers' own labels-with--100 loss as TRL's SFTTrainer uses it.
    Run("hf-sft-bf16", "hf", "sft", "bf16",
        "transformers SFT (LlamaForCausalLM, labels -100 on the prompt), bf16; pairs/s: 2 examples a pair"),
    Run("zf-sft-bf16", "zf", "sft", "bf16", "zerofit SFT, bf16; pairs/s: 2 examples a pair", peer="hf-sft-bf16"),
    Run("hf-dpo-v128k-bf16", "hf", "dpo", "bf16", "transformers DPO, large vocabulary", vocab="large_vocab"),
    Run("zf-dpo-v128k-bf16", "zf", "dpo", "bf16", "zerofit DPO, large vocabulary", vocab="large_vocab",
        peer="hf-dpo-v128k-bf16"),
    # Issue 30's peak goal at 128k (at most half transformers'): the policy's fp32 master weights and AdamW
    # state (12 B a parameter) go to the host, the device keeps bf16 weights, gradients and the reference.
    Run("zf-dpo-v128k-bf16-offload", "zf", "dpo", "bf16", "zerofit DPO, large vocabulary, optimizer offload",
        vocab="large_vocab", offload=True, peer="hf-dpo-v128k-bf16", base="zf-dpo-v128k-bf16"),
    Run("hf-reward-long-ckpt", "hf", "reward", "bf16", "transformers reward, long sequence, gradient checkpointing",
        seq="long_seq", ckpt=True),
    Run("zf-reward-long-ckpt", "zf", "reward", "bf16", "zerofit reward, long sequence, --checkpointing",
        seq="long_seq", ckpt=True, peer="hf-reward-long-ckpt"),
    Run("hf-reward-amp", "hf", "reward", "amp", "transformers LlamaForSequenceClassification, fp32 + bf16 autocast"),
]


def select_runs(only):
    """The runs named in `only` (comma-separated ids; a trailing '*' matches a prefix), all if empty, in
    table order. Raises ValueError naming an id that matches nothing."""
    if not only:
        return list(RUNS)
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    for w in wanted:
        if not any(_matches(w, r.id) for r in RUNS):
            raise ValueError("--only: no run '%s' (runs: %s)" % (w, ", ".join(r.id for r in RUNS)))
    return [r for r in RUNS if any(_matches(w, r.id) for w in wanted)]


def _matches(pattern, id):
    return id.startswith(pattern[:-1]) if pattern.endswith("*") else id == pattern


def head_dim(shape):
    return shape["hidden"] // shape["heads"]


def non_embedding_params(shape, task, vocab):
    """Parameters other than the input embedding table: the layers, the final norm and the head (the reward
    model's 1-output score, the DPO and SFT policy's vocab x hidden lm_head: a matmul per token, so it
    counts)."""
    h, kv = shape["hidden"], shape["kv_heads"] * head_dim(shape)
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * shape["intermediate"] + 2 * h
    head = h if task == "reward" else vocab * h
    return shape["layers"] * per_layer + h + head


def flops_per_token(shape, task, vocab, seq):
    """Model FLOPs per token of one training step (PaLM's appendix B): 6 N + 12 L H T for the trained model
    (no recomputation counted: checkpointing does not raise it); DPO adds the frozen reference's forward,
    2 N + 4 L H T."""
    n = non_embedding_params(shape, task, vocab)
    attention = shape["layers"] * shape["hidden"] * seq
    flops = 6 * n + 12 * attention
    if task == "dpo":
        flops += 2 * n + 4 * attention
    return flops


def tokens_per_step(shape, seq):
    # chosen and rejected sequence of each pair, all positions (SFT: two examples a pair)
    return 2 * shape["pairs"] * seq


# --- result records ---------------------------------------------------------------------------------------
OOM_PATTERNS = re.compile(r"out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|std::bad_alloc|RESOURCE_EXHAUSTED",
                          re.I)


def classify_failure(rc, log_text, deadline=None):
    """(status, detail) for a run that left no result: the deadline, an out-of-memory error, or the exit
    status with the log's last non-empty line."""
    if rc in (124, 137):
        return "timeout", "deadline%s passed" % (" of %s s" % deadline if deadline else "")
    if OOM_PATTERNS.search(log_text or ""):
        line = next((l for l in reversed(log_text.splitlines()) if OOM_PATTERNS.search(l)), "")
        return "oom", line.strip()[:160]
    last = next((l.strip() for l in reversed((log_text or "").splitlines()) if l.strip()), "no output")
    return "failed", "exit %s: %s" % (rc, last[:160])


# zerofit's step stages (its metrics' time/<stage>_ms), in the order of a step.
STAGES = ("forward", "backward", "reduce_scatter", "d2h", "host_accumulate", "cpu_adamw", "h2d", "all_gather",
          "wait")

# zerofit's device clock (its metrics' device_time/<part>_ms): the compute stream's step and its parts.
DEVICE_PARTS = ("step", "forward", "backward", "update", "gap")


def device_medians(steps, warmup):
    """The median of each device_time/<part>_ms over the records whose timed update is a measured step (a
    record describes the step `updates_ago` before its own); {} when none has them."""
    timed = [r for r in steps if "device_time/step_ms" in r and
             r["step"] - int(r.get("device_time/updates_ago", 0)) >= warmup]
    return {p: statistics.median(r.get("device_time/%s_ms" % p, 0.0) for r in timed)
            for p in DEVICE_PARTS if timed}


def summarize_zerofit_jsonl(lines, warmup, pairs):
    """A result record from zerofit_train_prefs --metrics-jsonl lines (one object per step, rank 0's): the
    median of time/step_ms over the steps after the first `warmup`, and the highest device peak
    (device_peak_allocated_bytes: each step's own peak) over those steps; the median of each stage the
    steps report (`stages`) and the highest host peak RSS. The device clock's medians (`device`, device_medians).
    Needs one measured step."""
    steps = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        rec = json.loads(line)
        if rec.get("rank", 0) == 0 and rec.get("time/step_ms") is not None:
            steps.append(rec)
    steps.sort(key=lambda r: r["step"])
    measured = [r for r in steps if r["step"] >= warmup]
    if not measured:
        return {"status": "failed", "detail": "%d steps in the metrics file, none after %d warm-up" % (len(steps), warmup)}
    peaks = [r["device_peak_allocated_bytes"] for r in measured if r.get("device_peak_allocated_bytes") is not None]
    stages = {s: statistics.median(r.get("time/%s_ms" % s, 0.0) for r in measured)
              for s in STAGES if any("time/%s_ms" % s in r for r in measured)}
    rss = [r["host_peak_rss_bytes"] for r in measured if r.get("host_peak_rss_bytes") is not None]
    return {"status": "ok", "detail": "", "step_ms": statistics.median(r["time/step_ms"] for r in measured),
            "steps_measured": len(measured), "pairs_per_step": pairs, "peak_bytes": max(peaks) if peaks else None,
            "stages": stages, "device": device_medians(steps, warmup), "host_rss_bytes": max(rss) if rss else None}


def record(args):
    """The driver's call after each run: keeps a record the run wrote itself (transformers), else makes one."""
    if args.skip:
        rec = {"status": "skipped", "detail": args.skip}
    elif os.path.exists(args.out) and args.jsonl is None:
        with open(args.out) as f:
            rec = json.load(f)
    else:
        log_text = _read(args.log)
        rec = None
        if args.rc == 0 and args.jsonl:
            try:
                with open(args.jsonl) as f:
                    rec = summarize_zerofit_jsonl(f, args.warmup, args.pairs)
            except (OSError, ValueError, KeyError) as e:
                rec = {"status": "failed", "detail": "metrics file %s: %s" % (args.jsonl, e)}
        if rec is None:
            status, detail = classify_failure(args.rc, log_text, args.deadline)
            rec = {"status": status, "detail": detail + _partial(args, status)}
    rec["id"] = args.id
    with open(args.out, "w") as f:
        json.dump(rec, f, sort_keys=True)
        f.write("\n")
    print("%s: %s %s" % (args.id, rec["status"], _short(rec)))


def _partial(args, status):
    """For a run cut by its deadline: the steps it measured before (from its metrics file), so that a slow
    row still says how slow; a timed-out row never counts as a result."""
    if status != "timeout" or not args.jsonl:
        return ""
    try:
        with open(args.jsonl) as f:
            rec = summarize_zerofit_jsonl(f, args.warmup, args.pairs)
    except (OSError, ValueError, KeyError):
        return ""
    if rec["status"] != "ok":
        return ""
    return " after %d measured steps (median %.1f ms)" % (rec["steps_measured"], rec["step_ms"])


def _short(rec):
    if rec.get("status") != "ok":
        return rec.get("detail", "")
    peak = "" if rec.get("peak_bytes") is None else ", peak %.2f GiB" % (rec["peak_bytes"] / 2**30)
    return "(median %.1f ms over %d steps%s)" % (rec["step_ms"], rec["steps_measured"], peak)


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


# --- the table ---------------------------------------------------------------------------------------------
def row_figures(run, rec, shape, peak_tflops):
    """pairs/s, step ms, MFU (fraction) and peak GiB of an "ok" record; None where not known."""
    step_s = rec["step_ms"] / 1e3
    seq, vocab = run.seq(shape), run.vocab(shape)
    flops = flops_per_token(shape, run.task, vocab, seq) * tokens_per_step(shape, seq)
    return {"pairs_per_s": rec["pairs_per_step"] / step_s, "step_ms": rec["step_ms"],
            "mfu": flops / step_s / (peak_tflops * 1e12) if peak_tflops > 0 else None,
            "peak_gib": None if rec.get("peak_bytes") is None else rec["peak_bytes"] / 2**30}


def _fmt(v, spec, missing="n/a"):
    return missing if v is None else format(v, spec)


def make_table(runs, records, shape, peak_tflops, header_lines=()):
    """Markdown: a header list, then one row per run (a run without a record says "not run"); a zerofit row
    ends with its ratios to its transformers peer (pairs/s: higher is better; peak: lower is better)."""
    out = list(header_lines)
    out.append("| run | what | seq | vocab | pairs/s | median step ms | MFU | device peak GiB | vs transformers |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---|")
    figures = {}
    for run in runs:
        rec = records.get(run.id)
        if rec is not None and rec.get("status") == "ok":
            figures[run.id] = row_figures(run, rec, shape, peak_tflops)
    for run in runs:
        rec = records.get(run.id)
        what = run.label + (" (attention: %s)" % rec["attn"] if rec and rec.get("attn") else "")
        cells = ["`%s`" % run.id, what, str(run.seq(shape)), str(run.vocab(shape))]
        if run.id in figures:
            f = figures[run.id]
            cells += ["%.2f" % f["pairs_per_s"], "%.1f" % f["step_ms"],
                      _fmt(None if f["mfu"] is None else 100 * f["mfu"], ".1f") + ("%" if f["mfu"] is not None else ""),
                      _fmt(f["peak_gib"], ".2f")]
        else:
            status = "not run" if rec is None else rec.get("status", "failed")
            detail = "" if rec is None else rec.get("detail", "")
            text = status + (": " + detail if detail else "")
            cells += [text.replace("|", "/"), "", "", ""]
        cells.append(_ratio_text(run, figures))
        out.append("| " + " | ".join(cells) + " |")
    out += breakdown_table(runs, records)
    return "\n".join(out) + "\n"


def breakdown_table(runs, records):
    """Markdown lines: zerofit's step stages of each "ok" record that has them (none: no lines)."""
    rows = [(run, records[run.id]) for run in runs
            if records.get(run.id, {}).get("status") == "ok" and records[run.id].get("stages")]
    if not rows:
        return []
    out = ["", "zerofit's step breakdown (medians over the measured steps, host clocks, ms; stages overlap: the "
           "reduce-scatter span covers the backward that feeds it, and on a GPU forward and backward are launch "
           "time until something waits)", "",
           "| run | step | " + " | ".join(s.replace("_", " ") for s in STAGES) + " | host peak RSS GiB |",
           "|---|" + "---:|" * (len(STAGES) + 2)]
    for run, rec in rows:
        cells = ["`%s`" % run.id, "%.1f" % rec["step_ms"]]
        cells += [_fmt(rec["stages"].get(s), ".1f") for s in STAGES]
        rss = rec.get("host_rss_bytes")
        cells.append(_fmt(None if rss is None else rss / 2**30, ".1f"))
        out.append("| " + " | ".join(cells) + " |")
    return out + device_table(rows)


def device_table(rows):
    """Markdown lines: the device clock of each (run, record) that has it, beside the host's forward and
    backward (none: no lines)."""
    rows = [(run, rec) for run, rec in rows if rec.get("device")]
    if not rows:
        return []
    out = ["", "zerofit's device clock (timing events on the compute stream, medians over the measured steps, ms; "
           "update: the step's end from the last backward, gap: the stream waiting between stages; a forward whose "
           "host time is close to its device time is launch-bound)", "",
           "| run | " + " | ".join("device " + p for p in DEVICE_PARTS) + " | host forward | host backward |",
           "|---|" + "---:|" * (len(DEVICE_PARTS) + 2)]
    for run, rec in rows:
        cells = ["`%s`" % run.id] + [_fmt(rec["device"].get(p), ".1f") for p in DEVICE_PARTS]
        cells += [_fmt(rec.get("stages", {}).get(s), ".1f") for s in ("forward", "backward")]
        out.append("| " + " | ".join(cells) + " |")
    return out


def _ratio_text(run, figures):
    if run.peer is None:
        return ""
    if run.id not in figures or run.peer not in figures:
        text = "vs `%s`: n/a" % run.peer
    else:
        mine, peer = figures[run.id], figures[run.peer]
        text = "x%.2f pairs/s" % (mine["pairs_per_s"] / peer["pairs_per_s"])
        if mine["peak_gib"] and peer["peak_gib"]:
            text += ", x%.2f peak" % (mine["peak_gib"] / peer["peak_gib"])
        text += " (vs `%s`)" % run.peer
    if run.base is not None:  # a variant (offload, unfused): its step against the run it varies
        if run.id in figures and run.base in figures:
            text += "; step x%.2f of `%s`" % (figures[run.id]["step_ms"] / figures[run.base]["step_ms"], run.base)
        else:
            text += "; vs `%s`: n/a" % run.base
    return text


def describe_shape(shape):
    return ("Llama, hidden %d, %d layers, %d heads / %d KV heads, intermediate %d, %d pairs = %d sequences per "
            "step in one micro-batch, random token ids (prompt = half the sequence)"
            % (shape["hidden"], shape["layers"], shape["heads"], shape["kv_heads"], shape["intermediate"],
               shape["pairs"], 2 * shape["pairs"]))


def table(args):
    shape = TINY_SHAPE if args.tiny else FULL_SHAPE
    runs = select_runs(args.only)
    records = {}
    for run in runs:
        path = os.path.join(args.results, run.id + ".json")
        if os.path.exists(path):
            with open(path) as f:
                records[run.id] = json.load(f)
    reward_n = non_embedding_params(shape, "reward", shape["vocab"])
    header = [
        "# zerofit vs Hugging Face transformers (scripts/gpu_bench.sh)",
        "",
        "- device: %s" % (args.device or "unknown"),
        "- shape: %s; %.1f M parameters without the input embedding (reward model)"
        % (describe_shape(shape), reward_n / 1e6),
        "- steps: %d warm-up, then the median over %d measured steps; each run a separate process"
        % (args.warmup, args.steps),
        "- MFU: model FLOPs per token 6 N + 12 L H T (N: parameters without the input embedding; DPO adds the "
        "reference's forward, 2 N + 4 L H T) x tokens per step / step time / %.0f TFLOP/s" % args.peak_tflops,
        "- device peak: transformers torch.cuda.max_memory_allocated over the measured steps; zerofit the highest "
        "of its measured steps' own peaks (allocated)",
        "- transformers: SDPA attention, torch.optim.AdamW(fused=True), clip_grad_norm_ 1.0; zerofit: "
        "zerofit_train_prefs, ZeRO-2 on one rank, fp32 master weights, offload with --threads %d"
        % args.offload_threads,
        "",
    ]
    sys.stdout.write(make_table(runs, records, shape, args.peak_tflops, header))


def llama_config(shape, vocab, seq):
    """config.json of the shape (a Hugging Face Llama config: zerofit reads it; the transformers side builds
    the same LlamaConfig from the same fields)."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab,
            "hidden_size": shape["hidden"], "intermediate_size": shape["intermediate"],
            "num_hidden_layers": shape["layers"], "num_attention_heads": shape["heads"],
            "num_key_value_heads": shape["kv_heads"], "head_dim": head_dim(shape), "hidden_act": "silu",
            "max_position_embeddings": seq, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "attention_bias": False, "tie_word_embeddings": False, "initializer_range": 0.02,
            "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "torch_dtype": "bfloat16"}


def write_data(out, shape, vocab, seq, train_pairs, seed=1):
    """A zerofit --data directory: config.json and random token-id pairs of prompt seq/2 - 1 and responses
    seq/2 - 1 tokens: with the BOS zerofit adds to the prompt and the EOS it appends to each response,
    every sequence is exactly `seq` tokens (no padding, no truncation). Ids are drawn from [3, vocab): never
    the pad (0), BOS or EOS id. 8 held-out pairs keep the evaluations before and after training short."""
    import random
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(llama_config(shape, vocab, seq), f, indent=2)
    rng = random.Random(seed)
    prompt, response = seq // 2 - 1, seq - seq // 2 - 1
    for name, n in (("train_ids.jsonl", train_pairs), ("test_ids.jsonl", 8)):
        with open(os.path.join(out, name), "w") as f:
            for _ in range(n):
                ids = lambda k: [rng.randrange(3, vocab) for _ in range(k)]
                f.write(json.dumps({"prompt_ids": ids(prompt), "chosen_ids": ids(response),
                                    "rejected_ids": ids(response)}) + "\n")


def data(args):
    shape = TINY_SHAPE if args.tiny else FULL_SHAPE
    write_data(args.dir, shape, args.vocab, args.seq, args.train_pairs)


def plan(args):
    shape = TINY_SHAPE if args.tiny else FULL_SHAPE
    for run in select_runs(args.only):
        print(run.id, run.impl, run.task, run.dtype, run.vocab(shape), run.seq(shape), int(run.ckpt),
              int(run.offload), -1 if run.dpu is None else run.dpu, int(run.fused), run.optim)


def shape_args(args):
    """The shape as key=value words, for the driver (model config and data)."""
    shape = TINY_SHAPE if args.tiny else FULL_SHAPE
    print(" ".join("%s=%s" % kv for kv in sorted(shape.items())))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("plan", "table", "shape"):
        s = sub.add_parser(name)
        s.add_argument("--tiny", action="store_true")
        s.add_argument("--only", default="")
        if name == "table":
            s.add_argument("--results", required=True)
            s.add_argument("--peak-tflops", type=float, default=989.0)
            s.add_argument("--device", default="")
            s.add_argument("--steps", type=int, default=10)
            s.add_argument("--warmup", type=int, default=3)
            s.add_argument("--offload-threads", type=int, default=0)
    d = sub.add_parser("data")
    d.add_argument("--tiny", action="store_true")
    d.add_argument("--dir", required=True)
    d.add_argument("--vocab", type=int, required=True)
    d.add_argument("--seq", type=int, required=True)
    d.add_argument("--train-pairs", type=int, default=128)
    r = sub.add_parser("record")
    r.add_argument("--id", required=True)
    r.add_argument("--rc", type=int, required=True)
    r.add_argument("--log", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--jsonl")
    r.add_argument("--warmup", type=int, default=3)
    r.add_argument("--pairs", type=int, default=8)
    r.add_argument("--deadline")
    r.add_argument("--skip", help="the run was not started, for this reason")
    args = p.parse_args(argv)
    try:
        {"plan": plan, "table": table, "record": record, "shape": shape_args, "data": data}[args.command](args)
    except ValueError as e:
        print("prefs_bench_table: %s" % e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
