#!/bin/bash
# test-control-channel.sh: what a taken-over serving process can make the supervisor hold through
# the control channel (issue 31 review). The serving process stops reading the channel and writes
# method calls to it; the supervisor, outside the sandbox, must not queue an answer to each of them
# (30,000 calls with 4 KiB object paths grew it by 287 MB before the fix, linearly). Then it writes
# PropertiesChanged signals as fast as it can while a client of the bus that subscribed to them
# reads nothing: the supervisor passes them on to the bus, but must not queue more than the bus
# takes (231 MB for 300 signals of 900 kB before, linearly). In
# every sandbox mode, then the instance still stops cleanly. Needs root (pidfd_getfd of the
# daemon's socket), dbus-daemon, python3.
set -uo pipefail

: "${VUFSD_BINARY:?}" "${VUFSD_DBUS_XML:?}"
SRC=$(cd "$(dirname "$VUFSD_DBUS_XML")/.." && pwd)
PY=/usr/bin/python3
# shellcheck source=tests/bus/test-lib.sh
. "$(dirname "$0")/test-lib.sh"
test_require_root "take the serving process's control channel (pidfd_getfd)"
test_require_tools dbus-daemon

# What the supervisor may grow by during one flood (120 MB of calls, 270 MB of signals).
MAX_GROWTH_KB=$((32 * 1024))
CALLS=30000
SIGNALS=300
if [ -n "${ASAN_OPTIONS:-}" ]; then
        # AddressSanitizer keeps freed memory in quarantine (256 MB by default) before reusing it, so
        # a supervisor that frees every message still grows by that much: no quarantine for this
        # test, whose question is what stays allocated. A third of the flood (40 MB of calls, 90 MB
        # of signals: still past the bound had nothing been dropped), as the build is slower. No
        # leak check at exit either: LeakSanitizer stops the world with ptrace, which a daemon in
        # its namespace sandbox cannot do, and spins (docs/security.md: sanitizer builds default
        # to --sandbox=none for that reason; this test runs every mode).
        export ASAN_OPTIONS="$ASAN_OPTIONS:quarantine_size_mb=0:thread_local_quarantine_size_kb=0:detect_leaks=0"
        CALLS=10000
        SIGNALS=100
fi

test_private_bus channel

subscribe() { # subscribe MODE: a client that asks for every PropertiesChanged and never reads; the
        # bus then reads the supervisor only as fast as it can keep what it owes that client (any
        # user may be this client). One per mode: the bus drops what a full one is owed.
        "$PY" "$SRC/tests/bus/test-bus-inject.py" subscribe "$T/bus.sock" 600 >"$T/subscriber-$1.log" 2>&1 &
        pids+=($!)
        for _ in $(seq 100); do grep -q subscribed "$T/subscriber-$1.log" && break; sleep 0.05; done
}

flood() { # flood MODE SUPERVISOR CHILD KIND COUNT SIZE WHAT: the supervisor's growth over one flood
        local mode=$1 sup=$2 child=$3 kind=$4 count=$5 size=$6 what=$7 out rc before after
        out=$("$PY" "$SRC/tests/bus/test-bus-inject.py" "$kind" "$sup" "$count" "$size" 2>&1)
        rc=$?
        kill -CONT "$child"
        before=$(sed -n 's/^rss-before //p' <<<"$out")
        after=$(sed -n 's/^rss-after //p' <<<"$out")
        if [ $rc != 0 ] || [ -z "$before" ] || [ -z "$after" ]; then
                fail "$mode: the $kind flood did not run: $out"
        elif [ $((after - before)) -le $MAX_GROWTH_KB ]; then
                ok "$mode: the supervisor grew by $((after - before)) kB for $count $what"
        else
                fail "$mode: the supervisor grew by $((after - before)) kB for $count $what (at most $MAX_GROWTH_KB)"
        fi
}

for mode in namespace chroot none; do
        mkdir -p "$T/share-$mode"
        "$VUFSD_BINARY" --socket-path "$T/$mode.sock" --shared-dir "$T/share-$mode" --bus "$VM_BUS_ADDRESS" \
                --instance "chan-$mode" --sandbox "$mode" >"$T/$mode.log" 2>&1 &
        sup=$!
        pids+=("$sup")
        for _ in $(seq 200); do grep -q "Control interface" "$T/$mode.log" && [ -S "$T/$mode.sock" ] && break; sleep 0.05; done
        if ! grep -q "Control interface" "$T/$mode.log"; then
                fail "$mode: vufsd did not start its control plane: $(cat "$T/$mode.log")"
                continue
        fi
        child=$(cut -d' ' -f1 "/proc/$sup/task/$sup/children")
        stopped+=("$child")
        flood "$mode" "$sup" "$child" flood "$CALLS" 4096 "unanswered calls"
        subscribe "$mode"
        flood "$mode" "$sup" "$child" signals "$SIGNALS" 900000 "PropertiesChanged signals of 900 kB"
        vufsd_pids=("$sup")
        test_stop_daemons "$T/$mode.log"
done

test_summary
