#!/usr/bin/env bash
# Sourced by sdk/make_deb.sh and bindings/python/make_python_deb.sh: the Depends of a .deb
# computed from what its ELF files link, as Debian's packaging does (dpkg-shlibdeps reads each
# library's shlibs or symbols file: libtorch2.14, libabsl20240722, libopenmpi3t64 and so on,
# with the lowest version that provides the symbols used).

# shlib_depends PRIVATE_DIR FILE...: the Depends line for FILEs (absolute paths); libraries the
# package itself holds (_plexus.so for _plexus_torch.so) are looked up in PRIVATE_DIR.
shlib_depends() {
  local private=$1 work out status
  shift
  work="$(mktemp -d)"
  mkdir -p "${work}/debian"
  # dpkg-shlibdeps wants a source package's control file to exist; it reads nothing else in it.
  printf 'Source: plexus\n\nPackage: plexus\nArchitecture: any\n' > "${work}/debian/control"
  status=0
  out="$(cd "${work}" && dpkg-shlibdeps -O "-l${private}" "$@" 2> "${work}/errors")" || status=$?
  if [[ ${status} -ne 0 ]]; then
    echo "deb: dpkg-shlibdeps could not compute the Depends of $*:" >&2
    grep -v ' warning: ' "${work}/errors" >&2
    rm -rf "${work}"
    return 1
  fi
  rm -rf "${work}"
  sed -n 's/^shlibs:Depends=//p' <<< "${out}"
}

# installed_range PACKAGE: "PACKAGE (>= X.Y~), PACKAGE (<< X.Y+1~)" for the X.Y this machine
# has installed (python3 3.11, python3-torch 2.14): an extension built for one minor version
# loads in no other.
installed_range() {
  local version major minor
  version="$(dpkg-query -W -f='${Version}' "$1" 2> /dev/null)" ||
    { echo "deb: $1 is not installed" >&2; return 1; }
  version="${version#*:}"  # Drop an epoch.
  major="${version%%.*}"
  minor="${version#*.}"
  minor="${minor%%[!0-9]*}"
  echo "$1 (>= ${major}.${minor}~), $1 (<< ${major}.$((minor + 1))~)"
}
