#!/bin/sh
# Guest side of test-guest-survive.sh (busybox sh): the workload that runs while the host kills or
# upgrades vufsd's serving process (docs/survival.md), all at once:
#   tree    extracts a source tree from /etc/vufs/tree.tar into the share and checks it against
#           the archive (every name, and every file's SHA-256 made on the host from the archive),
#           then removes it; repeated
#   fio     fio with verification (crc32c) on two files in the share (buffered psync and O_DIRECT
#           libaio), then once more from the host after dropping the guest's caches; repeated
#   locks   one process holds a POSIX lock (F_SETLK) and one an OFD lock (F_OFD_SETLK) on files in
#           the share for the whole run; a third opens them anew every 100 ms and asks whether a
#           write lock could be taken (F_GETLK, F_OFD_GETLK): each answer must be "held"
# Every step has a guest-side timeout; at the end every guest process must have exited (none hung)
# with status 0, and the lock holders must release their locks and close their files cleanly.
# $1 = mount point. Prints "VUFS-SURVIVE-START" once everything runs, one
# "VUFS-SURVIVE-ROUND tree|fio N ok|FAIL" per round, "VUFS-SURVIVE-PROC NAME exit N" (or "hung") per
# process, and "VUFS-SURVIVE: ..." with the totals; exits with the number of failures.
#
# The workload runs until the host creates "survive-stop" in the share (the host has done its
# kills or upgrades and seen a round of each), at most vufs.max_seconds (default 900); the rounds
# in progress then finish.
# Parameters (kernel command line vufs.KEY=VALUE): step_timeout (seconds per step, default 240),
# fio_size (per fio file, default 8m).
# shellcheck disable=SC2317 # the rounds are called through worker ("$1_round")

mnt=${1:-/mnt}
cd / || exit 1
# shellcheck source=tests/vm/guest-checks.sh
. "$(dirname "$0")/guest-checks.sh" || { echo "CHECK FAIL 0: guest-checks.sh missing"; exit 1; }

max_seconds=${VUFS_MAX_SECONDS:-900}
step=${VUFS_STEP_TIMEOUT:-240}
fio_size=${VUFS_FIO_SIZE:-8m}
tree_tar=/etc/vufs/tree.tar
tree_names=/etc/vufs/tree.names
tree_sums=/etc/vufs/tree.sha256
locks=/usr/bin/vufs-guest-locks
work=$mnt/survive
stop_share=$mnt/survive-stop
# Local files (outside the share) that end the workers, the probe and the holders in turn.
stop_workers=/tmp/stop-workers
stop_probe=/tmp/stop-probe
stop_locks=/tmp/stop-locks

for f in "$tree_tar" "$tree_names" "$tree_sums" "$locks"; do
        [ -e "$f" ] || { echo "VUFS-SURVIVE: $f is not in the initramfs"; exit 100; }
done
command -v fio > /dev/null || { echo "VUFS-SURVIVE: fio is not in the initramfs"; exit 100; }
mkdir -p "$work" || { echo "VUFS-SURVIVE: mkdir $work failed"; exit 100; }

# tree_round N: one extraction and check; its failures are counted by fail().
tree_round() {
        d=$work/tree.$1
        before=$failures
        n=$((n + 1))
        if ! timeout "$step" mkdir "$d" 2> /tmp/tree.err; then
                fail "tree round $1: mkdir: $(tr '\n' ' ' < /tmp/tree.err)"
                return
        fi
        timeout "$step" tar -x -f "$tree_tar" -C "$d" 2> /tmp/tree.err
        rc=$?
        [ "$rc" -eq 0 ] || fail "tree round $1: tar -x exited $rc: $(head -n 5 /tmp/tree.err | tr '\n' ' ')"
        # Every name the archive holds and nothing else.
        timeout "$step" find "$d" > /tmp/tree.found 2> /tmp/tree.err
        rc=$?
        [ "$rc" -eq 0 ] || fail "tree round $1: find exited $rc: $(head -n 5 /tmp/tree.err | tr '\n' ' ')"
        sed "s|^$d|.|" /tmp/tree.found | LC_ALL=C sort > /tmp/tree.got
        cmp -s "$tree_names" /tmp/tree.got ||
                fail "tree round $1: names differ from the archive's: $(diff "$tree_names" /tmp/tree.got |
                        grep '^[-+][^-+]' | head -n 5 | tr '\n' ' ')"
        # Every file's contents, by absolute path (no working directory in the share).
        sed "s|  \./|  $d/|" "$tree_sums" > /tmp/tree.sums
        timeout "$step" sha256sum -c /tmp/tree.sums > /tmp/tree.check 2>&1
        rc=$?
        [ "$rc" -eq 0 ] || fail "tree round $1: sha256sum -c exited $rc: $(grep -v ': OK$' /tmp/tree.check |
                head -n 5 | tr '\n' ' ')"
        timeout "$step" rm -rf "$d" 2> /tmp/tree.err || fail "tree round $1: rm -rf: $(head -n 5 /tmp/tree.err | tr '\n' ' ')"
        if [ "$failures" -eq "$before" ]; then
                echo "CHECK ok $n: tree round $1: $(wc -l < "$tree_names") names extracted, $(wc -l < "$tree_sums") files verified"
                echo "VUFS-SURVIVE-ROUND tree $1 ok"
        else
                echo "VUFS-SURVIVE-ROUND tree $1 FAIL"
        fi
}

# fio_round N: two files written with verification, then verified again from the host.
fio_round() {
        dir=$work/fio.$1
        before=$failures
        if ! timeout "$step" mkdir "$dir"; then
                n=$((n + 1))
                fail "fio round $1: mkdir $dir"
                echo "VUFS-SURVIVE-ROUND fio $1 FAIL"
                return
        fi
        {
                printf '[global]\ndirectory=%s\nthread\nverify=crc32c\ndo_verify=1\nverify_state_save=0\n' "$dir"
                printf 'randrepeat=1\nrandseed=%s\nsize=%s\nbs=4k\nrw=randwrite\n' $((4242 + $1)) "$fio_size"
                printf '[buffered-psync]\nioengine=psync\nfilename=buffered.dat\nfsync=32\n'
                printf '[direct-libaio]\nioengine=libaio\nfilename=direct.dat\ndirect=1\niodepth=8\n'
        } > /tmp/survive.fio
        FIO_TIMEOUT=$step run_fio "fio round $1 write+verify" /tmp/survive.fio 2 write
        drop_caches
        FIO_TIMEOUT=$step run_fio "fio round $1 verify_only" /tmp/survive.fio 2 verify --verify_only
        if ! timeout "$step" rm -rf "$dir"; then
                n=$((n + 1))
                fail "fio round $1: rm -rf $dir"
        fi
        if [ "$failures" -eq "$before" ]; then
                echo "VUFS-SURVIVE-ROUND fio $1 ok"
        else
                echo "VUFS-SURVIVE-ROUND fio $1 FAIL"
        fi
}

# worker NAME: rounds of NAME_round until $stop_workers exists (at least one); exits with its
# failures and leaves "ROUNDS FAILURES" in /tmp/NAME.rounds.
worker() {
        r=0
        while [ $r -eq 0 ] || [ ! -e "$stop_workers" ]; do
                r=$((r + 1))
                "$1_round" $r
                echo "$r $failures" > "/tmp/$1.rounds"
        done
        [ "$failures" -lt 255 ] || failures=255
        exit "$failures"
}

# wait_for PID SECONDS: 0 once PID has exited, 1 if it still runs after SECONDS.
wait_for() {
        t=0
        while kill -0 "$1" 2> /dev/null; do
                # A zombie has exited: it is reaped by `wait` below.
                [ "$(sed 's/.*) //' "/proc/$1/stat" 2> /dev/null | cut -d' ' -f1)" = Z ] && return 0
                t=$((t + 1))
                [ $t -le $(($2 * 10)) ] || return 1
                usleep 100000
        done
        return 0
}

# finish NAME PID SECONDS: waits for one process; counts a hang or a failed exit.
hung=0
procs_failed=0
finish() {
        if ! wait_for "$2" "$3"; then
                hung=$((hung + 1))
                echo "VUFS-SURVIVE-PROC $1 hung (still running ${3}s after it was told to stop)"
                return
        fi
        wait "$2"
        rc=$?
        echo "VUFS-SURVIVE-PROC $1 exit $rc"
        [ $rc -eq 0 ] || procs_failed=$((procs_failed + 1))
}

# The locks first: held before anything else runs, probed from then on.
rm -f "$stop_workers" "$stop_probe" "$stop_locks"
"$locks" hold posix "$work/posix.lock" "$stop_locks" > /tmp/hold-posix.out 2>&1 &
hold_posix=$!
"$locks" hold ofd "$work/ofd.lock" "$stop_locks" > /tmp/hold-ofd.out 2>&1 &
hold_ofd=$!
t=0
until grep -q '^held' /tmp/hold-posix.out && grep -q '^held' /tmp/hold-ofd.out; do
        t=$((t + 1))
        if [ $t -gt 600 ]; then
                echo "VUFS-SURVIVE: the locks were not taken within 60 s:"
                cat /tmp/hold-posix.out /tmp/hold-ofd.out
                exit 100
        fi
        usleep 100000
done
"$locks" probe "$work/posix.lock" "$work/ofd.lock" "$stop_probe" 100 > /tmp/probe.out 2>&1 &
probe=$!
worker tree &
tree=$!
worker fio &
fio=$!
echo "VUFS-SURVIVE-START: locks held, probe, tree and fio running"

# Until the host says stop.
t0=$(date +%s)
stopped=0
while [ $(($(date +%s) - t0)) -lt "$max_seconds" ]; do
        # vufsd lets the guest cache a negative entry for 1 s: the lookup reaches the host again.
        if [ -e "$stop_share" ]; then
                stopped=1
                break
        fi
        sleep 1
done
[ $stopped -eq 1 ] || { n=$((n + 1)); fail "the host did not say stop within ${max_seconds}s"; }

# The workers end their round, then the probe, then the holders (who release their locks).
touch "$stop_workers"
finish tree $tree $((step * 5))
finish fio $fio $((step * 4))
touch "$stop_probe"
finish probe $probe 60
touch "$stop_locks"
finish hold-posix $hold_posix 60
finish hold-ofd $hold_ofd 60
cat /tmp/hold-posix.out /tmp/hold-ofd.out /tmp/probe.out | sed 's/^/VUFS-SURVIVE-LOCKS: /'

tree_rounds=0 tree_failures=0 fio_rounds=0 fio_failures=0
[ ! -f /tmp/tree.rounds ] || read -r tree_rounds tree_failures < /tmp/tree.rounds
[ ! -f /tmp/fio.rounds ] || read -r fio_rounds fio_failures < /tmp/fio.rounds
[ "$tree_rounds" -gt 0 ] || { n=$((n + 1)); fail "no tree round finished"; }
[ "$fio_rounds" -gt 0 ] || { n=$((n + 1)); fail "no fio round finished"; }
timeout "$step" rm -rf "$work" || { n=$((n + 1)); fail "rm -rf $work"; }

# The workers' failures are in their exit status (failed_processes).
err=$((failures + hung + procs_failed))
echo "VUFS-SURVIVE: tree_rounds=$tree_rounds tree_failures=$tree_failures fio_rounds=$fio_rounds" \
        "fio_failures=$fio_failures $(sed -n 's/^probe: //p' /tmp/probe.out | tr ',' ';')" \
        "hung=$hung failed_processes=$procs_failed err=$err"
[ "$err" -lt 255 ] || err=255
exit "$err"
