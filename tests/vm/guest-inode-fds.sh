#!/bin/sh
# Guest side of test-inode-fds.sh (busybox sh): on a directory share served with a budget of a few
# dozen inode fds, makes DIRS x FILES files with known contents, drops its caches, walks and reads
# every one back, renames a directory and reads it again, then removes the tree. $1 = mount point;
# VUFS_DIRS and VUFS_FILES (kernel command line vufs.dirs=, vufs.files=) the shape (default 30 x 100).
# shellcheck source=tests/vm/guest-checks.sh
. /scripts/guest-checks.sh
mnt=${1:-/mnt}
dirs=${VUFS_DIRS:-30}
files=${VUFS_FILES:-100}
total=$((dirs * files))
cd "$mnt" || exit 1

make_tree() {
        d=0
        while [ $d -lt "$dirs" ]; do
                mkdir "t/d$d" || return 1
                f=0
                while [ $f -lt "$files" ]; do
                        echo "file $d/$f" > "t/d$d/f$f" || return 1
                        f=$((f + 1))
                done
                d=$((d + 1))
        done
}

# read_back DIR D: every file of DIR holds "file D/F"; says which do not.
read_back() {
        bad=0
        f=0
        while [ $f -lt "$files" ]; do
                [ "$(cat "$1/f$f")" = "file $2/$f" ] || { echo "$1/f$f: '$(cat "$1/f$f" 2>&1)'"; bad=$((bad + 1)); }
                f=$((f + 1))
        done
        [ $bad -eq 0 ]
}

read_all() {
        d=0
        while [ $d -lt "$dirs" ]; do
                read_back "t/d$d" $d || return 1
                d=$((d + 1))
        done
}

drop() {
        sync
        echo 3 > /proc/sys/vm/drop_caches
}

mkdir t
check "made $total files" make_tree
drop
check "find lists them all" expect "files" "$total" "$(find t -type f | wc -l)"
ls -lR t > /tmp/ls.out 2>&1
check "ls -lR stats them all" expect "entries" "$total" "$(grep -c '^-' /tmp/ls.out)"
drop
check "every file reads back" read_all
check "rename a directory" mv t/d0 t/moved
drop
check "its files read back under the new name" read_back t/moved 0
check "rm -rf the tree" rm -rf t
check "the share is empty again" expect "entries" "0" "$(ls -A | wc -l)"
echo "INODEFDS: $n checks, $failures failed"
exit "$failures"
