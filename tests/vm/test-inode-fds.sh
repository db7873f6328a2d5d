#!/bin/bash
# A real guest on a *directory* share (a directory of /var/tmp's file system, where file handles do
# not engage) served by vufsd with --max-inode-fds=64: the guest makes 3,000 files in 30
# directories, walks and reads them back after dropping its caches, renames a directory and
# removes the tree (tests/vm/guest-inode-fds.sh); the host samples the serving process's open fds
# (/proc/PID/fd) every 0.2 s, which must stay within the budget plus the daemon's own fds (issue 34:
# an fd per inode would be over 3,000).
#
# Usage: test-inode-fds.sh [--dirs N] [--files N] [--budget N]
# Environment: VUFSD_BINARY, VUFS_VM_BUILD_DIR, VUFS_VM_TMPDIR (default /var/tmp), VUFS_VM_REQUIRED.
# Exit status: 0 pass, 1 fail, 77 skipped (QEMU or a kernel missing).

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"

msg() { echo "test-inode-fds: $*" >&2; }

dirs=30
files=100
budget=64
# The daemon's own fds besides the guest's inodes and what the guest holds open at a time (a file
# being read, a directory being listed): sockets, eventfds, memory regions, /proc/self/fd, the root.
slack=48
while [ $# -gt 0 ]; do
        case "$1" in
        --dirs) dirs=${2:?}; shift 2 ;;
        --files) files=${2:?}; shift 2 ;;
        --budget) budget=${2:?}; shift 2 ;;
        *) msg "unknown argument $1"; exit 2 ;;
        esac
done

vm_require_prerequisites test-inode-fds
vufsd=${VUFSD_BINARY:-$top/build/daemon/vufsd}
[ -x "$vufsd" ] || { msg "FAIL: vufsd not found at $vufsd (set VUFSD_BINARY)"; exit 1; }

work=$(mktemp -d "${VUFS_VM_TMPDIR:-/var/tmp}/vufs-inode-fds.XXXXXX")
sampler=
cleanup() {
        [ -z "$sampler" ] || kill "$sampler" 2>/dev/null || true
        rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/share"
samples=$work/samples
: > "$samples"

vm_sample_server "$work/vufs.sock" "$samples" &
sampler=$!
rc=0
VUFSD_EXTRA_ARGS="--max-inode-fds=$budget --bus=none --log-level=notice" \
        "$here/run-guest.sh" --backend "vufsd:$vufsd" --share "$work/share" --socket "$work/vufs.sock" \
        --script guest-inode-fds.sh --param "dirs=$dirs" --param "files=$files" --memory 512M --timeout 900 \
        --log "$work/console" --backend-log "$work/backend" --quiet || rc=$?
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
sampler=

grep -a '^CHECK\|^INODEFDS' "$work/console" | tr -d '\r' | sed 's/^/test-inode-fds: guest: /' >&2 || true
base=$(awk '$1 > 0 { print $1; exit }' "$samples")
peak=$(sort -n -k1 "$samples" | tail -n 1 | cut -d' ' -f1)
msg "$(wc -l < "$samples") samples: $base fds idle, at most $peak while the guest made and walked $((dirs * files)) files (budget $budget)"
fail=0
if [ "$rc" != 0 ]; then
        msg "FAIL: the guest run failed (exit $rc)"
        tail -n 30 "$work/console" | tr -d '\r' >&2
        fail=1
fi
if [ -z "$peak" ] || [ "$peak" -gt $((budget + slack)) ]; then
        msg "FAIL: the serving process held ${peak:-?} fds, more than the budget $budget + $slack"
        fail=1
fi
if [ $fail -eq 0 ]; then msg PASS; else msg FAIL; fi
exit $fail
