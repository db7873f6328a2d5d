#!/bin/bash
# Real-guest test of --translate-uid/--translate-gid: vufsd serves a share with guest ids squashed
# onto one host user (the layout of a rootless host without a user namespace), the guest
# (guest-idmap.sh) creates every kind of entry as root and chowns, and the host checks the owners
# that arrived. Usage: test-guest-idmap.sh [VUFSD-BINARY]. Exit 0 pass, 1 fail, 77 skipped.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"
msg() { echo "test-guest-idmap: $*" >&2; }
vufsd_bin=${1:-${VUFSD_BINARY:-}}
vm_require_prerequisites test-guest-idmap
[ -x "$vufsd_bin" ] || { msg "FAIL: vufsd binary '$vufsd_bin' not found"; exit 1; }

build_dir=${VUFS_VM_BUILD_DIR:-/var/tmp/vufs-vm}
tmp=$(mktemp -d "${VUFS_VM_TMPDIR:-/var/tmp}/vufs-test-idmap.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
share=$tmp/share
mkdir -p "$share"
chown 1234:5000 "$share"
touch "$share/host-owned"
chown 7777:5050 "$share/host-owned"

kver=$(vm_kernel_version)
initrd=$("$here/mkinitramfs.sh" "$build_dir/initramfs-$kver.cpio.gz" --kernel-version "$kver")
export VUFSD_EXTRA_ARGS="--translate-uid=squash-guest:0:1234:65536 --translate-uid=host:1234:0:1
        --translate-uid=forbid-guest:70000:1 --translate-gid=map:0:5000:100"
status=0
"$here/run-guest.sh" --share "$share" --initrd "$initrd" --backend "vufsd:$vufsd_bin" --script guest-idmap.sh \
        --log "$tmp/console.log" --backend-log "$tmp/backend.log" --timeout 300 || status=$?
grep -a -E 'CHECK (ok|FAIL)|CHECKS:' "$tmp/console.log" | tr -d '\r' | sed 's/^/test-guest-idmap:   guest /' >&2 || true
[ $status -eq 0 ] || { msg "FAIL: guest run failed"; tail -n 30 "$tmp/backend.log" >&2 || true; exit 1; }

fail=0
expect_owner() { # PATH UID:GID
        local got
        got=$(stat -c '%u:%g' "$share/$1")
        if [ "$got" = "$2" ]; then
                msg "ok: $1 is $2 on the host"
        else
                msg "FAIL: $1 is $got on the host, expected $2"
                fail=1
        fi
}
expect_owner d 1234:5000
expect_owner d/sym 1234:5000
expect_owner d/fifo 1234:5000
expect_owner d/f 1234:5030
expect_owner d/g 66000:200
expect_owner d/sg 1234:5030
expect_owner d/sg/in 1234:5030
expect_owner host-owned 7777:5050
[ "$(stat -c %i "$share/d/g")" = "$(stat -c %i "$share/d/hard")" ] || { msg "FAIL: hard link"; fail=1; }
[ $fail -eq 0 ] && msg "PASS"
exit $fail
