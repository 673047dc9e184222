#!/usr/bin/env python3
"""bench/grpo_memory_replan.py reads 7d5f4cd's H200 GRPO table from its run record as the run had it.
  grpo_memory_replan_test.py <repository root>"""

import os
import sys
import unittest

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(ROOT, "bench"))
import grpo_memory_replan as r  # noqa: E402


class MeasuredRowsTest(unittest.TestCase):
    def test_the_runs_nine_configurations(self):
        rows = r.measured_rows(os.path.join(ROOT, r.RUN))
        self.assertEqual(len(rows), 9)
        self.assertEqual(rows[0], (64, 64, 4, 4, 1, 8, 8642.0, 9049.7))
        # The two-rank configuration: 4 prompts a pass on each rank, 8 a step.
        self.assertEqual(rows[2][:6], (128, 64, 4, 8, 2, 8))
        self.assertEqual(rows[-1][-2:], (9192.8, 9633.3))

    def test_the_micro_batches_that_ran(self):
        # BENCHMARKS.md: "2 in seven of its nine configurations, 4 in two".
        runs = [r.micro_batch_run(row) for row in r.measured_rows(os.path.join(ROOT, r.RUN))]
        self.assertEqual(sorted(runs), [2] * 7 + [4] * 2)


if __name__ == "__main__":
    unittest.main()
