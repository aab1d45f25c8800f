#!/usr/bin/env bash
# Installs every Debian package plexus needs to build and test. Idempotent: packages already
# present are skipped, and apt-get runs only when something is missing. Run as root (or with
# sudo available).
set -euo pipefail

packages=(
  bazel-bootstrap      # Bazel 4.2.3, the build system (offline; see docs/building.md)
  g++
  libabsl-dev          # abseil 20220623 (Debian 12), 20240722 (Debian 13)
  libgtest-dev libgmock-dev
  libgloo-dev          # the gloo backend
  libssl-dev           # libcrypto: HMAC-SHA256 connection authentication
  clang                # libFuzzer targets (tests/fuzz)
  libclang-rt-dev      # clang's sanitizer headers and runtimes (Debian 13 splits them out)
  clang-format         # tools:format_test: C++ formatted as .clang-format says
  clang-tidy           # tools/naming_check.sh: names as .clang-tidy says (a CI stage)
  libopenmpi-dev openmpi-bin  # the mpi backend and mpirun
  pybind11-dev python3-dev    # Python bindings
  python3-numpy python3-pytest python3-torch  # Python tests; plexus.torch and DDP
  python3-setuptools   # torch.utils.cpp_extension imports it (tools/build_torch_extension.sh)
  libtorch-dev         # torch 1.13 (Debian 12) or 2.6 (Debian 13): the C++ torch backend
  python3-matplotlib   # bench --plot, hang_report --plot
  python3-venv         # installing the wheel into a venv (docs/python.md; PEP 668)
  cmake pkg-config     # building C++ services against an install (sdk:install_test)
  debootstrap          # a clean Debian 12 to install the .debs into (sdk:deb_clean_install_test)
  dpkg-dev             # dpkg-shlibdeps: the .debs' Depends from what their libraries link
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
[[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
echo "install_deps: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends \
  "${missing[@]}"
