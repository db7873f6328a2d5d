#!/bin/bash
# Real-guest test: a Linux guest under QEMU (TCG) mounts a share served by the backend, checks file
# operations and data integrity both ways (guest-basic.sh), reloads virtiofs, reboots without the backend
# being restarted and checks again; afterwards the host checks what the guest wrote and that the backend
# exited with status 0 once QEMU disconnected.
#
# Usage: test-guest.sh [--backend vufsd|virtiofsd] [--no-reboot | --keep-listening] [--keep] [VUFSD-BINARY]
#   --backend      vufsd (default: VUFSD-BINARY or $VUFSD_BINARY) or QEMU's C virtiofsd (reference run)
#   --no-reboot    one boot only (the module reload still restarts the rings once)
#   --keep-listening  instead of a guest reboot, QEMU exits after the first boot and a second QEMU
#                  connects to the same vufsd --keep-listening process, which must then exit 0 on SIGTERM
#                  (the first boot skips the checks the default mode already covers)
#   --keep         keep the share and logs (printed at the end)
# Environment: VUFS_VM_BUILD_DIR (initramfs cache, default /var/tmp/vufs-vm), VUFS_VM_TMPDIR (where the
# share is created, default /var/tmp), VUFS_VM_REQUIRED=1 (missing QEMU or kernel fails instead of skipping).
# Exit status: 0 pass, 1 fail, 77 skipped (qemu-system-x86_64 or the kernel is not installed).

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"

msg() { echo "test-guest: $*" >&2; }

backend=vufsd
mode=reboot
keep=0
vufsd_bin=${VUFSD_BINARY:-}
while [ $# -gt 0 ]; do
        case "$1" in
        --backend) backend=${2:?}; shift 2 ;;
        --no-reboot) mode=single; shift ;;
        --keep-listening) mode="keep-listening"; shift ;;
        --keep) keep=1; shift ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) msg "unknown option $1"; exit 2 ;;
        *) vufsd_bin=$1; shift ;;
        esac
done

vm_require_prerequisites test-guest

case "$backend" in
vufsd)
        if [ -z "$vufsd_bin" ] || [ ! -x "$vufsd_bin" ]; then
                msg "FAIL: vufsd binary '${vufsd_bin}' not found (pass it or set VUFSD_BINARY)"
                exit 1
        fi
        backend_arg=vufsd:$vufsd_bin
        ;;
virtiofsd)
        backend_arg=virtiofsd
        [ $mode != keep-listening ] || { msg "--keep-listening needs vufsd"; exit 2; }
        ;;
*) msg "unknown backend $backend"; exit 2 ;;
esac

build_dir=${VUFS_VM_BUILD_DIR:-/var/tmp/vufs-vm}
t0=$(date +%s.%N)
tmp=$(mktemp -d "${VUFS_VM_TMPDIR:-/var/tmp}/vufs-test-guest.XXXXXX")
backend_pid=
cleanup() {
        local rc=$?
        if [ -n "$backend_pid" ] && kill -0 "$backend_pid" 2>/dev/null; then
                kill -KILL "$backend_pid" 2>/dev/null || true
                wait "$backend_pid" 2>/dev/null || true
        fi
        if [ $keep -eq 1 ] || { [ "${VUFS_VM_KEEP_ON_FAILURE:-0}" = 1 ] && [ $rc -ne 0 ]; }; then
                msg "kept $tmp"
        else
                rm -rf "$tmp"
        fi
        exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

share=$tmp/share
mkdir -p "$share/host-dir" "$share/host-links"

# Host side of the data exchange: files with known checksums, a big directory, links.
vm_make_data "$share/host-data" big1.bin:5242880 odd.bin:3149825 small.bin:100 empty.bin:0
for i in $(seq 0 299); do
        echo "$i" > "$share/host-dir/e$i"
done
echo "target of the host's links" > "$share/host-links/target.txt"
ln "$share/host-links/target.txt" "$share/host-links/hard"
ln -s target.txt "$share/host-links/sym"
cat > "$share/test.conf" <<EOF
HOST_DATA_FILES=4
HOST_DIR_ENTRIES=300
EOF
(cd "$share/host-data" && sha256sum -- *.bin) > "$tmp/host-data.sums"

kver=$(vm_kernel_version)
initrd=$("$here/mkinitramfs.sh" "$build_dir/initramfs-$kver.cpio.gz" --kernel-version "$kver")

run_args=(--share "$share" --initrd "$initrd")
guest_failed() {
        mkdir -p "$build_dir"
        tr -d '\r' < "$tmp/console.log" > "$build_dir/last-console-$backend.log" 2>/dev/null || true
        cp "$tmp/backend.log" "$build_dir/last-backend-$backend.log" 2>/dev/null || true
        grep -a -E 'CHECK (ok|FAIL)|CHECKS:' "$tmp/console.log" | tr -d '\r' | sed 's/^/test-guest:   guest /' >&2 || true
        if [ "$1" -ne 0 ]; then
                msg "FAIL: guest run failed (console log: $build_dir/last-console-$backend.log)"
                exit 1
        fi
}

msg "backend $backend, share $share, kernel $kver, mode $mode"
status=0
case $mode in
single|reboot)
        run_args+=(--backend "$backend_arg" --log "$tmp/console.log" --backend-log "$tmp/backend.log" --timeout 420)
        [ $mode = single ] || run_args+=(--reboot --param reboot=1)
        "$here/run-guest.sh" "${run_args[@]}" || status=$?
        guest_failed $status
        ;;
keep-listening)
        # One vufsd process, two QEMU processes one after the other: the first guest's "reboot -f"
        # ends its QEMU (-no-reboot), the second QEMU connects to the same listening vufsd.
        sock=$tmp/vhost-user-fs.sock
        # shellcheck disable=SC2086 # VUFSD_EXTRA_ARGS: see run-guest.sh
        "$vufsd_bin" --socket-path "$sock" --shared-dir "$share" --keep-listening ${VUFSD_EXTRA_ARGS:-} > "$tmp/backend.log" 2>&1 &
        backend_pid=$!
        for _ in $(seq 100); do
                if [ -S "$sock" ] || ! kill -0 $backend_pid 2>/dev/null; then
                        break
                fi
                sleep 0.1
        done
        [ -S "$sock" ] || { msg "FAIL: vufsd did not create $sock"; cat "$tmp/backend.log" >&2; exit 1; }
        sleep 0.2
        start_time=$(cut -d' ' -f22 /proc/$backend_pid/stat)
        for run in 1 2; do
                "$here/run-guest.sh" "${run_args[@]}" --socket "$sock" --param reboot=1 --param quick=1 --timeout 250 \
                        --log "$tmp/console.log" --backend-log "$tmp/backend.log" || status=$?
                [ $status -eq 0 ] || kill -TERM $backend_pid 2>/dev/null || true
                guest_failed $status
                if [ "$(cut -d' ' -f22 /proc/$backend_pid/stat 2>/dev/null)" != "$start_time" ]; then
                        msg "FAIL: vufsd pid $backend_pid is gone after QEMU run $run (--keep-listening)"
                        cat "$tmp/backend.log" >&2
                        exit 1
                fi
                msg "QEMU run $run done; vufsd pid $backend_pid still listening"
        done
        kill -TERM $backend_pid
        for _ in $(seq 100); do
                [ "$(sed 's/.*) //' /proc/$backend_pid/stat 2>/dev/null | cut -d' ' -f1)" = Z ] && break
                sleep 0.1
        done
        status=0
        wait $backend_pid || status=$?
        backend_pid=
        if [ $status -ne 0 ]; then
                msg "FAIL: vufsd exited with status $status after SIGTERM"
                tail -n 40 "$tmp/backend.log" >&2
                exit 1
        fi
        msg "vufsd exited with status 0 after SIGTERM"
        ;;
esac

# Host side: what the guest wrote, after the guest is gone and the backend has exited.
failures=0
hcheck() {
        local desc=$1
        shift
        if "$@" > "$tmp/hcheck.out" 2>&1; then
                msg "host ok: $desc"
        else
                failures=$((failures + 1))
                msg "host FAIL: $desc"
                sed 's/^/test-guest:     /' "$tmp/hcheck.out" >&2
        fi
}
expect() {
        [ "$2" = "$3" ] && return 0
        echo "$1: expected '$2', got '$3'"
        return 1
}
h_guest_data() {
        (cd "$share/guest-data" && sha256sum -c SHA256SUMS) || return 1
        expect "files in guest-data" 5 "$(ls "$share/guest-data" | wc -l)" || return 1
        expect "size of g1.bin" 6291456 "$(stat -c %s "$share/guest-data/g1.bin")" || return 1
        expect "size of g3.bin" 3145728 "$(stat -c %s "$share/guest-data/g3.bin")"
}
h_guest_dir() {
        expect "entries in guest-dir" 250 "$(ls "$share/guest-dir" | wc -l)" || return 1
        expect "content of g249" g249 "$(cat "$share/guest-dir/g249")"
}
h_guest_links() {
        local d=$share/guest-links
        expect "nlink of orig.txt" 2 "$(stat -c %h "$d/orig.txt")" || return 1
        expect "inode of hard.txt" "$(stat -c %i "$d/orig.txt")" "$(stat -c %i "$d/hard.txt")" || return 1
        expect "symlink" orig.txt "$(readlink "$d/sym.txt")" || return 1
        [ -L "$d/sym.txt" ] || return 1
        expect "mode of mode604.txt" 604 "$(stat -c %a "$d/mode604.txt")" || return 1
        [ ! -e "$d/to-rename.txt" ] || { echo "to-rename.txt still exists"; return 1; }
        expect "renamed.txt" renamed "$(cat "$d/renamed.txt")" || return 1
        expect "size of truncated.bin" 12345 "$(stat -c %s "$d/truncated.bin")"
}
h_host_data_intact() {
        (cd "$share/host-data" && sha256sum -c "$tmp/host-data.sums")
}
h_no_scratch() {
        [ ! -e "$share/scratch" ] || { ls -laR "$share/scratch"; return 1; }
}
h_reload() {
        expect "after-reload.txt" "written after the module reload" "$(cat "$share/state/after-reload.txt")"
}
h_reboot() {
        expect "boot 1 marker" 1 "$(cat "$share/state/boot1")" || return 1
        expect "boot 2 marker" 2 "$(cat "$share/state/boot2")" || return 1
        (cd "$share/after-reboot" && sha256sum -c SHA256SUMS)
}
h_owner() {
        # The guest runs as root; the files it created must not belong to anyone else.
        local bad
        # -print -quit stops find itself: a "find | head" pipeline would fail under pipefail when
        # head leaves early, hiding the message below.
        bad=$(find "$share/guest-data" "$share/guest-links" ! -uid 0 -print -quit)
        [ -z "$bad" ] || { echo "not owned by root (the first found): $bad"; return 1; }
}

hcheck "guest's multi-MB files match the guest's checksums" h_guest_data
hcheck "guest's directory with 250 entries" h_guest_dir
hcheck "guest's hard link, symlink, chmod, rename, truncate" h_guest_links
hcheck "host files unchanged" h_host_data_intact
hcheck "guest scratch directory removed" h_no_scratch
hcheck "file written after the virtiofs module reload" h_reload
hcheck "ownership of guest-created files" h_owner
[ $mode = single ] || hcheck "second boot ran against the same backend process" h_reboot

elapsed=$(echo "$(date +%s.%N) $t0" | awk '{ printf "%.1f", $1 - $2 }')
if [ $failures -ne 0 ]; then
        msg "FAIL: $failures host-side checks failed (${elapsed}s)"
        exit 1
fi
msg "PASS: backend $backend (${elapsed}s)"
