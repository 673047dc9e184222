#!/usr/bin/env bash
# Regenerates tests/text/golden/chat_*.jsonl with Python jinja2 (Debian python3-jinja2, see scripts/setup.sh).
#   tests/text/oracle/make_chat_golden.sh [HF_TOKENIZERS_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
hf_dir="${1:-$root/../shared/hf-tokenizers}"
python3 "$root/tests/text/oracle/make_chat_golden.py" "$hf_dir" "$root/tests/text/golden"
