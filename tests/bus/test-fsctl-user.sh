#!/bin/bash
# test-fsctl-user.sh: vufsd run as an ordinary user on that user's session bus, as the user
# service (units/user/vufsd@.service) runs it, and fsctl --user against it:
#   - vufsd as uid A, without --bus, finds the session bus the way a user service's environment
#     names it (XDG_RUNTIME_DIR/bus, no DBUS_SESSION_BUS_ADDRESS) and owns org.vufsd.Instance.NAME;
#   - fsctl --user as A: list, status, set-threads, set-cache, stats (counting the requests the
#     test frontend sent), reset-stats;
#   - on a session bus that admits other users too (a loose configuration, or a
#     DBUS_SESSION_BUS_ADDRESS naming someone else's bus), fsctl --user as uid B and as root
#     refuses to talk to A's instance (the owner check: the name's owner must be the caller), and
#     A refuses an instance B owns there;
#   - --system (the default) does not look at the session bus, and bash completion of -i lists
#     the instances of the bus the command line names (--user: the session bus).
# Needs root (it runs the daemon and the callers as other uids with setpriv), dbus-daemon, python3.
set -uo pipefail

: "${VUFSD_BINARY:?}" "${FSCTL_BINARY:?}" "${FE_TRAFFIC:?}"
PY=/usr/bin/python3
# shellcheck source=tests/bus/test-lib.sh
. "$(dirname "$0")/test-lib.sh"
test_require_root "run the daemon and the callers as other users"
test_require_tools dbus-daemon setpriv

T=$(mktemp -d /tmp/vufsd-fsctl-user.XXXXXX)
chmod 755 "$T"
pids=()
made_users=()
cleanup() {
        for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
        for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
        for u in "${made_users[@]}"; do userdel "$u"; done
        rm -rf "$T"
}
trap cleanup EXIT

# Two ordinary users (dbus-daemon wants a passwd entry for the uid it runs as).
for u in vufsd-test-ua vufsd-test-ub; do
        if ! getent passwd $u >/dev/null; then
                useradd --system --user-group --no-create-home --home-dir / --shell /usr/sbin/nologin $u &&
                        made_users+=("$u")
        fi
done
UA=$(id -u vufsd-test-ua) && UB=$(id -u vufsd-test-ub) || { echo "cannot create the test users"; exit 1; }

# The build directory may sit below a directory only root can enter: run copies (both link only
# system libraries).
install -m 755 "$VUFSD_BINARY" "$T/vufsd"
install -m 755 "$FSCTL_BINARY" "$T/fsctl"

# A's runtime directory as the user manager makes it ($XDG_RUNTIME_DIR, 0700), holding the session
# bus socket at the place sd-bus and libdbus look when DBUS_SESSION_BUS_ADDRESS is unset.
RUN_A=$T/run-$UA
mkdir -m 700 "$RUN_A"
chown "$UA:$UA" "$RUN_A"
mkdir -m 755 "$T/share-a" "$T/share-b" "$T/run-$UB"
chown "$UA:$UA" "$T/share-a"
chown "$UB:$UB" "$T/share-b" "$T/run-$UB"

# as UID CMD...: CMD as UID with a user service's environment (its runtime dir, no bus address).
# It execs: call it in a subshell ($(...) or &), so that $! is the command itself.
as() {
        local uid=$1
        shift
        exec setpriv --reuid="$uid" --regid="$uid" --clear-groups \
                env -i PATH=/usr/bin:/bin HOME=/ XDG_RUNTIME_DIR="$T/run-$uid" "$@"
}
# Runs fsctl as UID with extra environment; sets $out, $err, $rc.
F() { # F UID [VAR=VALUE...] fsctl-args...
        local uid=$1
        shift
        local -a envs=()
        while [[ ${1:-} == *=* && ${1:-} != -* ]]; do envs+=("$1"); shift; done
        out=$(as "$uid" "${envs[@]}" "$T/fsctl" "$@" 2>"$T/err")
        rc=$?
        err=$(cat "$T/err")
}
want() { # want RC DESCRIPTION
        if [ "$rc" = "$1" ]; then ok "$2 (exit $rc)"; else fail "$2: exit $rc, want $1; stdout: $out; stderr: $err"; fi
}
json() { printf '%s' "$out" | "$PY" -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"; }

# ---- A's session bus ----
# Like /usr/share/dbus-1/session.conf, but admitting every uid: what a loosely configured session
# bus (or one reached through another user's DBUS_SESSION_BUS_ADDRESS) looks like to fsctl. Run as
# A, as dbus-daemon --session would be.
cat >"$T/session.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$RUN_A/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
EOF
as $UA dbus-daemon --config-file="$T/session.conf" --nofork --print-address=3 3>"$T/bus.address" 2>"$T/dbus.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$T/bus.address" ] && break; sleep 0.05; done
[ -s "$T/bus.address" ] || { echo "dbus-daemon did not start:"; cat "$T/dbus.log"; exit 1; }
# The bus socket's directory is A's alone; the others reach it through this open copy of the path.
chmod 711 "$RUN_A"
chmod 666 "$RUN_A/bus"
A_BUS=unix:path=$RUN_A/bus

start_vufsd() { # start_vufsd UID INSTANCE SHARE [VAR=VALUE...]: vufsd as UID, no --bus (the default)
        local uid=$1 inst=$2 share=$3 pid
        shift 3
        as "$uid" "$@" "$T/vufsd" --socket-path "$T/run-$uid/$inst.sock" --shared-dir "$share" --instance "$inst" \
                --keep-listening --threads inline >>"$T/vufsd-$inst.log" 2>&1 &
        pid=$!
        pids+=("$pid")
        for _ in $(seq 200); do
                grep -q "Control interface on" "$T/vufsd-$inst.log" && [ -S "$T/run-$uid/$inst.sock" ] && return 0
                kill -0 $pid 2>/dev/null || break
                sleep 0.05
        done
        echo "vufsd $inst did not come up:"
        cat "$T/vufsd-$inst.log"
        exit 1
}

# ---- vufsd as A: the session bus found from XDG_RUNTIME_DIR alone ----
start_vufsd $UA vm1 "$T/share-a"
check "vufsd as uid $UA chose the session bus without --bus" \
        grep -q "Control interface on the session bus as org.vufsd.Instance.vm1" "$T/vufsd-vm1.log"
out=$(DBUS_SESSION_BUS_ADDRESS=$A_BUS busctl --user call org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus GetConnectionUnixUser s org.vufsd.Instance.vm1 2>&1)
check "org.vufsd.Instance.vm1 is owned by uid $UA: $out" test "$out" = "u $UA"
# Issue 31 finding 9: the process serving the guest (the supervisor's child, in its user namespace)
# holds no session-bus connection, with which a taken-over daemon could call the user's systemd
# (StartTransientUnit runs anything as the user) or own other names; the supervisor holds it.
vm1_pid=${pids[-1]}
serving=$(cut -d' ' -f1 "/proc/$vm1_pid/task/$vm1_pid/children")
err=""
out=$("$PY" "$(dirname "$0")/test-bus-inject.py" own "$serving" "$RUN_A/bus" org.vufsd.Instance.stolen 2>&1)
rc=$?
want 2 "A's serving process (pid $serving) holds no session-bus connection: $(tr '\n' ';' <<<"$out")"
out=$(DBUS_SESSION_BUS_ADDRESS=$A_BUS busctl --user call org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus NameHasOwner s org.vufsd.Instance.stolen 2>&1)
check "... so no name was taken through it: $out" test "$out" = "b false"
out=$(DBUS_SESSION_BUS_ADDRESS=$A_BUS busctl --user call org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus GetConnectionUnixProcessID s org.vufsd.Instance.vm1 2>&1)
check "org.vufsd.Instance.vm1 is owned by the supervisor (pid $vm1_pid): $out" test "$out" = "u $vm1_pid"

# ---- fsctl --user as A ----
F $UA --user list --quiet
want 0 "A: fsctl --user list"
check "A's list names vm1" test "$out" = vm1
F $UA --user -i vm1 status --json
want 0 "A: fsctl --user -i vm1 status"
check "status: the share and the socket in A's runtime dir" \
        json "d['shared_directory']=='$T/share-a' and d['socket']=='$RUN_A/vm1.sock'"
F $UA --user -i vm1 set-threads 3
want 0 "A: fsctl --user -i vm1 set-threads 3"
F $UA --user -i vm1 set-cache never
want 0 "A: fsctl --user -i vm1 set-cache never"
F $UA --user status --json
want 0 "A: fsctl --user status (the only instance)"
check "the changes took: pool of 3, cache never" json "d['thread_mode']=='pool' and d['pool_size']==3 and d['cache_policy']=='never'"
F $UA --user -i vm1 reset-stats
want 0 "A: fsctl --user -i vm1 reset-stats"
# The test frontend as root (the socket is A's; root may connect) sends verified requests.
n=$("$FE_TRAFFIC" "$RUN_A/vm1.sock" --count 5 --size 4096 2>"$T/fe.err") &&
        ok "fe-traffic through A's socket ($n round trips)" || { fail "fe-traffic"; cat "$T/fe.err"; }
F $UA --user -i vm1 stats --json
want 0 "A: fsctl --user -i vm1 stats"
check "stats counts the frontend's WRITEs and READs" \
        json "sum(o['requests'] for o in d['opcodes'] if o['name'] in ('WRITE','READ')) >= 10"
F $UA DBUS_SESSION_BUS_ADDRESS=$A_BUS --user -i vm1 stats
want 0 "A: fsctl --user with DBUS_SESSION_BUS_ADDRESS"
check "the stats table shows WRITE" grep -q '^WRITE' <<<"$out"

# --system is the default and does not look at the session bus.
F $UA DBUS_SYSTEM_BUS_ADDRESS=unix:path=$T/no-such-bus -i vm1 stats
want 5 "A: fsctl without --user looks at the system bus, not the session bus"
check "names the system bus" grep -q "system bus" <<<"$err"

# Bash completion of -i asks the bus the command line names: --user lists A's instances.
install -m 644 "$(dirname "$0")/../../ctl/fsctl.bash-completion" "$T/fsctl.bash-completion"
complete_as_a() { # complete_as_a WORDS...: what completion offers A for the last word
        as $UA DBUS_SYSTEM_BUS_ADDRESS=unix:path=$T/no-such-bus bash -c '
                PATH=$0:$PATH
                source "$0/fsctl.bash-completion"
                COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _fsctl
                printf "%s\n" "${COMPREPLY[@]}"' "$T" "$@"
}
out=$(complete_as_a fsctl --user -i v)
check "completion of fsctl --user -i offers A's vm1: '$out'" test "$out" = vm1
out=$(complete_as_a fsctl -i v)
check "completion of fsctl -i (system bus) does not: '$out'" test -z "$out"

# ---- another uid on the same bus: the owner check ----
F $UB DBUS_SESSION_BUS_ADDRESS=$A_BUS --user -i vm1 status
want 1 "B: fsctl --user -i vm1 status on A's bus is refused"
check "the refusal names the owner and the caller" grep -q "owned by uid $UA, not by you (uid $UB)" <<<"$err"
check "nothing of A's instance was printed" test -z "$out"
F $UB DBUS_SESSION_BUS_ADDRESS=$A_BUS --user -i vm1 set-threads 1
want 1 "B: fsctl --user -i vm1 set-threads is refused before any call"
F 0 DBUS_SESSION_BUS_ADDRESS=$A_BUS --user -i vm1 stats
want 1 "root: fsctl --user -i vm1 stats on A's bus is refused too (not root's bus)"
F $UA --user -i vm1 status --json
check "B's and root's attempts changed nothing" json "d['thread_mode']=='pool' and d['pool_size']==3"

# B's own vufsd on A's bus: A must not talk to it either (it would read A's changes).
start_vufsd $UB vm2 "$T/share-b" DBUS_SESSION_BUS_ADDRESS=$A_BUS
F $UA --user -i vm2 set-cache always
want 1 "A: fsctl --user -i vm2 (owned by B) is refused"
check "the refusal names B" grep -q "owned by uid $UB, not by you (uid $UA)" <<<"$err"
F $UB DBUS_SESSION_BUS_ADDRESS=$A_BUS --user -i vm2 set-cache always
want 0 "B: fsctl --user -i vm2 (its own) works"

test_summary
