#!/usr/bin/env bash
# Builds python3-plexus, the Python package as Debian installs Python modules:
#
#   bazel run //:python_deb -- --output=DIR      # DIR/python3-plexus_0.1.0_amd64.deb
#   apt install ./python3-plexus_0.1.0_amd64.deb
#
# It puts plexus/ (the extensions built here for this machine's python3 and torch),
# _plexus_entry.py and plexus-VERSION.dist-info (the entry points through which torch 2.5+ finds
# "plexus" with no import: _plexus_entry.py) in /usr/lib/python3/dist-packages. Its Depends come
# from what the extensions link (dpkg-shlibdeps: libtorch, abseil, gloo, Open MPI, OpenSSL), the
# python3 and the python3-torch they were built for, and numpy. The C++ SDK is the package
# plexus (bazel run //:deb).
set -euo pipefail
# The main repository in the runfiles is "plexus" under Bazel 4's WORKSPACE, "_main" under bzlmod.
runfiles="${RUNFILES_DIR:-$0.runfiles}/plexus"
[[ -d "${runfiles}" ]] || runfiles="${RUNFILES_DIR:-$0.runfiles}/_main"
[[ -d "${runfiles}" ]] || runfiles="${PWD}"
source "${runfiles}/sdk/deb_common.sh"
output="$(output_dir python_deb "$@")"

stage="$(mktemp -d)"
trap 'rm -rf "${stage}"' EXIT
site="${stage}/usr/lib/python3/dist-packages"
install -d "${site}"
cp -rL "${runfiles}/bindings/python/plexus_pkg/." "${site}/"
find "${site}" -name __pycache__ -prune -exec rm -rf {} +
chmod 0755 "${stage}"
find "${stage}/usr" -type d -exec chmod 0755 {} +
find "${stage}/usr" -type f -exec chmod 0644 {} +  # Modules and extensions alike, as Debian's.
(( $(ls "${site}"/plexus-*.dist-info/entry_points.txt | wc -l) == 1 )) ||
  { echo "python_deb: plexus_pkg holds no single plexus-*.dist-info" >&2; exit 1; }
version="$(sed -n 's/^Version: //p' "${site}"/plexus-*.dist-info/METADATA)"
# Debian records the installer as dh_python3 would; pip then leaves the files to apt.
echo debian > "$(echo "${site}"/plexus-*.dist-info)/INSTALLER"

depends="$(shlib_depends "${site}/plexus" "${site}"/plexus/*.so)"
depends+=", $(installed_range python3), python3-numpy"
# The torch backend is built for one torch: a torch of another minor version does not load it.
if [[ -e "${site}/plexus/_plexus_torch.so" ]]; then
  depends+=", $(installed_range python3-torch)"
fi

install -d "${stage}/DEBIAN"
cat > "${stage}/DEBIAN/control" <<CONTROL
Package: python3-plexus
Source: plexus
Version: ${version}
Architecture: $(dpkg --print-architecture)
Maintainer: plexus developers <plexus@localhost>
Section: python
Priority: optional
Depends: ${depends}
Suggests: plexus, openmpi-bin
Installed-Size: $(du -sk "${stage}/usr" | cut -f1)
Description: collective communication with torch.distributed's API (Python)
 plexus: all_reduce, broadcast, all_gather and the rest of torch.distributed's collectives
 on numpy arrays and torch tensors, over its own TCP and shared-memory backend, Gloo, Open MPI
 and NCCL, with an elastic fault-tolerant communicator. "import plexus as dist" stands in for
 torch.distributed; "plexus" is a torch.distributed backend that torch 2.5 and later find
 installed (torch 1.13: import plexus.torch). The C++ SDK is the package plexus.
CONTROL
# Byte-compiled on install and cleaned on removal, as dh_python3's scripts do (python3's
# python3-minimal has both tools).
cat > "${stage}/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ "$1" = configure ] && command -v py3compile > /dev/null 2>&1; then
  py3compile -p python3-plexus
fi
POSTINST
cat > "${stage}/DEBIAN/prerm" <<'PRERM'
#!/bin/sh
set -e
if command -v py3clean > /dev/null 2>&1; then
  py3clean -p python3-plexus
fi
PRERM
chmod 0755 "${stage}/DEBIAN/postinst" "${stage}/DEBIAN/prerm"
install -d "${output}"
dpkg-deb --build --root-owner-group "${stage}" \
  "${output}/python3-plexus_${version}_$(dpkg --print-architecture).deb"
