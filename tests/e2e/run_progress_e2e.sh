#!/bin/bash
# What `zerofit run` prints of a job's steps (issue 29), 2 MPI ranks:
#  - into a pipe: a step line every log_every steps, the first and the last (a 300-step job with log_every 25:
#    13 lines, not 300), plus at most one per 30 s of wall time, and no terminal codes;
#  - on a terminal (script(1) gives it one): one progress line redrawn in place (carriage return, erase to end
#    of line) through every step, the evaluations and the other lines printed as lines above it, the last
#    progress line left on screen and the final report on a fresh line.
# usage: run_progress_e2e.sh path/to/zerofit path/to/zerofit_make_arith_prefs
set -u
set -o pipefail
Z="$1"
GEN="$2"
D=$(mktemp -d)
trap 'pkill -9 -f "zerofit_worker.*$D" 2>/dev/null; rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$GEN" --out "$D/data" --train 200 --test 20 --ids --pad > /dev/null || fail "data generation"
spec() {  # spec NAME STEPS [more YAML lines]
  local name=$1 steps=$2
  shift 2
  {
    cat <<YAML
name: $name
task: reward
model: $D/data
data: $D/data
world_size: 2
training: {steps: $steps, global_batch: 16, micro_batch: 4, gradient_accumulation: 2, lr: 1.0e-3}
YAML
    printf '%s\n' "$@"
  } > "$D/$name.yaml"
}

# --- a pipe --------------------------------------------------------------------------------------------------
spec piped 300 "log_every: 25"
t0=$(date +%s)
"$Z" run "$D/piped.yaml" --state-dir "$D/s1" 2>&1 | cat > "$D/piped.log" || { cat "$D/piped.log"; fail "piped run"; }
took=$(( $(date +%s) - t0 ))
grep -q "succeeded after 1 attempt" "$D/piped.log" || fail "piped run: $(tail -3 "$D/piped.log")"
grep -q $'[\r\x1b]' "$D/piped.log" && fail "terminal codes in a pipe: $(grep -c $'\r' "$D/piped.log") lines"
steps=$(grep -o " step [0-9]*/300 " "$D/piped.log" | grep -o "[0-9]*/300" | cut -d/ -f1)
printed=$(echo "$steps" | grep -c .)
for want in 1 $(seq 25 25 300); do
  echo "$steps" | grep -qx "$want" || fail "step $want/300 not printed; printed: ${steps//$'\n'/ }"
done
# Any other step line is one of the 30-s wall-clock lines (a loaded machine): at most one per 30 s.
[ "$printed" -le $((13 + took / 30)) ] || fail "$printed step lines in ${took} s for 300 steps: ${steps//$'\n'/ }"

# --- a terminal ----------------------------------------------------------------------------------------------
spec tty 40 "eval: {every: 20}" "log_every: 1000"
env -u NO_COLOR TERM=xterm script -qfec "'$Z' run '$D/tty.yaml' --state-dir '$D/s2'" "$D/tty.raw" < /dev/null > /dev/null \
  || { cat -v "$D/tty.raw"; fail "run on a terminal"; }
grep -q $'\x1b\\[K' "$D/tty.raw" || fail "no erase-to-end-of-line on a terminal: $(cat -v "$D/tty.raw" | head)"
# Every step was drawn in place (log_every is for pipes and files)...
drawn=$(grep -ao $'\rstep [0-9]*/40 ' "$D/tty.raw" | grep -o "[0-9]*/40" | sort -u | wc -l)
[ "$drawn" = 40 ] || fail "$drawn of 40 steps drawn in place: $(cat -v "$D/tty.raw")"
# ... and what stays on screen (each line's text after its last carriage return) holds the two evaluations,
# the last progress line, and the final report on a line of its own.
sed 's/\r$//' "$D/tty.raw" | awk -F'\r' '{print $NF}' | sed 's/\x1b\[K//g' > "$D/tty.screen"
[ "$(grep -c "step [0-9]*/40 .*| eval: held-out acc" "$D/tty.screen")" = 2 ] \
  || fail "the evaluations are not lines of their own: $(cat "$D/tty.screen")"
[ "$(grep -c "step [0-9]*/40 " "$D/tty.screen")" = 3 ] || fail "step lines left on screen: $(cat "$D/tty.screen")"
grep -A1 "^step 40/40 " "$D/tty.screen" | grep -q "^zerofit run: job-000001 succeeded after 1 attempt" \
  || fail "the report is not on a fresh line under the last progress line: $(cat "$D/tty.screen")"
grep -q "^[0-9:]* [^ ]* *done: held-out accuracy" "$D/tty.screen" || fail "no done line: $(cat "$D/tty.screen")"
echo "PASS (pipe: $printed step lines of 300 in ${took} s; terminal: 40 steps in place, 2 evaluations as lines)"
