#!/usr/bin/env bash
# Runs a command on this checkout inside a root of another Debian release. Run as root.
#
#   tools/debian/run.sh trixie bazel test //bindings/python/...   # Debian 13: torch 2.6, GCC 14
#   tools/debian/run.sh forky bazel build //tools:bench            # forky: torch 2.14, Bazel 7
#   tools/debian/run.sh forky                                      # a shell there
#
# The first call makes the root (debootstrap --variant=minbase, about 1-2 minutes) and installs
# the project's dependencies in it with tools/install_deps.sh (3-8 minutes, 1.5-3 GB); later
# calls reuse it, and rerun install_deps.sh, which returns at once when nothing is missing.
# The checkout is bind-mounted at the same path inside, so a path printed there is the path here.
# Bazel's convenience links are bazel-deb13-* or bazel-forky-* (not bazel-*), so the builds
# never swap each other's bazel-bin; each keeps its own output tree (the root's /root/.cache).
#
# forky is Debian's `testing`: this machine's debootstrap may have no script named forky, so
# sid's is used (the two differ only in name). The archive's forky index can be a dated
# snapshot whose Valid-Until has passed; apt in that root is told not to check it
# (/etc/apt/apt.conf.d/99plexus-snapshot).
#
# PLEXUS_DEBIAN13_ROOT, PLEXUS_FORKY_ROOT: where each root lives (default
# /var/cache/plexus/debian13, /var/cache/plexus/forky).
# PLEXUS_DEBIAN_MIRROR: the archive (default: the first deb.debian.org-style URI apt uses here,
# else http://deb.debian.org/debian).
set -euo pipefail

usage="usage: tools/debian/run.sh trixie|forky [COMMAND...]"
suite=${1:-}
case $suite in
  trixie | 13) suite=trixie name=debian13 root=${PLEXUS_DEBIAN13_ROOT:-/var/cache/plexus/debian13} ;;
  forky) name=forky root=${PLEXUS_FORKY_ROOT:-/var/cache/plexus/forky} ;;
  *) echo "tools/debian/run.sh: unknown Debian suite '$suite' (trixie or forky); $usage" >&2
     exit 2 ;;
esac
shift
repo=$(cd "$(dirname "$0")/../.." && pwd)
ready=$root/.plexus-ready

if [[ $(id -u) -ne 0 ]]; then
  echo "tools/debian/run.sh: needs root (debootstrap, chroot, bind mounts)" >&2
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
  local started=$SECONDS source script=()
  source=$(mirror)
  echo "$name: making $root from $source"
  # Never delete through a mount left by a run that was killed (its /proc, /dev, this checkout).
  if awk -v root="$root/" 'index($2 "/", root) == 1 {found = 1} END {exit !found}' /proc/mounts
  then
    echo "$name: something is still mounted under $root (see /proc/mounts); unmount it" \
         "(umount -R -l PATH) and run again" >&2
    exit 1
  fi
  [[ $suite == forky && ! -e /usr/share/debootstrap/scripts/forky ]] &&
    script=(/usr/share/debootstrap/scripts/sid)
  rm -rf "$root"
  mkdir -p "$(dirname "$root")"
  debootstrap --variant=minbase "$suite" "$root" "$source" "${script[@]}" \
    >"$root.debootstrap.log" 2>&1 || {
    echo "$name: debootstrap failed; the last lines of $root.debootstrap.log:" >&2
    tail -20 "$root.debootstrap.log" >&2
    exit 1
  }
  # The same archive for later apt-get runs inside (install_deps.sh), whatever debootstrap wrote.
  echo "deb $source $suite main" >"$root/etc/apt/sources.list"
  # A snapshot index past its Valid-Until date is still the archive's index (see the top).
  echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99plexus-snapshot"
  # Bazel's links in the shared checkout get names of their own (see the top of this file).
  local prefix=bazel-deb13-
  [[ $suite == forky ]] && prefix=bazel-forky-
  echo "build --symlink_prefix=$prefix" >"$root/etc/bazel.bazelrc"
  echo "$name: root made in $((SECONDS - started)) s"
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
# Name resolution as on this machine: its host name resolves as on a machine of its own
# (gloo and torchrun's c10d rendezvous look it up).
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
    echo "$name: installing the dependencies failed" >&2
    exit 1
  }
  touch "$ready"
  echo "$name: dependencies installed in $((SECONDS - started)) s"
else
  in_root "bash tools/install_deps.sh >/dev/null" || {
    echo "$name: tools/install_deps.sh failed inside the root" >&2
    exit 1
  }
fi

if [[ $# -eq 0 ]]; then
  in_root "exec bash -i"
else
  in_root "$(printf '%q ' "$@")"
fi
