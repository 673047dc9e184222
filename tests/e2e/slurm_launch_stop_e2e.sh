#!/bin/bash
# `zerofit slurm-launch` stopping its srun (issue 19): SIGTERM to slurm-launch (Slurm ending or requeueing the
# job) sends srun SIGTERM, and SIGKILL to srun's process group when srun has not exited after the 5 s grace
# (an srun stuck on a node it cannot reach). A fake srun that ignores SIGTERM stands in for it, inside a fake
# allocation (the SLURM_* variables of a batch step): no Slurm needed.
# usage: slurm_launch_stop_e2e.sh path/to/zerofit
set -u
Z="$1"
. "$(dirname "$0")/lib.sh"
printf '#!/bin/bash\ntrap "" TERM\necho $$ > "%s/srun.pid"\nwhile true; do sleep 0.1; done\n' "$D" > "$D/srun"
chmod +x "$D/srun"
mkdir -m 700 "$D/state"
cat > "$D/job.yaml" << YAML
name: stop
task: reward
model: $D/model
data: $D/data
world_size: 2
training: {steps: 10, global_batch: 4, micro_batch: 1, gradient_accumulation: 2}
YAML
SLURM_JOB_ID=424242 SLURM_JOB_NUM_NODES=1 SLURM_NTASKS=2 SLURM_CPUS_PER_TASK=1 SLURM_RESTART_COUNT=0 \
  SLURM_JOB_NODELIST="$(hostname -s)" "$Z" slurm-launch --state-dir "$D/state" --spec "$D/job.yaml" \
  --worker /bin/true --srun "$D/srun" --scontrol /bin/true > "$D/launch.log" 2>&1 &
LAUNCH=$!
for _ in $(seq 100); do [ -s "$D/srun.pid" ] && break; sleep 0.1; done
[ -s "$D/srun.pid" ] || fail "the fake srun did not start: $(cat "$D/launch.log")"
SRUN=$(cat "$D/srun.pid")
start=$(date +%s%N)
kill -TERM "$LAUNCH"
for _ in $(seq 150); do kill -0 "$SRUN" 2> /dev/null || break; sleep 0.1; done
if kill -0 "$SRUN" 2> /dev/null; then
  kill -9 "$SRUN"
  fail "srun still runs 15 s after SIGTERM to slurm-launch: $(cat "$D/launch.log")"
fi
took_ms=$((($(date +%s%N) - start) / 1000000))
# It ignores SIGTERM: only the SIGKILL after the grace ends it.
[ "$took_ms" -ge 4000 ] || fail "srun ended ${took_ms} ms after the SIGTERM: before the grace, not by SIGKILL"
for _ in $(seq 100); do kill -0 "$LAUNCH" 2> /dev/null || break; sleep 0.1; done
kill -0 "$LAUNCH" 2> /dev/null && fail "slurm-launch still runs after its srun ended"
echo "srun (ignoring SIGTERM) killed ${took_ms} ms after SIGTERM to slurm-launch"
echo "PASS"
