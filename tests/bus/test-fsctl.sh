#!/bin/bash
# test-fsctl.sh: fsctl end to end against vufsd instances on a private dbus-daemon, with verified
# guest-like traffic from fe-traffic (the test frontend) while settings change.
# Needs: VUFSD_BINARY, FSCTL_BINARY, FE_TRAFFIC, VUFSD_DBUS_XML (set by meson), dbus-daemon, python3.
set -uo pipefail

: "${VUFSD_BINARY:?}" "${FSCTL_BINARY:?}" "${FE_TRAFFIC:?}" "${VUFSD_DBUS_XML:?}"
SRC=$(cd "$(dirname "$VUFSD_DBUS_XML")/.." && pwd)
PY=/usr/bin/python3
# shellcheck source=tests/bus/test-lib.sh
. "$(dirname "$0")/test-lib.sh"
test_require_tools dbus-daemon

T=$(mktemp -d /tmp/vufsd-fsctl.XXXXXX)
pids=()
vufsd_pids=()
cleanup() {
        for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
        for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
        rm -rf "$T"
}
trap cleanup EXIT

# Runs fsctl; sets $out, $err, $rc.
F() {
        out=$("$FSCTL_BINARY" --address "$ADDR" "$@" 2>"$T/err")
        rc=$?
        err=$(cat "$T/err")
}
expect_rc() { # expect_rc WANT DESCRIPTION fsctl-args...
        local want=$1 what=$2
        shift 2
        F "$@"
        if [ "$rc" = "$want" ]; then ok "$what (exit $rc)"; else fail "$what: exit $rc, want $want; stdout: $out; stderr: $err"; fi
}
json() { # json EXPRESSION: evaluates EXPRESSION on the parsed $out (as d; sys.argv[1] = $odd_share)
        printf '%s' "$out" | "$PY" -c "import json,sys; d=json.load(sys.stdin); r=($1); sys.exit(0 if r else 1)" \
                "${odd_share:-}"
}

# shellcheck source=tests/vm/common.sh
. "$SRC/tests/vm/common.sh"
vm_private_bus "$T" || { echo "dbus-daemon did not start"; exit 1; }
pids+=("$VM_BUS_PID")
ADDR=$VM_BUS_ADDRESS

start_vufsd() { # start_vufsd INSTANCE SOCKET SHARE extra...
        local inst=$1 sock=$2 share=$3 pid
        shift 3
        mkdir -p "$share"
        "$VUFSD_BINARY" --socket-path "$sock" --shared-dir "$share" --bus "$ADDR" --instance "$inst" \
                --keep-listening "$@" >>"$T/vufsd.log" 2>&1 &
        pid=$!
        pids+=($pid)
        vufsd_pids+=($pid)
        for _ in $(seq 200); do
                grep -qxF -- "$inst" <<< "$("$FSCTL_BINARY" --address "$ADDR" list --quiet 2>/dev/null)" && [ -S "$sock" ] && return 0
                kill -0 $pid 2>/dev/null || break
                sleep 0.05
        done
        echo "vufsd $inst did not come up"
        cat "$T/vufsd.log"
        return 1
}

start_vufsd vm1 "$T/vm1.sock" "$T/share" --threads inline || exit 1

# ---- reading ----
expect_rc 0 "list" list
check "list shows vm1 and its socket" grep -q "^vm1 .*$T/vm1.sock .*no .*inline .*auto" <<<"$out"
expect_rc 0 "list --json" list --json
check "list --json: one entry, vm1, not connected" json 'len(d)==1 and d[0]["instance"]=="vm1" and d[0]["connected"] is False and d[0]["bus_name"]=="org.vufsd.Instance.vm1"'
expect_rc 0 "status without -i (one instance runs)" status
check "status names the instance" grep -q "^Instance: *vm1$" <<<"$out"
check "status shows the cache policy" grep -q "^Cache: *auto$" <<<"$out"
check "status shows the inode fds kept open" grep -q "^Inode fds: *[0-9]* of at most [0-9]* cached (--max-inode-fds)$" <<<"$out"
expect_rc 0 "status --json" -i vm1 status --json
check "status --json fields" json 'd["thread_mode"]=="inline" and d["cache_policy"]=="auto" and d["socket"]=="'"$T"'/vm1.sock" and d["request_queues"]==1 and d["uptime_usec"]>0 and isinstance(d["options"],list)'
expect_rc 0 "stats before traffic" -i vm1 stats
check "stats says there were no requests" grep -q "No requests since the last reset" <<<"$out"

# ---- set-threads / set-cache ----
expect_rc 0 "set-threads 4" -i vm1 set-threads 4
check "set-threads 4 confirms" grep -q "threads pool, pool size 4" <<<"$out"
F -i vm1 status --json
check "4 = pool of 4" json 'd["thread_mode"]=="pool" and d["pool_size"]==4'
expect_rc 0 "set-threads 0" -i vm1 set-threads 0
F -i vm1 status --json
check "0 = inline, size kept" json 'd["thread_mode"]=="inline" and d["pool_size"]==4'
expect_rc 0 "set-threads auto --size 3" -i vm1 set-threads auto --size 3
F -i vm1 status --json
check "auto with 3" json 'd["thread_mode"]=="auto" and d["pool_size"]==3'
expect_rc 0 "set-threads pool (size kept)" -q -i vm1 set-threads pool
check "--quiet prints nothing" test -z "$out"
F -i vm1 status --json
check "pool with 3" json 'd["thread_mode"]=="pool" and d["pool_size"]==3'
expect_rc 2 "set-threads bogus" -i vm1 set-threads bogus
check "names the bad value" grep -q '"bogus"' <<<"$err"
expect_rc 2 "set-threads 2000 (daemon refuses)" -i vm1 set-threads 2000
check "out of range message" grep -q "invalid value: Pool size 2000 is out of range" <<<"$err"
expect_rc 2 "set-threads pool --size 0" -i vm1 set-threads pool --size 5000
expect_rc 2 "set-threads 4 --size 2" -i vm1 set-threads 4 --size 2
expect_rc 2 "set-threads -1" -i vm1 set-threads -1
F -i vm1 status --json
check "refused calls changed nothing" json 'd["thread_mode"]=="pool" and d["pool_size"]==3'
expect_rc 0 "set-cache never" -i vm1 set-cache never
check "set-cache confirms" grep -q "cache never" <<<"$out"
expect_rc 2 "set-cache sometimes" -i vm1 set-cache sometimes
check "names the policies" grep -q "never, metadata, auto or always" <<<"$err"
F -i vm1 status --json
check "cache still never" json 'd["cache_policy"]=="never"'

# ---- set-poll-us ----
check "status --json: auto by default, at most 50 us" json 'd["poll_usec"]==50 and d["poll_mode"]=="auto"'
F -i vm1 status
check "status: busy poll auto" grep -q "^Busy poll: *auto, at most 50 us per request queue$" <<<"$out"
expect_rc 0 "set-poll-us 50" -i vm1 set-poll-us 50
check "set-poll-us confirms" grep -q "^vm1: busy poll 50 us$" <<<"$out"
F -i vm1 status --json
check "status --json: poll_mode fixed" json 'd["poll_mode"]=="fixed"'
F -i vm1 status
check "status: busy poll 50 us" grep -q "^Busy poll: *50 us per request queue$" <<<"$out"
F -i vm1 status --json
check "status --json: poll_usec 50" json 'd["poll_usec"]==50'
F list --json
check "list --json carries poll_usec" json 'd[0]["poll_usec"]==50'
expect_rc 2 "set-poll-us 1000001 (daemon refuses)" -i vm1 set-poll-us 1000001
check "out of range message" grep -q "set-poll-us: invalid value: Busy-poll window 1000001 is out of range: 0..1000000 microseconds" <<<"$err"
expect_rc 2 "set-poll-us fast" -i vm1 set-poll-us fast
check "names the bad window" grep -q 'invalid busy-poll window "fast"' <<<"$err"
expect_rc 2 "set-poll-us -5" -i vm1 set-poll-us -5
expect_rc 2 "set-poll-us without a value" -i vm1 set-poll-us
expect_rc 2 "set-poll-us --size" -i vm1 set-poll-us 5 --size 2
expect_rc 2 "set-poll-us --json" -i vm1 set-poll-us 5 --json
F -i vm1 status --json
check "refused set-poll-us changed nothing" json 'd["poll_usec"]==50'
expect_rc 0 "set-poll-us 1000000 (the limit)" -q -i vm1 set-poll-us 1000000
check "set-poll-us --quiet prints nothing" test -z "$out"
expect_rc 0 "set-poll-us auto" -i vm1 set-poll-us auto
check "set-poll-us auto confirms" grep -q "^vm1: busy poll auto (at most 50 us)$" <<<"$out"
F -i vm1 status --json
check "status --json: auto again" json 'd["poll_usec"]==50 and d["poll_mode"]=="auto"'
F -i vm1 stats --json
check "stats --json: poll_mode auto, polls and poll_usec counters" json 'd["poll_mode"]=="auto" and "polls" in d["executor"] and "poll_usec" in d["executor"]'
F -i vm1 stats
check "stats header shows busy poll auto" grep -q ", busy poll auto, " <<<"$out"
expect_rc 2 "set-poll-us Auto" -i vm1 set-poll-us Auto
expect_rc 0 "set-poll-us 0" -i vm1 set-poll-us 0
check "set-poll-us 0 confirms off" grep -q "^vm1: busy poll off$" <<<"$out"
F -i vm1 status --json
check "poll_usec back to 0" json 'd["poll_usec"]==0 and d["poll_mode"]=="off"'

# ---- errors ----
expect_rc 3 "no such instance" -i nope status
check "says so" grep -q 'no such instance "nope"' <<<"$err"
out=$("$FSCTL_BINARY" --address "unix:path=$T/no-bus" status 2>"$T/err"); rc=$?; err=$(cat "$T/err")
if [ $rc = 5 ] && grep -q "cannot connect" <<<"$err"; then ok "bus unreachable (exit 5)"; else fail "bus unreachable: exit $rc: $err"; fi
out=$(DBUS_SYSTEM_BUS_ADDRESS="unix:path=$T/no-bus" "$FSCTL_BINARY" list 2>"$T/err"); rc=$?
if [ $rc = 5 ]; then ok "DBUS_SYSTEM_BUS_ADDRESS honoured (exit 5 on a missing bus)"; else fail "DBUS_SYSTEM_BUS_ADDRESS: exit $rc"; fi
out=$(DBUS_SYSTEM_BUS_ADDRESS="$ADDR" "$FSCTL_BINARY" -i vm1 status --json 2>"$T/err"); rc=$?
if [ $rc = 0 ] && json 'd["instance"]=="vm1"'; then ok "--system reaches DBUS_SYSTEM_BUS_ADDRESS"; else fail "--system via DBUS_SYSTEM_BUS_ADDRESS: exit $rc"; fi
expect_rc 2 "unknown verb" frobnicate
expect_rc 2 "missing verb"
expect_rc 2 "--json on a changing verb" -i vm1 set-cache auto --json
expect_rc 2 "set-cache without a value" -i vm1 set-cache
expect_rc 2 "status with an extra argument" status extra
expect_rc 2 "--watch without stats" --watch status
expect_rc 0 "--help" --help
check "--help lists the verbs" grep -q "set-threads N|inline|pool|auto" <<<"$out"
check "--help lists set-poll-us" grep -q "set-poll-us auto|N" <<<"$out"
expect_rc 0 "--version" --version

# ---- statistics per mode: set-threads visibly changes what the data path does ----
F -i vm1 set-threads 0
F -i vm1 reset-stats
check "reset-stats confirms" grep -q "vm1: statistics reset" <<<"$out"
n=$("$FE_TRAFFIC" "$T/vm1.sock" --count 10 --size 20000) && ok "traffic inline ($n round trips)" || fail "traffic inline"
F -i vm1 stats --json
check "inline: requests ran inline, none on the pool" json 'd["thread_mode"]=="inline" and d["executor"]["inline_runs"]>=50 and d["executor"]["pool_runs"]==0'
check "stats --json: WRITE counted with bytes and latency" json 'any(o["name"]=="WRITE" and o["requests"]>=10 and o["bytes"]>0 and sum(o["latency_histogram"])==o["requests"] and 0<o["p50_usec"]<=o["p99_usec"] for o in d["opcodes"])'
check "stats --json: queues add up to opcodes" json 'sum(q["requests"] for q in d["queues"])==sum(o["requests"] for o in d["opcodes"])'
inline_runs=$(printf '%s' "$out" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["executor"]["inline_runs"])')
F -i vm1 set-threads 2
n=$("$FE_TRAFFIC" "$T/vm1.sock" --count 10 --size 20000) && ok "traffic on a pool of 2 ($n round trips)" || fail "traffic pool"
F -i vm1 stats --json
check "pool: requests ran on the pool, at most 2 workers" json 'd["thread_mode"]=="pool" and d["pool_size"]==2 and d["executor"]["pool_runs"]>=50 and d["executor"]["live_workers"]<=2'
F -i vm1 set-threads auto
n=$("$FE_TRAFFIC" "$T/vm1.sock" --count 10 --size 20000) && ok "traffic in auto ($n round trips)" || fail "traffic auto"
F -i vm1 stats --json
check "auto: per-request choices counted" json 'd["thread_mode"]=="auto" and d["executor"]["auto_inline"]+d["executor"]["auto_pool"]>=50'
F -i vm1 stats
check "stats table has opcode rows" grep -Eq "^WRITE +[0-9]+ " <<<"$out"
check "stats table has queue rows" grep -Eq "^request0 +[0-9]+ " <<<"$out"
check "stats shows the executor" grep -q "Executor: mode_switches=" <<<"$out"
check "stats header shows busy poll off" grep -q "^Instance vm1: threads auto (pool size [0-9]*), busy poll off, " <<<"$out"

# ---- set-poll-us reaches the data path: queue threads find requests while polling ----
F -i vm1 set-threads 0
F -i vm1 stats --json
check "poll_hits is an executor counter" json '"poll_hits" in d["executor"] and d["poll_usec"]==0'
hits0=$(printf '%s' "$out" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["executor"]["poll_hits"])')
# Round trips 2 ms apart: back to back requests are found by the re-check right after a reply,
# before any window opens; the first request after a pause is what a window catches.
n=$("$FE_TRAFFIC" "$T/vm1.sock" --count 10 --size 20000 --pause-us 2000) && ok "traffic, polling off ($n round trips)" || fail "traffic, polling off"
F -i vm1 stats --json
check "polling off: no poll hits" json 'd["executor"]["poll_hits"]=='"$hits0"
expect_rc 0 "set-poll-us 100000 live" -q -i vm1 set-poll-us 100000
n=$("$FE_TRAFFIC" "$T/vm1.sock" --count 20 --size 20000 --pause-us 2000) && ok "traffic, polling 100 ms ($n round trips)" || fail "traffic, polling on"
F -i vm1 stats --json
check "polling on: windows found requests" json 'd["poll_usec"]==100000 and d["executor"]["poll_hits"]>='"$hits0"'+10'
F -i vm1 stats
check "stats header shows the window" grep -q "busy poll 100000us" <<<"$out"
F -q -i vm1 set-poll-us 0
sleep 0.3 # past the last 100 ms window
F -i vm1 stats --json
hits1=$(printf '%s' "$out" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["executor"]["poll_hits"])')
n=$("$FE_TRAFFIC" "$T/vm1.sock" --count 10 --size 20000 --pause-us 2000) && ok "traffic, polling off again ($n round trips)" || fail "traffic, polling off again"
F -i vm1 stats --json
check "polling off again: poll_hits stays at $hits1" json 'd["executor"]["poll_hits"]=='"$hits1"
F -i vm1 set-threads auto

# ---- stats --watch while traffic flows ----
rm -f "$T/stop"
"$FE_TRAFFIC" "$T/vm1.sock" --seconds 120 --stop-file "$T/stop" --size 50000 >"$T/traffic.out" 2>&1 &
tp=$!
sleep 0.3
expect_rc 0 "stats --watch --count 2" -i vm1 stats --watch --interval 0.5 --count 2
check "two refreshes" test "$(grep -c '^OPCODE *REQ/S *MB/S' <<<"$out")" = 2
check "a WRITE row with a rate" grep -Eq "^WRITE +[0-9]*[1-9][0-9]*\.[0-9] " <<<"$out"
check "a TOTAL row and the mode" grep -q "threads auto" <<<"$out"
check "the header shows busy poll" grep -q "threads auto (pool [0-9]*)  poll off  in flight" <<<"$out"
expect_rc 0 "stats --watch --json" -i vm1 stats --watch --json --interval 0.4 --count 2
lines_ok=$(printf '%s\n' "$out" | "$PY" -c '
import json, sys
n = 0
for line in sys.stdin:
    d = json.loads(line)
    tot = [o for o in d["opcodes"] if o["name"] == "TOTAL"][0]
    assert d["interval_usec"] > 300000 and tot["requests_per_sec"] > 0 and tot["mb_per_sec"] > 0
    assert d["poll_usec"] == 0
    n += 1
print(n)')
check "stats --watch --json: one object per refresh with rates" test "$lines_ok" = 2
touch "$T/stop"
wait $tp && ok "traffic during --watch verified" || fail "traffic during --watch: $(cat "$T/traffic.out")"

# ---- repeated changes while the guest does verified I/O: no failed I/O ----
"$FE_TRAFFIC" "$T/vm1.sock" --seconds 6 --size 100000 >"$T/traffic.out" 2>&1 &
tp=$!
changes=0
change_failures=0
end=$((SECONDS + 5))
while [ $SECONDS -lt $end ]; do
        for args in "set-threads 4" "set-cache never" "set-threads 0" "set-cache always" "set-threads auto --size 2" \
                "set-cache metadata" "set-poll-us 50" "set-threads 1" "set-cache auto" "set-poll-us 0"; do
                # shellcheck disable=SC2086
                "$FSCTL_BINARY" --address "$ADDR" -q -i vm1 $args || change_failures=$((change_failures + 1))
                changes=$((changes + 1))
        done
done
if wait $tp; then ok "no failed I/O during $changes live changes ($(cat "$T/traffic.out") round trips)"; else fail "I/O failed during live changes: $(cat "$T/traffic.out")"; fi
check "every live change succeeded ($change_failures failures)" test $change_failures = 0
F -q -i vm1 set-poll-us 0

expect_rc 0 "reset-stats" -i vm1 reset-stats
F -i vm1 stats --json
check "stats empty after reset" json 'd["opcodes"]==[] and all(q["requests"]==0 for q in d["queues"])'

# ---- several instances; a name that needs escaping, a path that needs JSON escaping ----
odd='9vm-a.b@c:d_e'
odd_share=$T/$'sh"a\\re\tx'
start_vufsd "$odd" "$T/odd.sock" "$odd_share" || exit 1
expect_rc 3 "status without -i when two run" status
check "lists the candidates" grep -q "2 instances are running.*choose one with -i: $odd vm1" <<<"$err"
expect_rc 0 "list --json with two" list --json
check "both listed" json 'sorted(x["instance"] for x in d)==["'"$odd"'", "vm1"]'
check "the escaped bus name" json 'any(x["bus_name"]=="org.vufsd.Instance._39vm_2da_2eb_40c_3ad_5fe" for x in d)'
expect_rc 0 "status -i with the odd name" -i "$odd" status --json
check "quote, backslash and tab survive JSON" json 'd["shared_directory"]==sys.argv[1]' 
expect_rc 0 "list --quiet" list --quiet
check "names only" test "$(printf '%s\n' "$out" | sort | tr '\n' '|')" = "$odd|vm1|"

# ---- bash completion ----
PATH="$(dirname "$FSCTL_BINARY"):$PATH"
# shellcheck source=/dev/null
source "$SRC/ctl/fsctl.bash-completion"
complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _fsctl; printf '%s\n' "${COMPREPLY[@]}"; }
check "completes verbs" test "$(complete_words fsctl set-c)" = "set-cache"
check "completes set-poll-us" test "$(complete_words fsctl set-p)" = "set-poll-us"
check "completes cache policies" test "$(complete_words fsctl -i vm1 set-cache al | tr '\n' ' ')" = "always "
check "completes instances from the bus" test "$(complete_words fsctl --address "$ADDR" -i v)" = "vm1"

# ---- man pages render without warnings ----
if command -v groff >/dev/null; then
        for page in "$SRC/docs/man/fsctl.1" "$SRC/docs/man/vufsd.8"; do
                w=$(groff -man -ww -z -Tutf8 "$page" 2>&1)
                if [ -z "$w" ]; then ok "$(basename "$page") renders cleanly"; else fail "$(basename "$page"): $w"; fi
        done
fi

# ---- every daemon stops cleanly on SIGTERM, without sanitizer reports ----
test_stop_daemons "$T/vufsd.log"

test_summary
