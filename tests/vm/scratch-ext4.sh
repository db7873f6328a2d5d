# scratch-ext4.sh: a throwaway ext4 on a loop device for the benchmarks (sourced by bash, not run).
# shellcheck shell=bash
#
# Benchmarks that create and delete many files must not run on whatever file system the work
# directory happens to be: on an ext4 without a journal (a common VM image root) each create
# scans past every inode freed in the last minutes (ext4's recently_deleted()), so a cell measures
# the runs before it (docs/benchmarks.md, "Fourth round"). Used by tools/bench-report.sh and
# tests/vm/bench-meta.sh.

# scratch_ext4_mount IMG MNT SIZE [INODES]: makes a sparse image IMG of SIZE (truncate's syntax),
# puts mkfs.ext4's defaults on it (with a journal; INODES inodes if given) and mounts it on MNT.
# Inode tables and journal are written now, not by ext4lazyinit during the run, where they would
# be noise. Returns nonzero, with a message on stderr, if a step fails (no loop devices, say).
scratch_ext4_mount() {
        local img=$1 mnt=$2 size=$3 inodes=${4:-}
        mkdir -p "$mnt" || return 1
        truncate -s "$size" "$img" || return 1
        mkfs.ext4 -q -F ${inodes:+-N "$inodes"} -E lazy_itable_init=0,lazy_journal_init=0 "$img" >&2 || {
                echo "mkfs.ext4 of $img failed" >&2
                rm -f "$img"
                return 1
        }
        mount -o loop "$img" "$mnt" || {
                echo "mounting $img on a loop device failed (are there loop devices here?)" >&2
                rm -f "$img"
                return 1
        }
}

# scratch_ext4_remove IMG MNT: unmounts MNT (lazily if something still holds it) and deletes IMG.
# Safe to call twice, or when scratch_ext4_mount failed half way.
scratch_ext4_remove() {
        local img=$1 mnt=$2
        if mountpoint -q "$mnt" 2>/dev/null; then
                umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
        fi
        rm -f "$img"
}
