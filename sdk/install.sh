#!/usr/bin/env bash
# Installs plexus under a prefix for C++ services, tools and Python:
#
#   bazel run //:install -- --prefix=/opt/plexus
#
#   PREFIX/lib/libplexus.so.0.1.0 (+ .so.0, .so)     every backend built here
#   PREFIX/include/plexus/plexus.h (+ what it includes, under include/plexus/)
#   PREFIX/lib/pkgconfig/plexus.pc                    pkg-config --cflags --libs plexus
#   PREFIX/lib/cmake/plexus/plexusConfig{,Version}.cmake   find_package(plexus): plexus::plexus
#   PREFIX/bin/plexus-bench, plexus-tcp-store-server, plexus-elastic-master
#   PREFIX/lib/python3/dist-packages/plexus           the Python package
#
# Run from Bazel's runfiles (bazel run, or a test that depends on //:install).
set -euo pipefail

prefix=""
destdir=""  # Staging root for packaging: files go to DESTDIR/PREFIX, and name PREFIX.
for arg in "$@"; do
  case "${arg}" in
    --prefix=*) prefix="${arg#--prefix=}" ;;
    --destdir=*) destdir="${arg#--destdir=}" ;;
    *) echo "install: unknown argument '${arg}'; usage: install --prefix=DIR [--destdir=DIR]" >&2
       exit 2 ;;
  esac
done
if [[ -z "${prefix}" ]]; then
  echo "install: --prefix=DIR is required" >&2
  exit 2
fi
# bazel run starts us in the runfiles; a relative prefix means the caller's directory.
if [[ "${prefix}" != /* ]]; then prefix="${BUILD_WORKING_DIRECTORY:-${PWD}}/${prefix}"; fi

# The main repository in the runfiles is "plexus" under Bazel 4's WORKSPACE, "_main" under bzlmod.
runfiles="${RUNFILES_DIR:-$0.runfiles}/plexus"
[[ -d "${runfiles}" ]] || runfiles="${RUNFILES_DIR:-$0.runfiles}/_main"
[[ -d "${runfiles}" ]] || runfiles="${PWD}"
cd "${runfiles}"
# The version is plexus.h's (kVersionMajor/Minor/Patch), so the two cannot drift apart.
version_part() { sed -nE "s/^inline constexpr int kVersion$1 = ([0-9]+);/\1/p" sdk/plexus.h; }
readonly version_major="$(version_part Major)" version_minor="$(version_part Minor)"
readonly version_patch="$(version_part Patch)"
readonly version="${version_major}.${version_minor}.${version_patch}"
[[ "${version}" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
  { echo "install: cannot read the version from sdk/plexus.h" >&2; exit 1; }
# The headers come from the source tree the runfiles link to.
source_root="$(cd "$(dirname "$(readlink -f sdk/plexus.h)")/.." && pwd)"
named="${prefix}"            # What the .pc and CMake files say.
prefix="${destdir}${prefix}"  # Where the files go.

install -d "${prefix}/lib/pkgconfig" "${prefix}/lib/cmake/plexus" "${prefix}/include/plexus" \
  "${prefix}/bin" "${prefix}/lib/python3/dist-packages"

# The library, with its soname link and the development link.
install -m 0755 sdk/libplexus.so "${prefix}/lib/libplexus.so.${version}"
ln -sfn "libplexus.so.${version}" "${prefix}/lib/libplexus.so.${version_major}"
ln -sfn "libplexus.so.${version_major}" "${prefix}/lib/libplexus.so"

# plexus.h and every header it includes from this repository, under include/plexus/, with
# their includes of each other rewritten to "plexus/..." so one -I PREFIX/include finds them.
headers="$(cd "${source_root}" && g++ -std=c++17 -MM -MT x -I. -isystem /usr/local/cuda/include \
  sdk/plexus.h | tr -d '\\' | tr ' ' '\n' | grep -E '^(base|executor|frontend|algorithms|backends|devices)/.*\.h$' | sort -u)"
rewrite() {
  sed -E 's@#include "(base|executor|frontend|algorithms|backends|devices)/@#include "plexus/\1/@' "$1"
}
for header in ${headers}; do
  install -d "${prefix}/include/plexus/$(dirname "${header}")"
  rewrite "${source_root}/${header}" > "${prefix}/include/plexus/${header}"
done
rewrite "${source_root}/sdk/plexus.h" > "${prefix}/include/plexus/plexus.h"

# What a consumer links besides libplexus: Debian's abseil (its .pc files).
readonly absl_modules="absl_base absl_flat_hash_set absl_span absl_status absl_statusor absl_strings absl_str_format absl_synchronization absl_time"
cat > "${prefix}/lib/pkgconfig/plexus.pc" <<EOF
prefix=${named}
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: plexus
Description: Collective communication (tcp, gloo, mpi and nccl backends) for C++ services
Version: ${version}
Requires: ${absl_modules}
Cflags: -std=c++17 -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lplexus
EOF

cat > "${prefix}/lib/cmake/plexus/plexusConfig.cmake" <<EOF
# plexus ${version}: find_package(plexus) gives the imported target plexus::plexus.
include(CMakeFindDependencyMacro)
find_dependency(PkgConfig)
pkg_check_modules(PLEXUS_ABSL REQUIRED IMPORTED_TARGET ${absl_modules})
get_filename_component(_plexus_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET plexus::plexus)
  add_library(plexus::plexus SHARED IMPORTED)
  set_target_properties(plexus::plexus PROPERTIES
    IMPORTED_LOCATION "\${_plexus_prefix}/lib/libplexus.so.${version}"
    IMPORTED_SONAME "libplexus.so.${version_major}"
    INTERFACE_INCLUDE_DIRECTORIES "\${_plexus_prefix}/include"
    INTERFACE_LINK_LIBRARIES "PkgConfig::PLEXUS_ABSL"
    INTERFACE_COMPILE_FEATURES cxx_std_17)
endif()
unset(_plexus_prefix)
EOF

cat > "${prefix}/lib/cmake/plexus/plexusConfigVersion.cmake" <<EOF
# Compatible when the major version matches and the installed version is not older.
set(PACKAGE_VERSION "${version}")
if(PACKAGE_FIND_VERSION_MAJOR EQUAL ${version_major} AND
   NOT PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
else()
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
endif()
EOF

install -m 0755 tools/bench "${prefix}/bin/plexus-bench"
install -m 0644 tools/bench_plot.py "${prefix}/bin/bench_plot.py"  # For plexus-bench --plot.
install -m 0755 tools/tcp_store_server "${prefix}/bin/plexus-tcp-store-server"
install -m 0755 tools/elastic_master "${prefix}/bin/plexus-elastic-master"
rm -rf "${prefix}/lib/python3/dist-packages/plexus"
cp -rL bindings/python/plexus_pkg/plexus "${prefix}/lib/python3/dist-packages/plexus"
chmod -R u+w "${prefix}/lib/python3/dist-packages/plexus"

echo "plexus ${version} installed under ${prefix}"
