#!/usr/bin/env bash
# Every C++ file of the checkout is formatted as .clang-format says (Debian 12's clang-format 14
# and Debian 13's 19 agree on every file; write constructs they format alike):
# the diff is printed, and the fix is `clang-format -i FILE`.
set -euo pipefail
checkout="$(dirname "$(readlink -f WORKSPACE)")"
if ! command -v clang-format > /dev/null; then
  # A check that cannot run must not pass: CI and every supported setup install it.
  echo "FAILED: clang-format is not installed, so the format cannot be checked" \
       "(tools/install_deps.sh installs it: apt install clang-format)"
  exit 1
fi
cd "${checkout}"
if [[ -d .git ]] && command -v git > /dev/null; then
  mapfile -t files < <(git ls-files '*.cc' '*.h')
else
  mapfile -t files < <(find . -path ./bazel-\* -prune -o \( -name '*.cc' -o -name '*.h' \) -print)
fi
present=()
for file in "${files[@]}"; do
  [[ -f "${file}" ]] && present+=("${file}")  # Not deleted in the working tree.
done
# One clang-format for every file: a process per file took 90 s on a busy 2-core machine.
if clang-format --dry-run --Werror "${present[@]}" > /dev/null 2>&1; then
  echo "${#files[@]} C++ files formatted as .clang-format says ($(clang-format --version))"
  exit 0
fi
failed=()
for file in "${present[@]}"; do
  if ! clang-format --dry-run --Werror "${file}" > /dev/null 2>&1; then
    failed+=("${file}")
    clang-format "${file}" | diff -u "${file}" - | head -40 || true
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "${#failed[@]} of ${#files[@]} C++ files differ from .clang-format; fix with:"
  echo "  clang-format -i ${failed[*]}"
  exit 1
fi
echo "${#files[@]} C++ files formatted as .clang-format says ($(clang-format --version))"
