#!/bin/bash
# test-guest-control.sh: the real-guest test (test-guest.sh: verified file I/O both ways) while
# fsctl keeps switching the running instance's threading mode and cache policy over D-Bus.
# Passes when the guest's checks all pass (no failed guest I/O), vufsd exits cleanly, and enough
# changes landed while the guest was connected. Exit 77 when test-guest.sh skips.
# Needs: VUFSD_BINARY, FSCTL_BINARY, dbus-daemon; the rest as test-guest.sh.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"
: "${VUFSD_BINARY:?}" "${FSCTL_BINARY:?}"
msg() { echo "test-guest-control: $*" >&2; }
if ! command -v dbus-daemon >/dev/null; then
        msg "SKIP: dbus-daemon is not installed (package dbus)"
        exit 77
fi

T=$(mktemp -d /tmp/vufsd-guest-control.XXXXXX)
bus_pid=
guest_pid=
cleanup() {
        [ -z "$guest_pid" ] || kill "$guest_pid" 2>/dev/null
        [ -z "$bus_pid" ] || kill "$bus_pid" 2>/dev/null
        wait 2>/dev/null
        rm -rf "$T"
}
trap cleanup EXIT

vm_private_bus "$T" || { msg "FAIL: dbus-daemon did not start"; exit 1; }
bus_pid=$VM_BUS_PID
ADDR=$VM_BUS_ADDRESS

export VUFSD_EXTRA_ARGS="${VUFSD_EXTRA_ARGS:-} --bus $ADDR --instance guestctl"
"$here/test-guest.sh" >"$T/guest.out" 2>&1 &
guest_pid=$!

fsctl() { "$FSCTL_BINARY" --address "$ADDR" -q -i guestctl "$@"; }
settings=("set-threads 4" "set-cache never" "set-threads 0" "set-cache always" "set-threads auto --size 2"
        "set-cache metadata" "set-threads 1" "set-cache auto")
changes=0
refused=0
i=0
while kill -0 $guest_pid 2>/dev/null; do
        # Only changes while the guest is connected count; before and between, just wait.
        if grep -q '"connected":true' <<< "$("$FSCTL_BINARY" --address "$ADDR" -i guestctl status --json 2>/dev/null)"; then
                # shellcheck disable=SC2086
                if fsctl ${settings[i % ${#settings[@]}]} 2>>"$T/fsctl.err"; then
                        changes=$((changes + 1))
                else
                        refused=$((refused + 1))
                fi
                i=$((i + 1))
        fi
        sleep 0.2
done
wait $guest_pid
rc=$?
guest_pid=
cat "$T/guest.out" >&2
if [ $rc = 77 ]; then
        msg "SKIP (test-guest.sh skipped)"
        exit 77
fi
msg "$changes live changes while the guest was connected, $refused refused"
# A change can race with the guest's disconnect (the instance is gone): that is not a failure, but
# most must land.
if [ $rc != 0 ]; then
        msg "FAIL: the guest test failed while settings changed (exit $rc)"
        exit 1
fi
if [ $changes -lt 8 ]; then
        msg "FAIL: only $changes changes landed while the guest was connected"
        cat "$T/fsctl.err" >&2
        exit 1
fi
echo "2 passed, 0 failed"
