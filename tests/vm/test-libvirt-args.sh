#!/bin/bash
# test-libvirt-args.sh: vufsd started the way libvirt, Kata Containers and KubeVirt start a
# virtio-fs daemon serves a real guest (the other launchers' forms run against the test frontend
# in tests/compat).
# libvirt creates, binds and listens on the socket itself, passes it as --fd=N (first argument) and
# points QEMU's chardev at the same path. Both argument forms are run against a QEMU guest
# (tests/vm/guest-basic.sh, data checked both ways):
#   -o form:         --fd=N -o source=DIR,cache=always,sandbox=chroot,xattr,flock,posix_lock
#                    --thread-pool-size=2 --rlimit-nofile=4096 -d   (DIR contains a comma, which
#                    libvirt doubles)
#   separate-options: --fd=N --shared-dir DIR --cache none --sandbox namespace --xattr
#                    --thread-pool-size=2 --rlimit-nofile=4096 --log-level debug
# and --print-capabilities must be the JSON libvirt reads, with only supported features.
# Kata's Go runtime passes its own listening socket as fd 3 (--syslog ... --fd=3 and its default
# extra arguments); KubeVirt's virtiofs container lets vufsd create the socket (--socket-path,
# --sandbox=none, the migration flags).
#
# Environment: VUFSD_BINARY, VUFS_VM_BUILD_DIR (initramfs cache), VUFS_VM_REQUIRED=1 (missing QEMU
# or kernel fails instead of skipping).
# Exit status: 0 pass, 1 fail, 77 skipped (QEMU, a kernel or python3 missing).

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"
# shellcheck source=tests/systemd/guest-share.sh
. "$here/../systemd/guest-share.sh"

msg() { echo "test-libvirt-args: $*" >&2; }
fail() {
        msg "FAIL: $*"
        exit 1
}

vufsd=${VUFSD_BINARY:-}
[ -n "$vufsd" ] && [ -x "$vufsd" ] || fail "VUFSD_BINARY not set"
missing=$(vm_missing_prerequisites)
command -v python3 > /dev/null || missing+=" python3"
if [ -n "$missing" ]; then
        msg "missing: $(echo "$missing" | paste -sd';')"
        [ "${VUFS_VM_REQUIRED:-0}" != 1 ] || exit 1
        msg "SKIP"
        exit 77
fi

t0=$(date +%s)
tmp=$(mktemp -d "${VUFS_VM_TMPDIR:-/var/tmp}/vufs-libvirt.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# --print-capabilities: what libvirt parses (type "fs"; features: migrate-precopy, separate-options
# and the Rust virtiofsd's two negotiation modes): all four, migration being docs/migration.md's.
"$vufsd" --print-capabilities > "$tmp/caps.json" || fail "--print-capabilities exited non-zero"
python3 - "$tmp/caps.json" <<'PY' || fail "--print-capabilities: $(cat "$tmp/caps.json")"
import json, sys
caps = json.load(open(sys.argv[1]))
assert caps["type"] == "fs", caps
assert caps.get("features") == ["migrate-precopy", "posix-acl-negotiation-mode", "security-label-negotiation-mode",
                                "separate-options"], caps
PY
msg "ok: --print-capabilities: $(tr -d ' \n' < "$tmp/caps.json")"

# The part of libvirt that matters here: socket(), bind(), listen(), then exec the daemon with the
# listening fd inherited; "{fd}" in the arguments becomes its number.
launcher='
import os, socket, sys
path, argv = sys.argv[1], sys.argv[2:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
s.listen(1)
fd = os.dup2(s.fileno(), 9)  # not 3: vufsd must use the number it is given
os.set_inheritable(fd, True)
os.execv(argv[0], [a.replace("{fd}", str(fd)) for a in argv])
'''
# Kata's Go runtime: the socket is the child's fd 3 (exec.Cmd ExtraFiles).
launcher3=${launcher/os.dup2(s.fileno(), 9)/os.dup2(s.fileno(), 3)}

# run_cmd NAME SHARE DEBUG BACKEND-COMMAND...: one guest run with this backend command (@SOCK@ is
# the socket path); DEBUG=1 also checks that the debug option took effect.
run_cmd() {
        local name=$1 share=$2 debug=$3 t
        shift 3
        local sums=$tmp/$name.sums
        mkdir -p "$share"
        guest_share_prepare "$share" "$sums"
        t=$(date +%s)
        "$here/run-guest.sh" --script guest-basic.sh --timeout 240 \
                --build-dir "${VUFS_VM_BUILD_DIR:-/var/tmp/vufs-vm}" \
                --log "$tmp/$name-console.log" --backend-log "$tmp/$name-backend.log" --quiet \
                -- "$@" ||
                fail "$name: guest run with: $*"
        out=$(guest_share_check "$share" "$sums") || fail "$name: $out"
        if [ "$debug" = 1 ]; then
                grep -q '^<7>' "$tmp/$name-backend.log" || fail "$name: no debug output from vufsd despite the debug option"
        fi
        msg "ok: $name form served a guest ($(($(date +%s) - t))s): $*"
}

# run_form NAME SHARE ARGS...: libvirt's way, vufsd started as "ARGS" (with {fd}).
run_form() {
        local name=$1 share=$2
        shift 2
        run_cmd "$name" "$share" 1 python3 -c "$launcher" @SOCK@ "$vufsd" "$@"
}

share_a=$tmp/share,with-comma
escaped_a=${share_a//,/,,}
run_form o-options "$share_a" "--fd={fd}" -o "source=$escaped_a,cache=always,sandbox=chroot,xattr,flock,posix_lock" \
        --thread-pool-size=2 --rlimit-nofile=4096 -d
run_form separate-options "$tmp/share-b" "--fd={fd}" --shared-dir "$tmp/share-b" --cache none --sandbox namespace \
        --xattr --thread-pool-size=2 --rlimit-nofile=4096 --log-level debug

run_cmd kata-go "$tmp/share-kata" 0 python3 -c "$launcher3" @SOCK@ "$vufsd" --syslog --cache=auto \
        --shared-dir="$tmp/share-kata" --fd=3 --migration-mode=find-paths --migration-on-error=guest-error \
        --thread-pool-size=1 --announce-submounts
run_cmd kubevirt "$tmp/share-kubevirt" 0 "$vufsd" --socket-path=@SOCK@ --shared-dir="$tmp/share-kubevirt" \
        --sandbox=none --cache=auto --migration-on-error=guest-error --migration-mode=find-paths

msg "PASS ($(($(date +%s) - t0))s)"
