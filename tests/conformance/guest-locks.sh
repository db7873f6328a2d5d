#!/bin/sh
# Guest side of test-locks.sh (busybox sh): runs the lock matrix vufs-locks on a fresh tmpfs (its peer
# a local process) and on the virtiofs mount (its peer a process on the host serving $1/locks-peer),
# then compares the two outputs observation by observation.
# $1 = virtiofs mount point. /etc/vufs/locks-known holds the differences docs/conformance.md lists,
# "NAME<TAB>VALUE" per line: NAME may differ from the tmpfs result only by giving exactly VALUE.
# Prints "LOCKS-DIFF name: tmpfs=... virtiofs=..." for every unlisted difference, "LOCKS-STALE" for
# a listed one that did not show (the list must stay exact), one "LOCKS:" summary; exits with the
# number of both (or 100+ on a setup error). Both outputs are left in $1/locks-results/ for the host.

mnt=${1:-/mnt}
probe=/usr/bin/vufs-locks
known=/etc/vufs/locks-known
tfs=/locks-tmpfs
res=$mnt/locks-results

cd / || exit 100
[ -x "$probe" ] || { echo "LOCKS: $probe missing"; exit 101; }
[ -f "$known" ] || { echo "LOCKS: $known missing"; exit 101; }
[ -d "$mnt/locks-peer" ] || { echo "LOCKS: $mnt/locks-peer (made by the host) missing"; exit 101; }
if ! mkdir -p "$tfs" || ! mount -t tmpfs -o mode=0755 tmpfs "$tfs"; then
        echo "LOCKS: cannot mount a tmpfs"
        exit 102
fi
mkdir -p "$tfs/locks" "$mnt/locks" "$res" || exit 103
chmod 0777 "$mnt/locks" || exit 103

uptime_s() {
        cut -d' ' -f1 /proc/uptime
}

t0=$(uptime_s)
"$probe" run "$tfs/locks" > /tmp/tmpfs.out 2> /tmp/tmpfs.err
rc_t=$?
t1=$(uptime_s)
"$probe" run "$mnt/locks" "$mnt/locks-peer" > /tmp/virtiofs.out 2> /tmp/virtiofs.err
rc_v=$?
t2=$(uptime_s)
# Progress lines are expected; anything else on stderr is shown.
grep -h -v "^vufs-locks: [a-z_]*-[a-z_]*$" /tmp/tmpfs.err /tmp/virtiofs.err
cp /tmp/tmpfs.out "$res/tmpfs.out"
cp /tmp/virtiofs.out "$res/virtiofs.out"
echo "LOCKS-TIME: tmpfs $(echo "$t0 $t1" | awk '{ printf "%.1f", $2 - $1 }')s virtiofs $(echo "$t1 $t2" | awk '{ printf "%.1f", $2 - $1 }')s"
if [ $rc_t -ne 0 ] || [ $rc_v -ne 0 ]; then
        echo "LOCKS: matrix failed (tmpfs exit $rc_t, virtiofs exit $rc_v)"
        tail -n 5 /tmp/tmpfs.out /tmp/virtiofs.out
        exit 104
fi

awk -F '\t' -v KNOWN="$known" -v T=/tmp/tmpfs.out -v V=/tmp/virtiofs.out '
function parse(line, arr,   i, name) {
        i = index(line, ": ")
        if (i == 0) { name = line; arr[name] = "(no value)" } else { name = substr(line, 1, i - 1); arr[name] = substr(line, i + 2) }
        if (!(name in seen)) { seen[name] = 1; all[++nall] = name }
}
FILENAME == KNOWN { if ($1 != "" && substr($1, 1, 1) != "#") { kv[$1] = $2; korder[++nk] = $1 } next }
FILENAME == T { parse($0, t); nt++; next }
FILENAME == V { parse($0, v); nv++; next }
END {
        for (k = 1; k <= nall; k++) {
                name = all[k]
                want = (name in t) ? t[name] : "(missing)"
                got = (name in v) ? v[name] : "(missing)"
                if (want == got) { same++; continue }
                if ((name in kv) && kv[name] == got) {
                        print "LOCKS-KNOWN " name ": tmpfs=" want " virtiofs=" got
                        used[name] = 1
                        nknown++
                } else {
                        print "LOCKS-DIFF " name ": tmpfs=" want " virtiofs=" got ((name in kv) ? " (listed: " kv[name] ")" : "")
                        ndiff++
                }
        }
        for (k = 1; k <= nk; k++)
                if (!used[korder[k]]) {
                        name = korder[k]
                        print "LOCKS-STALE listed difference did not show: " name " (listed " kv[name] ", tmpfs=" \
                              ((name in t) ? t[name] : "(missing)") " virtiofs=" ((name in v) ? v[name] : "(missing)") ")"
                        nstale++
                }
        printf "LOCKS: observations tmpfs=%d virtiofs=%d same=%d listed=%d unlisted=%d stale=%d\n",
               nt, nv, same + 0, nknown + 0, ndiff + 0, nstale + 0
        n = ndiff + nstale
        exit n > 99 ? 99 : n
}' "$known" /tmp/tmpfs.out /tmp/virtiofs.out
rc=$?
rm -rf "$mnt/locks"
umount "$tfs"
exit $rc
