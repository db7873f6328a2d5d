#!/bin/bash
# test-survive.sh: the control plane across a serving process's death (--crash-restarts,
# docs/survival.md): vufsd on a private dbus-daemon, its serving process killed with SIGKILL twice;
# each time the next one answers fsctl through a new control channel (the supervisor, which owns the
# name, stays) and its statistics say how many restarts there were. The supervisor survives its
# own seccomp filter doing so (a call outside it would end vufsd with SIGSYS).
# Then the same under socket activation. Needs: VUFSD_BINARY, FSCTL_BINARY, FE_TRAFFIC, VUFSD_DBUS_XML
# (set by meson), dbus-daemon, systemd-socket-activate.
set -uo pipefail

: "${VUFSD_BINARY:?}" "${FSCTL_BINARY:?}" "${FE_TRAFFIC:?}" "${VUFSD_DBUS_XML:?}"
SRC=$(cd "$(dirname "$VUFSD_DBUS_XML")/.." && pwd)
# shellcheck source=tests/bus/test-lib.sh
. "$(dirname "$0")/test-lib.sh"
test_require_tools dbus-daemon systemd-socket-activate

test_private_bus survive
ADDR=$VM_BUS_ADDRESS
mkdir -p "$T/share"
"$VUFSD_BINARY" --socket-path "$T/vm1.sock" --shared-dir "$T/share" --bus "$ADDR" --instance vm1 \
        --crash-restarts=3 >>"$T/vufsd.log" 2>&1 &
vufsd=$!
pids+=("$vufsd")
vufsd_pids+=("$vufsd")
fsctl() { "$FSCTL_BINARY" --address "$ADDR" -i vm1 "$@"; }
up() {
        for _ in $(seq 200); do
                fsctl status >/dev/null 2>&1 && return 0
                sleep 0.05
        done
        return 1
}
# supervisor -> spawner -> serving process
serving() {
        local spawner
        spawner=$(cut -d' ' -f1 "/proc/$vufsd/task/$vufsd/children")
        cut -d' ' -f1 "/proc/$spawner/task/$spawner/children"
}
# SIGKILL to the serving process, then wait for another one (4 s at most).
kill_and_wait() {
        local old now
        old=$(serving 2>/dev/null || true)
        [ -n "$old" ] || return 1
        kill -KILL "$old"
        for _ in $(seq 200); do
                now=$(serving 2>/dev/null || true)
                [ -n "$now" ] && [ "$now" != "$old" ] && return 0
                sleep 0.02
        done
        return 1
}
check "vufsd answers fsctl" up

for round in 1 2; do
        check "round $round: another serving process took over" kill_and_wait
        check "round $round: it answers fsctl status" up
        out=$(fsctl stats 2>&1)
        check "round $round: fsctl stats says $round restart(s)" grep -qE "^Restarts: +$round( |$)" <<< "$out"
        check "round $round: vufsd is still running" kill -0 "$vufsd"
done
m=$(fsctl stats --format=openmetrics 2>&1)
check "openmetrics: vufsd_restarts_total 2" grep -qE '^vufsd_restarts_total(\{[^}]*\})? 2$' <<< "$m"
check "openmetrics: the last restart's pause, in seconds" grep -qE '^vufsd_last_restart_pause_seconds(\{[^}]*\})? [0-9]+\.[0-9]{6}$' <<< "$m"
lint=$(promtool check metrics <<< "$m" 2>&1) && [ -z "$lint" ] && ok "promtool check metrics: clean" ||
        fail "promtool check metrics: $lint"
if grep -q "SIGSYS\|signal SYS" "$T/vufsd.log"; then fail "a seccomp kill in the log"; else ok "no seccomp kill"; fi
# ---- socket activation (systemd-socket-activate: LISTEN_FDS, LISTEN_PID): the serving process
# started after a death finds the activated socket too (LISTEN_PID names it, not the spawner) ----
mkdir -p "$T/share2"
systemd-socket-activate -l "$T/act.sock" "$VUFSD_BINARY" --shared-dir "$T/share2" --bus=none --keep-listening \
        --crash-restarts=3 >>"$T/vufsd.log" 2>&1 &
act=$!
pids+=("$act")
vufsd_pids+=("$act")
vufsd=$act
for _ in $(seq 100); do [ -S "$T/act.sock" ] && break; sleep 0.05; done
check "activated: serves a first frontend" "$FE_TRAFFIC" "$T/act.sock" --count 2 --size 4096
check "activated: another serving process took over" kill_and_wait
check "activated: it serves the next frontend on the activated socket" "$FE_TRAFFIC" "$T/act.sock" --count 2 --size 4096

test_stop_daemons "$T/vufsd.log"
[ "$failed" = 0 ] || cat "$T/vufsd.log"
test_summary
