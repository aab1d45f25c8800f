#!/usr/bin/env bash
# The .debs as a user installs them on a clean Debian of this machine's release (bookworm on
# Debian 12, trixie on 13, forky: each depends on the runtimes it was built against): debootstrap
# a minimal one from the machine's apt mirror, `apt install ./plexus_*.deb
# ./python3-plexus_*.deb` there (apt brings python3-torch and the rest of their Depends), then
# from /tmp, with no PYTHONPATH: `import plexus` finds /usr/lib/python3/dist-packages, the
# README's numpy and torch examples run on 2 ranks (torch's with no import of plexus where torch
# 2.5+ reads entry points: bindings/python/tests/readme_examples.py); add a compiler, CMake and
# pkg-config, build the example service both ways and run it on 2 and 4 ranks under mpirun.
# Needs root (debootstrap, chroot, mounts in a private mount namespace); skips, saying why,
# without root, debootstrap or a reachable mirror.
set -euo pipefail

skip() { echo "SKIP: $*"; exit 0; }
[[ "$(id -u)" == 0 ]] || skip "needs root for debootstrap and chroot"
command -v debootstrap > /dev/null || skip "debootstrap is not installed (tools/install_deps.sh)"
suite="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
[[ -n "${suite}" ]] || skip "/etc/os-release names no Debian release"
# The first Debian archive apt uses here (deb822 .sources or a one-line list), not security's.
mirror="$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2> /dev/null |
  grep -oE '^(URIs:|deb)\s+https?://[^ ]+/debian/?(\s|$)' | awk '{print $2}' | head -1 || true)"
[[ -n "${mirror}" ]] || mirror="http://deb.debian.org/debian"

root="${TEST_TMPDIR}/${suite}"
sdk/deb --output="${TEST_TMPDIR}/deb" > /dev/null
bindings/python/python_deb --output="${TEST_TMPDIR}/deb" > /dev/null
if ! debootstrap --variant=minbase "${suite}" "${root}" "${mirror}" > "${TEST_TMPDIR}/debootstrap.log" 2>&1; then
  tail -5 "${TEST_TMPDIR}/debootstrap.log"
  skip "debootstrap could not build ${suite} from ${mirror}"
fi
cp "${TEST_TMPDIR}"/deb/*.deb "${root}/tmp/"
mkdir -p "${root}/tmp/service" "${root}/tmp/python"
cp README.md bindings/python/tests/readme_examples.py "${root}/tmp/python/"
cp -L docs/examples/cpp/* "${root}/tmp/service/"
cp sdk/example_checks.sh "${root}/tmp/"
cp /etc/resolv.conf "${root}/etc/" 2> /dev/null || true
# An archive whose index is a dated snapshot past its Valid-Until (forky's, see
# tools/debian/run.sh) is read inside as apt here is told to read it.
apt-config dump | grep -E '^Acquire::Check-Valid-Until ' \
  > "${root}/etc/apt/apt.conf.d/99plexus-snapshot" || true

cat > "${root}/tmp/inside.sh" <<'INSIDE'
set -euo pipefail
source /tmp/example_checks.sh
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Their Depends alone must be enough (and recommends would double the ~360 packages to unpack).
apt-get install -y -qq --no-install-recommends /tmp/plexus_*.deb /tmp/python3-plexus_*.deb \
  > /tmp/apt.log 2>&1 || { tail -20 /tmp/apt.log; exit 1; }
echo "ok: apt installed $(dpkg-query -W -f='${Package} ${Version}, ' plexus python3-plexus)on a clean $(. /etc/os-release && echo "${VERSION_CODENAME}")"
# Python, from outside any tree and with nothing on the path but what apt installed.
unset PYTHONPATH
cd /tmp/python
found="$(python3 -c 'import plexus; print(plexus.__file__)')"
[[ "${found}" == /usr/lib/python3/dist-packages/plexus/__init__.py ]] ||
  { echo "FAIL: import plexus found ${found}"; exit 1; }
echo "ok: import plexus from /tmp: ${found} (torch $(python3 -c 'import torch; print(torch.__version__)'))"
timeout 300 python3 readme_examples.py README.md
apt-get install -y -qq --no-install-recommends g++ cmake pkg-config make > /tmp/apt_tools.log 2>&1 ||
  { tail -20 /tmp/apt_tools.log; exit 1; }
cd /tmp/service
g++ average_service.cc $(pkg-config --cflags --libs plexus) -o service_pkgconfig
cmake -S . -B build > cmake.log 2>&1 && cmake --build build >> cmake.log 2>&1 ||
  { cat cmake.log; exit 1; }
for n in 2 4; do
  for binary in ./service_pkgconfig ./build/average_service; do
    out="$(timeout 120 mpirun --allow-run-as-root --oversubscribe -np "${n}" "${binary}" 5 2>&1)" ||
      true
    check_ranks "${out}" "${n}" 5 "${binary} on ${n} ranks, installed from the .deb"
  done
done
INSIDE

# Mounts made in a private namespace vanish with it, whatever happens.
unshare --mount --propagation private bash -c "
  set -e
  mount -t proc proc '${root}/proc'
  mount --bind /dev '${root}/dev'
  chroot '${root}' /bin/bash /tmp/inside.sh
"
