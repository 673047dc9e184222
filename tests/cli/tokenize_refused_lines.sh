#!/usr/bin/env bash
# Issue 29: `zerofit tokenize` on a file with one conversation Mistral's template refuses (a user turn after a
# user turn) writes that line with an "error" naming FILE:LINE and tokenizes the lines after it: three output
# lines, exit status 1, the count on stderr. With --fail-fast it stops there: exit status 2, the one line
# before it written. Usage: tokenize_refused_lines.sh ZEROFIT MISTRAL_DIR
set -u
zerofit=$1
tokenizer=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  cat "$tmp/err" "$tmp/out.jsonl" 2>/dev/null
  exit 1
}

cat >"$tmp/in.jsonl" <<'JSONL'
{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]}
{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}
{"messages": [{"role": "user", "content": "c"}]}
JSONL

"$zerofit" tokenize --tokenizer "$tokenizer" --in "$tmp/in.jsonl" --out "$tmp/out.jsonl" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] || fail "exit status $rc, want 1"
[ "$(wc -l <"$tmp/out.jsonl")" -eq 3 ] || fail "want 3 output lines"
grep -q '1 of 3 lines refused' "$tmp/err" || fail "stderr lacks the count"
sed -n 2p "$tmp/out.jsonl" | grep -qF "\"error\":\"$tmp/in.jsonl:2: chat template" || fail "line 2 lacks its error"
sed -n 3p "$tmp/out.jsonl" | grep -q '"ids":\[' || fail "line 3 is not tokenized"

"$zerofit" tokenize --fail-fast --tokenizer "$tokenizer" --in "$tmp/in.jsonl" --out "$tmp/out.jsonl" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] || fail "--fail-fast: exit status $rc, want 2"
[ "$(wc -l <"$tmp/out.jsonl")" -eq 1 ] || fail "--fail-fast: want the 1 line before the refused one"
grep -qF "$tmp/in.jsonl:2: chat template" "$tmp/err" || fail "--fail-fast: stderr lacks FILE:LINE"

"$zerofit" tokenize --help | grep -q -- '--fail-fast' || fail "--help does not document --fail-fast"
echo PASS
