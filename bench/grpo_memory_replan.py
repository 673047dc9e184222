#!/usr/bin/env python3
"""Issue 32: 7d5f4cd's H200 GRPO memory table re-planned at the micro-batch the trainer really ran.

docs/gpu-runs/2026-11-27-h200-7d5f4cd.md's table compared each configuration's measured passes with plans
at micro-batch M, but scripts/gpu_grpo_memory.sh started the trainer with `--micro M`, which is the number of
micro-batches a rank runs a step (fixed in a9d76f6): the run trained micro-batches of (prompts a rank x
samples) / M sequences. This script asks a `zerofit plan` built at that run's tree (7d5f4cd) for the
micro-batch that ran, adds the two things that tree's plan left out and later trees explain, and prints each
pass's error:
  - ZeRO-2's staging growth: 4 embedding-sized bf16 staging buffers added during the first backward for
    buckets waiting to launch (4 x vocabulary x hidden x 2 B; the runtime no longer grows so since c95b97c
    and d1954dc, BENCHMARKS.md "What the GRPO generation pass carried after the first backward");
  - cuBLAS's two 32 MiB workspaces (the forward's and autograd's; the plan counts them since 4f3af0d).
Both are held from the first training pass on, so both apply to the last step's generation and training
passes.

  git worktree add /tmp/zf-7d5f4cd 7d5f4cd && cmake -S /tmp/zf-7d5f4cd -B /tmp/zf-7d5f4cd/build -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo && ninja -C /tmp/zf-7d5f4cd/build zerofit
  python3 bench/grpo_memory_replan.py /tmp/zf-7d5f4cd/build/cli/zerofit

Standard library only.
"""

import json
import os
import subprocess
import sys
import tempfile

RUN = "docs/gpu-runs/2026-11-27-h200-7d5f4cd.md"
GPU_GB = 150  # the harness's --hardware on the H200: 143771 MiB as decimal GB
WORKSPACES = 2 * 32 * 2**20


def measured_rows(path):
    """The run's configurations and measured passes: (P, N, S, prompts a step, ranks, M, step-2 generation
    MiB, step-2 training MiB). The table's prompts/pass column is the plan's rollout batch; prompts a step
    (the harness's global batch) is that times the ranks for the table's configurations."""
    rows = []
    with open(path) as f:
        lines = f.readlines()
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 15 or not cells[0].isdigit():
            continue
        p, n, s, r, w, m = map(int, cells[:6])
        rows.append((p, n, s, r * w, w, m, float(cells[9]), float(cells[12])))
    return rows


def micro_batch_run(row):
    """The sequences of a micro-batch the trainer ran: a rank's prompts x samples over `--micro M`."""
    p, n, s, g, w, m = row[:6]
    return g // w * s // m


def plan(zerofit, config, p, n, s, g, w, micro):
    out = subprocess.run(
        [zerofit, "plan", "--model", config, "--task", "grpo", "--hardware", "%dx%dGB" % (w, GPU_GB),
         "--global-batch", str(g), "--prompt-len", str(p), "--new-tokens", str(n), "--samples-per-prompt",
         str(s), "--micro-batch", str(micro), "--stage", "2", "--offload", "off", "--checkpointing", "off",
         "--reference", "resident", "--safety", "1", "--json"],
        capture_output=True, text=True, check=True).stdout
    passes = json.loads(out)["memory"]["grpo_passes"]
    return passes["generation_tensor_bytes"] / 2**20, passes["training_tensor_bytes"] / 2**20


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: grpo_memory_replan.py ZEROFIT  (a zerofit CLI built at 7d5f4cd)")
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    with open(os.path.join(root, "bench/generation_qwen05b.json")) as f:
        model = json.load(f)
    model["num_hidden_layers"] = 12  # the harness's model
    staging = 4 * model["vocab_size"] * model["hidden_size"] * 2
    extra = (staging + WORKSPACES) / 2**20
    print("| prompt | new | samples | ranks | micro-batch run | training planned | + %.1f MiB | measured | error "
          "| generation planned + %.1f MiB | measured | error |" % (extra, extra))
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "config.json")
        with open(config, "w") as f:
            json.dump(model, f)
        for row in measured_rows(os.path.join(root, RUN)):
            p, n, s, g, w, m, gen, train = row
            micro = micro_batch_run(row)
            gen_plan, train_plan = plan(sys.argv[1], config, p, n, s, g, w, micro)
            et = (train_plan + extra - train) / train * 100
            eg = (gen_plan + extra - gen) / gen * 100
            errors += [et, eg]
            print("| %d | %d | %d | %d | %d | %.1f | %.1f | %.1f | %+.2f%% | %.1f | %.1f | %+.2f%% |" %
                  (p, n, s, w, micro, train_plan, train_plan + extra, train, et, gen_plan + extra, gen, eg))
    if not errors:
        sys.exit("no configuration found in " + RUN)
    a = [abs(e) for e in errors]
    print("\n%d passes: mean |error| %.2f%%, max %.2f%%" % (len(a), sum(a) / len(a), max(a)))


if __name__ == "__main__":
    main()
