#!/bin/bash
# The lock conformance matrix in a real guest (issue 18): boots one guest that runs vufs-locks on a
# tmpfs and on the virtiofs share served by vufsd (tests/conformance/guest-locks.sh), while a
# vufs-locks peer process on the host answers the guest's requests to probe, take and release locks
# on the host's copies of the same files. Fails on any difference from the tmpfs run that the
# "Locks" table of docs/conformance.md does not list with exactly the value vufsd gives, and on a
# listed one that no longer shows.
#
# Usage: test-locks.sh [--keep] [POLICY]        (default policy: auto; locks do not depend on it)
# Environment: VUFSD_BINARY, VUFS_LOCKS (the static vufs-locks binary), VUFS_CONFORMANCE_DOC (default
# docs/conformance.md of this tree), VUFS_VM_BUILD_DIR (initramfs cache and kept logs, default
# /var/tmp/vufs-vm), VUFS_VM_TMPDIR (where the share is created, default /var/tmp), VUFS_VM_REQUIRED=1
# (missing QEMU or kernel fails instead of skipping), VUFSD_EXTRA_ARGS (more vufsd options).
# Exit status: 0 pass, 1 fail, 77 skipped (qemu-system-x86_64 or the kernel is not installed).

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"

msg() { echo "test-locks: $*" >&2; }

keep=0
policy=auto
while [ $# -gt 0 ]; do
        case "$1" in
        --keep) keep=1; shift ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        never|none|metadata|auto|always) policy=$1; shift ;;
        *) msg "unknown argument $1"; exit 2 ;;
        esac
done

vm_require_prerequisites test-locks

vufsd_bin=${VUFSD_BINARY:-}
probe=${VUFS_LOCKS:-}
doc=${VUFS_CONFORMANCE_DOC:-$here/../../docs/conformance.md}
vm_require_conformance_inputs test-locks "$vufsd_bin" "$probe" VUFS_LOCKS "$doc"

build_dir=${VUFS_VM_BUILD_DIR:-/var/tmp/vufs-vm}
mkdir -p "$build_dir"
tmp=$(mktemp -d "${VUFS_VM_TMPDIR:-/var/tmp}/vufs-test-locks.XXXXXX")
peer_pid=
cleanup() {
        local rc=$?
        if [ -n "$peer_pid" ] && kill -0 "$peer_pid" 2>/dev/null; then
                kill "$peer_pid" 2>/dev/null || true
                wait "$peer_pid" 2>/dev/null || true
        fi
        if [ $keep -eq 1 ]; then
                msg "kept $tmp"
        else
                rm -rf "$tmp"
        fi
        exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The listed differences: rows "| `locks.NAME` | `VALUE` | reason |" of docs/conformance.md.
# shellcheck disable=SC2016 # the backquotes are Markdown, not shell
sed -n 's/^| *`\(locks\.[^`]*\)` *| *`\([^`]*\)` *|.*/\1\t\2/p' "$doc" > "$tmp/known"
msg "$(wc -l < "$tmp/known") listed lock differences in $doc"

kver=$(vm_kernel_version)
initrd=$("$here/mkinitramfs.sh" "$build_dir/initramfs-locks-$kver.cpio.gz" --kernel-version "$kver" \
        --script "$here/../conformance/guest-locks.sh" \
        --extra "$probe:/usr/bin/vufs-locks" --extra "$tmp/known:/etc/vufs/locks-known")

share=$tmp/share
mkdir -p "$share/locks-peer" "$share/locks"
chmod 0777 "$share/locks-peer" "$share/locks"
# The host's side: another process locking the host's copies of the guest's files.
"$probe" peer "$share/locks-peer" "$share/locks" 900 > "$tmp/peer.log" 2>&1 &
peer_pid=$!

t0=$(date +%s.%N)
status=0
VUFSD_EXTRA_ARGS="--cache=$policy ${VUFSD_EXTRA_ARGS:-}" \
        "$here/run-guest.sh" --backend "vufsd:$vufsd_bin" --share "$share" --initrd "$initrd" \
        --script guest-locks.sh --param "cache=$policy" --timeout 800 --quiet \
        --log "$tmp/console.log" --backend-log "$tmp/backend.log" || status=$?
elapsed=$(echo "$(date +%s.%N) $t0" | awk '{ printf "%.1f", $1 - $2 }')

# The guest's last request is "quit": a peer still running missed it.
peer_status=0
for _ in $(seq 50); do
        kill -0 "$peer_pid" 2>/dev/null || break
        sleep 0.1
done
if kill -0 "$peer_pid" 2>/dev/null; then
        msg "host peer still running after the guest ended"
        kill "$peer_pid" 2>/dev/null || true
        peer_status=1
fi
wait "$peer_pid" 2>/dev/null || peer_status=$?
peer_pid=

tr -d '\r' < "$tmp/console.log" > "$build_dir/last-locks.log" || true
cp "$tmp/backend.log" "$build_dir/last-locks-backend.log" 2>/dev/null || true
cp "$tmp/peer.log" "$build_dir/last-locks-peer.log" 2>/dev/null || true
rm -rf "$build_dir/last-locks-results"
cp -r "$share/locks-results" "$build_dir/last-locks-results" 2>/dev/null || true
grep -a -E '^(LOCKS|vufs-locks)' "$build_dir/last-locks.log" | grep -v '^vufs-locks: [a-z_]*-[a-z_]*$' |
        sed "s/^/test-locks:   /" >&2 || true
if [ $status -ne 0 ] || [ $peer_status -ne 0 ]; then
        msg "FAIL: cache=$policy (${elapsed}s; guest status $status, host peer status $peer_status; console:" \
            "$build_dir/last-locks.log, host peer: $build_dir/last-locks-peer.log, outputs: $build_dir/last-locks-results)"
        exit 1
fi
msg "PASS: cache=$policy (${elapsed}s)"
