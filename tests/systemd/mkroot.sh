#!/bin/bash
# Builds (or reuses) the minimal Debian 12 root the systemd test boots with systemd-nspawn.
#
# Usage: mkroot.sh DEST-DIR
#   Unpacks a pristine root into DEST-DIR (which must not exist or be empty). The debootstrap
#   output is cached as a tarball under $VUFS_ROOT_CACHE (default /var/cache/vufsd-test), keyed by
#   a hash of the suite, variant and package list, so only the first run pays for debootstrap.
#   debootstrap is called without a mirror argument: it uses its own default archive.
#
# Exit status: 0 done, 1 failure, 77 debootstrap missing (apt-get install debootstrap).

set -euo pipefail

msg() { echo "mkroot: $*" >&2; }

dest=${1:?usage: mkroot.sh DEST-DIR}
cache=${VUFS_ROOT_CACHE:-/var/cache/vufsd-test}
suite=bookworm
variant=minbase
# systemd as PID 1 and the system bus; the shared libraries vufsd and fsctl link dynamically
# (libsystemd0 comes with systemd); util-linux (Essential) brings setpriv/runuser for the
# unprivileged-caller check; dbus-user-session (with libpam-systemd) gives the user manager its
# session bus (dbus.socket at $XDG_RUNTIME_DIR/bus) for the user-service check.
packages=systemd,systemd-sysv,dbus,dbus-user-session,libpam-systemd,libglib2.0-0,libseccomp2,libcap2

command -v debootstrap >/dev/null || { msg "debootstrap is missing (apt-get install debootstrap)"; exit 77; }

key=$(printf '%s\n' "$suite" "$variant" "$packages" "$(dpkg-query -W -f='${Version}' debootstrap 2>/dev/null)" |
        sha256sum | cut -c1-16)
tarball=$cache/root-$suite-$key.tar

if [ ! -s "$tarball" ]; then
        mkdir -p "$cache"
        work=$(mktemp -d "$cache/build.XXXXXX")
        # debootstrap mounts /proc (and more) inside the root: remove_tree DIR unmounts what is
        # below DIR before removing it, and never crosses into another file system while removing.
        remove_tree() {
                local m
                for m in $(awk -v w="$1/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r); do
                        umount -l "$m" 2>/dev/null || true
                done
                rm -rf --one-file-system "$1"
        }
        cleanup() { remove_tree "$work"; }
        trap cleanup EXIT
        msg "running debootstrap --variant=$variant --include=$packages $suite (cached as $tarball)"
        start=$(date +%s)
        # Up to three attempts: debootstrap downloads ~100 packages, and one failed fetch on a fresh
        # machine's network must not fail the suite. Each attempt starts from an empty directory.
        attempt=1
        until debootstrap --variant="$variant" --include="$packages" "$suite" "$work/root" >"$work/log" 2>&1; do
                tail -n 30 "$work/log" >&2
                if [ "$attempt" -ge 3 ]; then
                        msg "debootstrap failed $attempt times"
                        exit 1
                fi
                msg "debootstrap failed (attempt $attempt); retrying in 10 s"
                remove_tree "$work/root"
                attempt=$((attempt + 1))
                sleep 10
        done
        # Pristine apt caches are not needed to boot.
        rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*
        tar -C "$work/root" --numeric-owner -cf "$work/root.tar" .
        mv "$work/root.tar" "$tarball"
        msg "debootstrap took $(( $(date +%s) - start )) s"
fi

mkdir -p "$dest"
if [ -n "$(ls -A "$dest")" ]; then
        msg "$dest is not empty"
        exit 1
fi
tar -C "$dest" --numeric-owner -xf "$tarball"
