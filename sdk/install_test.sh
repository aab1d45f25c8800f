#!/usr/bin/env bash
# The C++ SDK as a service team uses it: install plexus into a temporary prefix, copy the
# example service out of the repository, build it with pkg-config and with CMake, and run 2 and
# 4 ranks under mpirun and 2 through env:// (MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE, as
# torchrun sets them); every rank must print the checksum computed here. The reconfigure example
# likewise, on 3 processes sharing a FileStore. Then the .deb: its
# dependencies, and the example built against its unpacked files and run.
set -euo pipefail

prefix="${TEST_TMPDIR}/prefix"
work="${TEST_TMPDIR}/service"
runfiles="${PWD}"
source sdk/example_checks.sh
sdk/install --prefix="${prefix}" > "${TEST_TMPDIR}/install.log"
rm -rf "${work}"
cp -rL docs/examples/cpp "${work}"
cd "${work}"

export PKG_CONFIG_PATH="${prefix}/lib/pkgconfig"
g++ average_service.cc $(pkg-config --cflags --libs plexus) -o average_service_pkgconfig
cmake -S . -B build -DCMAKE_PREFIX_PATH="${prefix}" > cmake.log 2>&1 || { cat cmake.log; exit 1; }
cmake --build build >> cmake.log 2>&1 || { cat cmake.log; exit 1; }

mpirun_args=(--oversubscribe)
[[ "$(id -u)" == 0 ]] && mpirun_args+=(--allow-run-as-root)
for binary in ./average_service_pkgconfig ./build/average_service; do
  for n in 2 4; do
    out="$(timeout 180 mpirun -np "${n}" "${mpirun_args[@]}" "${binary}" 10 2>&1)" || true
    check_ranks "${out}" "${n}" 10 "${binary} under mpirun -np ${n}"
  done
done

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
pids=()
for r in 0 1; do
  MASTER_ADDR=127.0.0.1 MASTER_PORT="${port}" RANK="${r}" WORLD_SIZE=2 \
    timeout 120 ./build/average_service 5 > "rank${r}.out" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "${pid}" || true; done  # check_ranks shows what failed.
check_ranks "$(cat rank0.out rank1.out)" 2 5 "env:// with MASTER_ADDR/MASTER_PORT"

# Membership by handle (reconfigure_service.cc): 3 processes form a group, then 2 once the last
# has left; each prints what it saw.
g++ reconfigure_service.cc $(pkg-config --cflags --libs plexus) -o reconfigure_service_pkgconfig
for binary in ./reconfigure_service_pkgconfig ./build/reconfigure_service; do
  store="${TEST_TMPDIR}/handles.$(basename "${binary}")"
  pids=()
  for i in 0 1 2; do
    timeout 120 "${binary}" "${store}" "${i}" 3 > "member${i}.out" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "${pid}" || true; done  # The lines below show what failed.
  out="$(cat member0.out member1.out member2.out)"
  expected="member 0: uuid 1: rank 0 of 3, sum 6.0
member 0: uuid 2: rank 0 of 2, sum 3.0
member 1: uuid 1: rank 1 of 3, sum 6.0
member 1: uuid 2: rank 1 of 2, sum 3.0
member 2: uuid 1: rank 2 of 3, sum 6.0"
  if [[ "${out}" != "${expected}" ]]; then
    echo "FAIL: ${binary} on 3 processes printed:"; echo "${out}"; echo "expected:"; echo "${expected}"
    exit 1
  fi
  echo "ok: ${binary}: 3 members, then 2"
done

# The Debian package: unpacked rather than installed (a test must not change the system), with
# pkg-config told where the /usr tree now is.
"${runfiles}/sdk/deb" --output="${TEST_TMPDIR}/deb" > /dev/null
package="$(ls "${TEST_TMPDIR}"/deb/plexus_*.deb)"
depends="$(dpkg-deb -f "${package}" Depends)"
# The runtimes it was built against, by this machine's package names (libabsl20220623 and
# libopenmpi3 on Debian 12, libabsl20240722 and libopenmpi40 on Debian 13), each installed here.
for needed in libabsl2 libabsl-dev libgloo libopenmpi openmpi-bin libssl3; do
  grep -q "${needed}" <<< "${depends}" || { echo "FAIL: the .deb does not depend on ${needed}*"; exit 1; }
done
# Package names without their version constraints (dpkg-shlibdeps writes "libc6 (>= 2.34)").
for dependency in $(sed -E 's/\([^)]*\)//g; s/,/ /g' <<< "${depends}"); do
  dpkg-query -W -f='${Status}' "${dependency}" 2> /dev/null | grep -q "install ok installed" ||
    { echo "FAIL: the .deb depends on ${dependency}, which this machine does not have"; exit 1; }
done
root="${TEST_TMPDIR}/debroot"
dpkg-deb -x "${package}" "${root}"
for path in usr/lib/libplexus.so.0 usr/include/plexus/plexus.h usr/lib/pkgconfig/plexus.pc \
            usr/lib/cmake/plexus/plexusConfig.cmake usr/bin/plexus-bench; do
  [[ -e "${root}/${path}" ]] || { echo "FAIL: the .deb has no /${path}"; exit 1; }
done
# The Python package is python3-plexus's: the two packages share no file.
[[ ! -e "${root}/usr/lib/python3" ]] ||
  { echo "FAIL: the SDK's .deb holds /usr/lib/python3, which is python3-plexus's"; exit 1; }
g++ average_service.cc \
  $(PKG_CONFIG_PATH="${root}/usr/lib/pkgconfig" pkg-config --define-prefix --cflags --libs plexus) \
  -o average_service_deb
out="$(timeout 180 mpirun -np 2 "${mpirun_args[@]}" ./average_service_deb 10 2>&1)" || true
check_ranks "${out}" 2 10 "built against the unpacked .deb, mpirun -np 2"
