#!/bin/sh
# Guest side of huge-tree.sh (busybox sh): walks the share's tree, timing each walk.
# $1 = mount point. Each step prints "HUGE: NAME seconds S lines N errors E" (N lines of output, E
# lines of errors, e.g. "Too many open files" when the backend runs out of fds) and the first
# errors as "HUGE-ERR:" lines. The host judges the numbers; the script fails only if it cannot run.
mnt=${1:-/mnt}
cd "$mnt" || exit 1

now() { cut -d' ' -f1 /proc/uptime; }
step() {
        name=$1
        shift
        s=$(now)
        "$@" > /tmp/huge.out 2> /tmp/huge.err
        e=$(now)
        echo "HUGE: $name seconds $(echo "$s $e" | awk '{ printf "%.1f", $2 - $1 }') lines $(wc -l < /tmp/huge.out) errors $(wc -l < /tmp/huge.err)"
        head -n 3 /tmp/huge.err | sed 's/^/HUGE-ERR: /'
}

# Every name (LOOKUP of each, READDIRPLUS), then a stat of each (ls -l: GETATTR where the
# attributes timed out), then the same after dropping the guest's dentry and inode caches (the
# guest FORGETs what it dropped and looks everything up again).
step find1 find .
step stat1 ls -lR .
sync
echo 3 > /proc/sys/vm/drop_caches
step find2 find .
step stat2 ls -lR .
exit 0
