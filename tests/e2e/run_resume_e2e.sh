#!/bin/bash
# A job continued from the checkpoint an earlier job left (TRL's resume_from_checkpoint): a `zerofit run`
# stopped with Ctrl-C, and another killed with -9 together with its workers (a closed terminal, a reboot),
# leave their checkpoint.dir; a new `zerofit run --resume` (the first) or a spec with `checkpoint.resume: true`
# (the second), on a fresh state directory, continues after the latest checkpoint and ends with the same
# optimizer state and parameters as an uninterrupted run (the final checkpoint files compare equal), having
# taken over the earlier job's folders (rotated away as its own). Resuming a finished job, or another model's
# checkpoint, is refused with the reason and changes nothing; `checkpoint.resume` with an empty directory
# starts from step 0.
# usage: run_resume_e2e.sh path/to/zerofit path/to/zerofit_make_arith_prefs
set -u
set -m  # background jobs in their own process groups, SIGINT not ignored: a signal reaches `zerofit run` alone
Z="$1"
GEN="$2"
. "$(dirname "$0")/lib.sh"
"$GEN" --out "$D/data" --train 400 --test 40 --ids --pad > /dev/null || fail "data generation"
spec() {  # spec NAME CHECKPOINT_DIR [MORE CHECKPOINT KEYS]
  cat > "$D/$1.yaml" <<YAML
name: $1
task: reward
model: $D/data
data: $D/data
world_size: 2
max_restarts: 1
training:
  steps: 1500
  global_batch: 16
  micro_batch: 4
  gradient_accumulation: 2
  lr: 1.0e-3
  lr_schedule: cosine
  warmup_steps: 10
checkpoint: {dir: $2, every: 250, keep: 1${3:-}}
YAML
}
# Waits until the `zerofit run` writing LOG has checkpointed 0-based STEP.
wait_checkpoint() {
  for _ in $(seq 1200); do grep -q "(checkpoint step $2)" "$1" && return; sleep 0.05; done
  cat "$1"
  fail "never reached step $(($2 + 1))"
}
# Waits (10 s) until no worker of the run writing LOG is left.
wait_no_workers() {
  local addr
  addr=$(grep -o "(coordinator 127.0.0.1:[0-9]*" "$1" | head -1 | cut -d' ' -f2)
  for _ in $(seq 100); do pgrep -f "zerofit_worker --coordinator $addr " > /dev/null || return; sleep 0.1; done
  fail "workers of the stopped run are still running"
}
same_final_state() {  # same_final_state CHECKPOINT_DIR
  for r in 0 1; do
    cmp "$D/ck_straight/step-00001500/rank-0000$r.safetensors" "$1/step-00001500/rank-0000$r.safetensors" \
      || fail "$1: rank $r state differs from the uninterrupted run"
  done
}
continued_from() {  # continued_from LOG: the step the run continued after
  grep -o "checkpoint.resume: continuing from .* after [0-9]* steps" "$1" | grep -o "[0-9]* steps$" | cut -d' ' -f1
}

spec straight "$D/ck_straight"
"$Z" run "$D/straight.yaml" --state-dir "$D/s0" > "$D/straight.log" 2>&1 || { cat "$D/straight.log"; fail "uninterrupted run"; }

# 1. Ctrl-C, then zerofit run --resume.
spec ctrl_c "$D/ck_a"
"$Z" run "$D/ctrl_c.yaml" --state-dir "$D/s1" > "$D/ctrl_c.log" 2>&1 &
RUN=$!
wait_checkpoint "$D/ctrl_c.log" 249
kill -INT $RUN
wait $RUN && fail "a run stopped by SIGINT exited 0"
grep -q "stopped by SIGINT" "$D/ctrl_c.log" || { cat "$D/ctrl_c.log"; fail "not stopped by SIGINT"; }
wait_no_workers "$D/ctrl_c.log"
"$Z" run --resume "$D/ctrl_c.yaml" --state-dir "$D/s2" > "$D/resumed_a.log" 2>&1 \
  || { cat "$D/resumed_a.log"; fail "zerofit run --resume"; }
after=$(continued_from "$D/resumed_a.log")
[ -n "$after" ] && [ $((after % 250)) = 0 ] && [ "$after" -ge 250 ] && [ "$after" -lt 1500 ] \
  || { cat "$D/resumed_a.log"; fail "continued after '$after' steps"; }
grep -q "attempt 1: 400 training pairs, steps $after..1499" "$D/resumed_a.log" || fail "steps not from $after"
same_final_state "$D/ck_a"
folders=("$D"/ck_a/step-*)
[ ${#folders[@]} = 1 ] || fail "the earlier job's folders were not rotated: ${folders[*]}"

# 2. kill -9 of zerofit run (its workers die with it), then a spec with checkpoint.resume: true.
spec killed "$D/ck_b"
"$Z" run "$D/killed.yaml" --state-dir "$D/s3" > "$D/killed.log" 2>&1 &
RUN=$!
wait_checkpoint "$D/killed.log" 499
kill -9 $RUN
wait $RUN
wait_no_workers "$D/killed.log"
spec continued "$D/ck_b" ", resume: true"
"$Z" run "$D/continued.yaml" --state-dir "$D/s4" > "$D/resumed_b.log" 2>&1 \
  || { cat "$D/resumed_b.log"; fail "a spec with checkpoint.resume: true"; }
after=$(continued_from "$D/resumed_b.log")
[ -n "$after" ] && [ "$after" -ge 500 ] || { cat "$D/resumed_b.log"; fail "continued after '$after' steps"; }
same_final_state "$D/ck_b"

# 3. Nothing left to train: refused at once, nothing changed.
md5sum "$D"/ck_a/step-*/* > "$D/ck_a.md5"
"$Z" run --resume "$D/ctrl_c.yaml" --state-dir "$D/s5" > "$D/finished.log" 2>&1 && fail "a finished job resumed"
grep -q "ck_a/step-00001500 (job job-000001, request run-[0-9a-f-]*) holds 1500 steps and training.steps is 1500: nothing is left to train; raise training.steps" \
  "$D/finished.log" || { cat "$D/finished.log"; fail "no clear refusal of a finished job"; }
grep -q "failed after 1 attempt" "$D/finished.log" || fail "a job with nothing to train was retried"
md5sum -c --quiet "$D/ck_a.md5" || fail "the finished job's checkpoint changed"

# 4. Another model's checkpoint (a DPO policy has no reward head): refused, naming the parameter; unchanged.
spec other_task "$D/ck_a" ", resume: true"
sed -i 's/task: reward/task: dpo/; s/steps: 1500/steps: 2000/' "$D/other_task.yaml"
"$Z" run "$D/other_task.yaml" --state-dir "$D/s7" > "$D/other_task.log" 2>&1 && fail "a DPO job resumed a reward model"
grep -q "cannot start: checkpoint.resume: $D/ck_a/step-00001500/manifest.json: field 'params\[[0-9]*\]' is 'score.weight'" \
  "$D/other_task.log" || { cat "$D/other_task.log"; fail "no clear refusal of another model's checkpoint"; }
md5sum -c --quiet "$D/ck_a.md5" || fail "the refused checkpoint changed"

# 5. checkpoint.resume with no checkpoint yet: from step 0.
spec fresh "$D/ck_c" ", resume: true"
sed -i 's/steps: 1500/steps: 20/' "$D/fresh.yaml"
"$Z" run "$D/fresh.yaml" --state-dir "$D/s6" > "$D/fresh.log" 2>&1 || { cat "$D/fresh.log"; fail "resume: true, empty dir"; }
grep -q "checkpoint.resume: no checkpoint in $D/ck_c yet; starting from step 0" "$D/fresh.log" \
  || { cat "$D/fresh.log"; fail "no note that there was nothing to continue from"; }
echo PASS
