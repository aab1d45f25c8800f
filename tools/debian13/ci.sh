#!/usr/bin/env bash
# CI's Debian 13 stage (.ci/run): in a Debian 13 root (tools/debian13/run.sh), builds every
# target with --config=ci and runs the tests that meet what Debian 13 has in other versions
# (torch 2.6, Python 3.13, abseil 20240722, Open MPI 5, clang 19, its package names): the
# Python package and torch backend suites, torch 2.6's own DistributedTest suite at 2 and 3
# ranks, the Work and executor units, everything started by mpirun or torchrun, the fuzzers'
# clang build, the format check, and the SDK as installed, packaged and consumed by Bazel.
# The rest of the suite is the same code on the same kernel, and runs in the Debian 12 stage.
# Prints "debian13: N passed, N failed". Cost on the 2-core VM: see docs/building.md.
set -uo pipefail
cd "$(dirname "$0")/../.."

targets=(
  //base/work:all
  //executor:all
  //bindings/python:test_api
  //bindings/python:test_collectives
  //bindings/python:test_stores
  //bindings/python:test_torch_backend
  //bindings/python:test_torch_semantics
  //bindings/python:test_torch_stacks
  //bindings/python:torch_suite_2_ranks
  //bindings/python:torch_suite_3_ranks
  //bindings/python:test_launchers
  //bindings/python:test_lifecycle
  //bindings/torch:torch_stream_test
  //tests/mpi:all
  //tests/transport:mpi_test
  //tests/conformance:semantics_mpi_test
  //tests/fuzz:fuzz_test
  //tools:format_test
  //sdk:install_test
  //sdk:deb_clean_install_test
  //tests/bazel_consumer:consumer_test
)

log=$(mktemp)
started=$SECONDS
bash tools/debian13/run.sh bazel build --config=ci //... 2>&1 | tee "$log"
built=${PIPESTATUS[0]}
echo "debian13: bazel build //... $([[ $built -eq 0 ]] && echo passed || echo FAILED)" \
  "($((SECONDS - started)) s since the stage began)"
bash tools/debian13/run.sh bazel test --config=ci "${targets[@]}" 2>&1 | tee "$log"
tested=${PIPESTATUS[0]}
total=$(sed -nE 's/^Executed [0-9]+ out of ([0-9]+) tests?:.*/\1/p' "$log" | tail -1)
failed=$(grep -cE "^//[^ ]+ +(FAILED|TIMEOUT|FAILED TO BUILD|NO STATUS)" "$log")
[[ -n "$total" ]] && echo "debian13: $((total - failed)) passed, $failed failed" \
  "($((SECONDS - started)) s for the stage)"
rm -f "$log"
[[ $built -ne 0 ]] && exit "$built"
exit "$tested"
