#!/usr/bin/env bash
# Sourced by sdk/make_deb.sh and bindings/python/make_python_deb.sh: their one argument, and
# the Depends of a .deb computed from what its ELF files link, as Debian's packaging does
# (dpkg-shlibdeps reads each library's shlibs or symbols file: libtorch2.14, libabsl20240722,
# libopenmpi3t64 and so on, with the lowest version that provides the symbols used).

# output_dir NAME ARG...: the absolute directory of --output=DIR (relative to where `bazel run`
# was started); exits with NAME's usage otherwise.
output_dir() {
  local name=$1 arg output=""
  shift
  for arg in "$@"; do
    case "${arg}" in
      --output=*) output="${arg#--output=}" ;;
      *) echo "${name}: unknown argument '${arg}'; usage: ${name} --output=DIR" >&2; exit 2 ;;
    esac
  done
  [[ -n "${output}" ]] || { echo "${name}: --output=DIR is required" >&2; exit 2; }
  [[ "${output}" == /* ]] || output="${BUILD_WORKING_DIRECTORY:-${PWD}}/${output}"
  echo "${output}"
}

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
