#!/usr/bin/env python3
"""bench/prefs_bench_table.py (scripts/gpu_bench.sh's plan, records and table) and the argument handling of
bench/transformers_prefs_bench.py, without torch: FLOPs against hand counts, the summary of a zerofit metrics
JSONL, failures classified, the markdown table with its ratios.
  prefs_bench_table_test.py <repository root>"""

import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(ROOT, "bench"))
import prefs_bench_table as t  # noqa: E402
import transformers_prefs_bench as hf  # noqa: E402  (must not import torch at module level)


class PlanTest(unittest.TestCase):
    def test_all_runs_and_peers(self):
        ids = [r.id for r in t.select_runs("")]
        self.assertEqual(len(ids), 17)
        for r in t.RUNS:
            if r.impl == "zf":
                self.assertIn(r.peer, ids, r.id)
                peer = next(p for p in t.RUNS if p.id == r.peer)
                self.assertEqual((peer.task, peer.vocab_key, peer.seq_key, peer.ckpt),
                                 (r.task, r.vocab_key, r.seq_key, r.ckpt), r.id)
            if r.base is not None:  # the twin of a variant row: the same run without offload, or fused
                base = next(p for p in t.RUNS if p.id == r.base)
                self.assertTrue((r.offload and not base.offload) or (not r.fused and base.fused) or
                                (r.optim != base.optim), r.id)
                self.assertEqual((base.task, base.vocab_key, base.seq_key, base.ckpt),
                                 (r.task, r.vocab_key, r.seq_key, r.ckpt), r.id)

    def test_only(self):
        self.assertEqual([r.id for r in t.select_runs("zf-reward-*, hf-dpo-bf16")],
                         ["zf-reward-bf16", "zf-reward-bf16-unfused", "zf-reward-bf16-offload",
                          "zf-reward-bf16-offload-dpu", "zf-reward-bf16-8bit", "zf-reward-bf16-8bit-offload",
                          "hf-dpo-bf16", "zf-reward-long-ckpt"])
        with self.assertRaises(ValueError):
            t.select_runs("zf-nothing")

    def test_plan_lines(self):
        out = io.StringIO()
        sys.stdout, saved = out, sys.stdout
        try:
            self.assertEqual(t.main(["plan", "--only",
                                     "zf-dpo-v128k-bf16,hf-reward-long-ckpt,zf-reward-bf16-offload-dpu,zf-reward-bf16-unfused"]), 0)
        finally:
            sys.stdout = saved
        self.assertEqual(out.getvalue().splitlines(),
                         ["zf-reward-bf16-unfused zf reward bf16 4096 1024 0 0 -1 0 adamw_torch",
                          "zf-reward-bf16-offload-dpu zf reward bf16 4096 1024 0 1 1 1 adamw_torch",
                          "zf-dpo-v128k-bf16 zf dpo bf16 128256 1024 0 0 -1 1 adamw_torch",
                          "hf-reward-long-ckpt hf reward bf16 4096 4096 1 0 -1 1 adamw_torch"])


class FlopsTest(unittest.TestCase):
    def test_issue_30_shape(self):
        s = t.FULL_SHAPE
        # per layer: q, o 2048^2 each; k, v 2048 x 1024 each (16 KV heads of 64); gate/up/down 2048 x 5504;
        # two norms; then the final norm and the 1-output score head.
        per_layer = 2 * 2048 * 2048 + 2 * 2048 * 1024 + 3 * 2048 * 5504 + 2 * 2048
        self.assertEqual(t.non_embedding_params(s, "reward", 4096), 16 * per_layer + 2048 + 2048)
        self.assertAlmostEqual((t.non_embedding_params(s, "reward", 4096) + 4096 * 2048) / 1e9, 0.75, places=2)
        n = t.non_embedding_params(s, "dpo", 128256)
        self.assertEqual(n, 16 * per_layer + 2048 + 128256 * 2048)
        self.assertEqual(t.flops_per_token(s, "reward", 4096, 1024),
                         6 * t.non_embedding_params(s, "reward", 4096) + 12 * 16 * 2048 * 1024)
        self.assertEqual(t.flops_per_token(s, "dpo", 128256, 1024), 8 * n + 16 * 16 * 2048 * 1024)
        # SFT trains the causal model alone: 6 N + 12 L H T, the lm_head counted.
        self.assertEqual(t.flops_per_token(s, "sft", 4096, 1024),
                         6 * (16 * per_layer + 2048 + 4096 * 2048) + 12 * 16 * 2048 * 1024)
        self.assertEqual(t.tokens_per_step(s, 4096), 16 * 4096)


def jsonl(steps, rank=0, peak=True):
    lines = []
    for step, ms in steps:
        rec = {"step": step, "rank": rank, "loss": 0.69, "time/step_ms": ms}
        if peak:
            rec["device_peak_allocated_bytes"] = 2**30 * (1 + step)
        lines.append(json.dumps(rec))
    return lines


class RecordTest(unittest.TestCase):
    def test_median_after_warmup(self):
        lines = jsonl([(0, 9000.0), (1, 100.0), (2, 300.0), (3, 200.0), (4, 250.0)])
        lines += jsonl([(2, 1.0)], rank=1)  # another rank's line is not rank 0's timing
        rec = t.summarize_zerofit_jsonl(lines, warmup=1, pairs=8)
        self.assertEqual(rec["status"], "ok")
        self.assertEqual(rec["steps_measured"], 4)
        self.assertEqual(rec["step_ms"], 225.0)
        self.assertEqual(rec["peak_bytes"], 5 * 2**30)
        self.assertIsNone(t.summarize_zerofit_jsonl(jsonl([(1, 5.0)], peak=False), 1, 8)["peak_bytes"])

    def test_stage_breakdown(self):
        lines = []
        for step, adamw in ((0, 900.0), (1, 10.0), (2, 30.0), (3, 20.0)):
            lines.append(json.dumps({"step": step, "rank": 0, "time/step_ms": 100.0 + step, "time/forward_ms": 5.0,
                                     "time/cpu_adamw_ms": adamw, "host_peak_rss_bytes": 2**30 * step}))
        rec = t.summarize_zerofit_jsonl(lines, warmup=1, pairs=8)
        self.assertEqual(rec["stages"], {"forward": 5.0, "cpu_adamw": 20.0})
        self.assertEqual(rec["host_rss_bytes"], 3 * 2**30)
        rec["id"] = "zf-reward-bf16-offload"
        runs = t.select_runs("hf-reward-bf16,zf-reward-bf16-offload")
        lines = t.make_table(runs, {rec["id"]: rec}, t.FULL_SHAPE, 989.0).splitlines()
        header = [l for l in lines if l.startswith("| run | step |")]
        self.assertEqual(len(header), 1)
        row = lines[lines.index(header[0]) + 2].split("|")[1:-1]
        cells = dict(zip([c.strip() for c in header[0].split("|")[1:-1]], [c.strip() for c in row]))
        self.assertEqual(cells["run"], "`zf-reward-bf16-offload`")
        self.assertEqual(cells["step"], "102.0")
        self.assertEqual(cells["cpu adamw"], "20.0")
        self.assertEqual(cells["forward"], "5.0")
        self.assertEqual(cells["wait"], "n/a")
        self.assertEqual(cells["host peak RSS GiB"], "3.0")

    def test_device_clock(self):
        # Each record times the update before its own (updates_ago 1): with 2 warm-up steps, the records of
        # steps 3 and 4 count (steps 2 and 3), not step 2's (warm-up step 1).
        lines = []
        for step, backward in ((0, 999.0), (1, 777.0), (2, 120.0), (3, 140.0), (4, 130.0)):
            lines.append(json.dumps({"step": step, "rank": 0, "time/step_ms": 200.0, "time/forward_ms": 4.0,
                                     "time/backward_ms": 90.0, "device_time/step_ms": 210.0,
                                     "device_time/forward_ms": 60.0, "device_time/backward_ms": backward,
                                     "device_time/update_ms": 15.0, "device_time/gap_ms": 5.0,
                                     "device_time/updates_ago": 1}))
        lines.append(json.dumps({"step": 5, "rank": 0, "time/step_ms": 200.0}))  # no device clock
        rec = t.summarize_zerofit_jsonl(lines, warmup=2, pairs=8)
        self.assertEqual(rec["device"], {"step": 210.0, "forward": 60.0, "backward": 135.0, "update": 15.0,
                                         "gap": 5.0})
        self.assertEqual(t.summarize_zerofit_jsonl(jsonl([(1, 5.0)]), 1, 8)["device"], {})
        rec["id"] = "zf-reward-bf16"
        lines = t.make_table(t.select_runs("zf-reward-bf16"), {rec["id"]: rec}, t.FULL_SHAPE, 989.0).splitlines()
        header = [l for l in lines if l.startswith("| run | device step |")]
        self.assertEqual(len(header), 1)
        row = lines[lines.index(header[0]) + 2].split("|")[1:-1]
        cells = dict(zip([c.strip() for c in header[0].split("|")[1:-1]], [c.strip() for c in row]))
        self.assertEqual(cells["device backward"], "135.0")
        self.assertEqual(cells["host forward"], "4.0")
        self.assertEqual(cells["device gap"], "5.0")

    def test_no_step_after_warmup(self):
        rec = t.summarize_zerofit_jsonl(jsonl([(0, 5.0), (1, 6.0)]), warmup=3, pairs=8)
        self.assertEqual(rec["status"], "failed")
        self.assertIn("none after 3 warm-up", rec["detail"])

    def test_classify(self):
        self.assertEqual(t.classify_failure(124, "", 150)[0], "timeout")
        self.assertEqual(t.classify_failure(137, "step 1", None)[0], "timeout")
        status, detail = t.classify_failure(1, "step 1\nc10::OutOfMemoryError: CUDA out of memory. Tried\n", None)
        self.assertEqual(status, "oom")
        self.assertIn("CUDA out of memory", detail)
        self.assertEqual(t.classify_failure(1, "a\nflag --x: bad\n\n", None), ("failed", "exit 1: flag --x: bad"))

    def test_record_cli(self):
        with tempfile.TemporaryDirectory() as d:
            log, out, metrics = (os.path.join(d, n) for n in ("r.log", "r.json", "r.jsonl"))
            with open(metrics, "w") as f:
                f.write("\n".join(jsonl([(0, 50.0), (1, 10.0), (2, 30.0)])) + "\n")
            open(log, "w").close()
            with open(os.devnull, "w") as null:
                saved, sys.stdout = sys.stdout, null
                try:
                    t.main(["record", "--id", "zf-x", "--rc", "0", "--log", log, "--out", out, "--jsonl", metrics,
                            "--warmup", "1"])
                    with open(out) as f:
                        self.assertEqual(json.load(f)["step_ms"], 20.0)
                    # A run the deadline ended: its partial metrics do not count.
                    t.main(["record", "--id", "zf-x", "--rc", "124", "--log", log, "--out", out, "--jsonl", metrics,
                            "--deadline", "9"])
                    with open(out) as f:
                        cut = json.load(f)
                    # ... but the row says how far it got: steps 1, 2 after warm-up 1 (the default 3 here)
                    self.assertEqual(cut["status"], "timeout")
                    self.assertNotIn("step_ms", cut)
                    t.main(["record", "--id", "zf-x", "--rc", "124", "--log", log, "--out", out, "--jsonl", metrics,
                            "--deadline", "9", "--warmup", "1"])
                    with open(out) as f:
                        self.assertEqual(json.load(f)["detail"],
                                         "deadline of 9 s passed after 2 measured steps (median 20.0 ms)")
                    # A transformers run's own record is kept; a skip says why.
                    with open(out, "w") as f:
                        json.dump({"status": "oom", "detail": "OutOfMemoryError: x"}, f)
                    t.main(["record", "--id", "hf-x", "--rc", "1", "--log", log, "--out", out])
                    with open(out) as f:
                        self.assertEqual(json.load(f), {"id": "hf-x", "status": "oom", "detail": "OutOfMemoryError: x"})
                    t.main(["record", "--id", "hf-y", "--rc", "0", "--log", log, "--out", out, "--skip", "no torch"])
                    with open(out) as f:
                        self.assertEqual(json.load(f)["status"], "skipped")
                finally:
                    sys.stdout = saved


class TableTest(unittest.TestCase):
    def test_rows_ratios_and_failures(self):
        runs = t.select_runs("hf-reward-bf16,zf-reward-bf16,zf-reward-bf16-offload,zf-reward-bf16-offload-dpu,"
                             "hf-dpo-bf16,zf-dpo-bf16")
        s = t.FULL_SHAPE
        flops = t.flops_per_token(s, "reward", 4096, 1024) * t.tokens_per_step(s, 1024)
        step_ms = flops / (0.5 * 989e12) * 1e3  # 50% MFU
        records = {
            "hf-reward-bf16": {"status": "ok", "step_ms": step_ms, "pairs_per_step": 8, "peak_bytes": 20 * 2**30,
                               "attn": "sdpa"},
            "zf-reward-bf16": {"status": "ok", "step_ms": step_ms / 2, "pairs_per_step": 8, "peak_bytes": 10 * 2**30},
            "zf-reward-bf16-offload": {"status": "oom", "detail": "CUDA out of memory | x"},
            "zf-reward-bf16-offload-dpu": {"status": "ok", "step_ms": step_ms * 0.6, "pairs_per_step": 8,
                                           "peak_bytes": None},
            "zf-dpo-bf16": {"status": "ok", "step_ms": 100.0, "pairs_per_step": 8, "peak_bytes": None},
        }
        text = t.make_table(runs, records, s, 989.0, ["# head", ""])
        lines = text.splitlines()
        self.assertEqual(lines[0], "# head")
        rows = {l.split("|")[1].strip(): [c.strip() for c in l.split("|")[2:-1]] for l in lines[4:]}
        hf_row, zf_row = rows["`hf-reward-bf16`"], rows["`zf-reward-bf16`"]
        self.assertIn("(attention: sdpa)", hf_row[0])
        # cells: what, seq, vocab, pairs/s, step ms, MFU, peak GiB, ratios
        self.assertEqual(hf_row[1:3], ["1024", "4096"])
        self.assertEqual(hf_row[5], "50.0%")
        self.assertEqual(zf_row[5], "100.0%")
        self.assertEqual(hf_row[7], "")
        self.assertEqual(zf_row[6], "10.00")
        self.assertEqual(zf_row[7], "x2.00 pairs/s, x0.50 peak (vs `hf-reward-bf16`)")
        self.assertAlmostEqual(float(zf_row[3]), 2 * float(hf_row[3]), delta=0.011)
        self.assertEqual(rows["`zf-reward-bf16-offload`"][3], "oom: CUDA out of memory / x")
        # offload rows: the step against the on-device run too (issue 30's 1.3x), n/a where either is missing
        self.assertEqual(rows["`zf-reward-bf16-offload`"][7],
                         "vs `hf-reward-bf16`: n/a; vs `zf-reward-bf16`: n/a")
        self.assertEqual(rows["`zf-reward-bf16-offload-dpu`"][7],
                         "x1.67 pairs/s (vs `hf-reward-bf16`); step x1.20 of `zf-reward-bf16`")
        self.assertEqual(rows["`hf-dpo-bf16`"][3], "not run")
        self.assertEqual(rows["`zf-dpo-bf16`"][6], "n/a")
        self.assertEqual(rows["`zf-dpo-bf16`"][7], "vs `hf-dpo-bf16`: n/a")
        self.assertEqual(len(lines), 4 + len(runs))

    def test_data_directory(self):
        with tempfile.TemporaryDirectory() as d:
            t.write_data(d, t.TINY_SHAPE, 512, 64, 3)
            with open(os.path.join(d, "config.json")) as f:
                config = json.load(f)
            self.assertEqual((config["vocab_size"], config["hidden_size"], config["head_dim"]), (512, 64, 16))
            with open(os.path.join(d, "train_ids.jsonl")) as f:
                pairs = [json.loads(l) for l in f]
            self.assertEqual(len(pairs), 3)
            for p in pairs:
                # + BOS and EOS (zerofit adds them): exactly the sequence length
                self.assertEqual(1 + len(p["prompt_ids"]) + len(p["chosen_ids"]) + 1, 64)
                self.assertEqual(len(p["chosen_ids"]), len(p["rejected_ids"]))
                self.assertTrue(all(3 <= i < 512 for i in p["prompt_ids"] + p["chosen_ids"]))


class TransformersArgsTest(unittest.TestCase):
    def test_defaults_from_shape(self):
        args = hf.parse_args(["--task", "dpo", "--dry-run"])
        self.assertEqual((args.vocab, args.seq, args.dtype, args.steps, args.warmup), (4096, 1024, "bf16", 10, 3))
        args = hf.parse_args(["--task", "reward", "--tiny", "--seq", "128", "--checkpointing", "--out", "x"])
        self.assertEqual((args.vocab, args.seq, args.checkpointing, args.shape["hidden"]), (4096, 128, True, 64))

    def test_dry_run_needs_no_torch(self):
        out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "transformers_prefs_bench.py"),
                              "--task", "reward", "--dtype", "amp", "--dry-run"],
                             capture_output=True, text=True, check=True).stdout
        self.assertIn("hidden 2048, 16 layers, 32 heads / 16 KV heads, intermediate 5504", out)
        self.assertNotIn("torch", sys.modules)

    def test_bad_arguments(self):
        with open(os.devnull, "w") as null:
            saved, sys.stderr = sys.stderr, null
            try:
                for argv in (["--task", "reward"], ["--task", "ppo", "--dry-run"], ["--task", "dpo", "--steps", "0",
                                                                                     "--dry-run"]):
                    with self.assertRaises(SystemExit, msg=argv):
                        hf.parse_args(argv)
            finally:
                sys.stderr = saved


if __name__ == "__main__":
    unittest.main(verbosity=1)
