#!/usr/bin/env bash
# Builds a Debian package of the same install, prefix /usr:
#
#   bazel run //:deb -- --output=DIR      # DIR/plexus_0.1.0_amd64.deb
#   apt install ./plexus_0.1.0_amd64.deb  # then: pkg-config --cflags --libs plexus,
#                                         # find_package(plexus), /usr/bin/plexus-*
set -euo pipefail
output=""
for arg in "$@"; do
  case "${arg}" in
    --output=*) output="${arg#--output=}" ;;
    *) echo "deb: unknown argument '${arg}'; usage: deb --output=DIR" >&2; exit 2 ;;
  esac
done
[[ -n "${output}" ]] || { echo "deb: --output=DIR is required" >&2; exit 2; }
[[ "${output}" == /* ]] || output="${BUILD_WORKING_DIRECTORY:-${PWD}}/${output}"
# The main repository in the runfiles is "plexus" under Bazel 4's WORKSPACE, "_main" under bzlmod.
runfiles="${RUNFILES_DIR:-$0.runfiles}/plexus"
[[ -d "${runfiles}" ]] || runfiles="${RUNFILES_DIR:-$0.runfiles}/_main"
[[ -d "${runfiles}" ]] || runfiles="${PWD}"

# The package holding the shared library whose file name starts with $1, as this machine
# has it (libabsl20220623 on Debian 12, libabsl20240722 on Debian 13): the .deb depends on the
# runtime it was built against.
package_of() {
  local path owner
  path="$(ldconfig -p | awk -v lib="$1" 'index($1, lib) == 1 && /x86-64/ {print $NF; exit}')"
  [[ -n "${path}" ]] || { echo "deb: no shared library $1* on this machine" >&2; exit 1; }
  path="$(readlink -f "${path}")"
  # Merged /usr: dpkg may list the file under /lib or under /usr/lib.
  owner="$(dpkg-query -S "${path}" 2> /dev/null || dpkg-query -S "${path#/usr}" 2> /dev/null)" ||
    { echo "deb: no package owns ${path}" >&2; exit 1; }
  echo "${owner%%:*}"
}
absl="$(package_of libabsl_base.so.)"
gloo="$(package_of libgloo.so)"
mpi="$(package_of libmpi.so.)"
ssl="$(package_of libssl.so.3)"
depends="${absl}, libabsl-dev, ${gloo}, ${mpi}, openmpi-bin, ${ssl}, python3, python3-numpy"

stage="$(mktemp -d)"
trap 'rm -rf "${stage}"' EXIT
"${runfiles}/sdk/install" --prefix=/usr --destdir="${stage}" > /dev/null
version="$(sed -n 's/^Version: //p' "${stage}/usr/lib/pkgconfig/plexus.pc")"
install -d "${stage}/DEBIAN"
cat > "${stage}/DEBIAN/control" <<CONTROL
Package: plexus
Version: ${version}
Architecture: $(dpkg --print-architecture)
Maintainer: plexus developers <plexus@localhost>
Section: libdevel
Priority: optional
Depends: ${depends}
Recommends: pkg-config, cmake, g++
Installed-Size: $(du -sk "${stage}/usr" | cut -f1)
Description: collective communication for C++ services and Python
 plexus: all_reduce, broadcast, all_gather and the rest of torch.distributed's collectives
 over its own TCP and shared-memory backend, Gloo, Open MPI and NCCL, with an elastic
 fault-tolerant communicator. This package holds libplexus.so, <plexus/plexus.h>,
 pkg-config and CMake files, the tools and the Python package.
CONTROL
install -d "${output}"
dpkg-deb --build --root-owner-group "${stage}" "${output}/plexus_${version}_$(dpkg --print-architecture).deb"
