#!/usr/bin/env bash
# The CPU time of every compile and link of one cold build, whatever else the machine runs (issue 29: the test
# command's budget is CPU time on 2 cores; wall times on a shared machine say little). Compiles with ccache
# off through a g++ wrapper that appends "user sys output" per call to a log, then sums it. Usage:
#   scripts/build_cpu_profile.sh main|asan|tsan OUT_DIR
# OUT_DIR gets the build folder (build/), cpu.log and a summary printed at the end: total CPU-s, by kind
# (library compiles, test compiles, links) and the 25 costliest objects.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?main, asan or tsan}
out=$(realpath -m "${2:?output folder}")
mkdir -p "$out"
cat > "$out/gxx-timed" << WRAP
#!/bin/bash
o=unknown; prev=
for a in "\$@"; do [[ "\$prev" == "-o" ]] && o=\$a; prev=\$a; done
exec /usr/bin/time -f "%U %S \$o" -a -o "$out/cpu.log" /usr/bin/g++ "\$@"
WRAP
chmod +x "$out/gxx-timed"
rm -f "$out/cpu.log"
flags=(-G Ninja "-DCMAKE_CXX_COMPILER=$out/gxx-timed")
targets=()
case "$kind" in
  main) flags+=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEROFIT_PLAIN_TORCH_FREE_UNIT_TESTS=OFF) ;;
  asan) flags+=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g1" -DZEROFIT_SANITIZE=address,undefined) ;;
  tsan) flags+=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g1" -DZEROFIT_SANITIZE=thread)
        targets=(--target core_unit_test ordered_line_map_test device_unit_test coordinator_unit_test sanitizer_canary) ;;
  *) echo "build_cpu_profile.sh: kind must be main, asan or tsan" >&2; exit 2 ;;
esac
cmake -S . -B "$out/build" "${flags[@]}" > /dev/null
start=$SECONDS
CCACHE_DISABLE=1 cmake --build "$out/build" -j "$(nproc)" "${targets[@]}" > "$out/build.log"
echo "build_cpu_profile.sh: $kind build, $((SECONDS - start)) s wall"
awk '{c = $1 + $2; o = $3; k = "library compiles"
      if (o ~ /^tests\//) k = "test compiles"
      if (o !~ /\.o$/ && o !~ /\.gch$/) k = "links"
      s[k] += c; t += c}
     END {printf "total %.0f CPU-s\n", t; for (k in s) printf "  %s %.0f CPU-s\n", k, s[k]}' "$out/cpu.log"
awk '{printf "%.1f %s\n", $1 + $2, $3}' "$out/cpu.log" | sort -rn | head -n 25
