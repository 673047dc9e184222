#!/usr/bin/env bash
# LibTorch headers cost ~20 s per translation unit and tie code to one LibTorch ABI: only worker/torch/ (and
# tests) may include them. Scans every C++ file of the tree outside those two (and outside build folders and
# third_party/); fails listing every offending file.
set -euo pipefail
root=${1:-.}
cd "$root"
files=$(find . \( -name '.git' -o -name 'build*' -o -name third_party -o -name node_modules -o -path ./tests \
                  -o -path ./worker/torch \) -prune -o -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cpp' \
                  -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \) -print)
bad=$(xargs -r grep -lE '#include *[<"](torch|ATen|c10)/' <<<"$files" || true)
if [[ -n "$bad" ]]; then
  echo "LibTorch included outside worker/torch/:"
  echo "$bad"
  exit 1
fi
echo "torch include boundary: ok ($(wc -l <<<"$files") files outside worker/torch/ and tests/)"
