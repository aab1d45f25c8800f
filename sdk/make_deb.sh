#!/usr/bin/env bash
# Builds a Debian package of the same install, prefix /usr:
#
#   bazel run //:deb -- --output=DIR      # DIR/plexus_0.1.0_amd64.deb
#   apt install ./plexus_0.1.0_amd64.deb  # then: pkg-config --cflags --libs plexus,
#                                         # find_package(plexus), /usr/bin/plexus-*
#
# The C++ side only: the Python package is python3-plexus (bazel run //:python_deb).
set -euo pipefail
# The main repository in the runfiles is "plexus" under Bazel 4's WORKSPACE, "_main" under bzlmod.
runfiles="${RUNFILES_DIR:-$0.runfiles}/plexus"
[[ -d "${runfiles}" ]] || runfiles="${RUNFILES_DIR:-$0.runfiles}/_main"
[[ -d "${runfiles}" ]] || runfiles="${PWD}"

source "${runfiles}/sdk/deb_common.sh"
output="$(output_dir deb "$@")"
stage="$(mktemp -d)"
trap 'rm -rf "${stage}"' EXIT
"${runfiles}/sdk/install" --prefix=/usr --destdir="${stage}" > /dev/null
# The Python package is python3-plexus's (bazel run //:python_deb).
rm -rf "${stage}/usr/lib/python3"
# What the library and the tools link, plus what a service building against the headers and
# starting ranks with mpirun needs.
depends="$(shlib_depends "${stage}/usr/lib" "${stage}"/usr/lib/libplexus.so.*.*.* \
  "${stage}"/usr/bin/plexus-{bench,tcp-store-server,elastic-master}), libabsl-dev, openmpi-bin"
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
 pkg-config and CMake files and the tools; python3-plexus holds the Python package.
CONTROL
install -d "${output}"
dpkg-deb --build --root-owner-group "${stage}" "${output}/plexus_${version}_$(dpkg --print-architecture).deb"
