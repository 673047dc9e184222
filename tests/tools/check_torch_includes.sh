#!/usr/bin/env bash
# LibTorch headers cost ~20 s per translation unit and tie code to one LibTorch ABI: only worker/torch/ (and
# tests) may include them. Fails listing every offending file.
set -euo pipefail
root=${1:-.}
cd "$root"
bad=$(grep -rlE '#include *[<"](torch|ATen|c10)/' --include='*.h' --include='*.cc' --include='*.cpp' --include='*.hpp' \
        core comm sharding offload planner coordinator cli bench worker 2>/dev/null | grep -v '^worker/torch/' || true)
if [[ -n "$bad" ]]; then
  echo "LibTorch included outside worker/torch/:"
  echo "$bad"
  exit 1
fi
echo "torch include boundary: ok"
