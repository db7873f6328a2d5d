#!/bin/bash
# POSIX conformance in a real guest: boots one guest per cache policy, each running vufs-posix on the
# virtiofs share served by vufsd and on a tmpfs in the same guest (tests/conformance/guest-conformance.sh),
# and fails on any difference docs/conformance.md does not list for that policy.
#
# Usage: test-conformance.sh [--keep] [POLICY...]      (default policies: never auto always)
# Environment: VUFSD_BINARY, VUFS_POSIX (the static vufs-posix binary), VUFS_CONFORMANCE_DOC (default
# docs/conformance.md of this tree), VUFS_VM_BUILD_DIR (initramfs cache and kept logs, default
# /var/tmp/vufs-vm), VUFS_VM_TMPDIR (where shares are created, default /var/tmp), VUFS_VM_REQUIRED=1
# (missing QEMU or kernel fails instead of skipping), VUFSD_EXTRA_ARGS (more vufsd options).
# Exit status: 0 pass, 1 fail, 77 skipped (qemu-system-x86_64 or the kernel is not installed).

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"

msg() { echo "test-conformance: $*" >&2; }

keep=0
policies=()
while [ $# -gt 0 ]; do
        case "$1" in
        --keep) keep=1; shift ;;
        -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        never|none|metadata|auto|always) policies+=("$1"); shift ;;
        *) msg "unknown argument $1"; exit 2 ;;
        esac
done
[ ${#policies[@]} -gt 0 ] || policies=(never auto always)

vm_require_prerequisites test-conformance

vufsd_bin=${VUFSD_BINARY:-}
probe=${VUFS_POSIX:-}
doc=${VUFS_CONFORMANCE_DOC:-$here/../../docs/conformance.md}
vm_require_conformance_inputs test-conformance "$vufsd_bin" "$probe" VUFS_POSIX "$doc"

build_dir=${VUFS_VM_BUILD_DIR:-/var/tmp/vufs-vm}
mkdir -p "$build_dir"
tmp=$(mktemp -d "${VUFS_VM_TMPDIR:-/var/tmp}/vufs-test-conformance.XXXXXX")
cleanup() {
        local rc=$?
        if [ $keep -eq 1 ]; then
                msg "kept $tmp"
        else
                rm -rf "$tmp"
        fi
        exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The listed differences: table rows "| `NAME` | POLICIES | reason |" of docs/conformance.md.
# shellcheck disable=SC2016 # the backquotes are Markdown, not shell
sed -n 's/^| *`\([^`]*\)` *| *\([a-z,]*\) *|.*/\1 \2/p' "$doc" > "$tmp/known"
msg "$(wc -l < "$tmp/known") listed differences in $doc"

kver=$(vm_kernel_version)
initrd=$("$here/mkinitramfs.sh" "$build_dir/initramfs-conformance-$kver.cpio.gz" --kernel-version "$kver" \
        --script "$here/../conformance/guest-conformance.sh" \
        --extra "$probe:/usr/bin/vufs-posix" --extra "$tmp/known:/etc/vufs/conformance-known")

# What the guest left in a share that a host user could use as a privilege (issue 33): set-id
# regular files, file capabilities, device nodes other than whiteouts (character 0:0, which open
# nothing and need no CAP_MKNOD). Set-group-id directories are inheritance, not privilege.
host_privileges() {
        find "$1" -type f \( -perm -4000 -o -perm -2000 \) -printf 'set-id file: %p\n'
        find "$1" \( -type b -o -type c \) -exec stat -c '%F %t:%T %n' {} + | grep -v '^character special file 0:0 ' || true
        getcap -r "$1" 2> /dev/null | sed 's/^/file capability: /'
}
command -v getcap > /dev/null || { msg "getcap missing (libcap2-bin, tools/install-deps.sh)"; exit 1; }
# The guest's chmod 4755 of a copy of id(1), run here as nobody from a directory nobody may reach
# (copied with its mode); prints the uid it runs with.
run_id_copy_as_nobody() {
        local d
        d=$(mktemp -d "$tmp/idrun.XXXXXX")
        chmod 0755 "$tmp" "$d"
        cp -p "$1" "$d/id"
        setpriv --reuid=65534 --regid=65534 --clear-groups "$d/id" -u
}

# After a run with the default --privileged-files=map: nothing in the share is a host privilege,
# and guest root's chmod 4755 of id leaves a program that runs as whoever runs it on the host.
check_map_mode() {
        local p=$1 share=$2 left uid
        left=$(host_privileges "$share")
        if [ -n "$left" ]; then
                msg "FAIL: cache=$p: the guest left host privileges in the share:"
                sed 's/^/test-conformance:   /' <<< "$left" >&2
                return 1
        fi
        if ! grep -aq '^CONFORMANCE-SETUID-COPY: mode 4755' "$build_dir/last-conformance-$p.log"; then
                msg "FAIL: cache=$p: the guest did not see its chmod 4755 of id (CONFORMANCE-SETUID-COPY)"
                return 1
        fi
        uid=$(run_id_copy_as_nobody "$share/id-copy" || true)
        if [ "$uid" != 65534 ]; then
                msg "FAIL: cache=$p: guest root's chmod 4755 of id, run by nobody on the host, printed '$uid'"
                return 1
        fi
        msg "cache=$p: no set-id file, device or file capability in the share; guest root's set-uid copy" \
            "of id is 4755 in the guest and runs as nobody (uid $uid) on the host"
}

failed=()
for p in "${policies[@]}"; do
        share=$tmp/share-$p
        mkdir -p "$share"
        cp "$(command -v id)" "$share/id-copy"
        t0=$(date +%s.%N)
        status=0
        # Extended attributes are off by default in vufsd (as in virtiofsd); the suite needs them.
        VUFSD_EXTRA_ARGS="--cache=$p --xattr ${VUFSD_EXTRA_ARGS:-}" \
                "$here/run-guest.sh" --backend "vufsd:$vufsd_bin" --share "$share" --initrd "$initrd" \
                --script guest-conformance.sh --param "cache=$p" --timeout 600 --quiet \
                --log "$tmp/console-$p.log" --backend-log "$tmp/backend-$p.log" || status=$?
        elapsed=$(echo "$(date +%s.%N) $t0" | awk '{ printf "%.1f", $1 - $2 }')
        tr -d '\r' < "$tmp/console-$p.log" > "$build_dir/last-conformance-$p.log" || true
        cp "$tmp/backend-$p.log" "$build_dir/last-conformance-backend-$p.log" 2>/dev/null || true
        rm -rf "$build_dir/last-conformance-results-$p"
        cp -r "$share/conformance-results" "$build_dir/last-conformance-results-$p" 2>/dev/null || true
        grep -a -E '^(CONFORMANCE|vufs-posix)' "$build_dir/last-conformance-$p.log" | sed "s/^/test-conformance:   [$p] /" >&2 || true
        # The default (map) only: refuse makes none either, allow is asked to make them.
        case "${VUFSD_EXTRA_ARGS:-}" in
        *privileged-files*) ;;
        *) check_map_mode "$p" "$share" || status=1 ;;
        esac
        if [ $status -ne 0 ]; then
                msg "FAIL: cache=$p (${elapsed}s; console: $build_dir/last-conformance-$p.log," \
                    "outputs: $build_dir/last-conformance-results-$p)"
                failed+=("$p")
        else
                msg "ok: cache=$p (${elapsed}s)"
        fi
done
if [ ${#failed[@]} -gt 0 ]; then
        msg "FAIL: policies ${failed[*]}"
        exit 1
fi
msg "PASS: cache policies ${policies[*]}"
