#!/bin/bash
# test-systemd.sh: vufsd's installed units under a real systemd. Builds the tree with --prefix=/usr,
# installs it (meson install --destdir) into a debootstrapped Debian 12 root (mkroot.sh, cached),
# boots the root with systemd-nspawn and drives it through nsenter into the container's PID 1
# namespaces:
#   - systemd-analyze verify is clean on the installed vufsd@.socket / vufsd@.service and
#     vufsd-metrics.service / .timer;
#   - systemctl start vufsd@vm1.socket; the socket is root:kvm 0660;
#   - a client (fe-session, the test frontend, run on the host through /proc/PID/root) connecting
#     activates vufsd@vm1.service, which reads /etc/vufsd/vm1.conf and serves the share; while it is
#     connected: STATUS= text, the bus name, fsctl status, fsctl set-threads as root (allowed) and as
#     an unprivileged user (denied), the hardening seen in /proc/PID/status;
#   - the client disconnects: the service exits cleanly (inactive, Result=success) and the socket
#     keeps listening; a second connection activates a fresh process;
#   - with CrashRestarts= in /etc/vufsd/vm1.conf, a looping session (fe-session --loop) is served
#     through several kill -KILLs of the serving process: every answer right, the unit active with
#     the same main PID, fsctl stats showing the restarts, the journal saying why;
#   - live upgrade under the unit: a looping session with a file held open for write is served
#     through fsctl -i vm1 upgrade three times, alternating two /usr builds that differ in their
#     version (each installed at the unit's ExecStart path as a package does, a new file renamed
#     over it), then through the post-install loop of docs/survival.md run as written: each time
#     the new version in fsctl's answer, STATUS=, fsctl status and the journal, the same main PID,
#     active/running, NRestarts=0; every answer right, every record of the file read back;
#   - systemctl start of the service returns once READY=1 came, and the bus name is owned by then;
#     a real QEMU guest then mounts the share through that socket and checks data both ways;
#   - a broken /etc/vufsd/bad.conf and a missing /etc/vufsd/nocfg.conf make their units fail once
#     (exit status 78, no restart loop) with a clear message in the journal;
#   - the user form: a lingering user's manager (user@UID.service, session bus from
#     dbus-user-session) runs systemctl --user start vufsd@vm1.socket with ~/.config/vufsd/vm1.conf;
#     a client on $XDG_RUNTIME_DIR/vufsd/vm1.sock activates vufsd as the user (NoNewPrivs, seccomp),
#     which owns its name on the session bus; fsctl --user stats shows the client's requests,
#     set-threads/set-cache take; the client leaves, the service exits, stop removes the socket;
#     /etc/vufsd/NAME.conf is no fallback for a missing ~/.config/vufsd/NAME.conf (exit 78).
#
# Environment: VUFS_SOURCE_DIR (default: this script's tree), VUFS_SD_BUILD_DIR (the /usr-prefixed
# build, kept between runs), VUFS_FE_SESSION (fe-session binary), VUFS_VM_BUILD_DIR (initramfs
# cache), VUFS_ROOT_CACHE (debootstrap cache, default /var/cache/vufsd-test), VUFS_SYSTEMD_KEEP=1
# (keep the root and logs), VUFS_SYSTEMD_REQUIRED=1 (missing prerequisites fail instead of skip).
# Exit status: 0 pass, 1 fail, 77 skipped (not root, or debootstrap/nspawn/QEMU missing).

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=${VUFS_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
# shellcheck source=tests/vm/common.sh
. "$src/tests/vm/common.sh"
# shellcheck source=tests/systemd/guest-share.sh
. "$here/guest-share.sh"

msg() { echo "test-systemd: $*" >&2; }
now() { date +%s.%N; }
since() { echo "$(now) $1" | awk '{ printf "%.1f", $1 - $2 }'; }
t_start=$(now)

unavailable() {
        if [ "${VUFS_SYSTEMD_REQUIRED:-0}" = 1 ]; then
                msg "FAIL: $*"
                exit 1
        fi
        msg "SKIP: $*"
        exit 77
}
[ "$(id -u)" = 0 ] || unavailable "needs root (debootstrap, systemd-nspawn)"
for tool in debootstrap systemd-nspawn nsenter meson; do
        command -v "$tool" >/dev/null || unavailable "$tool is missing (tools/install-deps.sh installs it)"
done
missing=$(vm_missing_prerequisites)
[ -z "$missing" ] || unavailable "the QEMU guest part needs: $(echo "$missing" | paste -sd';')"
fe_session=${VUFS_FE_SESSION:-}
[ -n "$fe_session" ] && [ -x "$fe_session" ] || { msg "FAIL: VUFS_FE_SESSION (fe-session binary) not set"; exit 1; }

tmp=$(mktemp -d /var/tmp/vufsd-systemd.XXXXXX)
root=$tmp/root
machine=vufsd-test-$$
nspawn_pid=
fe_pid=
cgroups=()
failed=0

dump_diagnostics() {
        [ -n "${cpid:-}" ] && [ -d "/proc/$cpid" ] || return 0
        msg "---- container state ----"
        ns systemctl --no-pager --all list-units 'vufsd*' >&2 || true
        ns journalctl --no-pager -n 60 -u 'vufsd@*' >&2 || true
        if [ -n "${uuid:-}" ]; then
                ns journalctl --no-pager -n 60 _UID="$uuid" >&2 || true
                ns journalctl --no-pager -n 30 -u "user@$uuid.service" >&2 || true
        fi
        msg "---- end of container state ----"
}

cleanup() {
        local rc=$?
        trap - EXIT INT TERM
        [ $rc -eq 0 ] || dump_diagnostics
        exec 7>&- 2>/dev/null || true
        if [ -n "$fe_pid" ]; then
                kill -KILL "$fe_pid" 2>/dev/null || true
        fi
        if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
                # nspawn forwards SIGTERM as a clean shutdown request to the container's systemd.
                kill -TERM "$nspawn_pid" 2>/dev/null || true
                for _ in $(seq 100); do
                        kill -0 "$nspawn_pid" 2>/dev/null || break
                        sleep 0.2
                done
                kill -KILL "$nspawn_pid" 2>/dev/null || true
        fi
        wait 2>/dev/null || true
        local cg
        for cg in "${cgroups[@]}"; do
                find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
        done
        if [ "${VUFS_SYSTEMD_KEEP:-0}" = 1 ]; then
                msg "kept $tmp"
        else
                rm -rf --one-file-system "$tmp"
        fi
        exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
        msg "FAIL: $*"
        exit 1
}
pass() { msg "ok: $*"; }

# session_start NAME WHAT SOCKET ARGS...: fe-session on SOCKET with ARGS, held open until fd 7 (the
# writer of $tmp/hold) is closed; returns once it reports its session, and fails with WHAT when it
# does not within 30 s. Its output goes to $tmp/NAME.out and .err; its pid is $fe_pid.
session_start() {
        local name=$1 what=$2 sock=$3
        shift 3
        "$fe_session" "$sock" "$@" --hold-stdin < "$tmp/hold" > "$tmp/$name.out" 2> "$tmp/$name.err" &
        fe_pid=$!
        exec 7> "$tmp/hold"
        for _ in $(seq 150); do
                grep -q 'session on .* ok' "$tmp/$name.err" && break
                kill -0 "$fe_pid" 2>/dev/null || break
                sleep 0.2
        done
        grep -q 'session on .* ok' "$tmp/$name.err" || { cat "$tmp/$name.err" >&2; fail "$what"; }
}

# loop_end NAME WHAT: ends the looping session NAME (fe-session --loop; its stdin closed), which must
# report every answer right, and sets $loop to its report; no loop-* name may be left in the share
# (a request that ran twice or not at all). WHAT ("around a kill") goes into the failures.
loop_end() {
        exec 7>&-
        wait "$fe_pid" || { cat "$tmp/$1.err" >&2; fail "the looping session had a wrong answer $2"; }
        fe_pid=
        loop=$(grep 'fe-session: loop:' "$tmp/$1.err") || { cat "$tmp/$1.err" >&2; fail "the looping session did not report"; }
        left=$(find "$share" -maxdepth 1 -name 'loop-*' | head -n 3)
        [ -z "$left" ] || fail "the loop's names left in the share $2 (a request ran twice or not at all): $left"
}

# ---- build, root, install ----

sdbuild=${VUFS_SD_BUILD_DIR:-$tmp/build-usr}
t=$(now)
if [ ! -f "$sdbuild/build.ninja" ]; then
        meson setup "$sdbuild" "$src" --prefix=/usr -Dtests=disabled -Dsystemd-tests=disabled \
                -Dvm-tests=disabled > "$tmp/setup.log" 2>&1 || { cat "$tmp/setup.log" >&2; fail "meson setup"; }
fi
meson compile -C "$sdbuild" > "$tmp/compile.log" 2>&1 || { tail -n 40 "$tmp/compile.log" >&2; fail "meson compile"; }
# The other build for the live-upgrade case: the same tree, /usr-prefixed too, as vufsd-test-hooks
# (tests/frontend/test-hooks.c: the same daemon reporting the version "X+test-hooks"; its hooks act
# only with VUFSD_TEST_KILL set), so that two builds that differ in their version take turns at
# /usr/libexec/vufsd. Only that target (libvufsd, main.c, test-hooks.c) is compiled.
otherbuild=$sdbuild-other
if [ ! -f "$otherbuild/build.ninja" ]; then
        meson setup "$otherbuild" "$src" --prefix=/usr -Dtests=enabled -Dsystemd-tests=disabled \
                -Dvm-tests=disabled > "$tmp/setup-other.log" 2>&1 || { cat "$tmp/setup-other.log" >&2; fail "meson setup (other build)"; }
fi
meson compile -C "$otherbuild" vufsd-test-hooks > "$tmp/compile-other.log" 2>&1 ||
        { tail -n 40 "$tmp/compile-other.log" >&2; fail "meson compile vufsd-test-hooks (other build)"; }
t_build=$(since "$t")

t=$(now)
"$here/mkroot.sh" "$root" || fail "building the Debian root"
t_root=$(since "$t")

t=$(now)
meson install -C "$sdbuild" --no-rebuild --destdir "$root" > "$tmp/install.log" 2>&1 ||
        { cat "$tmp/install.log" >&2; fail "meson install --destdir"; }
t_install=$(since "$t")
for f in /usr/libexec/vufsd /usr/lib/systemd/system/vufsd@.socket /usr/lib/systemd/system/vufsd@.service \
        /usr/lib/sysusers.d/vufsd.conf /usr/share/vufsd/example.conf /usr/share/qemu/vhost-user/50-vufsd.json; do
        [ -e "$root$f" ] || fail "meson install did not install $f"
done
grep -q '"binary": "/usr/libexec/vufsd"' "$root/usr/share/qemu/vhost-user/50-vufsd.json" ||
        fail "vhost-user descriptor does not name /usr/libexec/vufsd"
pass "installed into the root (build ${t_build}s, root ${t_root}s, install ${t_install}s)"

# The instances: vm1 (good), bad (broken file), nocfg (no file).
share=$root/srv/vufsd/vm1
mkdir -p "$share"
echo "hello from the host" > "$share/hello.txt"
cat > "$root/etc/vufsd/vm1.conf" <<EOF
[Share]
Directory=/srv/vufsd/vm1
Cache=auto
[Threads]
Mode=inline
EOF
printf '[Share]\nDirectory=/srv/vufsd/bad\nCache=sometimes\n' > "$root/etc/vufsd/bad.conf"

# ---- boot ----

# nspawn --keep-unit runs the container in nspawn's own cgroup: give it a private one in each
# systemd-relevant hierarchy so concurrent runs and the host stay apart (hosts without systemd).
for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified; do
        if [ -w "$h/cgroup.procs" ]; then
                mkdir "$h/$machine" && cgroups+=("$h/$machine")
        fi
done
if [ ${#cgroups[@]} -eq 0 ] && [ -f /sys/fs/cgroup/cgroup.controllers ] && [ -w /sys/fs/cgroup/cgroup.procs ]; then
        mkdir "/sys/fs/cgroup/$machine" && cgroups+=("/sys/fs/cgroup/$machine")
fi

t=$(now)
# --register=no --keep-unit: no machined/system bus on the host (nspawn would need them otherwise).
(
        for cg in "${cgroups[@]}"; do
                echo "$BASHPID" > "$cg/cgroup.procs"
        done
        exec systemd-nspawn --boot -D "$root" --register=no --keep-unit -M "$machine" --console=pipe
) < /dev/null > "$tmp/nspawn.log" 2>&1 &
nspawn_pid=$!

cpid=
for _ in $(seq 150); do
        cpid=$(pgrep -P "$nspawn_pid" -x systemd || true)
        [ -n "$cpid" ] && break
        kill -0 "$nspawn_pid" 2>/dev/null || { cat "$tmp/nspawn.log" >&2; fail "systemd-nspawn exited"; }
        sleep 0.2
done
[ -n "$cpid" ] || fail "no systemd in the container after 30 s"

# Runs a command in the container's namespaces with a clean environment.
ns() {
        nsenter -t "$cpid" -a env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 SYSTEMD_COLORS=0 "$@"
}
# Until PID 1 answers on its private socket systemctl fails at once; then "starting" until boot is done.
state=
for _ in $(seq 300); do
        state=$(ns systemctl is-system-running 2>/dev/null || true)
        case "$state" in running|degraded|maintenance|stopping|offline) break ;; esac
        kill -0 "$nspawn_pid" 2>/dev/null || break
        sleep 0.3
done
case "$state" in
running) ;;
degraded) msg "container is degraded:"; ns systemctl --no-pager --failed >&2 ;;
*) cat "$tmp/nspawn.log" >&2; fail "container did not boot (state '$state')" ;;
esac
t_boot=$(since "$t")
pass "container booted (PID 1 is host pid $cpid, ${t_boot}s)"

# What a package's postinst does: create the groups and the user of the sysusers snippet, then
# (dbus's trigger on system.d) reload the bus, which ignored <policy user="vufsd-bus"> while that
# user did not exist.
ns systemd-sysusers || fail "systemd-sysusers"
ns getent group kvm > /dev/null || fail "group kvm missing after systemd-sysusers"
ns getent passwd vufsd-bus > /dev/null || fail "user vufsd-bus missing after systemd-sysusers"
ns systemctl reload dbus.service || fail "reloading dbus after systemd-sysusers"

# Reads one property of a unit.
prop() { ns systemctl show -P "$2" "$1"; }
# Waits until a unit's ActiveState is $2 (timeout $3 s, default 15).
wait_state() {
        local i
        for i in $(seq $((${3:-15} * 5))); do
                [ "$(prop "$1" ActiveState)" = "$2" ] && return 0
                sleep 0.2
        done
        return 1
}

# Prints the journal of the matches given ($@, journalctl matches) once a line matching the
# extended regex $1 is in it, waiting up to 15 s: journald reads a unit's stderr asynchronously,
# so the message of a process that has exited can reach the journal after systemctl start has
# returned. Match on SYSLOG_IDENTIFIER=vufsd (the stream's own header) and a pattern naming the
# instance, not on the unit: journald takes _SYSTEMD_UNIT and _SYSTEMD_USER_UNIT from the
# writer's cgroup, which it cannot read once a process that failed at start is gone (seen: the
# user unit's line in the journal without _SYSTEMD_USER_UNIT). Prints what is there and returns
# 1 when the line never comes.
journal_wait() {
        local pattern=$1 out i
        shift
        for i in $(seq 75); do
                out=$(ns journalctl --no-pager -o cat "$@")
                if grep -Eq -- "$pattern" <<< "$out"; then
                        echo "$out"
                        return 0
                fi
                sleep 0.2
        done
        echo "$out"
        return 1
}

t_checks=$(now)

# ---- 1. systemd-analyze verify ----
# --man=no: the minimal root has no man(1); the page Documentation= names is checked by path.
out=$(ns systemd-analyze verify --man=no /usr/lib/systemd/system/vufsd@vm1.socket \
        /usr/lib/systemd/system/vufsd@vm1.service /usr/lib/systemd/system/vufsd-metrics.service \
        /usr/lib/systemd/system/vufsd-metrics.timer 2>&1) || { echo "$out" >&2; fail "systemd-analyze verify failed"; }
[ -z "$out" ] || { echo "$out" >&2; fail "systemd-analyze verify is not clean"; }
ls "$root"/usr/share/man/man8/vufsd.8* > /dev/null 2>&1 || fail "man:vufsd(8) named by the units is not installed"
pass "systemd-analyze verify: clean"

# ---- 2. the socket ----
ns systemctl start vufsd@vm1.socket || fail "systemctl start vufsd@vm1.socket"
[ "$(prop vufsd@vm1.socket ActiveState)" = active ] || fail "socket not active"
[ "$(prop vufsd@vm1.service ActiveState)" = inactive ] || fail "service started before any connection"
perm=$(ns stat -c '%A %U %G' /run/vufsd/vm1.sock)
[ "$perm" = "srw-rw---- root kvm" ] || fail "socket is '$perm', want 'srw-rw---- root kvm'"
hostsock=/proc/$cpid/root/run/vufsd/vm1.sock
[ -S "$hostsock" ] || fail "$hostsock not visible from the host"
pass "vufsd@vm1.socket listening on /run/vufsd/vm1.sock ($perm), service not started"

# ---- 3. a connection activates the service ----
mkfifo "$tmp/hold"
session_start fe1 "first session through the activated socket" "$hostsock" \
        --read hello.txt --write from-client.txt=written-by-fe-session
[ "$(cat "$tmp/fe1.out")" = "hello from the host" ] || fail "read hello.txt: '$(cat "$tmp/fe1.out")'"
[ "$(cat "$share/from-client.txt")" = written-by-fe-session ] || fail "the client's file is not in the share"
[ "$(prop vufsd@vm1.service ActiveState)" = active ] || fail "service not active while the client is connected"
pid1=$(prop vufsd@vm1.service MainPID)
status_text=$(prop vufsd@vm1.service StatusText)
pass "connection activated vufsd@vm1.service (pid $pid1); STATUS: $status_text"
[ -n "$status_text" ] || fail "no STATUS= text"
[ "$(prop vufsd@vm1.service WatchdogUSec)" = 30s ] || fail "WatchdogUSec is $(prop vufsd@vm1.service WatchdogUSec)"

mm=$(prop vufsd@vm1.service MemoryMax)
[ -n "$mm" ] && [ "$mm" != infinity ] || fail "MemoryMax is '$mm': the unit sets no memory limit"
pass "MemoryMax=$mm bytes"

ns busctl --system status org.vufsd.Instance.vm1 > /dev/null 2>&1 || fail "bus name org.vufsd.Instance.vm1 not owned"
pass "bus name org.vufsd.Instance.vm1 owned"
# The name's owner is the sysusers-created vufsd-bus, not root (issue 13 item 7).
owner=$(ns busctl --system call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
        GetConnectionUnixUser s org.vufsd.Instance.vm1 | awk '{print $2}')
bus_uid=$(ns id -u vufsd-bus) || fail "systemd-sysusers did not create the user vufsd-bus"
[ "$owner" = "$bus_uid" ] || fail "org.vufsd.Instance.vm1 is owned by uid '$owner', not vufsd-bus ($bus_uid)"
pass "org.vufsd.Instance.vm1 owned by vufsd-bus (uid $owner), not root"

# fsctl (issue 5): status, set-threads as root and as nobody.
[ -x "$root/usr/bin/fsctl" ] || fail "fsctl is not installed (/usr/bin/fsctl): the control-plane checks cannot run"
out=$(ns fsctl -i vm1 status 2>&1) || { echo "$out" >&2; fail "fsctl -i vm1 status"; }
grep -q vm1 <<< "$out" || { echo "$out" >&2; fail "fsctl status does not name the instance"; }
pass "fsctl -i vm1 status: $(echo "$out" | paste -sd' ' | cut -c1-160)"
ns fsctl -i vm1 set-threads 4 > "$tmp/fsctl-root.out" 2>&1 || { cat "$tmp/fsctl-root.out" >&2; fail "fsctl set-threads 4 as root"; }
out=$(ns fsctl -i vm1 status --json 2>&1) || fail "fsctl status --json"
grep -q '"pool"' <<< "$out" || { echo "$out" >&2; fail "set-threads 4 did not switch to the pool"; }
pass "fsctl -i vm1 set-threads 4 as root"
# STATUS= is refreshed every 5 s with the live mode and the request rate.
for _ in $(seq 40); do
        status_text=$(prop vufsd@vm1.service StatusText)
        case "$status_text" in *"threads pool (4 threads)"*"req/s"*) break ;; esac
        sleep 0.25
done
case "$status_text" in
*"threads pool (4 threads)"*"req/s"*) pass "STATUS= refreshed: $status_text" ;;
*) fail "STATUS= not refreshed with the new mode and a request rate after 10 s: '$status_text'" ;;
esac
if ns setpriv --reuid=65534 --regid=65534 --clear-groups fsctl -i vm1 set-threads 2 > "$tmp/fsctl-nobody.out" 2>&1; then
        fail "fsctl set-threads as nobody succeeded"
fi
grep -qi 'denied' "$tmp/fsctl-nobody.out" || { cat "$tmp/fsctl-nobody.out" >&2; fail "nobody's set-threads failed without 'denied'"; }
pass "fsctl set-threads as nobody denied: $(head -n 1 "$tmp/fsctl-nobody.out")"

# The hardening as the kernel sees it, on every process of the service.
want_bnd=$(printf '%016x' $(( (1 << 0) | (1 << 1) | (1 << 3) | (1 << 4) | (1 << 6) | (1 << 7) | (1 << 18) | (1 << 21) | (1 << 31) )))
# The unit's processes, from its cgroup as the container sees it (no procps in the root).
cg=$(prop vufsd@vm1.service ControlGroup)
pids=$(ns cat "/sys/fs/cgroup/systemd$cg/cgroup.procs" 2>/dev/null || ns cat "/sys/fs/cgroup$cg/cgroup.procs")
[ -n "$pids" ] || fail "no processes in the cgroup $cg of vufsd@vm1.service"
for p in $pids; do
        st=$(ns cat "/proc/$p/status")
        grep -q '^NoNewPrivs:[[:space:]]*1' <<< "$st" || fail "vufsd pid $p: NoNewPrivs not set"
        grep -q '^Seccomp:[[:space:]]*2' <<< "$st" || fail "vufsd pid $p: no seccomp filter"
        bnd=$(echo "$st" | awk '/^CapBnd:/ { print $2 }')
        [ $(( 0x$bnd & ~0x$want_bnd )) -eq 0 ] || fail "vufsd pid $p: CapBnd $bnd exceeds the unit's $want_bnd"
        eff=$(echo "$st" | awk '/^CapEff:/ { print $2 }')
        pass "vufsd pid $p: NoNewPrivs 1, Seccomp 2, CapBnd $bnd, CapEff $eff"
done
# The sandboxed child when there are two processes, else the main process.
mainpid=$(prop vufsd@vm1.service MainPID)
server=$mainpid
for p in $pids; do
        [ "$p" = "$mainpid" ] || server=$p
done
# The process that reads guest requests has dropped what only the sandbox setup needed.
eff=$(ns cat "/proc/$server/status" | awk '/^CapEff:/ { print $2 }')
[ $(( 0x$eff & ((1 << 21) | (1 << 18)) )) -eq 0 ] || fail "serving vufsd pid $server kept CAP_SYS_ADMIN/CAP_SYS_CHROOT: CapEff $eff"

# ---- 4. disconnect: clean exit, socket keeps listening ----
exec 7>&-
wait "$fe_pid" || { cat "$tmp/fe1.err" >&2; fail "fe-session exited with failure"; }
fe_pid=
wait_state vufsd@vm1.service inactive 15 || fail "service still $(prop vufsd@vm1.service ActiveState) 15 s after the disconnect"
[ "$(prop vufsd@vm1.service Result)" = success ] || fail "service Result=$(prop vufsd@vm1.service Result)"
[ "$(prop vufsd@vm1.service ExecMainStatus)" = 0 ] || fail "exit status $(prop vufsd@vm1.service ExecMainStatus)"
[ "$(prop vufsd@vm1.socket ActiveState)" = active ] || fail "socket not listening after the service exited"
pass "client gone: service inactive, Result=success, exit 0; socket still listening"

# ---- 5. the next connection activates a fresh process ----
"$fe_session" "$hostsock" --roundtrip 300000 2> "$tmp/fe2.err" || { cat "$tmp/fe2.err" >&2; fail "second session"; }
wait_state vufsd@vm1.service inactive 15 || fail "service still running after the second session"
pid2=$(prop vufsd@vm1.service ExecMainPID)
[ "$pid2" != "$pid1" ] || fail "second session served by the same pid $pid1"
[ "$(prop vufsd@vm1.service Result)" = success ] || fail "second run Result=$(prop vufsd@vm1.service Result)"
[ "$(prop vufsd@vm1.service NRestarts)" = 0 ] || fail "service was restarted"
pass "second connection activated a fresh process (pid $pid2), which exited cleanly"

# ---- 5b. the serving process killed under the unit (--crash-restarts, docs/survival.md) ----
# CrashRestarts= in the instance's file turns it on (no drop-in); a session loops requests by name while
# the host SIGKILLs the serving process (the spawner's child, found through the unit's cgroup)
# several times: every answer right, the unit active throughout with the same main PID, fsctl stats
# counting the restarts, the journal saying why each process died.
kills=5
cp "$root/etc/vufsd/vm1.conf" "$tmp/vm1.conf.orig"
printf '[Service]\nCrashRestarts=10\n' >> "$root/etc/vufsd/vm1.conf"
# The unit's processes as the container sees them: the supervisor (main PID), the spawner (its
# child), the serving process (the spawner's child). Prints the serving process's pid, nothing when
# there is none; $1 is the main PID. (A process gone meanwhile has no status: skipped.)
serving_pid() {
        local cg procs p pp spawner=
        cg=$(prop vufsd@vm1.service ControlGroup)
        procs=$(ns cat "/sys/fs/cgroup/systemd$cg/cgroup.procs" 2>/dev/null || ns cat "/sys/fs/cgroup$cg/cgroup.procs")
        for p in $procs; do
                pp=$(ns cat "/proc/$p/status" 2>/dev/null | awk '/^PPid:/ { print $2 }')
                [ "$pp" = "$1" ] && spawner=$p
        done
        [ -n "$spawner" ] || return 0
        for p in $procs; do
                pp=$(ns cat "/proc/$p/status" 2>/dev/null | awk '/^PPid:/ { print $2 }')
                [ "$pp" = "$spawner" ] && { echo "$p"; return 0; }
        done
        return 0 # none between a death and the next fork
}
# wait_serving MAIN NOT SECONDS: prints the serving process's pid once there is one other than NOT
# (empty: any), waiting up to SECONDS; nothing when there is none by then.
wait_serving() {
        local p i
        for i in $(seq $(($3 * 10))); do
                p=$(serving_pid "$1")
                [ -n "$p" ] && [ "$p" != "$2" ] && { echo "$p"; return 0; }
                sleep 0.1
        done
        return 0
}
session_start fe4 "session with --crash-restarts" "$hostsock" --loop
main=$(prop vufsd@vm1.service MainPID)
[ "$(prop vufsd@vm1.service ActiveState)" = active ] && [ "$main" != 0 ] || fail "service not active under the looping session"
grep -q -- '--crash-restarts' <<< "$(prop vufsd@vm1.service ExecStart)" &&
        fail "ExecStart names --crash-restarts: the unit is not the installed one, the file's key is not what is tested"
t=$(now)
for k in $(seq "$kills"); do
        old=$(wait_serving "$main" "" 5)
        [ -n "$old" ] || fail "kill $k: no serving process (the spawner's child) in the cgroup of vufsd@vm1.service"
        ns sh -c 'kill -KILL "$1"' sh "$old" || fail "kill $k: kill -KILL $old"
        new=$(wait_serving "$main" "$old" 10)
        [ -n "$new" ] || fail "kill $k: no serving process took over from pid $old within 10 s"
        [ "$(ns systemctl is-active vufsd@vm1.service)" = active ] || fail "kill $k: the unit is $(prop vufsd@vm1.service ActiveState)"
        [ "$(prop vufsd@vm1.service MainPID)" = "$main" ] || fail "kill $k: main PID changed from $main"
        kill -0 "$fe_pid" 2>/dev/null || { cat "$tmp/fe4.err" >&2; fail "kill $k: the session ended"; }
        sleep 1 # the session goes on with the new process
done
out=$(ns fsctl -i vm1 stats 2>&1) || { echo "$out" >&2; fail "fsctl -i vm1 stats after the kills"; }
grep -q "Restarts: $kills " <<< "$out" || { echo "$out" >&2; fail "fsctl stats does not show $kills restarts"; }
restarts=$(grep -o 'Restarts: .*' <<< "$out")
loop_end fe4 "around a kill"
journal=$(journal_wait "killed by signal KILL; starting another \\(restart $kills of 10" SYSLOG_IDENTIFIER=vufsd) ||
        { echo "$journal" >&2; fail "the journal does not say why the serving process died"; }
wait_state vufsd@vm1.service inactive 15 || fail "service still running after the looping session left"
[ "$(prop vufsd@vm1.service Result)" = success ] || fail "after the kills: Result=$(prop vufsd@vm1.service Result)"
[ "$(prop vufsd@vm1.service NRestarts)" = 0 ] || fail "after the kills: systemd restarted the unit"
pass "$kills x kill -KILL of the serving process under vufsd@vm1.service (main pid $main, active throughout, $(since "$t")s): ${loop#fe-session: }; fsctl stats: $restarts"

# ---- 5c. live upgrade under the unit (fsctl upgrade, docs/survival.md) ----
# The same CrashRestarts=10. A session loops requests by name and writes a record per iteration
# through one handle it keeps open; the host installs the other build at the unit's ExecStart path
# (a new file renamed over it, as dpkg does) and upgrades. Each time: fsctl upgrade exits 0 naming
# the new version; same main PID, active/running, NRestarts=0; STATUS=, fsctl status and the journal
# show the new version; another serving process; the pause measured (LastUpgradePauseUSec).
t=$(now)
exe=$(prop vufsd@vm1.service ExecStart | sed -n 's/.*path=\([^ ;]*\).*/\1/p')
[ "$exe" = /usr/libexec/vufsd ] || fail "ExecStart path is '$exe', not /usr/libexec/vufsd"
cp "$root$exe" "$tmp/vufsd-a"
cp "$otherbuild/tests/frontend/vufsd-test-hooks" "$tmp/vufsd-b"
ver_a=$("$tmp/vufsd-a" --version | awk '{ print $2 }')
ver_b=$("$tmp/vufsd-b" --version | awk '{ print $2 }')
[ -n "$ver_a" ] && [ -n "$ver_b" ] && [ "$ver_a" != "$ver_b" ] || fail "the two builds' versions: '$ver_a' and '$ver_b'"
# install_vufsd FILE: what a package does: the new binary written beside the old one, renamed over it.
install_vufsd() {
        cp "$1" "$root$exe.dpkg-new"
        chmod 0755 "$root$exe.dpkg-new"
        mv -f "$root$exe.dpkg-new" "$root$exe"
}
# upgrade_checks K FROM TO OUTPUT: the state after upgrade K from version FROM to TO, OUTPUT being
# what fsctl upgrade printed; appends the pause to $pauses.
upgrade_checks() {
        local k=$1 from=$2 to=$3 out=$4 show st pause re new
        grep -qF "vm1: upgraded from vufsd $from to vufsd $to (the guest paused" <<< "$out" ||
                { echo "$out" >&2; fail "upgrade $k: fsctl upgrade did not print the new version $to"; }
        show=$(ns systemctl show -p MainPID,ActiveState,SubState,NRestarts vufsd@vm1.service)
        for want in "MainPID=$main" ActiveState=active SubState=running NRestarts=0; do
                grep -qx "$want" <<< "$show" || { echo "$show" >&2; fail "upgrade $k: systemctl show: want $want"; }
        done
        for _ in $(seq 25); do
                st=$(prop vufsd@vm1.service StatusText)
                [ "${st% vufsd $to}" != "$st" ] && break
                sleep 0.2
        done
        [ "${st% vufsd $to}" != "$st" ] || fail "upgrade $k: STATUS= does not end with 'vufsd $to': '$st'"
        out=$(ns fsctl -i vm1 status 2>&1) || { echo "$out" >&2; fail "upgrade $k: fsctl status"; }
        [ "$(awk '/^Version:/ { print $2 }' <<< "$out")" = "$to" ] || { echo "$out" >&2; fail "upgrade $k: fsctl status Version is not $to"; }
        out=$(ns fsctl -i vm1 stats --json 2>&1) || { echo "$out" >&2; fail "upgrade $k: fsctl stats --json"; }
        grep -q "\"upgrades\":$k[,}]" <<< "$out" || { echo "$out" >&2; fail "upgrade $k: fsctl stats does not count $k upgrades"; }
        pause=$(grep -o '"last_upgrade_pause_usec":[0-9]*' <<< "$out" | cut -d: -f2)
        [ -n "$pause" ] && [ "$pause" -gt 0 ] || { echo "$out" >&2; fail "upgrade $k: no last_upgrade_pause_usec"; }
        pauses="$pauses $(awk -v u="$pause" 'BEGIN { printf "%.1f", u / 1000 }')"
        re=$(sed 's/[.+]/\\&/g' <<< "Live upgrade $k: vufsd $to serves the guest's session of vufsd $from")
        journal=$(journal_wait "$re" SYSLOG_IDENTIFIER=vufsd) ||
                { echo "$journal" | tail -n 20 >&2; fail "upgrade $k: the journal has no 'Live upgrade $k' line"; }
        journal_lines="$journal_lines
$(grep -E "$re" <<< "$journal" | head -n 1)"
        new=$(wait_serving "$main" "$serving" 5)
        [ -n "$new" ] || fail "upgrade $k: the serving process is still pid $serving"
        serving=$new
        kill -0 "$fe_pid" 2>/dev/null || { cat "$tmp/fe5.err" >&2; fail "upgrade $k: the session ended"; }
}
# fd_report: each process of the unit's open fds and limit, for a failed upgrade's diagnosis.
fd_report() {
        local cg p
        cg=$(prop vufsd@vm1.service ControlGroup)
        for p in $(ns cat "/sys/fs/cgroup/systemd$cg/cgroup.procs" 2>/dev/null || ns cat "/sys/fs/cgroup$cg/cgroup.procs"); do
                msg "pid $p (parent $(ns cat "/proc/$p/status" | awk '/^PPid:/ { print $2 }')): $(ns ls "/proc/$p/fd" | wc -l) fds open; $(ns cat "/proc/$p/limits" | grep 'open files' | tr -s ' ')"
        done
}
session_start fe5 "session for the live upgrades" "$hostsock" --loop --open-write upgrade-kept.dat
main=$(prop vufsd@vm1.service MainPID)
[ "$(prop vufsd@vm1.service ActiveState)" = active ] && [ "$main" != 0 ] || fail "service not active under the looping session"
[ "$(ns fsctl -i vm1 status | awk '/^Version:/ { print $2 }')" = "$ver_a" ] || fail "the installed vufsd is not version $ver_a"
serving=$(serving_pid "$main")
pauses=
journal_lines=
cur=$ver_a
upgrades=3
for k in $(seq "$upgrades"); do
        sleep 1 # the session goes on with this binary
        if [ "$cur" = "$ver_a" ]; then next=$ver_b; bin=$tmp/vufsd-b; else next=$ver_a; bin=$tmp/vufsd-a; fi
        install_vufsd "$bin"
        out=$(ns fsctl -i vm1 upgrade 2>&1) || { echo "$out" >&2; fd_report; fail "upgrade $k: fsctl -i vm1 upgrade failed"; }
        upgrade_checks "$k" "$cur" "$next" "$out"
        cur=$next
done
# Then what a package's post-installation script does, exactly as docs/survival.md "Upgrading
# every instance after installing a new vufsd" writes it, over every instance on the system bus.
postinst=$(awk '/^### Upgrading every instance/ { f = 1 } f && /^```sh$/ { c = 1; next } c && /^```$/ { exit } c' \
        "$src/docs/survival.md")
grep -q 'fsctl -i "$name" upgrade' <<< "$postinst" || fail "no post-install loop found in docs/survival.md"
[ "$(ns fsctl list --quiet)" = vm1 ] || fail "fsctl list --quiet: '$(ns fsctl list --quiet)', want vm1"
sleep 1
if [ "$cur" = "$ver_a" ]; then next=$ver_b; bin=$tmp/vufsd-b; else next=$ver_a; bin=$tmp/vufsd-a; fi
install_vufsd "$bin"
out=$(ns sh -ec "$postinst" 2>&1) || { echo "$out" >&2; fail "the post-install loop of docs/survival.md failed"; }
grep -q 'not upgraded' <<< "$out" && { echo "$out" >&2; fail "the post-install loop: an instance was not upgraded"; }
upgrade_checks $((upgrades + 1)) "$cur" "$next" "$out"
postinst_out=$out
cur=$next
sleep 1
loop_end fe5 "around an upgrade"
wait_state vufsd@vm1.service inactive 15 || fail "service still running after the upgrade session left"
[ "$(prop vufsd@vm1.service Result)" = success ] || fail "after the upgrades: Result=$(prop vufsd@vm1.service Result)"
[ "$(prop vufsd@vm1.service NRestarts)" = 0 ] || fail "after the upgrades: systemd restarted the unit"
rm -f "$share/upgrade-kept.dat"
install_vufsd "$tmp/vufsd-a" # the installed build again for what follows
msg "journal:$journal_lines"
msg "post-install loop: $postinst_out"
pass "$((upgrades + 1)) live upgrades under vufsd@vm1.service alternating vufsd $ver_a and $ver_b (the last by the post-install loop of docs/survival.md; main pid $main, active/running, NRestarts=0 throughout, $(since "$t")s): ${loop#fe-session: }; pauses (LastUpgradePauseUSec, ms):$pauses"
cp "$tmp/vm1.conf.orig" "$root/etc/vufsd/vm1.conf"

# ---- 6. READY=1 implies the bus name; a real guest through the activated socket ----
ns systemctl start vufsd@vm1.service || fail "systemctl start vufsd@vm1.service"
ns busctl --system status org.vufsd.Instance.vm1 > /dev/null 2>&1 ||
        fail "start returned (READY=1) but the bus name is not owned yet"
pass "systemctl start returned after READY=1 with the bus name owned; STATUS: $(prop vufsd@vm1.service StatusText)"

guest_share_prepare "$share" "$tmp/host-data.sums"

t=$(now)
"$src/tests/vm/run-guest.sh" --socket "$hostsock" --script guest-basic.sh --timeout 300 \
        --build-dir "${VUFS_VM_BUILD_DIR:-/var/tmp/vufs-vm}" --log "$tmp/console.log" --quiet ||
        fail "QEMU guest through the activated socket"
t_guest=$(since "$t")
wait_state vufsd@vm1.service inactive 15 || fail "service still running after QEMU exited"
[ "$(prop vufsd@vm1.service Result)" = success ] || fail "guest run: Result=$(prop vufsd@vm1.service Result)"
out=$(guest_share_check "$share" "$tmp/host-data.sums") || fail "after the guest: $out"
pass "QEMU guest mounted the share through vufsd@vm1.socket and checked data both ways (${t_guest}s); service exited cleanly"

# ---- 7. broken and missing configuration ----
if ns systemctl start vufsd@bad.service 2> "$tmp/bad.err"; then
        fail "vufsd@bad.service started with a broken config"
fi
sleep 1
[ "$(prop vufsd@bad.service ActiveState)" = failed ] || fail "bad: ActiveState=$(prop vufsd@bad.service ActiveState)"
[ "$(prop vufsd@bad.service Result)" = exit-code ] || fail "bad: Result=$(prop vufsd@bad.service Result)"
[ "$(prop vufsd@bad.service ExecMainStatus)" = 78 ] || fail "bad: exit status $(prop vufsd@bad.service ExecMainStatus)"
[ "$(prop vufsd@bad.service NRestarts)" = 0 ] || fail "bad: restarted $(prop vufsd@bad.service NRestarts) times"
[ "$(prop vufsd@bad.service StatusErrno)" = 22 ] || fail "bad: StatusErrno=$(prop vufsd@bad.service StatusErrno)"
journal=$(journal_wait '/etc/vufsd/bad\.conf: \[Share\] Cache=sometimes: unknown cache policy' SYSLOG_IDENTIFIER=vufsd) ||
        { echo "$journal" >&2; fail "bad: the journal does not explain the error"; }
pass "broken config: unit failed once (exit 78, ERRNO 22, no restart); journal: $(echo "$journal" | grep bad.conf | head -n 1)"

ns systemctl start vufsd@nocfg.service 2> /dev/null && fail "vufsd@nocfg.service started without a config"
sleep 1
[ "$(prop vufsd@nocfg.service ExecMainStatus)" = 78 ] || fail "nocfg: exit status $(prop vufsd@nocfg.service ExecMainStatus)"
journal=$(journal_wait 'no shared directory: set \[Share\] Directory= in /etc/vufsd/nocfg\.conf, which does not exist' \
        SYSLOG_IDENTIFIER=vufsd) || { echo "$journal" >&2; fail "nocfg: the journal does not explain the error"; }
pass "missing config: unit failed with: $(echo "$journal" | grep 'no shared directory' | head -n 1)"
ns systemctl stop vufsd@bad.socket vufsd@nocfg.socket
ns systemctl reset-failed

# ---- 8. stopping the socket removes it ----
ns systemctl stop vufsd@vm1.socket
[ ! -e "$hostsock" ] || fail "/run/vufsd/vm1.sock left behind after stopping the socket"
pass "systemctl stop vufsd@vm1.socket removed the socket"

# ---- 9. the user service: systemctl --user start vufsd@vm1.socket, fsctl --user ----
t=$(now)
# An ordinary user with lingering, so that user@UID.service (the user's manager, with its session
# bus from dbus-user-session) runs without a login.
uname=vufsd-user
ns useradd --create-home --shell /bin/sh "$uname" || fail "useradd $uname"
uuid=$(ns id -u "$uname")
ns loginctl enable-linger "$uname" || fail "loginctl enable-linger $uname"
wait_state "user@$uuid.service" active 30 || fail "user@$uuid.service is $(prop "user@$uuid.service" ActiveState) after enable-linger"
urun=/run/user/$uuid
# Commands as the user, in the environment the user manager's clients have.
as_user() {
        ns setpriv --reuid="$uuid" --regid="$uuid" --init-groups env HOME="/home/$uname" XDG_RUNTIME_DIR="$urun" "$@"
}
uprop() { as_user systemctl --user show -P "$2" "$1"; }
uwait_state() {
        local i
        for i in $(seq $((${3:-15} * 5))); do
                [ "$(uprop "$1" ActiveState)" = "$2" ] && return 0
                sleep 0.2
        done
        return 1
}
for _ in $(seq 50); do
        [ -S "/proc/$cpid/root$urun/bus" ] && break
        sleep 0.2
done
[ -S "/proc/$cpid/root$urun/bus" ] || fail "the user manager has no session bus at $urun/bus (dbus-user-session)"
for f in /usr/lib/systemd/user/vufsd@.socket /usr/lib/systemd/user/vufsd@.service; do
        [ -e "$root$f" ] || fail "meson install did not install $f"
done
out=$(as_user systemd-analyze --user verify --man=no /usr/lib/systemd/user/vufsd@vm1.socket \
        /usr/lib/systemd/user/vufsd@vm1.service 2>&1) || { echo "$out" >&2; fail "systemd-analyze --user verify failed"; }
[ -z "$out" ] || { echo "$out" >&2; fail "systemd-analyze --user verify is not clean"; }
pass "user@$uuid.service running with a session bus; systemd-analyze --user verify: clean"

# The user's configuration (same format as /etc/vufsd/NAME.conf) and share, in the home directory.
uhome=$root/home/$uname
ushare=$uhome/share
mkdir -p "$uhome/.config/vufsd" "$ushare"
echo "hello from the user" > "$ushare/hello.txt"
printf '[Share]\nDirectory=/home/%s/share\n[Threads]\nMode=inline\n' "$uname" > "$uhome/.config/vufsd/vm1.conf"
chown -R "$uuid:$uuid" "$uhome/.config" "$ushare"

as_user systemctl --user start vufsd@vm1.socket || fail "systemctl --user start vufsd@vm1.socket"
[ "$(uprop vufsd@vm1.socket ActiveState)" = active ] || fail "user socket not active"
[ "$(uprop vufsd@vm1.service ActiveState)" = inactive ] || fail "user service started before any connection"
perm=$(ns stat -c '%A %U' "$urun/vufsd/vm1.sock") || fail "no socket at $urun/vufsd/vm1.sock"
[ "$perm" = "srw------- $uname" ] || fail "user socket is '$perm', want 'srw------- $uname'"
pass "systemctl --user start vufsd@vm1.socket: listening on $urun/vufsd/vm1.sock ($perm)"

uhostsock=/proc/$cpid/root$urun/vufsd/vm1.sock
session_start fe3 "session through the user socket" "$uhostsock" \
        --read hello.txt --write from-client.txt=written-to-the-user
[ "$(cat "$tmp/fe3.out")" = "hello from the user" ] || fail "read hello.txt from the user's share: '$(cat "$tmp/fe3.out")'"
[ "$(cat "$ushare/from-client.txt")" = written-to-the-user ] || fail "the client's file is not in the user's share"
upid=$(uprop vufsd@vm1.service MainPID)
[ "$(uprop vufsd@vm1.service ActiveState)" = active ] && [ "$upid" != 0 ] || fail "user service not running while connected"
# Every process of the service (the supervisor and a sandboxed child, if any): the user's ids as
# the host sees them (a user namespace inside maps them), NoNewPrivs, seccomp.
cg=$(uprop vufsd@vm1.service ControlGroup)
upids=$(ns cat "/sys/fs/cgroup/systemd$cg/cgroup.procs" 2>/dev/null || ns cat "/sys/fs/cgroup$cg/cgroup.procs")
[ -n "$upids" ] || fail "no processes in the cgroup $cg of the user's vufsd@vm1.service"
uns=
for p in $upids; do
        st=$(ns cat "/proc/$p/status")
        grep -q "^Uid:[[:space:]]*${uuid}[[:space:]]${uuid}[[:space:]]${uuid}[[:space:]]${uuid}\$" <<< "$st" ||
                fail "user vufsd pid $p does not run as uid $uuid: $(echo "$st" | grep ^Uid:)"
        grep -q '^NoNewPrivs:[[:space:]]*1' <<< "$st" || fail "user vufsd pid $p: NoNewPrivs not set"
        grep -q '^Seccomp:[[:space:]]*2' <<< "$st" || fail "user vufsd pid $p: no seccomp filter"
        uns="$uns pid $p $(ns readlink "/proc/$p/ns/user")"
done
owner=$(as_user busctl --user call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
        GetConnectionUnixUser s org.vufsd.Instance.vm1 | awk '{print $2}')
[ "$owner" = "$uuid" ] || fail "org.vufsd.Instance.vm1 on the session bus is owned by '$owner', not $uuid"
pass "a connection activated the user's vufsd@vm1.service (main pid $upid; uid $uuid, NoNewPrivs, seccomp for each of:$uns); it owns org.vufsd.Instance.vm1 on the session bus"

out=$(as_user fsctl --user -i vm1 stats 2>&1) || { echo "$out" >&2; fail "fsctl --user -i vm1 stats"; }
grep -q '^READ  *[1-9]' <<< "$out" && grep -q '^CREATE  *[1-9]' <<< "$out" ||
        { echo "$out" >&2; fail "fsctl --user stats does not show the client's READ and CREATE"; }
pass "fsctl --user -i vm1 stats: $(grep -E '^(READ|CREATE) ' <<< "$out" | tr -s ' ' | paste -sd';')"
as_user fsctl --user -i vm1 set-threads 2 > "$tmp/fsctl-user.out" 2>&1 || { cat "$tmp/fsctl-user.out" >&2; fail "fsctl --user set-threads 2"; }
as_user fsctl --user -i vm1 set-cache never > "$tmp/fsctl-user.out" 2>&1 || { cat "$tmp/fsctl-user.out" >&2; fail "fsctl --user set-cache never"; }
out=$(as_user fsctl --user -i vm1 status --json 2>&1) || fail "fsctl --user status --json"
grep -q '"thread_mode":"pool"' <<< "$out" && grep -q '"cache_policy":"never"' <<< "$out" ||
        { echo "$out" >&2; fail "set-threads/set-cache over the session bus did not take"; }
# The system bus knows nothing of the user's instance.
ns fsctl -i vm1 status > /dev/null 2>&1 && fail "fsctl (system bus) found the user's instance"
pass "fsctl --user -i vm1 set-threads 2, set-cache never: took; the system bus has no vm1"

exec 7>&-
wait "$fe_pid" || { cat "$tmp/fe3.err" >&2; fail "fe-session (user socket) exited with failure"; }
fe_pid=
uwait_state vufsd@vm1.service inactive 15 || fail "user service still $(uprop vufsd@vm1.service ActiveState) after the disconnect"
[ "$(uprop vufsd@vm1.service Result)" = success ] || fail "user service Result=$(uprop vufsd@vm1.service Result)"
as_user systemctl --user stop vufsd@vm1.socket || fail "systemctl --user stop vufsd@vm1.socket"
[ ! -e "/proc/$cpid/root$urun/vufsd/vm1.sock" ] || fail "$urun/vufsd/vm1.sock left behind after stopping the user socket"
pass "client gone: user service exited cleanly; systemctl --user stop removed the socket"

# The user form reads only ~/.config/vufsd/NAME.conf: a system instance's /etc/vufsd/NAME.conf is
# not a fallback. The missing file fails the unit once with exit status 78.
printf '[Share]\nDirectory=/srv/vufsd/sysonly\n' > "$root/etc/vufsd/sysonly.conf"
as_user systemctl --user start vufsd@sysonly.service 2> /dev/null && fail "user vufsd@sysonly.service started without ~/.config/vufsd/sysonly.conf"
sleep 1
[ "$(uprop vufsd@sysonly.service ExecMainStatus)" = 78 ] || fail "user sysonly: exit status $(uprop vufsd@sysonly.service ExecMainStatus)"
[ "$(uprop vufsd@sysonly.service NRestarts)" = 0 ] || fail "user sysonly: restarted $(uprop vufsd@sysonly.service NRestarts) times"
journal=$(journal_wait "cannot use configuration file /home/$uname/\.config/vufsd/sysonly\.conf: No such file or directory" \
        SYSLOG_IDENTIFIER=vufsd) ||
        { echo "$journal" >&2; fail "user sysonly: the journal does not name the missing ~/.config file"; }
as_user systemctl --user stop vufsd@sysonly.socket
pass "user form without ~/.config/vufsd/sysonly.conf: failed once (exit 78), /etc/vufsd/sysonly.conf not used ($(since "$t")s for the user checks)"

t_checks=$(since "$t_checks")
msg "timings: build ${t_build}s, root ${t_root}s, install ${t_install}s, boot ${t_boot}s, checks ${t_checks}s (guest ${t_guest}s), total $(since "$t_start")s"
msg "PASS"
