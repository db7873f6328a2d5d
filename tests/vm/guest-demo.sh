#!/bin/sh
# Guest side of demo.sh (busybox sh): show the mounted share, read the host's files, write some of our own.
# $1 = mount point of the virtiofs share.

mnt=${1:-/mnt}
say() { echo "guest\$ $*"; }

echo
echo "================ inside the guest (Linux $(uname -r)) ================"
say "grep virtiofs /proc/mounts"
grep virtiofs /proc/mounts || exit 1
say "df -h $mnt"
df -h "$mnt" || exit 1
say "ls -la $mnt"
ls -la "$mnt" || exit 1
for f in "$mnt"/*.txt; do
        [ -f "$f" ] || continue
        say "cat $f"
        cat "$f" || exit 1
done

out=$mnt/from-guest
say "mkdir -p $out"
mkdir -p "$out" || exit 1
say "uname -a > $out/hello.txt"
{
        echo "Hello from the guest, written through virtio-fs."
        uname -a
        echo "guest uptime: $(cut -d' ' -f1 /proc/uptime) s"
} > "$out/hello.txt" || exit 1
say "dd if=/dev/urandom of=$out/random.bin bs=1M count=4"
dd if=/dev/urandom of="$out/random.bin" bs=1M count=4 2>/dev/null || exit 1
[ "$(stat -c %s "$out/random.bin")" = 4194304 ] || exit 1
say "(cd $out && sha256sum random.bin > random.bin.sha256)"
(cd "$out" && sha256sum random.bin > random.bin.sha256) || exit 1
cat "$out/random.bin.sha256"
say "ls -l $out"
ls -l "$out" || exit 1
echo "================ guest done, powering off ================"
echo
