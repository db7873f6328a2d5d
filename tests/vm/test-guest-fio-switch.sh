#!/bin/bash
# test-guest-fio-switch.sh: fio with --verify in a real guest while fsctl keeps switching the running
# vufsd's threading mode (inline, pool N, auto with varying N) and cache policy.
#
# vufsd runs with --instance on a private dbus-daemon, --sandbox namespace --seccomp kill. The guest
# (guest-fio-verify.sh) runs its fio windows; from its first sync point on, the host makes one
# change every 200-500 ms (inline, pool N, auto with N, cache policy in turn; N and the policy
# random) and checks that vufsd accepted it (fsctl exit 0 and the property read back). During the
# guest's "mappable" window (mmap jobs) the cache policy stays auto or always: never and metadata
# open files with FOPEN_DIRECT_IO, which Linux 6.1 cannot map shared. At the guest's last sync point
# the host reads `fsctl stats` and then lets the guest finish.
# Passes when: every fio check passed (no verification or I/O error), every change was accepted and
# more than 20 landed, requests ran both inline and in the pool and auto mode routed some, READ and
# WRITE had no errors on the host side, and vufsd exited with status 0 after QEMU disconnected.
#
# Usage: test-guest-fio-switch.sh [--keep]
# Environment: VUFSD_BINARY, FSCTL_BINARY (needed); VUFS_VM_BUILD_DIR (initramfs cache, default
# /var/tmp/vufs-vm), VUFS_VM_TMPDIR (where the share is created, default /var/tmp),
# VUFS_VM_REQUIRED=1 (missing QEMU or kernel fails instead of skipping), VUFS_FIO_ROUNDS (guest
# rounds, default 1), VUFSD_EXTRA_ARGS (more vufsd options).
# Exit status: 0 pass, 1 fail, 77 skipped (qemu-system-x86_64 or the kernel is not installed).

set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"

msg() { echo "test-guest-fio-switch: $*" >&2; }

keep=0
case "${1:-}" in
--keep) keep=1 ;;
"") ;;
*) msg "usage: test-guest-fio-switch.sh [--keep]"; exit 2 ;;
esac
: "${VUFSD_BINARY:?}" "${FSCTL_BINARY:?}"

vm_require_prerequisites test-guest-fio-switch dbus-daemon fio python3

t0=$(date +%s.%N)
build_dir=${VUFS_VM_BUILD_DIR:-/var/tmp/vufs-vm}
T=$(mktemp -d "${VUFS_VM_TMPDIR:-/var/tmp}/vufs-fio-switch.XXXXXX")
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

vm_private_bus "$T" || { msg "FAIL: dbus-daemon did not start"; exit 1; }
instance=fioswitch
fsctl() { "$FSCTL_BINARY" --address "$VM_BUS_ADDRESS" -i "$instance" "$@"; }

kver=$(vm_kernel_version)
initrd=$("$here/mkinitramfs.sh" "$build_dir/initramfs-fio-$kver.cpio.gz" --kernel-version "$kver" \
        --script "$here/guest-fio-verify.sh" --extra-dyn "$(command -v fio)") ||
        { msg "FAIL: building the initramfs with fio failed"; exit 1; }

rounds=${VUFS_FIO_ROUNDS:-1}
share=$T/share
mkdir -p "$share/fio-sync"
console=$T/console.log
: > "$console"
export VUFSD_EXTRA_ARGS="--bus $VM_BUS_ADDRESS --instance $instance --sandbox namespace --seccomp kill ${VUFSD_EXTRA_ARGS:-}"
"$here/run-guest.sh" --backend "vufsd:$VUFSD_BINARY" --share "$share" --initrd "$initrd" \
        --script guest-fio-verify.sh --param fio_sync=1 --param "fio_rounds=$rounds" \
        --memory 1G --timeout 480 --log "$console" --backend-log "$T/backend.log" > "$T/run-guest.out" 2>&1 &
guest_pid=$!

# The next change: sets $change (fsctl arguments) and $want (what fsctl must read back). The kinds
# take turns, so every mode and the cache get their share; sizes and policies are random.
kinds=(inline cache pool auto cache zero pool-size cache)
sizes=(1 2 3 4 6 8 16 64)
caches_all=(never metadata auto always)
caches_mappable=(auto always)
caches=("${caches_all[@]}")
turn=0
pick_change() {
        local size=${sizes[RANDOM % ${#sizes[@]}]} c=${caches[RANDOM % ${#caches[@]}]}
        case ${kinds[turn++ % ${#kinds[@]}]} in
        inline) change="set-threads inline"; want="threads inline," ;;
        zero) change="set-threads 0"; want="threads inline," ;;
        pool) change="set-threads $size"; want="threads pool, pool size $size" ;;
        pool-size) change="set-threads pool --size $size"; want="threads pool, pool size $size" ;;
        auto) change="set-threads auto --size $size"; want="threads auto, pool size $size" ;;
        cache) change="set-cache $c"; want="cache $c" ;;
        esac
}

changes=0
refused=0
declare -A applied=()
cache_now=auto
# apply ARGS... WANT: one fsctl change, counted; the read-back must contain WANT.
apply() {
        local want=${*: -1} out
        if out=$(fsctl "${@:1:$#-1}" 2>&1) && [[ "$out" == *"$instance: $want"* ]]; then
                changes=$((changes + 1))
                applied["${*:1:$#-1}"]=1
                [ "$1" != set-cache ] || cache_now=$2
        else
                refused=$((refused + 1))
                echo "fsctl ${*:1:$#-1}: expected '$want', got: $out" >> "$T/refused.log"
        fi
}

answered=" "
switching=0
sync_points=0
while kill -0 $guest_pid 2>/dev/null; do
        for point in $(tr -d '\r' < "$console" | sed -n 's/.*VUFS-FIO-SYNC: \([a-z0-9.]*\).*/\1/p'); do
                [[ "$answered" != *" $point "* ]] || continue
                case "$point" in
                any.*)
                        caches=("${caches_all[@]}")
                        switching=1
                        ;;
                mappable.*)
                        # The mmap jobs start once we answer: leave the direct-I/O policies first.
                        caches=("${caches_mappable[@]}")
                        case $cache_now in
                        auto|always) ;;
                        *) apply set-cache always "cache always" ;;
                        esac
                        switching=1
                        ;;
                done)
                        switching=0
                        fsctl stats --json > "$T/stats.json" 2>> "$T/refused.log" || refused=$((refused + 1))
                        ;;
                esac
                touch "$share/fio-sync/$point"
                answered+="$point "
                sync_points=$((sync_points + 1))
        done
        if [ $switching -eq 1 ]; then
                pick_change
                # shellcheck disable=SC2086 # $change is a list of words
                apply $change "$want"
                sleep "0.$((200 + RANDOM % 300))"
        else
                sleep 0.1
        fi
done
wait $guest_pid
rc=$?
guest_pid=

tr -d '\r' < "$console" > "$T/console.clean"
grep -a -E '^(CHECK |CHECKS:|VUFS-FIO)' "$T/console.clean" | sed 's/^/test-guest-fio-switch:   guest: /' >&2
grep -a -E 'backend exited|qemu exited|PASS|FAIL' "$T/run-guest.out" | sed 's/^/test-guest-fio-switch:   /' >&2

if [ $rc -ne 0 ]; then
        vm_check fail "run-guest.sh exited with $rc (guest failure, or vufsd did not exit with status 0)"
        sed 's/^/test-guest-fio-switch:   /' "$T/run-guest.out" >&2
else
        vm_check ok "guest passed and vufsd exited with status 0 after QEMU disconnected"
fi
total=$(sed -n 's/^VUFS-FIO-TOTAL: //p' "$T/console.clean")
if grep -aq '^CHECKS: [0-9]* run, 0 failed' "$T/console.clean" && [[ "$total" == *"failures=0" ]]; then
        vm_check ok "fio in the guest: $total"
else
        vm_check fail "fio in the guest reported failures (${total:-no totals})"
fi
if [ $sync_points -eq $((2 * rounds + 1)) ]; then
        vm_check ok "$sync_points guest sync points answered"
else
        vm_check fail "$sync_points guest sync points answered, expected $((2 * rounds + 1))"
fi
if [ $refused -eq 0 ] && [ $changes -gt 20 ]; then
        vm_check ok "$changes live changes accepted (${#applied[@]} distinct), none refused"
else
        vm_check fail "$changes live changes accepted, $refused refused (need > 20 and none refused)"
        [ ! -s "$T/refused.log" ] || sed 's/^/test-guest-fio-switch:   /' "$T/refused.log" >&2
fi

# The host's view, read while the guest waited at its last sync point.
if [ -s "$T/stats.json" ]; then
        if stats=$(python3 - "$T/stats.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
ex = s["executor"]
ops = {o["name"]: o for o in s["opcodes"]}
bad = []
for name in ("READ", "WRITE"):
    if ops.get(name, {}).get("requests", 0) == 0:
        bad.append("no %s requests" % name)
    elif ops[name]["errors"] != 0:
        bad.append("%d %s errors" % (ops[name]["errors"], name))
for name in ("inline_runs", "pool_runs"):
    if ex.get(name, 0) <= 0:
        bad.append("%s is %d" % (name, ex.get(name, 0)))
if ex.get("auto_inline", 0) + ex.get("auto_pool", 0) <= 0:
    bad.append("auto mode decided nothing")
def get(name, key="requests"):
    return ops.get(name, {}).get(key, 0)
total = sum(o["requests"] for o in s["opcodes"])
print("%d requests (READ %d: %d bytes, WRITE %d: %d bytes, FSYNC %d, FALLOCATE %d); executor: %s"
      % (total, get("READ"), get("READ", "bytes"), get("WRITE"), get("WRITE", "bytes"), get("FSYNC"),
         get("FALLOCATE"), ", ".join("%s %d" % kv for kv in sorted(ex.items()))))
if bad:
    print("; ".join(bad))
    sys.exit(1)
PY
        ); then
                vm_check ok "vufsd statistics: $stats"
        else
                vm_check fail "vufsd statistics: $stats"
        fi
else
        vm_check fail "no statistics read at the guest's last sync point"
fi

elapsed=$(echo "$(date +%s.%N) $t0" | awk '{ printf "%.1f", $1 - $2 }')
if [ $vm_failures -ne 0 ]; then
        [ $rc -ne 0 ] || sed 's/^/test-guest-fio-switch:   /' "$T/run-guest.out" >&2
        msg "FAIL after ${elapsed}s"
        echo "$vm_passes passed, $vm_failures failed"
        exit 1
fi
msg "PASS after ${elapsed}s"
echo "$vm_passes passed, 0 failed"
