#!/bin/sh
# Guest side of test-guest-survive.sh (busybox sh): short-lived file operations in a loop for
# VUFS_SECONDS seconds (mkdir, write, read back, rm, rmdir), each checked, while the host kills the
# serving process; prints each failure (VUFS-SURVIVE-ERR) and a summary (VUFS-SURVIVE:).
mnt=${1:-/mnt}
secs=${VUFS_SECONDS:-40}
echo "VUFS-SURVIVE-START"
ok=0; err=0; i=0
end=$(( $(date +%s) + secs ))
while [ "$(date +%s)" -lt "$end" ]; do
        i=$((i + 1))
        d=$mnt/d$i
        # The redirection's own error (a failed create) goes to the console, not to /tmp/e.
        if mkdir "$d" 2>/tmp/e && echo "line $i" > "$d/f" 2>>/tmp/e && [ "$(cat "$d/f" 2>>/tmp/e)" = "line $i" ] &&
           rm "$d/f" 2>>/tmp/e && rmdir "$d" 2>>/tmp/e; then
                ok=$((ok + 1))
        else
                err=$((err + 1))
                echo "VUFS-SURVIVE-ERR $i: $(tr '\n' ' ' < /tmp/e)"
        fi
done
echo "VUFS-SURVIVE: iterations=$i ok=$ok err=$err"
# The exit status is the failures (guest-init.sh prints the result line from it).
[ "$err" -lt 255 ] || err=255
exit "$err"
