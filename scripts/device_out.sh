# Sourced by the GPU check scripts (scripts/gpu_grpo_check.sh, gpu_grpo_memory.sh, gpu_offload_capacity.sh):
# the device tool brings back at most 8 files from $OUT, so a script writes its logs to a work folder and
# hands over only its summary and one tarball of that folder.
#   copy_to_device_out SUMMARY WORK_DIR TARBALL   nothing without $OUT (or when $OUT is WORK_DIR itself)
copy_to_device_out() {
  local summary=$1 work=$2 tarball=$3
  [[ -n "${OUT:-}" && -d "${OUT:-}" && "$(realpath "$OUT")" != "$(realpath "$work")" ]] || return 0
  cp "$summary" "$OUT/"
  tar -C "$work" -czf "$OUT/$tarball" .
}
