# shellcheck shell=bash
# Sourced by the e2e scripts that check which processes of a job remain (stop_and_secrets_e2e, cancel_e2e):
#   tree PID    PID and all its descendants, one line of PIDs;
#   alive PID   true while PID runs (not gone, not a zombie nobody reaps).
tree() {
  local out="$1" kids
  kids=$(ps -o pid= --ppid "$1" 2> /dev/null)
  for k in $kids; do out="$out $(tree "$k")"; done
  echo "$out"
}
alive() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2> /dev/null)" != Z ]; }
