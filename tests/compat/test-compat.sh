#!/bin/bash
# test-compat.sh: every launcher's virtiofsd invocation (launchers.list) starts vufsd unchanged,
# serves FUSE requests through the test frontend (fe-traffic: INIT, create/write/read back/verify
# round trips) and vufsd exits 0 by itself when the frontend disconnects, as virtiofsd does.
# For the path form it also checks what launchers wait for: the socket, SOCK.pid holding the pid
# (and locked), and the "Waiting for vhost-user socket connection" line.
#
# Usage: test-compat.sh [NAME...]   (default: every line of launchers.list)
# Environment: VUFSD_BINARY, FE_TRAFFIC. Exit status: 0 pass, 1 fail, 77 skipped (python3 missing).

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
msg() { echo "test-compat: $*" >&2; }
failures=0
fail() {
        msg "FAIL: $*"
        failures=$((failures + 1))
}

vufsd=${VUFSD_BINARY:?VUFSD_BINARY not set}
fe_traffic=${FE_TRAFFIC:?FE_TRAFFIC not set}
command -v python3 > /dev/null || { msg "SKIP: python3 missing"; exit 77; }

tmp=$(mktemp -d /tmp/vufs-compat.XXXXXX)
chmod 755 "$tmp"
pids=()
cleanup() {
        for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
        rm -rf "$tmp"
}
trap cleanup EXIT

# The launcher side: creates the socket where the mode asks for it, then execs vufsd.
launcher='
import os, pwd, socket, sys
mode, sock, share, argv = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
flags = mode.split("+")
fd = None
if flags[0] in ("fd", "activate"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(sock)
    s.listen(1)
    want = 3 if ("fd3" in flags or flags[0] == "activate") else 9
    fd = os.dup2(s.fileno(), want)
    os.set_inheritable(fd, True)
env = dict(os.environ)
if flags[0] == "activate":
    env["LISTEN_FDS"] = "1"
    env["LISTEN_PID"] = str(os.getpid())
if "rustlog" in flags:
    env["RUST_LOG"] = "error"
if "cwd" in flags:
    os.chdir(share)
if "user" in flags:
    nobody = pwd.getpwnam("nobody")
    os.setgroups([])
    os.setgid(nobody.pw_gid)
    os.setuid(nobody.pw_uid)
argv = [a.replace("{FD}", str(fd)) for a in argv]
os.execve(argv[0], argv, env)
'

# run_one NAME MODE ARGS...
run_one() {
        local name=$1 mode=$2 dir=$tmp/$1 a
        shift 2
        local share=$dir/share sock=$dir/vhost.sock log=$dir/vufsd.log args=()
        # A comma in the path where the launcher escapes it (libvirt's -o form); the others pass
        # the path as it is, which virtiofsd's -o splitting could not take either.
        [[ " $* " != *"{DIR,,}"* ]] || share=$dir/share,dir
        mkdir -p "$share"
        [[ $mode != *user* ]] || chown -R nobody "$dir"
        for a in "$@"; do
                a=${a//\{SOCK\}/$sock}
                a=${a//\{DIR,,\}/${share//,/,,}}
                a=${a//\{DIR\}/$share}
                args+=("$a")
        done
        # In a sanitizer build, LeakSanitizer cannot work inside a chroot or namespace sandbox (it
        # needs /proc and ptrace at exit, which the sandbox takes away); leaks are still checked on
        # every line that runs unconfined. A --uid-map/--gid-map implies the namespace sandbox.
        local lsan=
        [[ " ${args[*]} " != *" --sandbox"*"chroot"* && " ${args[*]} " != *"sandbox=chroot"* &&
                " ${args[*]} " != *"namespace"* && " ${args[*]} " != *"-map="* ]] || lsan=detect_leaks=0
        ASAN_OPTIONS=${ASAN_OPTIONS:-}${lsan:+${ASAN_OPTIONS:+:}$lsan} \
                python3 -c "$launcher" "$mode" "$sock" "$share" "$vufsd" "${args[@]}" > "$log" 2>&1 &
        local pid=$! i
        pids+=("$pid")
        for ((i = 0; i < 100; i++)); do
                [ -S "$sock" ] && break
                kill -0 "$pid" 2> /dev/null || break
                sleep 0.1
        done
        if [ ! -S "$sock" ]; then
                fail "$name: no socket: vufsd ${args[*]}: $(tail -3 "$log")"
                kill "$pid" 2> /dev/null || true
                return
        fi
        # The info lines go to stderr unless RUST_LOG hides them or --syslog sends them elsewhere
        # (virtme-ng and Proxmox pass it; they wait for SOCK.pid or the socket, not for a line).
        local lines=1
        [[ $mode != *rustlog* && " ${args[*]} " != *" --syslog "* ]] || lines=
        if [[ $mode == path* ]]; then
                # What a launcher reads before it starts the VM.
                for ((i = 0; i < 50; i++)); do
                        [ -n "$lines" ] || break
                        grep -q 'Waiting for vhost-user socket connection' "$log" && break
                        sleep 0.1
                done
                grep -q 'Waiting for vhost-user socket connection' "$log" ||
                        [ -z "$lines" ] || fail "$name: no \"Waiting for vhost-user socket connection\" line"
                if [ "$(cat "$sock.pid" 2> /dev/null)" != "$pid" ]; then
                        fail "$name: $sock.pid does not hold the pid $pid: $(cat "$sock.pid" 2>&1)"
                elif flock -n "$sock.pid" true; then
                        fail "$name: $sock.pid is not locked"
                fi
        fi
        local out
        if ! out=$(timeout 60 "$fe_traffic" "$sock" --count 5 2>&1); then
                fail "$name: FUSE traffic failed: $out; vufsd: $(tail -3 "$log")"
                kill "$pid" 2> /dev/null || true
                return
        fi
        # The frontend went away: vufsd exits by itself (no --keep-listening).
        local st=0
        for ((i = 0; i < 100; i++)); do
                kill -0 "$pid" 2> /dev/null || break
                sleep 0.1
        done
        if kill -0 "$pid" 2> /dev/null; then
                fail "$name: vufsd still running 10 s after the frontend disconnected"
                kill "$pid" 2> /dev/null || true
                return
        fi
        wait "$pid" || st=$?
        [ "$st" = 0 ] || { fail "$name: vufsd exited $st: $(tail -3 "$log")"; return; }
        if [[ $mode == path* ]] && ! grep -q 'Client connected' "$log" && [ -n "$lines" ]; then
                fail "$name: no line for the client connecting"
                return
        fi
        msg "ok: $name ($out round trips): vufsd ${args[*]}"
}

want=("$@")
while read -r name mode rest; do
        [[ -z $name || $name == \#* ]] && continue
        if [ ${#want[@]} -gt 0 ] && [[ " ${want[*]} " != *" $name "* ]]; then
                continue
        fi
        # shellcheck disable=SC2086 # the list holds whitespace-separated arguments
        run_one "$name" "$mode" $rest
done < "$here/launchers.list"

[ "$failures" = 0 ] || { msg "$failures failed"; exit 1; }
msg "PASS"
