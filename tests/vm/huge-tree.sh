#!/bin/bash
# huge-tree.sh: a real guest (QEMU, TCG) walks a tree of DIRS x FILES files (default 2,000 x 100 =
# 200,000) served by vufsd with --inode-file-handles=prefer, mandatory and never, and by QEMU's C
# virtiofsd, one after the other on the same tree (issue 16); and by vufsd with its defaults on the
# same shape of tree in a plain directory of DIR's file system, where no handles are used (issue
# 34). The guest times find and ls -lR, then both again after dropping its caches
# (guest-huge-tree.sh); the host samples the serving process's open fds (/proc/PID/fd) and RSS
# every 0.2 s.
#
# Usage: huge-tree.sh [--dirs N] [--files N] [--backends LIST] [--dir DIR] [--out FILE]
#   --backends LIST  comma separated: prefer, mandatory, never, dir, virtiofsd (default all five)
#   --dir DIR        where the trees live (default /var/tmp/vufs-huge): an ext4 image DIR/tree.img
#                    loop-mounted on DIR/tree, its own filesystem so that handles are allowed, and
#                    the directory DIR/dirtree (backend dir); kept between runs (rebuilt when
#                    DIRS/FILES change)
#   --out FILE       the markdown table (default: stdout only)
#   --timeout S      per guest run (default 1800)
# Needs root (mount, loop device), QEMU and a kernel (tests/vm/common.sh). Exit status 0 when every
# vufsd run served the guest, exited cleanly and saw every file; the handle modes within 1,000
# fds, never and dir (O_PATH fds, at most --max-inode-fds of them cached) within the default
# cache of 16,384 fds plus 1,000.

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"

msg() { echo "huge-tree: $*" >&2; }
die() { msg "error: $*"; exit 2; }

dirs=2000
files=100
backends=prefer,mandatory,never,dir,virtiofsd
base=/var/tmp/vufs-huge
out=
timeout_s=1800
vufsd=${VUFSD_BINARY:-$top/build/daemon/vufsd}

while [ $# -gt 0 ]; do
        case "$1" in
        --dirs) dirs=${2:?}; shift 2 ;;
        --files) files=${2:?}; shift 2 ;;
        --backends) backends=${2:?}; shift 2 ;;
        --dir) base=${2:?}; shift 2 ;;
        --out) out=${2:?}; shift 2 ;;
        --timeout) timeout_s=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
        esac
done

vm_require_prerequisites huge-tree mkfs.ext4 losetup
[ "$(id -u)" = 0 ] || die "run as root (loop mount, sandboxed daemons)"
[ -x "$vufsd" ] || die "vufsd not found at $vufsd (set VUFSD_BINARY)"

# make_tree DIR: DIRS directories of FILES empty files in DIR, and DIR/.shape.
make_tree() {
        msg "creating $dirs x $files files in $1"
        for ((d = 0; d < dirs; d++)); do
                mkdir "$1/d$d"
                (cd "$1/d$d" && eval "touch f{0..$((files - 1))}")
        done
        echo "$dirs x $files" > "$1/.shape"
}

tree=$base/tree
mkdir -p "$base" "$tree"
if ! mountpoint -q "$tree" || [ "$(cat "$tree/.shape" 2>/dev/null)" != "$dirs x $files" ]; then
        mountpoint -q "$tree" && umount "$tree"
        rm -f "$base/tree.img"
        # ext4 with inodes to spare; the tree is its own filesystem (handles need that, security.md).
        truncate -s $(((dirs * files / 1000 + 64) * 4))M "$base/tree.img"
        mkfs.ext4 -q -F -N $((dirs * files + dirs + 1000)) -E lazy_itable_init=0 "$base/tree.img"
        mount -o loop "$base/tree.img" "$tree"
        rmdir "$tree/lost+found" 2>/dev/null || true
        make_tree "$tree"
fi
entries=$(find "$tree" | wc -l) # what the guest's find lists: files, directories, "." and .shape
# The same shape in a directory of DIR's file system (backend dir): a directory share.
dirtree=$base/dirtree
if [[ ",$backends," == *,dir,* ]] && [ "$(cat "$dirtree/.shape" 2>/dev/null)" != "$dirs x $files" ]; then
        rm -rf "$dirtree"
        mkdir -p "$dirtree"
        make_tree "$dirtree"
fi

work=$(mktemp -d "${TMPDIR:-/var/tmp}/vufs-huge-run.XXXXXX")
sampler=
cleanup() {
        [ -z "$sampler" ] || kill "$sampler" 2>/dev/null || true
        rm -rf "$work"
}
trap cleanup EXIT

status=0
rows=()
IFS=, read -r -a list <<< "$backends"
for b in "${list[@]}"; do
        sock=$work/$b.sock
        samples=$work/$b.samples
        log=$work/$b.console
        blog=$work/$b.backend
        : > "$samples"
        share=$tree
        case "$b" in
        prefer|mandatory|never)
                backend=(--backend "vufsd:$vufsd")
                export VUFSD_EXTRA_ARGS="--inode-file-handles=$b --bus=none --log-level=notice"
                ;;
        dir)
                backend=(--backend "vufsd:$vufsd")
                export VUFSD_EXTRA_ARGS="--bus=none --log-level=notice"
                share=$dirtree
                ;;
        virtiofsd) backend=(--backend virtiofsd) ;;
        *) die "unknown backend $b" ;;
        esac
        vm_sample_server "$sock" "$samples" &
        sampler=$!
        msg "$b: guest walks $entries entries"
        rc=0
        "$here/run-guest.sh" "${backend[@]}" --share "$share" --socket "$sock" --script guest-huge-tree.sh \
                --memory 2G --timeout "$timeout_s" --log "$log" --backend-log "$blog" --quiet || rc=$?
        kill "$sampler" 2>/dev/null || true
        wait "$sampler" 2>/dev/null || true
        sampler=
        unset VUFSD_EXTRA_ARGS
        base_fds=$(head -n 1 "$samples" | cut -d' ' -f1)
        # before the guest looked anything up (a sample read while the process starts may be 0)
        base_rss=$(awk '$2 > 0' "$samples" | sort -n -k2 | head -n 1 | cut -d' ' -f2)
        max_fds=$(sort -n -k1 "$samples" | tail -n 1 | cut -d' ' -f1)
        max_rss=$(sort -n -k2 "$samples" | tail -n 1 | cut -d' ' -f2)
        step() { # NAME FIELD: a field of the guest's HUGE line for step NAME
                tr -d '\r' < "$log" | awk -v s="$1" -v f="$2" '$1 == "HUGE:" && $2 == s { for (i = 3; i < NF; i++) if ($i == f) print $(i + 1) }'
        }
        f1=$(step find1 lines) e1=$(step find1 errors)
        # Inodes the daemon remembers at the end of the first walk: every entry with handles, and
        # with O_PATH fds (which it keeps for some only); for virtiofsd one fd each, so the fds it
        # gained.
        case "$b" in
        prefer|mandatory|never|dir) inodes=${f1:-0} ;;
        *) inodes=$((${max_fds:-0} - ${base_fds:-0})) ;;
        esac
        per100k=$(awk -v a="${base_rss:-0}" -v b="${max_rss:-0}" -v n="$inodes" \
                'BEGIN { if (n > 0) printf "%.1f", (b - a) / 1024 * 100000 / n; else print "-" }')
        rows+=("| $b | ${max_fds:-?} (${base_fds:-?} idle) | $(step find1 seconds) s, ${f1:-?} listed, ${e1:-?} errors | $(step stat1 seconds) s, $(step stat1 errors) errors | $(step find2 seconds) s, $(step find2 errors) errors | $(step stat2 seconds) s | ${max_rss:-?} kB (${per100k} MiB / 100k inodes) | $rc |")
        msg "$b: exit $rc, max fds $max_fds, max RSS $max_rss kB; guest: $(tr -d '\r' < "$log" | grep -a '^HUGE' | paste -sd';')"
        grep -a 'HUGE-ERR' "$log" | head -n 3 | sed 's/^/huge-tree:   /' >&2 || true
        case "$b" in
        prefer|mandatory)
                [ "$rc" = 0 ] && [ "${f1:-0}" -ge "$entries" ] && [ "${e1:-1}" = 0 ] || {
                        msg "FAIL: $b: exit $rc, $f1 of $entries entries listed, $e1 errors"
                        status=1
                }
                # The bound: fds stay under 1,000 whatever the tree (the guest holds nothing open).
                [ "${max_fds:-99999}" -lt 1000 ] || { msg "FAIL: $b held $max_fds fds"; status=1; }
                ;;
        never|dir)
                # O_PATH fds, at most the default --max-inode-fds (16,384) of them cached: the walk
                # sees every file whatever the fd limit (issue 34; before, it ran out at the limit).
                [ "$rc" = 0 ] && [ "${f1:-0}" -ge "$entries" ] && [ "${e1:-1}" = 0 ] || {
                        msg "FAIL: $b: exit $rc, $f1 of $entries entries listed, $e1 errors"
                        tail -n 20 "$blog" >&2
                        status=1
                }
                [ "${max_fds:-99999}" -lt 17384 ] || { msg "FAIL: $b held $max_fds fds"; status=1; }
                ;;
        esac
done

{
        echo "| backend | max fds of the server | walk 1: find | walk 1: ls -lR | after drop_caches: find | ls -lR | max anonymous RSS | run |"
        echo "|---|---|---|---|---|---|---|---|"
        printf '%s\n' "${rows[@]}"
} | tee ${out:+"$out"}
exit $status
