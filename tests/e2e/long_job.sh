# shellcheck shell=bash
# Sourced by the e2e scripts that stop a job midway (cancel_e2e.sh, stop_and_secrets_e2e.sh), after they set D
# (a scratch directory) and fail:
#   write_long_job GEN   $D/data (arithmetic pairs, made by GEN = zerofit_make_arith_prefs) and $D/job.yaml: a
#           reward job of 2 ranks and 100,000 steps that logs every step.
write_long_job() {
  "$1" --out "$D/data" --train 200 --test 20 --ids --pad > /dev/null || fail "data generation"
  cat > "$D/job.yaml" << YAML
name: long
task: reward
model: $D/data
data: $D/data
world_size: 2
max_restarts: 0
training: {steps: 100000, global_batch: 16, micro_batch: 4, gradient_accumulation: 2, lr: 1.0e-3}
log_every: 1
YAML
}
