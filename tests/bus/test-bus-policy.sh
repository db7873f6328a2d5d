#!/bin/bash
# test-bus-policy.sh: the installed system bus policy (policy/org.vufsd.conf) on a real dbus-daemon
# configured like Debian's system bus: root's changes succeed, an unprivileged user's are denied
# with AccessDenied while reads work, the group "vufsd" may change, and nobody else may own an
# instance name. Then, on a bus that lets everything through, the daemon's own check still refuses
# the unprivileged caller. vufsd and fsctl find the bus through DBUS_SYSTEM_BUS_ADDRESS.
# The daemon's own connection (issue 13 items 7 and 11): root's vufsd is on the bus as the user
# vufsd-bus, not uid 0; a member of the group vufsd can no longer own (squat) an instance name; and
# a call written on a daemon's own connection (taken from the running process with pidfd_getfd)
# cannot change another instance, while the same bytes from root do. Issue 31: the process serving
# the guest holds no bus connection at all (so it cannot own another instance's name), the
# supervisor does; and fsctl refuses a name owned by a process that merely runs as vufsd-bus.
# Needs root (it switches users with setpriv), dbus-daemon, python3.
set -uo pipefail

: "${VUFSD_BINARY:?}" "${FSCTL_BINARY:?}" "${VUFSD_DBUS_POLICY:?}" "${FE_TRAFFIC:?}"
PY=/usr/bin/python3
SRC_TESTS=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/bus/test-lib.sh
. "$SRC_TESTS/test-lib.sh"
test_require_root "run callers as other users"
test_require_tools dbus-daemon setpriv

T=$(mktemp -d /tmp/vufsd-policy.XXXXXX)
chmod 755 "$T" # the unprivileged caller must reach the bus socket and our copy of fsctl
pids=()
vufsd_pids=()
made_group=
made_user=
made_adm_user=
cleanup() {
        for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
        for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
        [ -n "$made_user" ] && userdel vufsd-bus
        [ -n "$made_adm_user" ] && userdel vufsd-test-adm
        [ -n "$made_group" ] && groupdel vufsd
        rm -rf "$T"
}
trap cleanup EXIT

# The build directory may sit below a directory only root can enter: run a copy (it links only
# system libraries).
install -m 755 "$FSCTL_BINARY" "$T/fsctl"

NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
as_root() { out=$("$T/fsctl" "$@" 2>"$T/err"); rc=$?; err=$(cat "$T/err"); }
as_nobody() { out=$("${NOBODY[@]}" "$T/fsctl" "$@" 2>"$T/err"); rc=$?; err=$(cat "$T/err"); }
as_admin() { out=$(setpriv --reuid=65534 --regid=65534 --groups="$ADMIN_GID" "$T/fsctl" "$@" 2>"$T/err"); rc=$?; err=$(cat "$T/err"); }
want() { # want RC DESCRIPTION
        if [ "$rc" = "$1" ]; then ok "$2 (exit $rc)"; else fail "$2: exit $rc, want $1; stdout: $out; stderr: $err"; fi
}
json() { printf '%s' "$out" | "$PY" -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"; }

# The admin group must exist before dbus-daemon reads the policy.
if ! getent group vufsd >/dev/null; then
        groupadd --system vufsd && made_group=1
fi
ADMIN_GID=$(getent group vufsd | cut -d: -f3)
# The identity vufsd connects with (units/vufsd.sysusers creates it on a real system), also before
# dbus-daemon reads the policy that names it.
if ! getent passwd vufsd-bus >/dev/null; then
        useradd --system --user-group --no-create-home --home-dir / --shell /usr/sbin/nologin vufsd-bus &&
                made_user=1
fi
BUS_UID=$(id -u vufsd-bus)

start_bus() { # start_bus NAME POLICY-BODY: a bus in $T/NAME; sets $ADDR
        local dir=$T/$1
        mkdir -p "$dir"
        chmod 755 "$dir"
        cat >"$dir/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$dir/system_bus_socket</listen>
  <auth>EXTERNAL</auth>
$2
</busconfig>
EOF
        dbus-daemon --config-file="$dir/bus.conf" --nofork --print-address=3 3>"$dir/address" 2>"$dir/dbus.log" &
        pids+=($!)
        for _ in $(seq 100); do [ -s "$dir/address" ] && break; sleep 0.05; done
        ADDR=$(head -n1 "$dir/address")
        [ -n "$ADDR" ] || { echo "dbus-daemon did not start:"; cat "$dir/dbus.log"; exit 1; }
}

start_vufsd() { # start_vufsd INSTANCE extra...: root's vufsd on the current DBUS_SYSTEM_BUS_ADDRESS
        local inst=$1 pid
        shift
        mkdir -p "$T/share-$inst"
        "$VUFSD_BINARY" --socket-path "$T/$inst.sock" --shared-dir "$T/share-$inst" --instance "$inst" \
                --keep-listening "$@" >>"$T/vufsd-$inst.log" 2>&1 &
        pid=$!
        pids+=($pid)
        vufsd_pids+=($pid)
        for _ in $(seq 200); do
                grep -qxF "$inst" <<< "$("$T/fsctl" list --quiet 2>/dev/null)" && return 0
                kill -0 $pid 2>/dev/null || break
                sleep 0.05
        done
        echo "vufsd $inst did not own its name:"
        cat "$T/vufsd-$inst.log"
        exit 1
}

start_as() { # start_as DIR INSTANCE [COMMAND...]: vufsd run through COMMAND (setpriv ...), --sandbox none
        # on the system bus, sharing $T/DIR; waits until its log says whether it owns its name; sets $opid
        local dir=$1 inst=$2
        shift 2
        "$@" "$VUFSD_BINARY" --socket-path "$T/$dir/vu.sock" --shared-dir "$T/$dir" --instance "$inst" \
                --bus system --sandbox none --keep-listening >"$T/$dir/log" 2>&1 &
        opid=$!
        pids+=($opid)
        vufsd_pids+=($opid)
        for _ in $(seq 200); do grep -q "Control interface\|Cannot own\|Not allowed" "$T/$dir/log" && break; sleep 0.05; done
}

# ---- a system bus like Debian's: default deny, holes punched by the included policy ----
# (The same default context as /usr/share/dbus-1/system.conf, then <include> where system.conf has
# <includedir>system.d</includedir>.)
start_bus system "
  <policy context=\"default\">
    <allow user=\"*\"/>
    <deny own=\"*\"/>
    <deny send_type=\"method_call\"/>
    <allow send_type=\"signal\"/>
    <allow send_requested_reply=\"true\" send_type=\"method_return\"/>
    <allow send_requested_reply=\"true\" send_type=\"error\"/>
    <allow receive_type=\"method_call\"/>
    <allow receive_type=\"method_return\"/>
    <allow receive_type=\"error\"/>
    <allow receive_type=\"signal\"/>
    <allow send_destination=\"org.freedesktop.DBus\" send_interface=\"org.freedesktop.DBus\"/>
    <allow send_destination=\"org.freedesktop.DBus\" send_interface=\"org.freedesktop.DBus.Introspectable\"/>
    <allow send_destination=\"org.freedesktop.DBus\" send_interface=\"org.freedesktop.DBus.Properties\"/>
    <deny send_destination=\"org.freedesktop.DBus\" send_interface=\"org.freedesktop.DBus\" send_member=\"UpdateActivationEnvironment\"/>
    <deny send_destination=\"org.freedesktop.DBus\" send_interface=\"org.freedesktop.DBus.Debug.Stats\"/>
  </policy>
  <include>$VUFSD_DBUS_POLICY</include>"
export DBUS_SYSTEM_BUS_ADDRESS=$ADDR

# vufsd as root, no --bus: the system bus by default.
start_vufsd pol1 --threads inline
check "vufsd logged the system bus" grep -q "Control interface on the system bus as org.vufsd.Instance.pol1" "$T/vufsd-pol1.log"
# The bus sees the connection as vufsd-bus: a taken-over daemon holds no root connection.
out=$(busctl call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus GetConnectionUnixUser s \
        org.vufsd.Instance.pol1 2>&1); rc=$?
check "pol1's bus connection is uid $BUS_UID (vufsd-bus), not root: $out" test "$rc:$out" = "0:u $BUS_UID"

# root: everything.
as_root -i pol1 set-threads 4
want 0 "root: set-threads 4"
as_root -i pol1 set-cache never
want 0 "root: set-cache never"
as_root -i pol1 reset-stats
want 0 "root: reset-stats"
as_root -i pol1 set-poll-us 20
want 0 "root: set-poll-us 20"
as_root -i pol1 status --json
want 0 "root: status"
check "root's changes took effect" json 'd["thread_mode"]=="pool" and d["pool_size"]==4 and d["cache_policy"]=="never" and d["poll_usec"]==20'

# nobody: reads work...
as_nobody list
want 0 "nobody: list"
check "nobody sees pol1" grep -q "^pol1 " <<<"$out"
as_nobody -i pol1 status --json
want 0 "nobody: status (Properties.GetAll)"
check "nobody reads the properties" json 'd["instance"]=="pol1" and d["thread_mode"]=="pool"'
as_nobody -i pol1 stats --json
want 0 "nobody: stats (GetStatistics)"
out=$("${NOBODY[@]}" busctl call org.vufsd.Instance.pol1 /org/vufsd/Daemon org.vufsd.Daemon1 GetErrorCounts 2>"$T/err"); rc=$?; err=$(cat "$T/err")
want 0 "nobody: GetErrorCounts"
check "nobody reads the errors by errno" grep -q "^a(ut) " <<<"$out"
out=$("${NOBODY[@]}" busctl call org.vufsd.Instance.pol1 /org/vufsd/Daemon org.vufsd.Daemon1 GetLatencySums 2>"$T/err"); rc=$?; err=$(cat "$T/err")
want 0 "nobody: GetLatencySums"
check "nobody reads the latency sums" grep -q "^a(ut) " <<<"$out"
out=$("${NOBODY[@]}" busctl introspect org.vufsd.Instance.pol1 /org/vufsd/Daemon 2>"$T/err"); rc=$?; err=$(cat "$T/err")
want 0 "nobody: Introspect"
check "nobody's introspection shows the interface" grep -q "^org.vufsd.Daemon1 *interface" <<<"$out"
out=$("${NOBODY[@]}" busctl call org.vufsd.Instance.pol1 /org/vufsd/Daemon org.freedesktop.DBus.Peer Ping 2>"$T/err"); rc=$?; err=$(cat "$T/err")
want 0 "nobody: Peer.Ping"

# ... changes are denied by the bus policy.
for args in "set-threads 2" "set-threads inline" "set-cache always" "set-poll-us 100" "set-poll-us 0" "reset-stats"; do
        # shellcheck disable=SC2086
        as_nobody -i pol1 $args
        want 4 "nobody: $args denied"
        check "nobody: $args: AccessDenied from the bus" grep -q "access denied.*the bus said: Rejected send message" <<<"$(tr '\n' ' ' <<<"$err")"
done
out=$("${NOBODY[@]}" busctl call org.vufsd.Instance.pol1 /org/vufsd/Daemon org.vufsd.Daemon1 SetThreads su pool 2 2>&1); rc=$?
check "nobody: raw SetThreads call denied (busctl exit $rc)" test $rc != 0
check "raw call: AccessDenied" grep -qi "access denied\|AccessDenied" <<<"$out"
out=$("${NOBODY[@]}" busctl call org.vufsd.Instance.pol1 /org/vufsd/Daemon org.vufsd.Daemon1 SetPollUSec u 100 2>&1); rc=$?
check "nobody: raw SetPollUSec call denied (busctl exit $rc)" test $rc != 0
check "raw SetPollUSec: AccessDenied" grep -qi "access denied\|AccessDenied" <<<"$out"
out=$("${NOBODY[@]}" busctl call org.vufsd.Instance.pol1 /org/vufsd/Daemon org.vufsd.Daemon1 SetPollMode s off 2>&1); rc=$?
check "nobody: raw SetPollMode call denied (busctl exit $rc)" test $rc != 0
check "raw SetPollMode: AccessDenied" grep -qi "access denied\|AccessDenied" <<<"$out"
out=$("${NOBODY[@]}" busctl call org.vufsd.Instance.pol1 /org/vufsd/Daemon org.freedesktop.DBus.Properties Set ssv org.vufsd.Daemon1 CachePolicy s always 2>&1); rc=$?
check "nobody: Properties.Set denied (busctl exit $rc)" test $rc != 0
out=$("${NOBODY[@]}" busctl get-property org.vufsd.Instance.pol1 /org/vufsd/Daemon org.vufsd.Daemon1 PollUSec 2>"$T/err"); rc=$?; err=$(cat "$T/err")
want 0 "nobody: reads PollUSec"
check "nobody reads PollUSec 20" test "$out" = "u 20"
as_root -i pol1 status --json
check "nothing nobody tried changed anything" json 'd["thread_mode"]=="pool" and d["pool_size"]==4 and d["cache_policy"]=="never" and d["poll_usec"]==20'

# The group vufsd may change.
as_admin -i pol1 set-threads auto --size 3
want 0 "group vufsd: set-threads auto --size 3"
as_admin -i pol1 set-cache metadata
want 0 "group vufsd: set-cache metadata"
as_admin -i pol1 set-poll-us 0
want 0 "group vufsd: set-poll-us 0"
as_root -i pol1 status --json
check "the group's changes took effect" json 'd["thread_mode"]=="auto" and d["pool_size"]==3 and d["cache_policy"]=="metadata" and d["poll_usec"]==0'

# Nobody else may own an instance name: a vufsd run by nobody serves, without the control plane.
mkdir -p "$T/nobody" && chown 65534:65534 "$T/nobody"
start_as nobody intruder "${NOBODY[@]}"
npid=$opid
check "nobody's vufsd may not own org.vufsd.Instance.intruder" grep -q "Not allowed to own org.vufsd.Instance.intruder" "$T/nobody/log"
check "nobody's vufsd still serves" kill -0 $npid
as_root list --quiet
check "intruder is not on the bus" test "$out" = "pol1"

# A member of the group vufsd may change instances, but not own (squat) an instance's name: its
# vufsd runs without the control plane, so root's fsctl can never reach an impostor.
mkdir -p "$T/squat" && chown 65534:65534 "$T/squat"
start_as squat squat setpriv --reuid=65534 --regid=65534 --groups="$ADMIN_GID"
check "group vufsd's vufsd may not own org.vufsd.Instance.squat" grep -q "Not allowed to own org.vufsd.Instance.squat" "$T/squat/log"
as_root list --quiet
check "squat is not on the bus" test "$out" = "pol1"
# A bus user in the group vufsd (which may change every instance) is refused: no connection at all.
if ! getent passwd vufsd-test-adm >/dev/null; then
        useradd --system --no-create-home --home-dir / --shell /usr/sbin/nologin -g vufsd vufsd-test-adm &&
                made_adm_user=1
fi
mkdir -p "$T/adm"
"$VUFSD_BINARY" --socket-path "$T/adm/vu.sock" --shared-dir "$T/adm" --instance adm --bus-user vufsd-test-adm \
        --keep-listening >"$T/adm/log" 2>&1 &
apid=$!
pids+=($apid)
vufsd_pids+=($apid)
for _ in $(seq 200); do grep -q "Serving" "$T/adm/log" && break; sleep 0.05; done
check "a bus user in group vufsd is refused" grep -q 'Bus user "vufsd-test-adm" is in group "vufsd"' "$T/adm/log"
check "... and no connection is made" bash -c "! grep -q 'Control interface\|Cannot own\|Not allowed' '$T/adm/log'"
check "... while the guest is still served" kill -0 $apid

# Nor may the daemon's own identity change instances: another taken-over vufsd must not steer this one.
out=$(setpriv --reuid="$BUS_UID" --regid="$(id -g vufsd-bus)" --clear-groups "$T/fsctl" -i pol1 set-threads 2 2>"$T/err"); rc=$?; err=$(cat "$T/err")
want 4 "user vufsd-bus: set-threads denied"

# A vufsd's own connection, used as if taken over: a second root vufsd (pol3), whose bus socket is
# taken out of the running processes (its supervisor holds it now; the serving process has none,
# below), writes SetThreads(pool, 9) to pol1.
start_vufsd pol3
BUS_SOCK=${ADDR#unix:path=}
BUS_SOCK=${BUS_SOCK%%,*}
out=$("$PY" "$SRC_TESTS/test-bus-inject.py" root - "$BUS_SOCK" org.vufsd.Instance.pol1 7 2>&1); rc=$?
want 0 "raw SetThreads from a fresh root connection sent"
as_root -i pol1 status --json
check "positive control: root's raw SetThreads(pool, 7) took effect" json 'd["thread_mode"]=="pool" and d["pool_size"]==7'
# pol3 is serving a guest (the test frontend's verified traffic) while its connection is used.
"$FE_TRAFFIC" "$T/pol3.sock" --seconds 3 >"$T/traffic.out" 2>&1 &
tpid=$!
pids+=($tpid)
sleep 0.5
out=$("$PY" "$SRC_TESTS/test-bus-inject.py" steal "${vufsd_pids[-1]}" "$BUS_SOCK" org.vufsd.Instance.pol1 9 2>&1); rc=$?
want 0 "raw SetThreads written on pol3's own bus connection, pol3 serving a guest"
wait $tpid
trc=$?
check "pol3's guest traffic ran and verified meanwhile (exit $trc: $(cat "$T/traffic.out"))" test $trc = 0
as_root -i pol1 status --json
check "the daemon's connection cannot change pol1 (pool size still 7)" json 'd["thread_mode"]=="pool" and d["pool_size"]==7'
as_root list --quiet
check "pol3 kept its connection (the bus refused the call, not the message)" grep -qx pol3 <<<"$out"

# Issue 31 finding 3: the process that handles pol3's guest input (the supervisor's child) holds no
# bus connection at all, so a taken-over pol3 cannot own another instance's name (org.vufsd.Instance.*
# is ownable by vufsd-bus, whichever instance holds the connection). Every socket of the serving
# process is written a RequestName on when it leads to the bus.
serving=$(cut -d' ' -f1 "/proc/${vufsd_pids[-1]}/task/${vufsd_pids[-1]}/children")
out=$("$PY" "$SRC_TESTS/test-bus-inject.py" own "$serving" "$BUS_SOCK" org.vufsd.Instance.victim 2>&1); rc=$?
want 2 "pol3's serving process (pid $serving) holds no connection to the bus: $(tr '\n' ';' <<<"$out")"
out=$(busctl call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus NameHasOwner s \
        org.vufsd.Instance.victim 2>&1); rc=$?
check "org.vufsd.Instance.victim was not taken through pol3's serving process: $out" test "$rc:$out" = "0:b false"
# The supervisor holds pol3's connection; it handles no guest input.
check "pol3's name is owned by its supervisor (pid ${vufsd_pids[-1]})" test "$(busctl call org.freedesktop.DBus \
        /org/freedesktop/DBus org.freedesktop.DBus GetConnectionUnixProcessID s org.vufsd.Instance.pol3 2>&1)" = \
        "u ${vufsd_pids[-1]}"

# fsctl notices an impostor that is the bus user itself: a vufsd started by (not as root connecting
# as) vufsd-bus may own a name under the policy, but root's vufsd is a root process; whoever runs
# code as vufsd-bus cannot answer root's fsctl.
mkdir -p "$T/fake" && chown "$BUS_UID" "$T/fake"
start_as fake fake setpriv --reuid="$BUS_UID" --regid="$(id -g vufsd-bus)" --clear-groups
check "vufsd-bus's own vufsd owns org.vufsd.Instance.fake (the policy allows the user)" grep -q "Control interface" "$T/fake/log"
as_root -i fake status
want 1 "fsctl refuses an instance owned by a process running as vufsd-bus"
check "fsctl says why: $err" grep -q "owned by a process running as uid $BUS_UID" <<<"$err"
as_admin -i fake set-threads 2
want 1 "fsctl refuses the impostor for the group vufsd too"
as_root -i pol1 status
want 0 "fsctl still trusts root's vufsd connected as vufsd-bus"

# ---- live upgrade (docs/survival.md): a setter like the others ----
start_vufsd upg --crash-restarts=3
as_nobody -i upg upgrade
want 4 "nobody: upgrade denied"
check "nobody: upgrade: AccessDenied from the bus" grep -q "access denied.*the bus said: Rejected send message" <<<"$(tr '\n' ' ' <<<"$err")"
as_admin -i upg upgrade
want 0 "group vufsd: upgrade"
as_root -i upg upgrade
want 0 "root: upgrade"
check "root: upgrade says what serves now: $out" grep -q "^upg: upgraded from vufsd .* to vufsd .* (the guest paused" <<<"$out"
as_root -i upg stats --json
check "two upgrades counted, no restart" json 'd["upgrades"]==2 and d["restarts"]==0'
as_root -i pol1 upgrade
want 1 "root: upgrade of an instance without --crash-restarts fails"
check "it names the option: $err" grep -q -- "--crash-restarts" <<<"$err"

# ---- a bus that lets everyone do everything: the daemon's own check still refuses ----
start_bus open "
  <policy context=\"default\">
    <allow user=\"*\"/>
    <allow own=\"*\"/>
    <allow send_destination=\"*\" eavesdrop=\"true\"/>
    <allow eavesdrop=\"true\"/>
  </policy>"
export DBUS_SYSTEM_BUS_ADDRESS=$ADDR
start_vufsd pol2 --bus "$ADDR"
as_nobody -i pol2 set-threads 2
want 4 "open bus: nobody's set-threads refused by vufsd"
check "vufsd says who may" grep -q 'Only root and members of the group "vufsd" may change vufsd instance "pol2"' <<<"$err"
as_nobody -i pol2 set-cache never
want 4 "open bus: nobody's set-cache refused by vufsd"
as_nobody -i pol2 set-poll-us 100
want 4 "open bus: nobody's set-poll-us refused by vufsd"
check "vufsd says who may (set-poll-us)" grep -q 'Only root and members of the group "vufsd" may change vufsd instance "pol2"' <<<"$err"
as_root -i pol2 status --json
check "open bus: nobody's set-poll-us changed nothing" json 'd["poll_usec"]==50 and d["poll_mode"]=="auto"'
as_nobody -i pol2 set-poll-us auto
want 4 "open bus: nobody's set-poll-us auto (SetPollMode) refused by vufsd"
as_nobody -i pol2 upgrade
want 4 "open bus: nobody's upgrade refused by vufsd"
check "vufsd says who may (upgrade)" grep -q 'Only root and members of the group "vufsd" may change vufsd instance "pol2"' <<<"$err"
as_nobody -i pol2 status
want 0 "open bus: nobody reads"
as_admin -i pol2 set-threads 2
want 0 "open bus: group vufsd allowed by vufsd (supplementary groups from the bus)"
as_root -i pol2 set-threads 3
want 0 "open bus: root allowed"

# fsctl trusts a system-bus instance only when its name's owner is root or vufsd-bus: on a bus whose
# policy lets anyone own the names (an old or hand-written policy), nobody's impostor is refused.
mkdir -p "$T/impostor" && chown 65534:65534 "$T/impostor"
start_as impostor impostor "${NOBODY[@]}"
check "open bus: nobody's vufsd owns org.vufsd.Instance.impostor" grep -q "Control interface" "$T/impostor/log"
as_root -i impostor set-threads 2
want 1 "open bus: fsctl refuses to talk to an instance owned by nobody"
check "fsctl says why" grep -q "owned by uid 65534" <<<"$err"
as_root -i impostor status
want 1 "open bus: fsctl does not show an impostor's status"
as_root -i pol2 status
want 0 "open bus: fsctl still trusts root's instance"

# ---- every daemon stops cleanly on SIGTERM, without sanitizer reports ----
test_stop_daemons "$T"/vufsd-*.log "$T/nobody/log" "$T/squat/log" "$T/impostor/log" "$T/adm/log"

test_summary
