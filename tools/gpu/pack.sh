#!/usr/bin/env bash
# Packs the GPU checks into one folder that runs on a bare x86-64 Linux machine with the NVIDIA
# driver (no Bazel, no Debian packages there): the conformance suites on CUDA tensors (nccl and
# staged through tcp), the nccl backend's own tests, the benchmark, their non-system shared
# libraries and the CUDA runtime; and for the Python checks, the compiled objects of everything
# the extension links (from this build of //bindings/python:_plexus.so), plexus's and abseil's
# headers, the extension's sources and the plexus package, from which build_python.sh builds the
# extension for that machine's Python (an extension is tied to one Python version). NCCL itself (218 MB) does not fit the 64 MiB budget: run.sh
# takes it from the machine (PLEXUS_NCCL_LIBRARY, or the nvidia-nccl-cu13 / torch copy).
#
#   tools/gpu/pack.sh [DIR]     # default: gpu_pack/ at the repository root (git-ignored)
#   DIR/run.sh                  # on the GPU machine
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(realpath -m "${1:-$root/gpu_pack}")
cd "$root"

tests=(
  //tests/conformance:reductions_nccl_gpu_test
  //tests/conformance:data_movement_nccl_gpu_test
  //tests/conformance:semantics_nccl_gpu_test
  //tests/conformance:reductions_staged_gpu_test
  //tests/conformance:data_movement_staged_gpu_test
  //tests/conformance:semantics_staged_gpu_test
  //tests/nccl:nccl_gpu_test
)
bazel build --strip=always "${tests[@]}" //tools:bench //bindings/python:_plexus.so

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
binaries=()
for target in "${tests[@]}" //tools:bench; do
  path="bazel-bin/$(echo "${target#//}" | tr ':' '/')"
  install -m 755 "$path" "$out/bin/"
  binaries+=("$path")
done

# Every shared library the binaries load except the C library family and the C++ runtime,
# which any Linux with the NVIDIA driver has (newer ones are backward compatible).
system='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libresolv\.|libutil\.|libstdc\+\+\.|libgcc_s\.)'
binaries+=(bazel-bin/bindings/python/_plexus.so)
for binary in "${binaries[@]}"; do
  ldd "$binary" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ "$name" =~ $system ]] && continue
  cp -L "$path" "$out/lib/$name"
done
# Everything the extension links but its own binding sources, as one archive (debug info off),
# and the libraries it names.
objects=$(mktemp -d)
grep -E '\.o$' bazel-bin/bindings/python/_plexus.so-2.params | grep -v '/bindings/python/' |
  while read -r object; do
    objcopy --strip-debug "$object" "$objects/$(echo "$object" | tr '/' '_')"
  done
ar qc "$out/lib/libplexus_objects.a" "$objects"/*.o
rm -rf "$objects"
grep -E '^-l' bazel-bin/bindings/python/_plexus.so-2.params | sort -u | tr '\n' ' ' > "$out/lib/link_flags"

# The Python side: headers, the extension's sources, the package and the tests.
mkdir -p "$out/include" "$out/python/src" "$out/python/plexus" "$out/python/tests"
git ls-files '*.h' | grep -E '^(base|executor|frontend|devices|algorithms|backends)/' | while read -r header; do
  install -D -m 644 "$header" "$out/include/$header"
done
cp -r /usr/include/absl "$out/include/absl"
cp bindings/python/src/*.cc bindings/python/src/*.h "$out/python/src/"
install -D -m 644 -t "$out/include/bindings/python/src" bindings/python/src/*.h
(cd bindings/python && find plexus -name '*.py' -exec install -D -m 644 {} "$out/python/{}" \;)
cp bindings/python/tests/multiproc.py bindings/python/tests/test_gpu.py \
   bindings/python/tests/test_collectives.py "$out/python/tests/"
install -m 755 tools/gpu/build_python.sh "$out/build_python.sh"
# The torch backend, built there for that torch: build_torch_extension.sh python <its python> include
install -D -m 644 -t "$out/include/bindings/torch" bindings/torch/*.h
install -D -m 644 -t "$out/torch_src" bindings/torch/*.cc
install -m 755 tools/build_torch_extension.sh "$out/build_torch_extension.sh"
install -m 644 tools/gpu/per_call.py "$out/per_call.py"

cuda_root=$(readlink -f /usr/local/cuda)
cp -L "$cuda_root/lib64/libcudart.so.13" "$out/lib/"
install -m 755 tools/gpu/run.sh "$out/run.sh"
git rev-parse HEAD > "$out/COMMIT"
size=$(du -sm "$out" | cut -f1)
echo "packed $out: ${size} MiB"
if (( size > 64 )); then
  echo "pack.sh: $out is ${size} MiB, over the 64 MiB a device run carries" >&2
  exit 1
fi
