#!/bin/bash
# test-guest-survive.sh: issue 35's real-guest demonstration (docs/survival.md). A guest (QEMU 7.2,
# Linux 6.1, TCG) runs guest-survive.sh's workload on the share, all at once: a source tree
# extracted from a tar archive and checked against it, repeated; fio with verification; a POSIX
# and an OFD lock held for the whole run while another guest process probes them every 100 ms.
# Meanwhile the host, in one of two modes:
#   kill      SIGKILLs vufsd's serving process (--crash-restarts) COUNT times at random moments,
#             0.5 to 3 s apart; the takeover per kill from vufsd's log ("Took over ... ms after the
#             previous serving process died"): median and worst
#   upgrade   runs `fsctl -i NAME upgrade` COUNT times, alternating two builds that differ in their
#             version (VUFSD_BINARY and VUFSD_OTHER_BINARY, each copied in turn to the path the
#             instance runs from, as a package installs a binary); each upgrade's new version is
#             checked in fsctl's answer and in `fsctl status`; the guest's pause per upgrade from
#             vufsd's log ("Live upgrade N: ... the guest paused P ms"): median and worst
# The events go on until there were COUNT of them and the guest finished a round of the tree and
# of fio; then the host tells the guest to stop (a file in the share) and goes on until the rounds
# in progress have ended: the whole workload runs under kills or upgrades.
# Passes when: the guest saw no error (every tree identical to the archive, fio's verification
# clean, every lock probe saw both locks held, the holders released them cleanly, no guest process
# hung or failed), QEMU never disconnected (vufsd served until QEMU quit and then exited with
# status 0), and every event happened (every upgrade to the expected version).
#
# In the vm suite in both modes (vm-survive-upgrade, vm-survive-kill); by hand from a build
# directory:
#   VUFSD_BINARY=daemon/vufsd FSCTL_BINARY=ctl/fsctl VUFS_GUEST_LOCKS=tests/vm/vufs-guest-locks \
#           ../tests/vm/test-guest-survive.sh kill 20
#
# Usage: test-guest-survive.sh [--keep] kill|upgrade [COUNT]   (default COUNT 20)
# Environment: VUFSD_BINARY, VUFS_GUEST_LOCKS (the static vufs-guest-locks), FSCTL_BINARY (needed);
# VUFSD_OTHER_BINARY (upgrade: a build whose version differs, e.g. vufsd-test-hooks);
# VUFS_SURVIVE_TREE (directories archived as the source tree; default the kernel's UAPI headers:
# /usr/include/linux, asm-generic and asm, about 900 files), VUFS_VM_BUILD_DIR (initramfs cache, default
# /var/tmp/vufs-vm), VUFS_VM_TMPDIR (default /var/tmp), VUFS_VM_REQUIRED=1.
# Exit status: 0 pass, 1 fail, 2 usage, 77 skipped (no QEMU, kernel, fio or dbus-daemon).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"
msg() { echo "test-guest-survive: $*" >&2; }
elapsed() { awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

keep=0
mode=
count=20
while [ $# -gt 0 ]; do
        case "$1" in
        --keep) keep=1; shift ;;
        kill|upgrade) mode=$1; shift ;;
        [0-9]*) count=$1; shift ;;
        -h|--help) sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) msg "usage: test-guest-survive.sh [--keep] kill|upgrade [COUNT]"; exit 2 ;;
        esac
done
[ -n "$mode" ] || { msg "usage: test-guest-survive.sh [--keep] kill|upgrade [COUNT]"; exit 2; }
: "${VUFSD_BINARY:?}" "${VUFS_GUEST_LOCKS:?}" "${FSCTL_BINARY:?}"
[ "$mode" = kill ] || : "${VUFSD_OTHER_BINARY:?upgrade mode needs a second build}"
vm_require_prerequisites test-guest-survive fio dbus-daemon

t_start=$(date +%s.%N)
build_dir=${VUFS_VM_BUILD_DIR:-/var/tmp/vufs-vm}
T=$(mktemp -d "${VUFS_VM_TMPDIR:-/var/tmp}/vufs-survive.XXXXXX")
VM_BUS_PID=
guest_pid=
cleanup() {
        local rc=$?
        [ -z "$guest_pid" ] || kill "$guest_pid" 2>/dev/null
        [ -z "$VM_BUS_PID" ] || kill "$VM_BUS_PID" 2>/dev/null
        wait 2>/dev/null
        if [ $keep -eq 1 ]; then
                msg "kept $T"
        else
                rm -rf "$T"
        fi
        exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The source tree: regular files and directories only, owned by root, in name order (the same
# archive, and so the same cached initramfs, while the files do not change). The names and the
# checksums the guest compares with come from the archive itself, extracted here.
tree_dirs=${VUFS_SURVIVE_TREE:-"/usr/include/linux /usr/include/asm-generic $(find /usr/include -maxdepth 2 -path '*-linux-gnu/asm' -type d |
        head -n1)"}
mkdir -p "$T/tree-src" "$T/tree-check"
for d in $tree_dirs; do
        [ -d "$d" ] || { msg "FAIL: $d (VUFS_SURVIVE_TREE) is not a directory"; exit 1; }
        mkdir -p "$T/tree-src/$(basename "$d")"
        (cd "$d" && find . -type f -print0 | cpio --quiet -0 -pdm "$T/tree-src/$(basename "$d")") ||
                { msg "FAIL: copying $d"; exit 1; }
done
if ! tar -C "$T/tree-src" --sort=name --owner=0 --group=0 --numeric-owner -cf "$T/tree.tar" . ||
        ! tar -C "$T/tree-check" -xf "$T/tree.tar" ||
        ! (cd "$T/tree-check" && find . | LC_ALL=C sort > "$T/tree.names" &&
                find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum > "$T/tree.sha256"); then
        msg "FAIL: making the source tree's archive"
        exit 1
fi
rm -rf "$T/tree-src" "$T/tree-check"
msg "source tree: $(wc -l < "$T/tree.sha256") files, $(($(wc -l < "$T/tree.names") - $(wc -l < "$T/tree.sha256"))) directories, $(du -k "$T/tree.tar" | cut -f1) KiB"

kver=$(vm_kernel_version)
initrd=$("$here/mkinitramfs.sh" "$build_dir/initramfs-survive-$kver.cpio.gz" --kernel-version "$kver" \
        --script "$here/guest-survive.sh" --extra-dyn "$(command -v fio)" \
        --extra "$VUFS_GUEST_LOCKS:/usr/bin/vufs-guest-locks" --extra "$T/tree.tar:/etc/vufs/tree.tar" \
        --extra "$T/tree.names:/etc/vufs/tree.names" --extra "$T/tree.sha256:/etc/vufs/tree.sha256") ||
        { msg "FAIL: building the initramfs failed"; exit 1; }

vm_private_bus "$T" || { msg "FAIL: dbus-daemon did not start"; exit 1; }
instance=survive
fsctl() { "$FSCTL_BINARY" --address "$VM_BUS_ADDRESS" -i "$instance" "$@"; }

# The path the instance runs from: a live upgrade executes what is installed there. Installed as a
# package manager does, through a new name and a rename (the running binary keeps its inode).
mkdir -p "$T/bin"
exe=$T/bin/vufsd
install_binary() {
        cp "$1" "$exe.new" && chmod 0755 "$exe.new" && mv -f "$exe.new" "$exe"
}
install_binary "$VUFSD_BINARY" || { msg "FAIL: installing $VUFSD_BINARY"; exit 1; }
builds=("$VUFSD_BINARY")
versions=("$("$VUFSD_BINARY" --version | sed -n '1s/^vufsd //p')")
if [ "$mode" = upgrade ]; then
        builds+=("$VUFSD_OTHER_BINARY")
        versions+=("$("$VUFSD_OTHER_BINARY" --version | sed -n '1s/^vufsd //p')")
        if [ -z "${versions[0]}" ] || [ "${versions[0]}" = "${versions[1]}" ]; then
                msg "FAIL: the two builds must differ in their version: '${versions[0]}', '${versions[1]}'"
                exit 1
        fi
        msg "builds: ${builds[0]} (${versions[0]}), ${builds[1]} (${versions[1]})"
fi

mkdir -p "$T/share"
console=$T/console.log
: > "$console"
export VUFSD_EXTRA_ARGS="--crash-restarts=64 --sandbox namespace --seccomp kill --bus $VM_BUS_ADDRESS --instance $instance"
guest_timeout=1500
"$here/run-guest.sh" --backend "vufsd:$exe" --share "$T/share" --initrd "$initrd" --script guest-survive.sh \
        --memory 1G --timeout $guest_timeout --log "$console" --backend-log "$T/backend.log" \
        > "$T/run-guest.out" 2>&1 &
guest_pid=$!
until grep -aq VUFS-SURVIVE-START "$console" 2>/dev/null; do
        kill -0 $guest_pid 2>/dev/null || break
        sleep 0.5
done
msg "guest workload started after $(elapsed)s"

# The serving process: the supervisor (the oldest vufsd) -> the spawner -> the serving process.
serving_pid() {
        local sup sp
        sup=$(pgrep -o -f "^$exe ") || return 1
        sp=$(cut -d' ' -f1 "/proc/$sup/task/$sup/children" 2>/dev/null)
        [ -n "$sp" ] || return 1
        cut -d' ' -f1 "/proc/$sp/task/$sp/children" 2>/dev/null | grep .
}
# Rounds the guest finished of tree or fio.
rounds() { tr -d '\r' < "$console" | grep -ac "^VUFS-SURVIVE-ROUND $1 "; }

# One kill or upgrade (event_failures counts those that went wrong).
events=0
event_failures=0
next=1
: > "$T/events.log"
event() {
        local s out rc status want
        case $mode in
        kill)
                s=$(serving_pid) || { echo "no serving process found" >> "$T/events.log"; return; }
                if kill -KILL "$s" 2>/dev/null; then
                        events=$((events + 1))
                        echo "kill $events: pid $s" >> "$T/events.log"
                fi
                ;;
        upgrade)
                install_binary "${builds[next]}" || { event_failures=$((event_failures + 1)); return; }
                want=${versions[next]}
                out=$(fsctl upgrade 2>&1)
                rc=$?
                events=$((events + 1))
                status=$(fsctl status 2>&1 | sed -n 's/^Version: *//p')
                echo "upgrade $events to $want: fsctl exit $rc: $out; status: Version $status" >> "$T/events.log"
                if [ $rc -ne 0 ] || [[ "$out" != *" to vufsd $want "* ]] || [ "$status" != "$want" ]; then
                        event_failures=$((event_failures + 1))
                        msg "upgrade $events: expected version $want: fsctl exit $rc: $out; fsctl status: Version '$status'"
                fi
                next=$((1 - next))
                ;;
        esac
        # The counters as the instance saw them, once they count this event (a new serving process
        # answers within a second or so; the instance is gone once the guest has powered off).
        for _ in $(seq 25); do
                out=$(fsctl stats 2>/dev/null | grep -E '^(Restarts|Upgrades):') && stats=$out
                [ "$(stats_count)" != "$events" ] || break
                sleep 0.2
        done
}
# The number of kills or upgrades in the last fsctl stats: "Restarts: N (...)", "Upgrades: N (...)".
stats_count() {
        echo "$stats" | sed -n "s/^$([ "$mode" = kill ] && echo Restarts || echo Upgrades): \([0-9]*\).*/\1/p"
}
# 0.5 to 3 s apart.
pause() {
        local ms=$((500 + RANDOM % 2501))
        sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
}

# COUNT events, and at least until the guest finished a round of each (so it repeats them); then
# the guest is told to stop, and the events go on until its tree and fio workers have ended (the
# rounds they were in run under them too). Each condition is checked after the pause, right before
# the event.
more_events() {
        kill -0 $guest_pid 2>/dev/null &&
                { [ $events -lt "$count" ] || [ "$(rounds tree)" -lt 1 ] || [ "$(rounds fio)" -lt 1 ]; }
}
workers_running() {
        kill -0 $guest_pid 2>/dev/null &&
                [ "$(tr -d '\r' < "$console" | grep -acE '^VUFS-SURVIVE-PROC (tree|fio) ')" -lt 2 ]
}
stats=
while pause && more_events; do
        event
done
touch "$T/share/survive-stop"
msg "$events ${mode}s after $(elapsed)s, guest rounds tree $(rounds tree), fio $(rounds fio): the guest is told to stop"
while pause && workers_running; do
        event
done
msg "$events ${mode}s after $(elapsed)s, guest rounds tree $(rounds tree), fio $(rounds fio): the workers ended"
wait $guest_pid
rc=$?
guest_pid=

tr -d '\r' < "$console" > "$T/console.clean"
grep -a -E '^(VUFS-SURVIVE|CHECK FAIL|    )' "$T/console.clean" | sed 's/^/test-guest-survive:   guest: /' >&2
summary=$(sed -n 's/^VUFS-SURVIVE: //p' "$T/console.clean")

# The pause per event, from vufsd's log: median and worst.
if [ "$mode" = kill ]; then
        sed -n 's/.*Took over.*), \([0-9.]*\) ms after.*/\1/p' "$T/backend.log"
else
        sed -n 's/.*Live upgrade [0-9]*: .*the guest paused \([0-9.]*\) ms.*/\1/p' "$T/backend.log"
fi | sort -n > "$T/pauses"
pauses=$(awk '{ a[NR] = $1 } END { if (NR) printf "%d, median %s ms, worst %s ms", NR, a[int((NR + 1) / 2)], a[NR] }' "$T/pauses")
msg "pauses logged by vufsd: ${pauses:-none}"

if [ $rc -eq 0 ]; then
        vm_check ok "the guest passed; QEMU stayed connected until it quit and vufsd then exited with status 0"
else
        vm_check fail "run-guest.sh exited with $rc"
        # Its summary lines (the console and the log are shown above and below).
        grep -a '^run-guest: [^-]' "$T/run-guest.out" | sed 's/^/test-guest-survive:   /' >&2
fi
if [[ "$summary" == *" err=0" ]]; then
        vm_check ok "guest workload: $summary"
else
        vm_check fail "guest workload: ${summary:-no summary}"
fi
if [ $events -ge "$count" ] && [ $event_failures -eq 0 ]; then
        vm_check ok "$events ${mode}s"
else
        vm_check fail "$events ${mode}s of $count, $event_failures failed"
        sed 's/^/test-guest-survive:   /' "$T/events.log" >&2
fi
if [ "$(wc -l < "$T/pauses")" -ge "$events" ] && [ "$events" -gt 0 ]; then
        vm_check ok "each $mode logged its pause"
else
        vm_check fail "$(wc -l < "$T/pauses") pauses logged for $events ${mode}s"
fi
counted=$(stats_count)
if [ "${counted:-0}" -eq "$events" ]; then
        vm_check ok "fsctl stats counted every $mode: $(echo "$stats" | tr '\n' ' ')"
else
        vm_check fail "fsctl stats counted ${counted:-no} ${mode}s of $events: $(echo "$stats" | tr '\n' ' ')"
fi
if [ $vm_failures -ne 0 ]; then
        msg "backend log (last 30 lines):"
        tail -n 30 "$T/backend.log" | sed 's/^/test-guest-survive:   /' >&2
        msg "FAIL"
        exit 1
fi
msg "PASS after $(elapsed)s"
