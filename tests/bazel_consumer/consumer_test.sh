#!/usr/bin/env bash
# Builds docs/examples/cpp/average_service.cc in a workspace of its own that depends on this
# checkout (with Bazel 4, WORKSPACE.template; with Bazel 7 or later, MODULE.bazel.template and
# bazel_dep; BUILD.template, bazelrc.template as its .bazelrc), then runs 2 ranks through env://
# and checks every rank's checksum.
set -euo pipefail

source sdk/example_checks.sh
checkout="$(dirname "$(readlink -f WORKSPACE)")"
work="${TEST_TMPDIR}/consumer"
rm -rf "${work}"
mkdir -p "${work}" "${TEST_TMPDIR}/home"
bazel_major="$(bazel --batch --output_user_root="${TEST_TMPDIR}/bazel_root" --version |
               sed -nE 's/^bazel ([0-9]+)\..*/\1/p')"
if [[ "${bazel_major:-0}" -ge 7 ]]; then
  sed "s|PLEXUS_CHECKOUT|${checkout}|g" tests/bazel_consumer/MODULE.bazel.template \
    > "${work}/MODULE.bazel"
  # Empty: bzlmod reads WORKSPACE.bzlmod, not WORKSPACE, beside MODULE.bazel.
  : > "${work}/WORKSPACE.bzlmod"
else
  sed "s|PLEXUS_CHECKOUT|${checkout}|" tests/bazel_consumer/WORKSPACE.template > "${work}/WORKSPACE"
fi
cp tests/bazel_consumer/BUILD.template "${work}/BUILD"
cp tests/bazel_consumer/bazelrc.template "${work}/.bazelrc"
cp docs/examples/cpp/average_service.cc "${work}/"
cd "${work}"

# --batch: no server outlives the test. Actions unsandboxed: this test already runs outside
# Bazel's sandbox, and sandboxes do not nest everywhere.
export HOME="${TEST_TMPDIR}/home"
if ! timeout 2400 bazel --batch --output_user_root="${TEST_TMPDIR}/bazel_root" build \
       --spawn_strategy=local --jobs=2 --show_progress_rate_limit=60 --symlink_prefix=consumer- \
       //:average_service > build.log 2>&1; then
  tail -50 build.log
  echo "FAIL: the consumer workspace did not build"
  exit 1
fi
# Its own link name: a bazelrc of the machine's may set another (tools/debian/run.sh does).
binary="$(readlink -f consumer-bin/average_service)" ||
  { echo "FAIL: the build left no consumer-bin/average_service"; exit 1; }

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
pids=()
for r in 0 1; do
  MASTER_ADDR=127.0.0.1 MASTER_PORT="${port}" RANK="${r}" WORLD_SIZE=2 \
    timeout 120 "${binary}" 6 > "rank${r}.out" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "${pid}" || true; done  # check_ranks shows what failed.
check_ranks "$(cat rank0.out rank1.out)" 2 6 \
  "@plexus//sdk:plexus from another workspace, 2 ranks through env://"
