#!/usr/bin/env bash
# CI's stages on other Debians (.ci/run): in a root of SUITE (tools/debian/run.sh), builds with
# --config=ci what users build there (the library, the Python package, the torch backend, the
# benchmark) and runs the tests that meet what that release has in other versions. The rest of
# the suite is the same code on the same kernel, built and run once in the Debian 12 stage.
#
#   tools/debian/ci.sh forky    # torch 2.14, Bazel 7, GCC 16, Python 3.14, Open MPI 6, clang 21
#   tools/debian/ci.sh trixie   # torch 2.6 (Debian 13): the torch backend and torch's suite
#
# forky (a CI stage) takes every platform-dependent suite: Python (the elastic communicator's
# loops and its torch training example included), torch and its stacks, torch's
# own DistributedTest suite at 2 ranks, mpirun and torchrun launches, the lifecycle suite, the
# fuzzers' clang build, the format check, the SDK installed and packaged. trixie (by hand) keeps
# what is its own, torch 2.6. The Bazel consumer as a Bazel 7 module compiles plexus afresh (4
# minutes): by hand, tools/debian/run.sh forky bazel test //tests/bazel_consumer:consumer_test.
# Prints "SUITE: N passed, N failed". Costs, and why: docs/building.md.
set -uo pipefail
cd "$(dirname "$0")/../.."

suite=${1:-}
case $suite in
  forky)
    targets=(
      //base/work:all
      //executor:all
      //bindings/python:test_api
      //bindings/python:test_collectives
      //bindings/python:test_elastic
      //bindings/python:test_elastic_loops
      //bindings/python:test_elastic_state
      //bindings/python:test_stores
      //bindings/python:test_torch_backend
      //bindings/python:test_torch_reconfigure
      //bindings/python:test_reconfigure_training
      //bindings/python:test_torch_semantics
      //bindings/python:test_torch_shrink
      //bindings/python:test_torch_hooks
      //bindings/python:test_torch_coalescing
      //bindings/python:test_torch_stacks
      //bindings/python:torch_suite_2_ranks
      //bindings/python:torch_fault_tolerance_suite
      //bindings/python:test_launchers
      //bindings/python:test_lifecycle
      //bindings/python:test_package
      //bindings/python:test_reconfigure
      //bindings/torch:torch_stream_test
      //tests/mpi:all
      //tests/transport:mpi_test
      //tests/conformance:semantics_mpi_test
      //tests/fuzz:fuzz_test
      //tools:format_test
      //sdk:install_test
      //sdk:deb_clean_install_test
      //tools:bench
    ) ;;
  trixie | 13)
    suite=trixie
    targets=(
      //bindings/python:plexus_pkg
      //bindings/python:test_package
      //bindings/python:test_torch_backend
      //bindings/python:test_torch_coalescing
      //bindings/python:test_torch_hooks
      //bindings/python:torch_suite_2_ranks
      //tools:bench
    ) ;;
  *) echo "usage: tools/debian/ci.sh forky|trixie" >&2
     exit 2 ;;
esac

log=$(mktemp)
started=$SECONDS
# One invocation: tests start as soon as what they need is built. The fuzzers run 3 s each
# here: what differs is their clang build.
bash tools/debian/run.sh "$suite" bazel test --config=ci --test_env=FUZZ_SECONDS=3 \
  "${targets[@]}" 2>&1 | tee "$log"
tested=${PIPESTATUS[0]}
total=$(sed -nE 's/^Executed [0-9]+ out of ([0-9]+) tests?:.*/\1/p' "$log" | tail -1)
failed=$(grep -cE "^//[^ ]+ +(FAILED|TIMEOUT|FAILED TO BUILD|NO STATUS)" "$log")
[[ -n "$total" ]] && echo "$suite: $((total - failed)) passed, $failed failed" \
  "($((SECONDS - started)) s for the stage)"
[[ -z "$total" ]] && echo "$suite: the build FAILED ($((SECONDS - started)) s for the stage)"
rm -f "$log"
exit "$tested"
