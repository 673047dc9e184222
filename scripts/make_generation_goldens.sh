#!/bin/bash
# Regenerates the greedy-generation goldens of generation_test (GreedyEqualsTransformersGoldens, issue 32):
# one directory per config of tests/worker/torch/golden/configs/ under tests/worker/torch/golden/generation/,
# each with model.safetensors, config.json and golden.json from transformers' greedy generate. Needs python3
# with torch, transformers and safetensors (the GPU machine has them; Debian 12 does not package them). The
# goldens in the tree: transformers 5.17.0 with torch 2.11.0 on the H200 machine's CPU, 2026-11-27
# (scripts/gpu_grpo_check.sh, step 1). generation_test compares a token only where the float64 oracle of
# the same weights has no near-tie, so machines that round float32 differently agree.
#   scripts/make_generation_goldens.sh [--max-new-tokens N]
set -euo pipefail
cd "$(dirname "$0")/.."
out=tests/worker/torch/golden/generation
for config in tests/worker/torch/golden/configs/*.json; do
  name=$(basename "$config" .json)
  rm -rf "${out:?}/$name"
  python3 scripts/make_generation_golden.py --config "$config" --out "$out/$name" --max-new-tokens 12 "$@"
  rm -f "$out/$name/generation_config.json"
done
ls -l "$out"/*
