#!/bin/sh
# Guest side of test-guest.sh (busybox sh): file operations and data integrity on the virtiofs mount.
# $1 = mount point. The host prepared host-data/ (files + SHA256SUMS), host-dir/ and host-links/ and
# test.conf; this script checks them, leaves guest-data/, guest-dir/ and guest-links/ for the host to
# check, and exercises a module reload (second FUSE_INIT). With vufs.reboot=1 the first boot asks /init
# to reboot and the second boot (seeing state/boot1) verifies that everything survived. With vufs.quick=1
# the first boot only writes and checks the data the host and the second boot look at.
# Every check prints "CHECK ok N: ..." or "CHECK FAIL N: ..."; the exit status is the number of failures.
# shellcheck disable=SC2010,SC2317 # names here are our own; check functions are called through check()

mnt=${1:-/mnt}
cd / || exit 1
. "$mnt/test.conf" || { echo "CHECK FAIL 0: $mnt/test.conf missing"; exit 1; }

# shellcheck source=tests/vm/guest-checks.sh
. "$(dirname "$0")/guest-checks.sh" || { echo "CHECK FAIL 0: guest-checks.sh missing"; exit 1; }

drop_caches() {
        sync
        echo 3 > /proc/sys/vm/drop_caches
}

sum_of() {
        sha256sum "$1" | cut -d' ' -f1
}

same_content() {
        expect "content of $1 vs $2" "$(sum_of "$2")" "$(sum_of "$1")"
}

t_mounted() {
        grep " $mnt virtiofs " /proc/mounts
}

t_host_files() {
        (cd "$mnt/host-data" && sha256sum -c SHA256SUMS) || return 1
        expect "host files" "$HOST_DATA_FILES" "$(ls "$mnt/host-data" | grep -vc SHA256SUMS)"
}

t_host_file_direct() {
        want=$(grep ' big1.bin$' "$mnt/host-data/SHA256SUMS" | cut -d' ' -f1)
        got=$(dd if="$mnt/host-data/big1.bin" iflag=direct bs=1M 2>/dev/null | sha256sum | cut -d' ' -f1)
        expect "O_DIRECT read of big1.bin" "$want" "$got"
}

t_host_dir() {
        expect "entries in host-dir" "$HOST_DIR_ENTRIES" "$(ls "$mnt/host-dir" | wc -l)" || return 1
        expect "ls -l lines" "$HOST_DIR_ENTRIES" "$(ls -l "$mnt/host-dir" | grep -c '^-')" || return 1
        expect "content of e123" "123" "$(cat "$mnt/host-dir/e123")"
}

t_host_links() {
        d=$mnt/host-links
        expect "readlink sym" "target.txt" "$(readlink "$d/sym")" || return 1
        expect "content through sym" "$(cat "$d/target.txt")" "$(cat "$d/sym")" || return 1
        expect "nlink of hard" 2 "$(stat -c %h "$d/hard")" || return 1
        expect "inode of hard" "$(stat -c %i "$d/target.txt")" "$(stat -c %i "$d/hard")"
}

t_guest_write() {
        d=$mnt/guest-data
        mkdir -p "$d" || return 1
        dd if=/dev/urandom of="$d/g1.bin" bs=1M count=6 2>/dev/null || return 1
        dd if=/dev/urandom of="$d/g2.bin" bs=4097 count=555 2>/dev/null || return 1
        dd if=/dev/urandom of=/tmp/g3.bin bs=1M count=3 2>/dev/null || return 1
        dd if=/tmp/g3.bin of="$d/g3.bin" bs=1M oflag=direct 2>/dev/null || return 1
        dd if=/dev/urandom of="$d/g4.bin" bs=1000 count=300 2>/dev/null || return 1
        same_content "$d/g3.bin" /tmp/g3.bin || return 1
        rm -f /tmp/g3.bin
        (cd "$d" && sha256sum g1.bin g2.bin g3.bin g4.bin > SHA256SUMS) || return 1
        expect "size of g2.bin" 2273835 "$(stat -c %s "$d/g2.bin")"
}

t_guest_reread() {
        drop_caches
        (cd "$mnt/guest-data" && sha256sum -c SHA256SUMS)
}

t_many_entries() {
        d=$mnt/scratch/many
        mkdir -p "$d" || return 1
        i=0
        while [ $i -lt 400 ]; do
                echo "$i" > "$d/file-with-a-longish-name-$i" || return 1
                i=$((i + 1))
        done
        expect "entries after create" 400 "$(ls "$d" | wc -l)" || return 1
        drop_caches
        expect "entries after drop_caches" 400 "$(ls -l "$d" | grep -c '^-')" || return 1
        expect "content of entry 399" 399 "$(cat "$d/file-with-a-longish-name-399")" || return 1
        rm "$d"/file-with-a-longish-name-* || return 1
        expect "entries after remove" 0 "$(ls -a "$d" | grep -vc '^\.\.\?$')" || return 1
        rmdir "$d"
}

t_guest_dir() {
        d=$mnt/guest-dir
        mkdir -p "$d" || return 1
        i=0
        while [ $i -lt 250 ]; do
                echo "g$i" > "$d/g$i" || return 1
                i=$((i + 1))
        done
        expect "entries in guest-dir" 250 "$(ls "$d" | wc -l)"
}

t_rename() {
        d=$mnt/scratch
        echo A > "$d/r1" || return 1
        mv "$d/r1" "$d/r2" || return 1
        [ ! -e "$d/r1" ] || { echo "r1 still exists"; return 1; }
        expect "r2" A "$(cat "$d/r2")" || return 1
        echo B > "$d/r3" || return 1
        mv "$d/r2" "$d/r3" || return 1
        expect "r3 after rename over it" A "$(cat "$d/r3")" || return 1
        mkdir "$d/rd1" || return 1
        mv "$d/rd1" "$d/rd2" || return 1
        mv "$d/r3" "$d/rd2/" || return 1
        expect "moved into directory" A "$(cat "$d/rd2/r3")" || return 1
        drop_caches
        [ ! -e "$d/rd1" ] && [ ! -e "$d/r3" ] && [ -f "$d/rd2/r3" ] || { echo "stale names after drop_caches"; return 1; }
        rm -r "$d/rd2"
}

t_symlink() {
        d=$mnt/scratch
        echo "symlink target" > "$d/target.txt" || return 1
        ln -s target.txt "$d/sl" || return 1
        expect "readlink" target.txt "$(readlink "$d/sl")" || return 1
        expect "read through link" "symlink target" "$(cat "$d/sl")" || return 1
        [ -L "$d/sl" ] || { echo "sl is not a symlink"; return 1; }
        ln -s /nonexistent/path "$d/dangling" || return 1
        expect "readlink dangling" /nonexistent/path "$(readlink "$d/dangling")" || return 1
        [ ! -e "$d/dangling" ] || { echo "dangling link resolves"; return 1; }
        rm "$d/sl" "$d/dangling" "$d/target.txt"
}

t_hardlink() {
        d=$mnt/scratch
        echo data > "$d/h1" || return 1
        ln "$d/h1" "$d/h2" || return 1
        expect "nlink h1" 2 "$(stat -c %h "$d/h1")" || return 1
        expect "nlink h2" 2 "$(stat -c %h "$d/h2")" || return 1
        expect "same inode" "$(stat -c %i "$d/h1")" "$(stat -c %i "$d/h2")" || return 1
        echo more >> "$d/h2" || return 1
        expect "append through other name" "data
more" "$(cat "$d/h1")" || return 1
        rm "$d/h1" || return 1
        expect "nlink after unlink" 1 "$(stat -c %h "$d/h2")" || return 1
        expect "content after unlink" "data
more" "$(cat "$d/h2")" || return 1
        rm "$d/h2"
}

t_chmod() {
        d=$mnt/scratch
        echo x > "$d/m" || return 1
        chmod 640 "$d/m" || return 1
        expect "mode" 640 "$(stat -c %a "$d/m")" || return 1
        chmod u+x,o+r "$d/m" || return 1
        expect "mode" 744 "$(stat -c %a "$d/m")" || return 1
        drop_caches
        expect "mode after drop_caches" 744 "$(stat -c %a "$d/m")" || return 1
        printf '#!/bin/sh\necho script-ran\n' > "$d/s.sh" || return 1
        chmod 755 "$d/s.sh" || return 1
        expect "script on the share" script-ran "$("$d/s.sh")" || return 1
        cp /bin/busybox "$d/busybox" || return 1
        drop_caches
        expect "binary on the share" mapped "$("$d/busybox" echo mapped)" || return 1
        rm "$d/m" "$d/s.sh" "$d/busybox"
}

t_truncate() {
        d=$mnt/scratch
        dd if="$mnt/guest-data/g1.bin" of="$d/t" bs=1M count=1 2>/dev/null || return 1
        cp "$d/t" /tmp/t || return 1
        truncate -s 1000 "$d/t" /tmp/t || return 1
        expect "size after shrink" 1000 "$(stat -c %s "$d/t")" || return 1
        same_content "$d/t" /tmp/t || return 1
        truncate -s 3000000 "$d/t" /tmp/t || return 1
        expect "size after extend" 3000000 "$(stat -c %s "$d/t")" || return 1
        drop_caches
        same_content "$d/t" /tmp/t || return 1
        : > "$d/t" || return 1
        expect "size after O_TRUNC" 0 "$(stat -c %s "$d/t")" || return 1
        rm "$d/t" /tmp/t
}

t_mkdir_rmdir() {
        d=$mnt/scratch
        mkdir -p "$d/d1/d2/d3" || return 1
        [ -d "$d/d1/d2/d3" ] || return 1
        if mkdir "$d/d1" 2>/dev/null; then echo "mkdir of an existing directory succeeded"; return 1; fi
        if rmdir "$d/d1" 2>/dev/null; then echo "rmdir of a non-empty directory succeeded"; return 1; fi
        rmdir "$d/d1/d2/d3" "$d/d1/d2" "$d/d1" || return 1
        [ ! -e "$d/d1" ] || { echo "d1 still exists"; return 1; }
}

t_append() {
        d=$mnt/scratch
        printf 'one\n' > "$d/a" && printf 'two\n' >> "$d/a" && printf 'three\n' >> "$d/a" || return 1
        printf 'one\ntwo\nthree\n' > /tmp/a
        same_content "$d/a" /tmp/a || return 1
        cp "$mnt/guest-data/g2.bin" "$d/a" && cp "$mnt/guest-data/g2.bin" /tmp/a || return 1
        dd if="$mnt/guest-data/g4.bin" of="$d/a" bs=64k oflag=append conv=notrunc 2>/dev/null || return 1
        cat "$mnt/guest-data/g4.bin" >> /tmp/a || return 1
        drop_caches
        same_content "$d/a" /tmp/a || return 1
        rm "$d/a" /tmp/a
}

t_overwrite_middle() {
        d=$mnt/scratch
        cp "$mnt/guest-data/g1.bin" "$d/mid" && cp "$mnt/guest-data/g1.bin" /tmp/mid || return 1
        dd if=/dev/urandom of=/tmp/patch bs=5000 count=1 2>/dev/null || return 1
        dd if=/tmp/patch of="$d/mid" bs=5000 seek=37 conv=notrunc 2>/dev/null || return 1
        dd if=/tmp/patch of=/tmp/mid bs=5000 seek=37 conv=notrunc 2>/dev/null || return 1
        expect "size after overwrite" 6291456 "$(stat -c %s "$d/mid")" || return 1
        same_content "$d/mid" /tmp/mid || return 1
        drop_caches
        same_content "$d/mid" /tmp/mid || return 1
        rm "$d/mid" /tmp/mid /tmp/patch
}

t_statfs() {
        df -k "$mnt" || return 1
        total=$(df -k "$mnt" | awk 'NR == 2 { print $2 }')
        [ "${total:-0}" -gt 0 ] || { echo "df total $total"; return 1; }
        bsize=$(stat -f -c %S "$mnt") || return 1
        blocks=$(stat -f -c %b "$mnt") || return 1
        [ "$bsize" -gt 0 ] && [ "$blocks" -gt 0 ] || { echo "statfs bsize $bsize blocks $blocks"; return 1; }
}

t_guest_links() {
        d=$mnt/guest-links
        mkdir -p "$d" || return 1
        echo "original" > "$d/orig.txt" || return 1
        ln "$d/orig.txt" "$d/hard.txt" || return 1
        ln -s orig.txt "$d/sym.txt" || return 1
        echo "mode" > "$d/mode604.txt" && chmod 604 "$d/mode604.txt" || return 1
        echo "renamed" > "$d/to-rename.txt" && mv "$d/to-rename.txt" "$d/renamed.txt" || return 1
        dd if=/dev/urandom of="$d/truncated.bin" bs=1M count=1 2>/dev/null && truncate -s 12345 "$d/truncated.bin"
}

t_reload() {
        umount "$mnt" || return 1
        rmmod virtiofs || return 1
        insmod "$VUFS_MODDIR/virtiofs.ko" || return 1
        mount -t virtiofs "$VUFS_TAG" "$mnt" || return 1
        (cd "$mnt/guest-data" && sha256sum -c SHA256SUMS) || return 1
        (cd "$mnt/host-data" && sha256sum -c SHA256SUMS) || return 1
        echo "written after the module reload" > "$mnt/state/after-reload.txt"
}

t_survived() {
        (cd "$mnt/guest-data" && sha256sum -c SHA256SUMS) || return 1
        expect "guest-dir entries" 250 "$(ls "$mnt/guest-dir" | wc -l)" || return 1
        expect "guest-links nlink" 2 "$(stat -c %h "$mnt/guest-links/orig.txt")" || return 1
        expect "guest-links symlink" orig.txt "$(readlink "$mnt/guest-links/sym.txt")" || return 1
        expect "boot 1 marker" 1 "$(cat "$mnt/state/boot1")"
}

t_after_reboot_write() {
        d=$mnt/after-reboot
        mkdir -p "$d" || return 1
        dd if=/dev/urandom of="$d/r1.bin" bs=1M count=2 2>/dev/null || return 1
        (cd "$d" && sha256sum r1.bin > SHA256SUMS) || return 1
        drop_caches
        (cd "$d" && sha256sum -c SHA256SUMS)
}

mkdir -p "$mnt/state"
if [ -f "$mnt/state/boot1" ]; then
        echo "second boot: the backend served the first one and kept running"
        check "share mounted after reboot" t_mounted
        check "host files after reboot" t_host_files
        check "guest files from boot 1 survived" t_survived
        check "write and re-read after reboot" t_after_reboot_write
        echo 2 > "$mnt/state/boot2"
else
        mkdir -p "$mnt/scratch"
        check "share mounted" t_mounted
        check "host files checksums" t_host_files
        check "host file O_DIRECT read" t_host_file_direct
        check "host directory with $HOST_DIR_ENTRIES entries" t_host_dir
        check "host symlink and hard link" t_host_links
        check "guest writes multi-MB files" t_guest_write
        check "guest files re-read after drop_caches" t_guest_reread
        check "directory with 250 entries for the host" t_guest_dir
        check "links, modes and renames for the host" t_guest_links
        if [ "${VUFS_QUICK:-0}" != 1 ]; then
                check "400 entries: create, count, remove" t_many_entries
                check "rename" t_rename
                check "symlink and readlink" t_symlink
                check "hard link and link count" t_hardlink
                check "chmod and exec from the share" t_chmod
                check "truncate" t_truncate
                check "mkdir and rmdir" t_mkdir_rmdir
                check "append" t_append
                check "overwrite in the middle" t_overwrite_middle
                check "statfs" t_statfs
        fi
        rmdir "$mnt/scratch" 2>/dev/null || { ls -la "$mnt/scratch"; check "scratch directory empty" false; }
        check "umount, rmmod/insmod virtiofs, mount again" t_reload
        if [ "${VUFS_REBOOT:-0}" = 1 ]; then
                echo 1 > "$mnt/state/boot1"
                echo reboot > /run/vufs-action
        fi
fi
sync
echo "CHECKS: $n run, $failures failed"
exit $failures
