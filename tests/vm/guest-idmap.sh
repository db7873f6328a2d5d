#!/bin/sh
# Guest side of test-guest-idmap.sh (busybox sh, as guest root): ownership through
# --translate-uid/--translate-gid. The host serves the share with guest root squashed onto host
# 1234:5000 (shown back as 0:0), gids 0..99 as host 5000..5099, guest uid 70000 forbidden; it
# prepared host-owned (7777:5050). This script creates files, directories, symlinks, hard links,
# a fifo and a set-group-id directory, checks what the guest sees, and leaves them for the host to
# check. Prints "CHECK ok N"/"CHECK FAIL N"; the exit status is the number of failures.
# shellcheck disable=SC2317 # the check functions are called through check()
# shellcheck disable=SC2016,SC2317 # sh -c bodies expand in the shell they start; checks run via check()
mnt=${1:-/mnt}
cd "$mnt" || exit 1
# shellcheck source=tests/vm/guest-checks.sh
. "$(dirname "$0")/guest-checks.sh" || { echo "CHECK FAIL 0: guest-checks.sh missing"; exit 1; }
owner_is() { # PATH "UID GID"
        got=$(stat -c '%u %g' "$1") || return 1
        [ "$got" = "$2" ] || { echo "$1: expected owner '$2', got '$got'"; return 1; }
}
fails() { ! "$@"; }

check "host file owned 7777:5050 shows as 7777:50" owner_is host-owned "7777 50"
check "mkdir as root" mkdir d
check "new directory shows as 0:0" owner_is d "0 0"
check "create a file" sh -c 'echo data > d/f'
check "new file shows as 0:0" owner_is d/f "0 0"
check "symlink" ln -s f d/sym
check "symlink shows as 0:0" owner_is d/sym "0 0"
check "a second file and a hard link to it" sh -c 'echo more > d/g && ln d/g d/hard'
check "fifo" mkfifo d/fifo
check "fifo shows as 0:0" owner_is d/fifo "0 0"
check "chown to mapped 20:30" chown 20:30 d/f
check "chown 20:30 shows as 0:30 (uid squashed, gid mapped)" owner_is d/f "0 30"
check "chown to unmapped 66000:200 (through the hard link)" chown 66000:200 d/hard
check "chown 66000:200 shows unchanged" owner_is d/g "66000 200"
check "chown to forbidden 70000 fails" fails chown 70000 d/fifo
check "and changed nothing" owner_is d/fifo "0 0"
check "set-group-id directory of group 30" sh -c 'mkdir d/sg && chgrp 30 d/sg && chmod 2775 d/sg'
check "entry in it takes group 30" sh -c 'mkdir d/sg/in && [ "$(stat -c %g d/sg/in)" = 30 ]'
check "the caches agree after a drop" sh -c 'sync; echo 3 > /proc/sys/vm/drop_caches; [ "$(stat -c "%u %g" d/f)" = "0 30" ]'
sync
echo "CHECKS: $n run, $failures failed"
exit "$failures"
