#!/bin/bash
# test-metrics.sh: vufsd's statistics reaching Prometheus through the node exporter's textfile
# collector, with the real components: two vufsd instances on a private dbus-daemon doing known
# work (fe-traffic), the command of vufsd-metrics.service run as the unit runs it, promtool check
# metrics on the file, prometheus-node-exporter serving it, and a real prometheus scraping that and
# answering a PromQL query for both instances. Then an instance that exits disappears from the next
# file and a stopped (wedged) instance does not keep the others from being written.
# Needs: VUFSD_BINARY, FSCTL_BINARY, FE_TRAFFIC, VUFSD_DBUS_XML (set by meson), dbus-daemon, python3,
# promtool, prometheus, prometheus-node-exporter (tools/install-deps.sh). Everything on 127.0.0.1.
set -uo pipefail

: "${VUFSD_BINARY:?}" "${FSCTL_BINARY:?}" "${FE_TRAFFIC:?}" "${VUFSD_DBUS_XML:?}"
SRC=$(cd "$(dirname "$VUFSD_DBUS_XML")/.." && pwd)
PY=/usr/bin/python3
# shellcheck source=tests/bus/test-lib.sh
. "$(dirname "$0")/test-lib.sh"
test_require_tools dbus-daemon promtool prometheus prometheus-node-exporter

test_private_bus metrics
ADDR=$VM_BUS_ADDRESS

start_vufsd() { # start_vufsd INSTANCE: vufsd on $T/INSTANCE.sock sharing $T/INSTANCE
        local inst=$1 pid
        mkdir -p "$T/$inst"
        "$VUFSD_BINARY" --socket-path "$T/$inst.sock" --shared-dir "$T/$inst" --bus "$ADDR" --instance "$inst" \
                --keep-listening >>"$T/vufsd.log" 2>&1 &
        pid=$!
        pids+=("$pid")
        vufsd_pids+=("$pid")
        eval "pid_$inst=$pid"
        for _ in $(seq 200); do
                grep -qxF -- "$inst" <<< "$("$FSCTL_BINARY" --address "$ADDR" list --quiet 2>/dev/null)" &&
                        [ -S "$T/$inst.sock" ] && return 0
                sleep 0.05
        done
        echo "vufsd $inst did not come up"
        cat "$T/vufsd.log"
        return 1
}
free_port() {
        "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# Polls URL until it answers (at most 20 s).
wait_http() {
        for _ in $(seq 200); do
                curl_get "$1" >/dev/null 2>&1 && return 0
                sleep 0.1
        done
        return 1
}
curl_get() {
        "$PY" -c 'import sys,urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"
}
# The value of one sample in a text-format file: value FILE 'name{labels}'
value() {
        awk -v k="$2" '$1 == k { print $2 }' "$1"
}

start_vufsd vm1 || exit 1
start_vufsd vm2 || exit 1

# ---- known work: 10 round trips (up to 20000 bytes) on vm1, 7 (up to 5000) on vm2; then known
# errors: 3 MKDIRs of an existing directory (EEXIST) on vm1, 2 on vm2 ----
e1=3 e2=2
n1=$("$FE_TRAFFIC" "$T/vm1.sock" --count 10 --size 20000 --eexist $e1) && ok "traffic on vm1 ($n1 round trips)" ||
        fail "traffic on vm1"
n2=$("$FE_TRAFFIC" "$T/vm2.sock" --count 7 --size 5000 --eexist $e2) && ok "traffic on vm2 ($n2 round trips)" ||
        fail "traffic on vm2"
# fe-traffic writes and reads back 1 + (i * 7919) % size bytes in round trip i, one WRITE each.
bytes1=$("$PY" -c 'print(sum(1 + i * 7919 % 20000 for i in range(10)))')
bytes2=$("$PY" -c 'print(sum(1 + i * 7919 % 5000 for i in range(7)))')

# ---- the service's command, as the unit runs it (system bus, its --output in our directory) ----
unit="$SRC/units/vufsd-metrics.service.in"
exec_start=$(sed -n 's/^ExecStart=@bindir@\/fsctl //p' "$unit")
check "the unit has one fsctl ExecStart" test -n "$exec_start"
TEXTDIR=$T/textfile
mkdir -p "$TEXTDIR"
read -r -a args <<< "${exec_start//\/var\/lib\/prometheus\/node-exporter/$TEXTDIR}"
check "the unit writes into the node exporter's textfile directory" \
        grep -q -- "--output=/var/lib/prometheus/node-exporter/vufsd.prom" <<< "$exec_start"
run_service() { # the unit's command; the system bus is our private one
        DBUS_SYSTEM_BUS_ADDRESS=$ADDR "$FSCTL_BINARY" "${args[@]}" 2>"$T/service.err"
}
run_service && ok "the service's command exits 0" || fail "the service's command: $(cat "$T/service.err")"
PROM=$TEXTDIR/vufsd.prom
check "it wrote $PROM, mode 0644" test "$(stat -c %a "$PROM" 2>/dev/null)" = 644
check "no temporary file left beside it" test "$(find "$TEXTDIR" -type f | wc -l)" = 1
out=$(promtool check metrics < "$PROM" 2>&1) && ok "promtool check metrics: clean" || fail "promtool check metrics: $out"
[ -z "$out" ] || fail "promtool check metrics printed: $out"

want() { # want FILE 'sample' VALUE
        local got
        got=$(value "$1" "$2")
        if [ "$got" = "$3" ]; then ok "$2 = $3"; else fail "$2 = '$got', want $3"; fi
}
for v in vm1:"$n1":"$bytes1":$e1 vm2:"$n2":"$bytes2":$e2; do
        IFS=: read -r vm n bytes eexist <<< "$v"
        want "$PROM" "vufsd_up{vm=\"$vm\"}" 1
        want "$PROM" "vufsd_requests_total{vm=\"$vm\",opcode=\"WRITE\"}" "$n"
        want "$PROM" "vufsd_requests_total{vm=\"$vm\",opcode=\"CREATE\"}" "$n"
        want "$PROM" "vufsd_request_bytes_total{vm=\"$vm\",opcode=\"WRITE\"}" "$bytes"
        want "$PROM" "vufsd_request_bytes_total{vm=\"$vm\",opcode=\"READ\"}" "$bytes"
        want "$PROM" "vufsd_request_errors_total{vm=\"$vm\",opcode=\"WRITE\"}" 0
        want "$PROM" "vufsd_request_duration_seconds_bucket{vm=\"$vm\",opcode=\"WRITE\",le=\"+Inf\"}" "$n"
        want "$PROM" "vufsd_request_duration_seconds_count{vm=\"$vm\",opcode=\"WRITE\"}" "$n"
        want "$PROM" "vufsd_thread_mode_info{vm=\"$vm\",mode=\"inline\"}" 1
        want "$PROM" "vufsd_cache_policy_info{vm=\"$vm\",policy=\"auto\"}" 1
        want "$PROM" "vufsd_max_nodes{vm=\"$vm\"}" 1000000
        want "$PROM" "vufsd_errors_by_errno_total{vm=\"$vm\",errno=\"EEXIST\"}" "$eexist"
        check "$vm: the errors by errno add up to the errors by opcode" "$PY" - "$PROM" "$vm" <<'EOF'
import re, sys
by = {"errno": 0, "opcode": 0}
for line in open(sys.argv[1]):
    m = re.match(r'vufsd_(errors_by_errno|request_errors)_total\{vm="%s",(errno|opcode)="[^"]*"\} (\d+)$' % sys.argv[2], line)
    if m:
        by[m.group(2)] += int(m.group(3))
sys.exit(0 if by["errno"] == by["opcode"] >= 1 else 1)
EOF
        # Each opcode's latency sum lies between the histogram's bucket bounds times their counts:
        # a sum that is not the real one (0, or made up from the bounds) fails one side or the other
        # for at least one opcode of the run.
        check "$vm: every histogram has a _sum within what its buckets allow, not all at a bound" "$PY" - "$PROM" "$vm" <<'EOF'
import re, sys
h, sums = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r'vufsd_request_duration_seconds_(bucket|sum)\{vm="%s",opcode="([^"]*)"(?:,le="([^"]*)")?\} (\S+)$' % sys.argv[2], line)
    if not m:
        continue
    if m.group(1) == "sum":
        sums[m.group(2)] = float(m.group(4))
    else:
        h.setdefault(m.group(2), []).append((float("inf") if m.group(3) == "+Inf" else float(m.group(3)), int(m.group(4))))
strict = 0
for op, buckets in h.items():
    lo = hi = 0.0
    prev_le, prev_cum = 0.0, 0
    for le, cum in buckets:
        n = cum - prev_cum
        if n:
            lo += n * prev_le
            hi += n * le
        prev_le, prev_cum = le, cum
    s = sums.get(op)
    if s is None or not (lo <= s + 1e-6 and s <= hi + 1e-6):
        print(op, "sum", s, "outside", lo, hi)
        sys.exit(1)
    strict += lo < s < hi
sys.exit(0 if h and strict else 1)
EOF
        check "$vm: fds and nodes in use, below their budgets" "$PY" - "$PROM" "$vm" <<'EOF'
import sys
v = {}
for line in open(sys.argv[1]):
    if not line.startswith("#"):
        k, val = line.rsplit(" ", 1)
        v[k] = float(val)
vm = sys.argv[2]
g = lambda n: v['%s{vm="%s"}' % (n, vm)]
sys.exit(0 if 1 <= g("vufsd_open_fds") < g("vufsd_max_fds") and 1 <= g("vufsd_nodes") < g("vufsd_max_nodes") else 1)
EOF
done
check "buckets are cumulative and in seconds (le=\"1e-06\" ... \"4.194304\")" \
        grep -q 'vufsd_request_duration_seconds_bucket{vm="vm1",opcode="WRITE",le="4.194304"} '"$n1" "$PROM"
check "no \"instance\" label in the file (Prometheus's own)" bash -c "! grep -q 'instance=' '$PROM'"
series=$(grep -c '^vufsd_' "$PROM")
echo "# $series series in the file"

# ---- prometheus-node-exporter serves it ----
NE_PORT=$(free_port)
prometheus-node-exporter --collector.disable-defaults --collector.textfile \
        --collector.textfile.directory="$TEXTDIR" --web.listen-address="127.0.0.1:$NE_PORT" >"$T/ne.log" 2>&1 &
pids+=($!)
if wait_http "http://127.0.0.1:$NE_PORT/metrics"; then ok "node exporter up on 127.0.0.1:$NE_PORT"; else
        fail "node exporter did not answer"; cat "$T/ne.log"; fi
curl_get "http://127.0.0.1:$NE_PORT/metrics" >"$T/ne.metrics"
want "$T/ne.metrics" "node_textfile_scrape_error" 0
for v in vm1:"$n1" vm2:"$n2"; do
        IFS=: read -r vm n <<< "$v"
        want "$T/ne.metrics" "vufsd_requests_total{opcode=\"WRITE\",vm=\"$vm\"}" "$n"
        want "$T/ne.metrics" "vufsd_request_duration_seconds_count{opcode=\"WRITE\",vm=\"$vm\"}" "$n"
done
want "$T/ne.metrics" "vufsd_errors_by_errno_total{errno=\"EEXIST\",vm=\"vm1\"}" $e1
ne_series=$(grep -c '^vufsd_' "$T/ne.metrics")
if [ "$ne_series" = "$series" ]; then ok "the node exporter serves all $series vufsd series"; else
        fail "the node exporter serves $ne_series vufsd series, the file has $series"; fi

# ---- a real prometheus scrapes the node exporter and answers PromQL ----
P_PORT=$(free_port)
cat >"$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: node
    static_configs:
      - targets: ['127.0.0.1:$NE_PORT']
EOF
promtool check config "$T/prometheus.yml" >/dev/null 2>&1 && ok "promtool check config" || fail "promtool check config"
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
        --web.listen-address="127.0.0.1:$P_PORT" >"$T/prometheus.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$P_PORT/-/ready" && ok "prometheus ready on 127.0.0.1:$P_PORT" || fail "prometheus not ready"
query='sum by (vm) (vufsd_requests_total{opcode="WRITE"})'
url="http://127.0.0.1:$P_PORT/api/v1/query?query=$("$PY" -c 'import sys,urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$query")"
answer=
for _ in $(seq 150); do # scrapes every second: bounded at 15 s
        answer=$(curl_get "$url" 2>/dev/null)
        "$PY" -c 'import json,sys; sys.exit(0 if len(json.loads(sys.argv[1])["data"]["result"]) == 2 else 1)' \
                "$answer" 2>/dev/null && break
        sleep 0.1
done
echo "# PromQL $query -> $answer"
check "prometheus answers for vm1 ($n1) and vm2 ($n2)" "$PY" -c '
import json, sys
r = {x["metric"]["vm"]: x["value"][1] for x in json.loads(sys.argv[1])["data"]["result"]}
sys.exit(0 if r == {"vm1": sys.argv[2], "vm2": sys.argv[3]} else 1)' "$answer" "$n1" "$n2"

# ---- an instance that exits disappears from the next write ----
# shellcheck disable=SC2154 # pid_vm2: set by start_vufsd
kill "$pid_vm2"
wait "$pid_vm2"
vufsd_pids=("$pid_vm1")
run_service && ok "written again after vm2 exited" || fail "after vm2 exited: $(cat "$T/service.err")"
check "vm2's series are gone" bash -c "! grep -q 'vm=\"vm2\"' '$PROM'"
want "$PROM" 'vufsd_requests_total{vm="vm1",opcode="WRITE"}' "$n1"

# ---- a wedged instance does not stop the others ----
start_vufsd vm3 || exit 1
# shellcheck disable=SC2154 # pid_vm3: set by start_vufsd
wedged=("$pid_vm3" $(cat "/proc/$pid_vm3/task/"*/children 2>/dev/null))
kill -STOP "${wedged[@]}"
stopped=("${wedged[@]}")
t0=$(date +%s.%N)
run_service && ok "written with vm3 stopped" || fail "with vm3 stopped: $(cat "$T/service.err")"
t=$(echo "$(date +%s.%N) $t0" | awk '{ printf "%.1f", $1 - $2 }')
kill -CONT "${wedged[@]}"
stopped=()
check "bounded: the run took ${t}s (< 8 s)" awk -v t="$t" 'BEGIN { exit !(t < 8) }'
want "$PROM" 'vufsd_up{vm="vm3"}' 0
want "$PROM" 'vufsd_up{vm="vm1"}' 1
want "$PROM" 'vufsd_requests_total{vm="vm1",opcode="WRITE"}' "$n1"
check "vm3 has no other series" test "$(grep -c 'vm="vm3"' "$PROM")" = 1
check "the service said why on stderr" grep -q 'vm3' "$T/service.err"
out=$(promtool check metrics < "$PROM" 2>&1) && [ -z "$out" ] && ok "promtool check metrics: clean with vm3 down" ||
        fail "promtool with vm3 down: $out"

# ---- fsctl's own checks of the options ----
F() { "$FSCTL_BINARY" --address "$ADDR" "$@" >"$T/out" 2>"$T/err"; }
F -i vm1 stats --format=openmetrics && ok "stats -i vm1 --format=openmetrics" || fail "stats -i vm1 --format=openmetrics"
check "one instance: only its series" bash -c "! grep -q 'vm=\"vm3\"' '$T/out' && grep -q 'vufsd_up{vm=\"vm1\"} 1' '$T/out'"
F --all stats; check "--all without openmetrics: exit 2" test $? = 2
F stats --format=yaml; check "--format=yaml: exit 2" test $? = 2
F -i vm1 stats --format=openmetrics --watch; check "openmetrics with --watch: exit 2" test $? = 2
F -i vm1 status --format=openmetrics; check "status --format=openmetrics: exit 2" test $? = 2
F -i vm1 --all stats --format=openmetrics; check "-i with --all: exit 2" test $? = 2
F -i vm1 stats --format=json && check "--format=json is --json" "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/out"
check "stats --json: errors_by_errno has EEXIST $e1" "$PY" -c '
import json, sys
sys.exit(0 if json.load(open(sys.argv[1]))["errors_by_errno"]["EEXIST"] == int(sys.argv[2]) else 1)' "$T/out" $e1
F -i vm1 stats && check "stats: an Errors line with EEXIST=$e1" grep -q "^Errors:.* EEXIST=$e1\( \|\$\)" "$T/out"

test_stop_daemons "$T/vufsd.log"
test_summary
