#!/bin/sh
# Guest side of test-conformance.sh (busybox sh): runs vufs-posix on a fresh tmpfs and on the virtiofs
# mount of this guest, then compares the two outputs assertion by assertion.
# $1 = virtiofs mount point. VUFS_CACHE = the backend's cache policy (for the listed differences).
# /etc/vufs/conformance-known holds the differences docs/conformance.md lists: "PATTERN POLICIES" per
# line, PATTERN an assertion name or a prefix ending in '*', POLICIES "all" or a comma list.
# Prints "CONFORMANCE-DIFF name: tmpfs=... virtiofs=..." for every unlisted difference and one
# "CONFORMANCE: ..." summary; exits with the number of unlisted differences (or 100+ on a setup error).
# Both outputs are left in $1/conformance-results/ for the host.

mnt=${1:-/mnt}
policy=${VUFS_CACHE:-auto}
probe=/usr/bin/vufs-posix
known=/etc/vufs/conformance-known
tfs=/conformance-tmpfs
res=$mnt/conformance-results

cd / || exit 100
[ -x "$probe" ] || { echo "CONFORMANCE: $probe missing"; exit 101; }
[ -f "$known" ] || { echo "CONFORMANCE: $known missing"; exit 101; }
if ! mkdir -p "$tfs" || ! mount -t tmpfs -o mode=0755 tmpfs "$tfs"; then
        echo "CONFORMANCE: cannot mount a tmpfs"
        exit 102
fi
mkdir -p "$tfs/a" "$tfs/o" "$mnt/conformance/a" "$mnt/conformance/o" "$res" || exit 103
chmod 0755 "$mnt/conformance" "$mnt/conformance/a" "$tfs/a" || exit 103

uptime_s() {
        cut -d' ' -f1 /proc/uptime
}

t0=$(uptime_s)
"$probe" "$tfs/a" "$mnt/conformance/o" > /tmp/tmpfs.out 2> /tmp/tmpfs.err
rc_t=$?
t1=$(uptime_s)
"$probe" "$mnt/conformance/a" "$tfs/o" > /tmp/virtiofs.out
rc_v=$?
t2=$(uptime_s)
grep -v "^vufs-posix: [a-z_]*$" /tmp/tmpfs.err
cp /tmp/tmpfs.out "$res/tmpfs.out"
cp /tmp/virtiofs.out "$res/virtiofs-$policy.out"
echo "CONFORMANCE-TIME: tmpfs $(echo "$t0 $t1" | awk '{ printf "%.1f", $2 - $1 }')s virtiofs $(echo "$t1 $t2" | awk '{ printf "%.1f", $2 - $1 }')s"
if [ $rc_t -ne 0 ] || [ $rc_v -ne 0 ]; then
        echo "CONFORMANCE: probe failed (tmpfs exit $rc_t, virtiofs exit $rc_v)"
        tail -n 5 /tmp/tmpfs.out /tmp/virtiofs.out
        exit 104
fi

# xattr.user.*: a tmpfs without user xattrs (guest kernels before 6.6) answers EOPNOTSUPP to all of
# them; the expected answer is then the tmpfs run's trusted.* one for the same assertion (root may
# use both namespaces the same way), except where the kernel decides before the filesystem is asked
# (user.* exists only on regular files and directories).
awk -v policy="$policy" -v KNOWN="$known" -v T=/tmp/tmpfs.out -v V=/tmp/virtiofs.out '
function parse(line, arr, order, n,   i, name) {
        i = index(line, ": ")
        if (i == 0) { name = line; arr[name] = "(no value)" } else { name = substr(line, 1, i - 1); arr[name] = substr(line, i + 2) }
        if (!(name in seen)) { seen[name] = 1; all[++nall] = name }
}
function listed(name,   k, p) {
        for (k = 1; k <= np; k++) {
                p = pat[k]
                if (pol[k] != "all" && index("," pol[k] ",", "," policy ",") == 0)
                        continue
                if (p == name || (substr(p, length(p)) == "*" && substr(name, 1, length(p) - 1) == substr(p, 1, length(p) - 1))) {
                        used[k] = 1
                        return 1
                }
        }
        return 0
}
FILENAME == KNOWN { if ($1 != "" && substr($1, 1, 1) != "#") { pat[++np] = $1; pol[np] = $2 } next }
FILENAME == T { parse($0, t); nt++; next }
FILENAME == V { parse($0, v); nv++; next }
END {
        usersub = (t["xattr.user.set"] == "EOPNOTSUPP") ? 1 : 0
        for (k = 1; k <= nall; k++) {
                name = all[k]
                want = (name in t) ? t[name] : "(missing)"
                got = (name in v) ? v[name] : "(missing)"
                tname = "xattr.trusted." substr(name, 12)
                if (usersub && name ~ /^xattr\.user\./ && name !~ /\.(symlink\.lset|symlink\.lget|fifo\.set)$/ &&
                    (tname in t)) {
                        want = t[tname]
                        gsub(/trusted\./, "user.", want)
                        nsub++
                }
                if (want == got) { same++; continue }
                if (listed(name)) {
                        print "CONFORMANCE-KNOWN " name ": tmpfs=" want " virtiofs=" got
                        nknown++
                } else {
                        print "CONFORMANCE-DIFF " name ": tmpfs=" want " virtiofs=" got
                        ndiff++
                }
        }
        for (k = 1; k <= np; k++)
                if (!used[k] && (pol[k] == "all" || index("," pol[k] ",", "," policy ",") > 0))
                        print "CONFORMANCE-NOTE listed difference not seen under " policy ": " pat[k]
        printf "CONFORMANCE: cache=%s assertions tmpfs=%d virtiofs=%d same=%d listed=%d unlisted=%d (user xattrs checked against trusted: %d)\n",
               policy, nt, nv, same + 0, nknown + 0, ndiff + 0, nsub + 0
        exit ndiff > 99 ? 99 : ndiff
}' "$known" /tmp/tmpfs.out /tmp/virtiofs.out
rc=$?
# --privileged-files=map (the default): test-conformance.sh put a copy of the host's id(1) in the
# share; guest root makes it set-user-id, which the guest sees. The host runs it afterwards as a
# user and checks it prints that user's id, and that nothing the probe left (kept in
# $mnt/conformance for that look) is a set-id file, a device or has a file capability there.
if [ -f "$mnt/id-copy" ]; then
        chmod 4755 "$mnt/id-copy"
        echo "CONFORMANCE-SETUID-COPY: mode $(stat -c %a "$mnt/id-copy")"
fi
umount "$tfs"
exit $rc
