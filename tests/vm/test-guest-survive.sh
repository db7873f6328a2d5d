#!/bin/bash
# test-guest-survive.sh: a real guest (QEMU 7.2, Linux 6.1, TCG) loops over short file operations
# on the share (guest-survive.sh) while the host SIGKILLs vufsd's serving process every 1-2 s
# (--crash-restarts, docs/survival.md). Reports the kills, the guest's iterations and failures, and
# the takeover time per kill (median, worst) from vufsd's log.
#
# Not in the vm suite: open files do not survive a kill yet (docs/survival.md, "Not done"), so a
# guest that holds one across a kill gets an error (2 of 486 iterations in the measurement there).
# It passes when the guest saw no error; today it measures.
#
# Usage: test-guest-survive.sh [KILLS]   (default 20)
# Environment: VUFSD_BINARY (needed); VUFS_VM_BUILD_DIR (initramfs cache, default /var/tmp/vufs-vm),
# VUFS_VM_TMPDIR (default /var/tmp).
# Exit status: 0 no guest error, 1 errors or a failed run, 77 skipped (no QEMU or kernel).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"
: "${VUFSD_BINARY:?}"
vm_require_prerequisites test-guest-survive

kills_wanted=${1:-20}
build_dir=${VUFS_VM_BUILD_DIR:-/var/tmp/vufs-vm}
T=$(mktemp -d "${VUFS_VM_TMPDIR:-/var/tmp}/vufs-survive.XXXXXX")
guest_pid=
cleanup() {
        [ -z "$guest_pid" ] || kill "$guest_pid" 2>/dev/null
        wait 2>/dev/null
        rm -rf "$T"
}
trap cleanup EXIT
msg() { echo "test-guest-survive: $*" >&2; }

kver=$(vm_kernel_version)
initrd=$("$here/mkinitramfs.sh" "$build_dir/initramfs-survive-$kver.cpio.gz" --kernel-version "$kver" \
        --script "$here/guest-survive.sh") || { msg "FAIL: building the initramfs failed"; exit 1; }
# A copy: the processes are found by their command line.
cp "$VUFSD_BINARY" "$T/vufsd"
mkdir -p "$T/share"
console=$T/console.log
: > "$console"
export VUFSD_EXTRA_ARGS="--crash-restarts=64 --sandbox namespace --seccomp kill --bus=none"
seconds=$((kills_wanted * 2 + 10))
"$here/run-guest.sh" --backend "vufsd:$T/vufsd" --share "$T/share" --initrd "$initrd" --script guest-survive.sh \
        --param "seconds=$seconds" --timeout $((seconds + 300)) --log "$console" --backend-log "$T/backend.log" \
        > "$T/run-guest.out" 2>&1 &
guest_pid=$!
until grep -aq VUFS-SURVIVE-START "$console" 2>/dev/null; do
        kill -0 $guest_pid 2>/dev/null || break
        sleep 0.5
done
sleep 2
kills=0
while [ $kills -lt "$kills_wanted" ] && kill -0 $guest_pid 2>/dev/null; do
        # supervisor (the oldest) -> spawner -> serving process
        sup=$(pgrep -o -f "^$T/vufsd")
        [ -n "$sup" ] || break
        sp=$(cut -d' ' -f1 "/proc/$sup/task/$sup/children" 2>/dev/null)
        s=$(cut -d' ' -f1 "/proc/$sp/task/$sp/children" 2>/dev/null)
        [ -n "$s" ] && kill -KILL "$s" 2>/dev/null && kills=$((kills + 1))
        sleep "1.$((RANDOM % 9))"
done
wait $guest_pid
rc=$?
guest_pid=
tr -d '\r' < "$console" | grep -a -E "VUFS-SURVIVE|can't" | sed 's/^/test-guest-survive:   guest: /' >&2
summary=$(tr -d '\r' < "$console" | sed -n 's/^VUFS-SURVIVE: //p')
sed -n 's/.*Took over.*), \([0-9.]*\) ms after.*/\1/p' "$T/backend.log" | sort -n |
        awk '{a[NR] = $1} END {if (NR) printf "test-guest-survive: takeovers %d, median %s ms, worst %s ms\n", NR, a[int((NR + 1) / 2)], a[NR]}' >&2
msg "$kills kills; guest: ${summary:-no summary}; run-guest.sh exited $rc"
[ $rc -eq 0 ] && [[ "$summary" == *" err=0" ]]
