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
failed=0
for file in "${files[@]}"; do
  out=$(clang-tidy --quiet "${file}" -- -std=c++17 "${includes[@]}" 2>&1 || true)
  if grep -q "readability-identifier-naming" <<< "${out}"; then
    grep -E "readability-identifier-naming" <<< "${out}"
    failed=1
  fi
done
[[ ${failed} -eq 0 ]] && echo "naming_check: ${#files[@]} files follow .clang-tidy's naming"
exit "${failed}"
