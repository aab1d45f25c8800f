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
runfiles="${RUNFILES_DIR:-$0.runfiles}/plexus"
[[ -d "${runfiles}" ]] || runfiles="${PWD}"

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
Depends: libabsl20220623, libabsl-dev, libgloo0, libopenmpi3, openmpi-bin, libssl3, python3, python3-numpy
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
