#!/usr/bin/env bash
# CI's Debian 13 stage (.ci/run): in a Debian 13 root (tools/debian13/run.sh), builds with
# --config=ci what users build there (the library, the Python package, the torch backend, the
# SDK, the benchmark) and runs the tests that meet what Debian 13 has in other versions (torch
# 2.6, Python 3.13, abseil 20240722, Open MPI 5, clang 19, its package names): the Python
# package and torch backend suites, torch 2.6's own DistributedTest suite at 2 ranks, the Work
# and executor units, everything started by mpirun or torchrun, the fuzzers' clang build, the
# format check, and the SDK as installed and packaged. The rest of the suite (and every other
# target) is the same code on the same kernel, built and run in the Debian 12 stage.
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
  //tools:bench
)

log=$(mktemp)
started=$SECONDS
# One invocation: tests start as soon as what they need is built. The fuzzers run 3 s each
# here: what differs on Debian 13 is their clang 19 build.
bash tools/debian13/run.sh bazel test --config=ci --test_env=FUZZ_SECONDS=3 "${targets[@]}" 2>&1 |
  tee "$log"
tested=${PIPESTATUS[0]}
total=$(sed -nE 's/^Executed [0-9]+ out of ([0-9]+) tests?:.*/\1/p' "$log" | tail -1)
failed=$(grep -cE "^//[^ ]+ +(FAILED|TIMEOUT|FAILED TO BUILD|NO STATUS)" "$log")
[[ -n "$total" ]] && echo "debian13: $((total - failed)) passed, $failed failed" \
  "($((SECONDS - started)) s for the stage)"
[[ -z "$total" ]] && echo "debian13: the build FAILED ($((SECONDS - started)) s for the stage)"
rm -f "$log"
exit "$tested"
