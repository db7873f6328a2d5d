#!/bin/bash
# A real guest served by vufsd running as an unprivileged user (nobody) with libvirt's maps
# --uid-map=:0:BASE:65536: --gid-map=:0:BASE:65536:, the user's subordinate range (the test adds
# "nobody:BASE:65536" to /etc/subuid and /etc/subgid and removes it again). The guest
# (tests/vm/guest-userns.sh) makes files, directories, symlinks, a set-gid directory and hard
# links as guest root and guest users, runs pjdfstest-style ownership checks and checks that the
# unmapped cases answer EPERM; then this script checks the owners the host sees
# (docs/id-mapping.md).
#
# Usage: test-userns.sh [--keep]
# Environment: VUFSD_BINARY, VUFS_VM_BUILD_DIR (initramfs cache and kept logs, default
# /var/tmp/vufs-vm), VUFS_VM_TMPDIR (default /var/tmp), VUFS_VM_REQUIRED=1 (missing QEMU or
# kernel fails instead of skipping).
# Exit status: 0 pass, 1 fail, 77 skipped (QEMU, the kernel or newuidmap missing, or not root).

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"

msg() { echo "test-userns: $*" >&2; }

keep=0
[ "${1:-}" != --keep ] || keep=1

vm_require_prerequisites test-userns newuidmap newgidmap setpriv
if [ "$(id -u)" != 0 ]; then
        msg "SKIP: needs root (to add the subordinate range and start vufsd as nobody)"
        exit 77
fi
vufsd_bin=${VUFSD_BINARY:-}
if [ -z "$vufsd_bin" ] || [ ! -x "$vufsd_bin" ]; then
        msg "FAIL: vufsd binary '$vufsd_bin' not found (set VUFSD_BINARY)"
        exit 1
fi

user=nobody
uid=$(id -u $user)
base=500000
line="$user:$base:65536"
build_dir=${VUFS_VM_BUILD_DIR:-/var/tmp/vufs-vm}
mkdir -p "$build_dir"
tmp=$(mktemp -d "${VUFS_VM_TMPDIR:-/var/tmp}/vufs-test-userns.XXXXXX")
added=()

cleanup() {
        local rc=$? f
        for f in "${added[@]}"; do
                # only our own line; the file goes if it is empty then (it did not exist before)
                sed -i "\\|^$line\$|d" "$f" || true
                [ -s "$f" ] || rm -f "$f"
        done
        if [ $keep -eq 1 ]; then
                msg "kept $tmp"
        else
                rm -rf "$tmp"
        fi
        exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for f in /etc/subuid /etc/subgid; do
        if ! grep -qx "$line" "$f" 2>/dev/null; then
                echo "$line" >> "$f"
                added+=("$f")
        fi
done

# The share belongs to the map's root (the daemon is host uid $base inside its namespace); the
# path to it and the socket's directory are reachable by it and by $user.
chmod 0755 "$tmp"
share=$tmp/share
sockdir=$tmp/sock
mkdir -p "$share" "$sockdir"
chown "$base:$base" "$share"
chown "$uid:$uid" "$sockdir"

kver=$(vm_kernel_version)
initrd=$("$here/mkinitramfs.sh" "$build_dir/initramfs-userns-$kver.cpio.gz" --kernel-version "$kver" \
        --script "$here/guest-userns.sh")

t0=$(date +%s.%N)
status=0
"$here/run-guest.sh" --share "$share" --socket "$sockdir/vhost.sock" --initrd "$initrd" \
        --script guest-userns.sh --timeout 280 --quiet \
        --log "$tmp/console.log" --backend-log "$tmp/backend.log" -- \
        setpriv --reuid="$uid" --regid="$uid" --clear-groups -- \
        "$vufsd_bin" --socket-path @SOCK@ --shared-dir @SHARE@ --bus=none \
        --uid-map=:0:$base:65536: --gid-map=:0:$base:65536: || status=$?
elapsed=$(echo "$(date +%s.%N) $t0" | awk '{ printf "%.1f", $1 - $2 }')
tr -d '\r' < "$tmp/console.log" > "$build_dir/last-userns.log" || true
cp "$tmp/backend.log" "$build_dir/last-userns-backend.log" 2>/dev/null || true
grep -a '^CHECK FAIL' -A5 "$build_dir/last-userns.log" | sed 's/^/test-userns:   /' >&2 || true

# What the host sees: guest id N is host id base + N.
host_failures=0
expect_owner() {
        local path=$share/userns/$1 want=$2 got
        got=$(stat -c '%u:%g' "$path" 2>/dev/null || echo missing)
        if [ "$got" != "$want" ]; then
                msg "host: $1 is $got, expected $want"
                host_failures=$((host_failures + 1))
        fi
}
r=$base u=$((base + 1000)) g2=$((base + 2000))
expect_owner root-file "$r:$r"
expect_owner root-dir "$r:$r"
expect_owner root-link "$r:$r"
expect_owner user-file "$u:$u"
expect_owner user-dir "$u:$u"
expect_owner user-link "$u:$u"
expect_owner user-hard "$u:$u"
expect_owner sgid "$r:$g2"
expect_owner sgid/in-sgid "$u:$g2"
expect_owner sgid/sub "$u:$g2"
expect_owner chown-me "$u:$g2"
if [ "$(stat -c %h "$share/userns/user-file" 2>/dev/null)" != 2 ]; then
        msg "host: user-file and user-hard are not one inode"
        host_failures=$((host_failures + 1))
fi
for f in by-70000 dir-70000 by-3000 link-3000; do
        if [ -e "$share/userns/$f" ] || [ -L "$share/userns/$f" ]; then
                msg "host: $f exists although the guest got EPERM"
                host_failures=$((host_failures + 1))
        fi
done
if ! grep -q "^CHECK ok" "$build_dir/last-userns.log"; then
        msg "the guest ran no check"
        host_failures=$((host_failures + 1))
fi

if [ $status -ne 0 ] || [ $host_failures -ne 0 ]; then
        msg "FAIL (${elapsed}s; guest status $status, $host_failures host-side failures; console:" \
            "$build_dir/last-userns.log, daemon: $build_dir/last-userns-backend.log)"
        exit 1
fi
msg "PASS: $(grep -c '^CHECK ok' "$build_dir/last-userns.log") guest checks, owners on the host as mapped (${elapsed}s)"
