#!/bin/bash
# test-cmdline.sh: the command line as launchers and users meet it, on the vufsd binary:
#   - usage errors exit 2 and the message names the option (the Rust virtiofsd's clap behaviour),
#     including values accepted by the Rust daemon that vufsd refuses until they are built
#   - --version, --help and --print-capabilities work for an unprivileged user
#   - RUST_LOG sets the level unless --log-level is given
#   - --syslog sends the lines to syslog (a fake /dev/log in a private mount namespace) with the
#     sandbox on, and nothing to stderr
# Environment: VUFSD_BINARY, FE_TRAFFIC. Exit status: 0 pass, 1 fail, 77 skipped.

set -uo pipefail

msg() { echo "test-cmdline: $*" >&2; }
failures=0
fail() {
        msg "FAIL: $*"
        failures=$((failures + 1))
}

vufsd=${VUFSD_BINARY:?VUFSD_BINARY not set}
fe_traffic=${FE_TRAFFIC:?FE_TRAFFIC not set}
tmp=$(mktemp -d /tmp/vufs-cmdline.XXXXXX)
chmod 755 "$tmp"
mkdir -p "$tmp/share"
daemon=
cleanup() {
        [ -z "$daemon" ] || kill "$daemon" 2> /dev/null
        rm -rf "$tmp"
}
trap cleanup EXIT

# usage_error WORD ARGS...: vufsd ARGS exits 2 and stderr contains WORD.
usage_error() {
        local word=$1 st=0 err
        shift
        err=$(timeout 10 "$vufsd" "$@" 2>&1 > /dev/null) || st=$?
        if [ "$st" != 2 ]; then
                fail "vufsd $*: exit $st, want 2 ($err)"
        elif [[ $err != *"$word"* ]]; then
                fail "vufsd $*: message does not name $word: $err"
        fi
}

s=(--socket-path "$tmp/never.sock" --shared-dir "$tmp/share" --sandbox none)
usage_error --cache "${s[@]}" --cache=bogus
usage_error "-o cache" "${s[@]}" -o cache=bogus
usage_error --no-such-option "${s[@]}" --no-such-option
usage_error "-o bogus" "${s[@]}" -o xattr,bogus
usage_error --inode-file-handles "${s[@]}" --inode-file-handles never
usage_error --inode-file-handles "${s[@]}" --inode-file-handles=sometimes
# mandatory where the share cannot have handles (a subdirectory of /tmp's filesystem): refused at
# start (exit 1), the reason logged, nothing served.
err=$(timeout 10 "$vufsd" "${s[@]}" --inode-file-handles=mandatory 2>&1 > /dev/null); st=$?
[ "$st" = 1 ] && [[ $err == *"--inode-file-handles=mandatory: the shared directory is a subdirectory"* ]] ||
        fail "--inode-file-handles=mandatory on a subtree share: exit $st, want 1 and the reason ($err)"
usage_error --tag "${s[@]}" --tag=0123456789012345678901234567890123456
usage_error --tag "${s[@]}" --tag=
usage_error --posix-acl "${s[@]}" --posix-acl=sometimes
usage_error --security-label "${s[@]}" --security-label=maybe
usage_error --log-level "${s[@]}" --log-level=loud
usage_error --uid-map "${s[@]}" --uid-map=0:0:1
usage_error --uid-map "${s[@]}" --uid-map=:0:0:0:
usage_error --uid-map "${s[@]}" --uid-map=:4294967295:4294967295:2:
usage_error --uid-map "${s[@]}" --uid-map=:0:0:10: --uid-map=:5:5:10:
# a map needs a user namespace, which --sandbox none does not make (docs/id-mapping.md)
usage_error --uid-map "${s[@]}" --uid-map=:0:1000:1:
usage_error --gid-map "${s[@]}" --gid-map=:0:100000:65536:
# namespace id 0 (the daemon's own id inside) must be mapped
usage_error --uid-map --socket-path "$tmp/never.sock" --shared-dir "$tmp/share" --uid-map=:1:100000:10:
usage_error --gid-map --socket-path "$tmp/never.sock" --shared-dir "$tmp/share" --gid-map=:1:100000:10:
usage_error --translate-uid "${s[@]}" --translate-uid=bogus:1:2:3
usage_error --translate-uid "${s[@]}" --translate-uid=map:0:1000
usage_error --translate-uid "${s[@]}" --translate-uid=forbid-guest:100:0
usage_error --translate-uid "${s[@]}" --translate-uid=guest:0:0:10 --translate-uid=squash-guest:5:1:1
usage_error --translate-gid "${s[@]}" --translate-gid=map:0:4294967290:10
usage_error --translate-gid "${s[@]}" --translate-gid=squash-host:0:4294967295:1
usage_error --posix-acl "${s[@]}" --translate-uid=map:0:0:1 --posix-acl
usage_error --migration-mode "${s[@]}" --migration-mode=bogus
usage_error --migration-on-error "${s[@]}" --migration-on-error=retry
usage_error --migration-verify-handles "${s[@]}" --migration-mode=file-handles --migration-verify-handles
usage_error --migration-confirm-paths "${s[@]}" --migration-mode=file-handles --migration-confirm-paths
usage_error --fd --fd=3 --socket-path "$tmp/x.sock" --shared-dir "$tmp/share"
usage_error --socket-group --fd=3 --socket-group=root --shared-dir "$tmp/share"
usage_error --shared-dir --socket-path "$tmp/x.sock"
usage_error --xattrmap "${s[@]}" --xattrmap=:ok:all::
usage_error "-o xattrmap" "${s[@]}" -o xattrmap=:frob:all:::
usage_error --thread-pool-size "${s[@]}" --thread-pool-size=1025
usage_error "unexpected argument" "${s[@]}" stray

# Information, also for a user who could not run the daemon.
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
out=$(as_nobody "$vufsd" --version 2>&1) || fail "--version as nobody: $out"
[[ $out == "vufsd "* ]] || fail "--version printed: $out"
out=$(as_nobody "$vufsd" --print-capabilities 2>&1) || fail "--print-capabilities as nobody: $out"
[[ $out == *'"type": "fs"'* ]] || fail "--print-capabilities printed: $out"
# The features are the Rust virtiofsd's names (libvirt reads them), exactly those implemented
# (migrate-precopy: device-state migration, docs/migration.md).
features=$(python3 -c 'import json,sys; c=json.load(sys.stdin); print(" ".join(c["features"]))' <<< "$out") ||
        fail "--print-capabilities is not JSON: $out"
[ "$features" = "migrate-precopy posix-acl-negotiation-mode security-label-negotiation-mode separate-options" ] ||
        fail "--print-capabilities features: $features"
# Each negotiation mode claimed is one the parser takes: a valid MODE gets past the option and the
# usage error is about the missing --shared-dir instead.
for f in $features; do
        opt=${f%-negotiation-mode}
        [ "$opt" != "$f" ] || continue
        for mode in never auto always; do
                usage_error --shared-dir --socket-path "$tmp/never.sock" "--$opt=$mode"
        done
        usage_error "--$opt" --socket-path "$tmp/never.sock" --shared-dir "$tmp/share" "--$opt=sometimes"
done
out=$(as_nobody "$vufsd" --help 2>&1) || fail "--help as nobody: $out"
[[ $out == *--shared-dir* ]] || fail "--help printed: $out"

# start_daemon LOG ARGS...: vufsd in the background on $tmp/d.sock; waits for the socket.
start_daemon() {
        local log=$1 i
        shift
        rm -f "$tmp/d.sock"
        "$@" > "$log" 2>&1 &
        daemon=$!
        for ((i = 0; i < 100; i++)); do
                [ -S "$tmp/d.sock" ] && return 0
                kill -0 "$daemon" 2> /dev/null || break
                sleep 0.1
        done
        fail "no socket from: $*: $(tail -3 "$log")"
        return 1
}
stop_daemon() {
        local i
        kill "$daemon" 2> /dev/null
        for ((i = 0; i < 100; i++)); do
                kill -0 "$daemon" 2> /dev/null || break
                sleep 0.1
        done
        kill -9 "$daemon" 2> /dev/null
        wait "$daemon" 2> /dev/null
        daemon=
}

d=(--socket-path "$tmp/d.sock" --shared-dir "$tmp/share" --sandbox none --seccomp none)
# RUST_LOG=debug: debug lines (<7>); with --log-level=info it does not apply.
if start_daemon "$tmp/rustlog.log" env RUST_LOG=debug "$vufsd" "${d[@]}"; then
        "$fe_traffic" "$tmp/d.sock" --count 1 > /dev/null 2>&1 || fail "RUST_LOG=debug: no traffic"
        sleep 0.5
        stop_daemon
        grep -q '^<7>' "$tmp/rustlog.log" || fail "RUST_LOG=debug: no debug lines: $(head -5 "$tmp/rustlog.log")"
fi
if start_daemon "$tmp/rustlog2.log" env RUST_LOG=virtiofsd=debug "$vufsd" "${d[@]}" --log-level=info; then
        "$fe_traffic" "$tmp/d.sock" --count 1 > /dev/null 2>&1 || fail "RUST_LOG with --log-level: no traffic"
        sleep 0.5
        stop_daemon
        ! grep -q '^<7>' "$tmp/rustlog2.log" || fail "--log-level=info lost to RUST_LOG"
fi
if start_daemon "$tmp/rustlog3.log" env RUST_LOG=warn "$vufsd" "${d[@]}"; then
        stop_daemon
        ! grep -q 'Waiting for vhost-user' "$tmp/rustlog3.log" || fail "RUST_LOG=warn still logs info lines"
fi

# --syslog: lines go to /dev/log, tagged vufsd[PID], none to stderr; the sandbox (namespace, with
# seccomp) does not cut it off.
if command -v unshare > /dev/null && [ "$(id -u)" = 0 ]; then
        python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
out = open(sys.argv[2], "a", buffering=1)
while True:
    out.write(s.recv(65536).decode(errors="replace") + "\n")
' "$tmp/devlog" "$tmp/syslog.txt" &
        syslogd=$!
        for ((i = 0; i < 50; i++)); do [ -S "$tmp/devlog" ] && break; sleep 0.1; done
        # A private /dev holding the usual nodes and the fake log socket.
        cat > "$tmp/ns.sh" <<NS
set -e
mount --make-rprivate /
mkdir -p "$tmp/dev"
mount -t tmpfs tmpfs "$tmp/dev"
for n in null zero full random urandom tty; do touch "$tmp/dev/\$n"; mount --bind "/dev/\$n" "$tmp/dev/\$n"; done
touch "$tmp/dev/log"
mount --bind "$tmp/devlog" "$tmp/dev/log"
mount --rbind "$tmp/dev" /dev
# LeakSanitizer cannot run inside the sandbox (sanitizer builds): no leak check for this one.
export ASAN_OPTIONS="\${ASAN_OPTIONS:-}\${ASAN_OPTIONS:+:}detect_leaks=0"
exec "$vufsd" --syslog --socket-path "$tmp/d.sock" --shared-dir "$tmp/share" --sandbox namespace
NS
        if start_daemon "$tmp/syslog-stderr.log" unshare -m bash "$tmp/ns.sh"; then
                "$fe_traffic" "$tmp/d.sock" --count 2 > /dev/null 2>&1 || fail "--syslog: no traffic"
                for ((i = 0; i < 50; i++)); do
                        kill -0 "$daemon" 2> /dev/null || break
                        sleep 0.1
                done
                stop_daemon
                grep -q 'vufsd\[[0-9]*\]: Waiting for vhost-user socket connection' "$tmp/syslog.txt" ||
                        fail "--syslog: no Waiting line in syslog: $(head -5 "$tmp/syslog.txt" 2> /dev/null)"
                grep -q 'vufsd\[[0-9]*\]: Client connected' "$tmp/syslog.txt" ||
                        fail "--syslog: nothing logged from inside the sandbox: $(cat "$tmp/syslog.txt")"
                ! grep -q 'Waiting for vhost-user' "$tmp/syslog-stderr.log" ||
                        fail "--syslog: the lines went to stderr too"
        fi
        kill "$syslogd" 2> /dev/null
        wait "$syslogd" 2> /dev/null
else
        msg "skip: --syslog check needs root and unshare"
fi

# The socket (and SOCK.pid) appear before anything else can go wrong: launchers wait for the
# socket file, so a later failure (here the share that cannot be opened, by the filesystem layer
# or by the sandbox's bind mount) must
# happen while it exists: the launcher sees it, connects and sees vufsd go, instead of waiting for
# its timeout. inotify records the creations; the daemon removes both files as it exits.
early_socket() {
        local what=$1 st=0 out
        shift
        rm -f "$tmp/e.sock" "$tmp/e.sock.pid"
        mkdir -p "$tmp/early"
        out=$(python3 - "$tmp/early" "$vufsd" --socket-path "$tmp/early/e.sock" --shared-dir "$tmp/missing" \
                "$@" <<'PY' 2>&1) || st=$?
import ctypes, os, struct, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
IN_CREATE, IN_NONBLOCK = 0x100, 0o4000
fd = libc.inotify_init1(IN_NONBLOCK)
assert fd >= 0 and libc.inotify_add_watch(fd, sys.argv[1].encode(), IN_CREATE) >= 0
p = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=20)
names, buf = [], b""
try:
    while True:
        buf += os.read(fd, 65536)
except BlockingIOError:
    pass
while buf:
    wd, mask, cookie, n = struct.unpack_from("iIII", buf)
    names.append(buf[16:16 + n].rstrip(b"\0").decode())
    buf = buf[16 + n:]
print("exit", p.returncode, "created", " ".join(sorted(names)) or "nothing")
print(p.stderr.decode(errors="replace").strip().splitlines()[-1:])
PY
        if [ "$st" != 0 ]; then
                fail "early socket ($what): the watcher failed: $out"
        elif [[ $out != *"exit 1 created e.sock e.sock.pid"* ]]; then
                fail "early socket ($what): want exit 1 after creating e.sock and e.sock.pid: $out"
        elif [[ $out != *"$tmp/missing"* ]]; then
                fail "early socket ($what): not the share that failed: $out"
        elif [ -e "$tmp/early/e.sock" ] || [ -e "$tmp/early/e.sock.pid" ]; then
                fail "early socket ($what): left behind: $(ls "$tmp/early")"
        fi
}
early_socket "no sandbox" --sandbox none --seccomp none
if [ "$(id -u)" = 0 ]; then
        # LeakSanitizer cannot run inside the sandbox (sanitizer builds): no leak check here.
        ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0" early_socket "namespace sandbox" --sandbox namespace
else
        msg "skip: the early socket with --sandbox namespace needs root"
fi

[ "$failures" = 0 ] || { msg "$failures failed"; exit 1; }
msg "PASS"
