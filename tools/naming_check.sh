#!/usr/bin/env bash
# Checks C++ names against .clang-tidy's readability-identifier-naming rules (the naming the code
# already follows: CamelCase types, kConstants, member_ suffixes, snake_case locals) with
# Debian's clang-tidy. Usage: bash tools/naming_check.sh [FILE...]  (default: every .cc file
# whose includes resolve here; files needing a vendor's headers that are absent are skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-tidy > /dev/null || { echo "naming_check: clang-tidy not installed (apt install clang-tidy)"; exit 1; }
includes=(-I. -I/usr/local/cuda/include -I/usr/lib/x86_64-linux-gnu/openmpi/include
          $(python3-config --includes 2>/dev/null || true))
if [[ $# -gt 0 ]]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files '*.cc' | grep -v '^third_party/')
fi
# One clang-tidy per file, as many at once as there are cores.
export NAMING_INCLUDES="${includes[*]}"
out=$(printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -n 4 bash -c \
  'for f; do clang-tidy --quiet "$f" -- -std=c++17 ${NAMING_INCLUDES} 2>&1 || true; done' _)
if grep -E "readability-identifier-naming" <<< "${out}"; then
  exit 1
fi
echo "naming_check: ${#files[@]} files follow .clang-tidy's naming"
