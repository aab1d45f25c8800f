#!/usr/bin/env bash
# Builds the plexus Python extension on the machine it will run on, from what pack.sh packed:
# the extension's sources, plexus's and abseil's headers, and the compiled objects of everything
# else it links (lib/libplexus_objects.a, built here). The GPU machine's Python (3.12, torch 2.11) differs from Debian's 3.11 the
# wheel is built for, and an extension is tied to one Python version; this needs only g++,
# the Python headers and pybind11 there (`pip install pybind11` or torch's copy).
#   build_python.sh [PYTHON]     # default: python3; writes python/plexus/_plexus*.so
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${1:-python3}
suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
python_include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
# pybind11's headers: the pybind11 package, else torch's bundled copy, else the system's.
pybind_include=$("$python" -c 'import pybind11; print(pybind11.get_include())' 2>/dev/null ||
                 "$python" -c 'import os, torch.utils.cpp_extension as e; print([p for p in e.include_paths() if os.path.isdir(p + "/pybind11")][0])' 2>/dev/null ||
                 echo /usr/include)
out="$here/python/plexus/_plexus$suffix"
echo "building $out with $($python --version 2>&1), pybind11 from $pybind_include"
# The libraries are the packed copies (-L lib): Debian's abseil, Gloo and Open MPI, by soname.
libraries=$(cd "$here/lib" && for flag in $(cat link_flags); do
  name=${flag#-l}
  match=$(ls "lib$name.so"* 2>/dev/null | head -1)
  if [[ -n "$match" ]]; then echo "-l:$match"; else echo "$flag"; fi
done | tr '\n' ' ')
flags=(-std=c++17 -O2 -fPIC -fvisibility=hidden -I"$here/include" -I"$python_include" -I"$pybind_include")
objects="$here/python/obj"
mkdir -p "$objects"
# One compiler per core: the binding sources are a dozen files.
printf '%s\n' "$here"/python/src/*.cc |
  xargs -P "$(nproc)" -I{} sh -c 'g++ "$@" -c "{}" -o "'"$objects"'/$(basename "{}" .cc).o"' _ "${flags[@]}"
# shellcheck disable=SC2086
g++ -shared "$objects"/*.o -Wl,--whole-archive "$here/lib/libplexus_objects.a" \
  -Wl,--no-whole-archive -L"$here/lib" $libraries \
  -Wl,-rpath,'$ORIGIN/../../lib' -o "$out"
echo "built $out"
