#!/usr/bin/env bash
# Builds plexus's torch backend (plexus/_plexus_torch*.so) for the torch installed beside a
# given Python, next to an existing plexus package (one whose _plexus*.so that Python loads):
# Bazel builds it only for Debian's torch (1.13, 2.6, 2.14). Needs g++, that torch's headers (pip's wheels
# ship them) and plexus's and abseil's headers (a checkout, or the include/ of a GPU pack).
#   build_torch_extension.sh PACKAGE_DIR [PYTHON] [INCLUDE_DIR...]
# PACKAGE_DIR holds plexus/_plexus*.so; INCLUDE_DIR defaults to this checkout's root.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
package=$(cd "$1/plexus" && pwd)
python=${2:-python3}
shift $(( $# >= 2 ? 2 : 1 ))
includes=("$@")
[[ ${#includes[@]} -eq 0 ]] && includes=("$here")
sources="$here/bindings/torch"
[[ -d "$sources" ]] || sources="$(dirname "$0")/torch_src"  # A GPU pack carries them there.

suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
plexus_so=""
for name in "_plexus$suffix" _plexus.so; do
  [[ -f "$package/$name" ]] && { plexus_so=$name; break; }
done
[[ -n "$plexus_so" ]] || { echo "no _plexus extension in $package" >&2; exit 1; }
torch_info=$("$python" -c '
import os, torch
print(torch.__version__, int(torch._C._GLIBCXX_USE_CXX11_ABI), os.path.join(os.path.dirname(torch.__file__), "lib"))') ||
  { echo "build_torch_extension: $python cannot import torch" >&2; exit 1; }
read -r torch_version abi torch_lib <<<"$torch_info"
# torch's own helpers know its include paths; without them there is nothing to build against.
if ! include_list=$("$python" -c '
import torch.utils.cpp_extension as e
print("\n".join(e.include_paths()))' 2>&1); then
  echo "build_torch_extension: $python cannot import torch.utils.cpp_extension, which gives" \
       "torch's include paths:" >&2
  echo "$include_list" | tail -3 >&2
  echo "(Debian: apt install python3-setuptools, which it imports)" >&2
  exit 1
fi
mapfile -t torch_includes <<<"$include_list"
python_include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
out="$package/_plexus_torch$suffix"
echo "building $out for torch $torch_version against $plexus_so"

# The standard torch's headers ask for: C++20 from the torch whose ATen.h refuses older (as
# @torch//:defs.bzl decides for Bazel), else C++17.
standard=c++17
for dir in "${torch_includes[@]}"; do
  grep -qs "C++20 or later" "$dir/ATen/ATen.h" && standard=c++20
done
flags=(-std=$standard -O2 -fPIC -fvisibility=hidden -D_GLIBCXX_USE_CXX11_ABI="$abi"
       -Wno-deprecated-declarations -I"$python_include")
for dir in "${torch_includes[@]}" "${includes[@]}"; do flags+=(-I"$dir"); done
objects=$(mktemp -d)
trap 'rm -rf "$objects"' EXIT
printf '%s\n' "$sources"/*.cc |
  xargs -P "$(nproc)" -I{} sh -c 'g++ "$@" -c "{}" -o "'"$objects"'/$(basename "{}" .cc).o"' _ "${flags[@]}"
# Undefined plexus and abseil symbols resolve in _plexus (loaded first by `import plexus`).
g++ -shared "$objects"/*.o -o "$out" -L"$package" -l:"$plexus_so" -Wl,-rpath,'$ORIGIN' \
  -L"$torch_lib" -Wl,-rpath,"$torch_lib" -ltorch_python -ltorch -ltorch_cpu -lc10 -ldl
echo "built $out"
