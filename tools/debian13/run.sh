#!/usr/bin/env bash
# Runs a command on this checkout inside a Debian 13 (trixie) root: torch 2.6, Python 3.13,
# GCC 14, abseil 20240722. Run as root.
#
#   tools/debian13/run.sh bazel test //bindings/python/...
#   tools/debian13/run.sh            # a shell there
#
# The first call makes the root (debootstrap --variant=minbase, about 1-2 minutes) and installs
# the project's dependencies in it with tools/install_deps.sh (about 3-5 minutes, ~1.5 GB); later
# calls reuse it, and rerun install_deps.sh, which returns at once when nothing is missing.
# The checkout is bind-mounted at the same path inside, so a path printed there is the path here.
# Bazel's convenience links are bazel-deb13-* (not bazel-*), so the two builds never swap
# each other's bazel-bin; each keeps its own output tree (the root's /root/.cache/bazel).
#
# PLEXUS_DEBIAN13_ROOT: where the root lives (default /var/cache/plexus/debian13).
# PLEXUS_DEBIAN_MIRROR: the archive (default: the first deb.debian.org-style URI apt uses here,
# else http://deb.debian.org/debian).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
root=${PLEXUS_DEBIAN13_ROOT:-/var/cache/plexus/debian13}
ready=$root/.plexus-ready

if [[ $(id -u) -ne 0 ]]; then
  echo "tools/debian13/run.sh: needs root (debootstrap, chroot, bind mounts)" >&2
  exit 2
fi

mirror() {
  if [[ -n ${PLEXUS_DEBIAN_MIRROR:-} ]]; then
    echo "$PLEXUS_DEBIAN_MIRROR"
    return
  fi
  local uri
  uri=$(grep -hoE '(URIs:|^deb)\s+https?://[^ ]+/debian/?(\s|$)' /etc/apt/sources.list \
          /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
        grep -v security | head -1 | awk '{print $2}')
  echo "${uri:-http://deb.debian.org/debian}"
}

make_root() {
  command -v debootstrap >/dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap
  local started=$SECONDS source
  source=$(mirror)
  echo "debian13: making $root from $source"
  # Never delete through a mount left by a run that was killed (its /proc, /dev, this checkout).
  if awk -v root="$root/" 'index($2 "/", root) == 1 {found = 1} END {exit !found}' /proc/mounts
  then
    echo "debian13: something is still mounted under $root (see /proc/mounts); unmount it" \
         "(umount -R -l PATH) and run again" >&2
    exit 1
  fi
  rm -rf "$root"
  mkdir -p "$(dirname "$root")"
  debootstrap --variant=minbase trixie "$root" "$source" >"$root.debootstrap.log" 2>&1 || {
    echo "debian13: debootstrap failed; the last lines of $root.debootstrap.log:" >&2
    tail -20 "$root.debootstrap.log" >&2
    exit 1
  }
  # The same archive for later apt-get runs inside (install_deps.sh), whatever debootstrap wrote.
  echo "deb $source trixie main" >"$root/etc/apt/sources.list"
  # Bazel's links in the shared checkout get names of their own (see the top of this file).
  mkdir -p "$root/etc"
  echo "build --symlink_prefix=bazel-deb13-" >"$root/etc/bazel.bazelrc"
  echo "debian13: root made in $((SECONDS - started)) s"
}

mounted=()
unmount_all() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -R -l "${mounted[i]}" 2>/dev/null || true; done
}
trap unmount_all EXIT

# Recursive (/dev brings /dev/shm and /dev/pts), and a slave: nothing mounted under it inside
# propagates back to this machine's tree.
bind() {  # bind SOURCE TARGET-inside-root
  mkdir -p "$root$2"
  mount --rbind "$1" "$root$2"
  mount --make-rslave "$root$2"
  mounted+=("$root$2")
}

[[ -f $ready ]] || make_root
# The root is a mount point, as / is on a machine (unshare --propagation, which
# sdk:deb_clean_install_test uses, needs one).
mount --bind "$root" "$root"
mounted+=("$root")
bind /proc /proc
bind /dev /dev
bind /sys /sys
bind "$repo" "$repo"
# Material beside the checkout (../shared) where there is some, as tests look for it.
[[ -d $repo/../shared ]] && bind "$(cd "$repo/../shared" && pwd)" "$(cd "$repo/.." && pwd)/shared"
# Name resolution as on this machine: its host name resolves as on a Debian 13 machine of its
# own (gloo and torchrun's c10d rendezvous look it up).
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
cp /etc/hosts "$root/etc/hosts" 2>/dev/null || true

in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    ${http_proxy:+http_proxy=$http_proxy} ${https_proxy:+https_proxy=$https_proxy} \
    bash -c "cd '$repo' && $1"
}

if [[ ! -f $ready ]]; then
  started=$SECONDS
  in_root "apt-get update -q >/dev/null && bash tools/install_deps.sh" || {
    echo "debian13: installing the dependencies failed" >&2
    exit 1
  }
  touch "$ready"
  echo "debian13: dependencies installed in $((SECONDS - started)) s"
else
  in_root "bash tools/install_deps.sh >/dev/null" || {
    echo "debian13: tools/install_deps.sh failed inside the root" >&2
    exit 1
  }
fi

if [[ $# -eq 0 ]]; then
  in_root "exec bash -i"
else
  in_root "$(printf '%q ' "$@")"
fi
