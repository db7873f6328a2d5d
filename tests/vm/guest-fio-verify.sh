#!/bin/sh
# Guest side of test-guest-fio-switch.sh (busybox sh): fio with --verify on the virtiofs mount.
# $1 = mount point. The initramfs carries fio and its libraries (mkinitramfs.sh --extra-dyn).
#
# Each round writes new files with several fio jobs in parallel and reads every block back through
# fio's verification (crc32c headers and checksums), then drops the guest's caches and checks every
# block once more with a verify_only run, so that the second read comes from the host:
#   window "any"      psync 128 KiB sequential (buffered, fsync at the end), psync 4 KiB random
#                     (O_DIRECT), libaio 4 KiB random (O_DIRECT, iodepth 16), libaio 128 KiB
#                     sequential (O_DIRECT, iodepth 8): 4 jobs at once
#   window "mappable" mmap 4 KiB random, mmap 128 KiB sequential, psync 4 KiB random (buffered,
#                     fsync every 32 writes): 3 jobs at once
# Cache policies never and metadata open files with FOPEN_DIRECT_IO, which a Linux 6.1 guest cannot
# map shared (ENODEV, docs/conformance.md): the host keeps to auto and always during "mappable".
#
# Parameters (kernel command line vufs.KEY=VALUE, seen as VUFS_KEY):
#   vufs.fio_rounds=N   rounds (default 1); each round writes new data (another random seed)
#   vufs.fio_sync=1     before each window print "VUFS-FIO-SYNC: NAME" and wait for the host to
#                       create fio-sync/NAME on the share (it adapts its switching, then answers);
#                       at the end the same for "done" (the host reads the statistics meanwhile)
# Prints "CHECK ok N: ..." / "CHECK FAIL N: ..." per fio run, "VUFS-FIO-TOTAL: ..." with the sums,
# and "CHECKS: N run, F failed"; the exit status is the number of failures.
# shellcheck disable=SC2317 # the job lists are called through job_file ("jobs_$1")

mnt=${1:-/mnt}
cd / || exit 1
# shellcheck source=tests/vm/guest-checks.sh
. "$(dirname "$0")/guest-checks.sh" || { echo "CHECK FAIL 0: guest-checks.sh missing"; exit 1; }
rounds=${VUFS_FIO_ROUNDS:-1}
total_ios=0
total_written=0
total_verified=0

# Waits until the host answers the sync point $1 (only with vufs.fio_sync=1).
sync_point() {
        [ "${VUFS_FIO_SYNC:-0}" = 1 ] || return 0
        echo "VUFS-FIO-SYNC: $1"
        tries=0
        while [ ! -e "$mnt/fio-sync/$1" ]; do
                tries=$((tries + 1))
                if [ $tries -gt 1800 ]; then
                        n=$((n + 1))
                        fail "the host did not answer sync point $1 within 180 s"
                        return 1
                fi
                # The lookup must reach the host: forget the negative dentry a cached policy keeps.
                echo 2 > /proc/sys/vm/drop_caches
                usleep 100000
        done
}

# One job section: NAME ENGINE RW BS SIZE [more fio options...]
job() {
        name=$1 engine=$2 rw=$3 bs=$4 size=$5
        shift 5
        printf '[%s]\nioengine=%s\nrw=%s\nbs=%s\nsize=%s\nfilename=%s.dat\n' "$name" "$engine" "$rw" "$bs" "$size" "$name"
        for o in "$@"; do
                echo "$o"
        done
}

jobs_any() {
        job seq-psync-128k psync write 128k 32m end_fsync=1
        job rand-psync-4k psync randwrite 4k 8m direct=1
        job rand-libaio-4k libaio randwrite 4k 16m direct=1 iodepth=16 iodepth_batch_complete_min=1
        job seq-libaio-128k libaio write 128k 32m direct=1 iodepth=8
}

jobs_mappable() {
        job rand-mmap-4k mmap randwrite 4k 16m
        job seq-mmap-128k mmap write 128k 16m
        job rand-psync-4k-fsync psync randwrite 4k 8m fsync=32
}

# Writes the job file: WINDOW DIR SEED
job_file() {
        printf '[global]\ndirectory=%s\nthread\nverify=crc32c\ndo_verify=1\nverify_state_save=0\n' "$2"
        printf 'randrepeat=1\nrandseed=%s\nfallocate=native\n' "$3"
        "jobs_$1"
}

# window NAME NJOBS ROUND: one write+verify run and one verify_only run after dropping caches.
window() {
        dir=$mnt/fio/r$3-$1
        mkdir -p "$dir" || { n=$((n + 1)); fail "mkdir $dir"; return; }
        job_file "$1" "$dir" $((4242 + $3)) > "/tmp/$1.fio"
        run_fio "round $3 $1 write+verify" "/tmp/$1.fio" "$2" write
        drop_caches
        run_fio "round $3 $1 verify_only" "/tmp/$1.fio" "$2" verify --verify_only
        rm -rf "$dir" || { n=$((n + 1)); fail "rm -rf $dir"; }
}

command -v fio > /dev/null || { echo "CHECK FAIL 0: fio is not in the initramfs"; exit 1; }
echo "VUFS-FIO: $(fio --version), $rounds round(s), $(grep -c ^processor /proc/cpuinfo) CPUs"
round=1
while [ $round -le "$rounds" ]; do
        sync_point "any.$round" && window any 4 $round
        sync_point "mappable.$round" && window mappable 3 $round
        round=$((round + 1))
done
rmdir "$mnt/fio" 2>/dev/null
echo "VUFS-FIO-TOTAL: ios=$total_ios written=$total_written verified=$total_verified failures=$failures"
sync_point "done"
echo "CHECKS: $n run, $failures failed"
exit $failures
