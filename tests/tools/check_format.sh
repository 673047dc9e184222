#!/usr/bin/env bash
# clang-format is enforced: every C++ file tracked by git must already be formatted (.clang-format).
set -euo pipefail
cd "${1:-.}"
if ! command -v clang-format >/dev/null; then
  echo "clang-format not installed (./scripts/setup.sh installs it)"
  exit 1
fi
files=$(git ls-files '*.h' '*.cc' '*.cpp' 2>/dev/null || find . -name '*.h' -o -name '*.cc')
clang-format --dry-run --Werror $files
echo "format: ok ($(echo "$files" | wc -w) files)"
