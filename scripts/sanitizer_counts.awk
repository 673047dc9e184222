# Reads a compute-sanitizer log (memcheck, racecheck, synccheck) and prints "<errors> <api-in-nccl>
# <api-elsewhere>" (scripts/gpu_acceptance.sh; tests/tools/sanitizer_counts_test.sh with H200 logs). An API
# error's block is its "Program hit" line and the backtrace lines after it; it counts as NCCL's when a frame
# names libnccl (NCCL probes kernels and attributes at its initialisation and handles the errors itself).
function close_block() { if (in_api) { if (nccl) in_nccl++; else elsewhere++ } in_api = 0; nccl = 0 }
/=========     Program hit/ || /========= Program hit/ { close_block(); in_api = 1; next }
/Invalid __(global|shared|local)__|Race reported|Barrier error|Misaligned|Out-of-range|Uninitialized|Leaked/ {
  close_block(); errors++; next }
in_api && /libnccl/ { nccl = 1 }
# memcheck and synccheck end with "ERROR SUMMARY: N errors" (the API errors included), racecheck with
# "RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)": errors are the larger of N less the API
# errors and the errors counted above (a kind of error this parser does not know still fails).
/^========= (ERROR|RACECHECK) SUMMARY/ {
  close_block()
  if (match($0, /SUMMARY: [0-9]+ error/) || match($0, /\([0-9]+ error/)) {
    n = substr($0, RSTART, RLENGTH); gsub(/[^0-9]/, "", n); summary += n } }
END {
  close_block()
  if (summary - in_nccl - elsewhere > errors) errors = summary - in_nccl - elsewhere
  printf "%d %d %d\n", errors, in_nccl, elsewhere }
