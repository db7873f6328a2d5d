#!/bin/sh
# Guest side of test-userns.sh (busybox sh): the share is served by vufsd running as an
# unprivileged host user with --uid-map/--gid-map=:0:BASE:65536: (docs/id-mapping.md). Guest root
# and guest users make files, directories, symlinks, a set-gid directory and hard links (the host
# checks their owners afterwards); pjdfstest-style ownership checks; the unmapped cases must answer
# EPERM ("Operation not permitted"), never EINVAL.
# $1 = mount point. Every check prints "CHECK ok N: ..." or "CHECK FAIL N: ..."; the exit status is
# the number of failures.
# shellcheck disable=SC2317 # check functions are called through check()

mnt=${1:-/mnt}
cd / || exit 1

# shellcheck source=tests/vm/guest-checks.sh
. "$(dirname "$0")/guest-checks.sh" || { echo "CHECK FAIL 0: guest-checks.sh missing"; exit 1; }

# Users of the guest: 1000 (groups 1000 and 2000), 3000 whose primary group 70000 is outside the
# map, and 70000 (outside the map).
cat >> /etc/passwd <<EOF
root:x:0:0:root:/:/bin/sh
u1000:x:1000:1000::/tmp:/bin/sh
u3000:x:3000:70000::/tmp:/bin/sh
u70000:x:70000:1000::/tmp:/bin/sh
EOF
cat >> /etc/group <<EOF
root:x:0:
g1000:x:1000:u1000
g2000:x:2000:u1000
g70000:x:70000:
EOF

as() {
        user=$1
        shift
        su -s /bin/sh -c "$*" "$user"
}

# "Operation not permitted" from CMD (and it failed).
eperm() {
        if "$@" > /tmp/eperm.out 2>&1; then
                echo "succeeded: $*"
                return 1
        fi
        grep -q "Operation not permitted" /tmp/eperm.out && return 0
        echo "not EPERM: $(cat /tmp/eperm.out)"
        return 1
}

owner() { stat -c '%u:%g' "$1"; }

d=$mnt/userns
mkdir -p "$d" && chmod 1777 "$d" || exit 1

# --- guest root ---
t_root_file() { echo root > "$d/root-file" && expect owner 0:0 "$(owner "$d/root-file")"; }
t_root_dir() { mkdir "$d/root-dir" && expect owner 0:0 "$(owner "$d/root-dir")"; }
t_root_link() { ln -s root-file "$d/root-link" && expect owner 0:0 "$(stat -c '%u:%g' "$d/root-link")"; }
check "guest root creates a file" t_root_file
check "guest root creates a directory" t_root_dir
check "guest root creates a symlink" t_root_link

# --- guest user 1000 ---
t_user_file() { as u1000 "echo user > $d/user-file" && expect owner 1000:1000 "$(owner "$d/user-file")"; }
t_user_dir() { as u1000 "mkdir $d/user-dir" && expect owner 1000:1000 "$(owner "$d/user-dir")"; }
t_user_link() { as u1000 "ln -s user-file $d/user-link" && expect owner 1000:1000 "$(stat -c '%u:%g' "$d/user-link")"; }
t_user_hard() {
        as u1000 "ln $d/user-file $d/user-hard" && expect nlink 2 "$(stat -c %h "$d/user-file")" &&
                expect owner 1000:1000 "$(owner "$d/user-hard")"
}
check "guest user 1000 creates a file" t_user_file
check "guest user 1000 creates a directory" t_user_dir
check "guest user 1000 creates a symlink" t_user_link
check "guest user 1000 makes a hard link" t_user_hard

# --- a set-gid directory of group 2000 ---
t_sgid() {
        mkdir "$d/sgid" && chown 0:2000 "$d/sgid" && chmod 2777 "$d/sgid" &&
                as u1000 "echo x > $d/sgid/in-sgid && mkdir $d/sgid/sub" &&
                expect owner 1000:2000 "$(owner "$d/sgid/in-sgid")" &&
                expect owner 1000:2000 "$(owner "$d/sgid/sub")" &&
                expect "sub mode" drwxr-sr-x "$(stat -c %A "$d/sgid/sub")"
}
check "a set-gid directory gives its group, and the bit to subdirectories" t_sgid

# --- pjdfstest-style ownership (chown/00.t's cases that the map allows) ---
t_chown_root() {
        echo x > "$d/chown-me" && chown 1000:2000 "$d/chown-me" && expect owner 1000:2000 "$(owner "$d/chown-me")"
}
t_chown_back() { chown 0:0 "$d/chown-me" && chown 1000:1000 "$d/chown-me" && expect owner 1000:1000 "$(owner "$d/chown-me")"; }
t_chgrp_member() { as u1000 "chgrp 2000 $d/chown-me" && expect owner 1000:2000 "$(owner "$d/chown-me")"; }
t_chown_other() { eperm as u1000 "chown 3000 $d/chown-me"; }
t_chgrp_nonmember() { eperm as u1000 "chgrp 0 $d/chown-me"; }
check "root chowns within the map" t_chown_root
check "root chowns back and again" t_chown_back
check "the owner chgrps to a group of its own" t_chgrp_member
check "the owner may not give a file away (EPERM)" t_chown_other
check "the owner may not chgrp to a group it is not in (EPERM)" t_chgrp_nonmember

# --- the unmapped cases: EPERM ---
t_unmapped_chown() { eperm chown 70000 "$d/chown-me"; }
t_unmapped_chgrp() { eperm chgrp 70000 "$d/chown-me"; }
t_unmapped_uid_create() { eperm as u70000 "echo x > $d/by-70000"; }
t_unmapped_uid_mkdir() { eperm as u70000 "mkdir $d/dir-70000"; }
t_unmapped_gid_create() { eperm as u3000 "echo x > $d/by-3000"; }
t_unmapped_gid_symlink() { eperm as u3000 "ln -s x $d/link-3000"; }
t_unmapped_nothing_left() {
        for f in by-70000 dir-70000 by-3000 link-3000; do
                if [ -e "$d/$f" ] || [ -L "$d/$f" ]; then
                        echo "$f exists"
                        return 1
                fi
        done
}
check "chown to an unmapped uid: EPERM" t_unmapped_chown
check "chgrp to an unmapped gid: EPERM" t_unmapped_chgrp
check "an unmapped uid creates a file: EPERM" t_unmapped_uid_create
check "an unmapped uid makes a directory: EPERM" t_unmapped_uid_mkdir
check "a mapped uid with an unmapped gid creates a file: EPERM" t_unmapped_gid_create
check "a mapped uid with an unmapped gid makes a symlink: EPERM" t_unmapped_gid_symlink
check "nothing was created by the refused requests" t_unmapped_nothing_left

sync
echo "userns checks: $n, failures: $failures"
exit "$failures"
