#!/bin/bash
# Boots a throwaway Linux guest under QEMU (TCG) against a vhost-user-fs backend and reports its result.
#
# Usage: run-guest.sh [options] [-- BACKEND-COMMAND...]
#   --backend vufsd[:PATH] | virtiofsd[:PATH]
#                        start this backend on --socket serving --share (instead of a BACKEND-COMMAND);
#                        vufsd defaults to $VUFSD_BINARY, virtiofsd to /usr/lib/qemu/virtiofsd
#   --share DIR          the shared directory (needed with --backend)
#   --socket PATH        vhost-user socket (default: in a temporary directory); in a BACKEND-COMMAND
#                        the word @SOCK@ is replaced by it and @SHARE@ by --share
#   --initrd FILE        initramfs to boot (default: built or reused by mkinitramfs.sh in --build-dir)
#   --build-dir DIR      cache directory for the initramfs (default $VUFS_VM_BUILD_DIR or /var/tmp/vufs-vm)
#   --log FILE           console log (default: in the temporary directory, printed on failure)
#   --backend-log FILE   backend stdout+stderr (default: in the temporary directory, printed on failure;
#                        without a backend to start, the existing log to print on failure)
#   --tag TAG            virtiofs tag (default vufs)
#   --script NAME        guest script in the initramfs (default guest-basic.sh)
#   --param KEY=VALUE    pass vufs.KEY=VALUE on the kernel command line (the script sees VUFS_KEY)
#   --append TEXT        more kernel command line
#   --memory SIZE        guest RAM (default 512M)
#   --smp N              guest CPUs (default 2)
#   --queues N           num-request-queues of the device (default: QEMU's, 1)
#   --reboot             let the guest reboot (QEMU without -no-reboot); implies --expect-pass 2
#   --expect-pass N      number of "VUFS-RESULT: PASS" lines required (default 1)
#   --timeout SECONDS    whole run, from QEMU start (default 240)
#   --keep-listening     the backend keeps listening after QEMU disconnects: stop it with SIGTERM and
#                        require exit status 0 (default: require that it exits by itself with status 0)
#   --show               print the guest console live
#   --quiet              print only the result and failure details
#   --qemu-arg ARG       one more QEMU argument (repeatable)
#
# Exit status: 0 guest passed and backend exited cleanly, 1 test failure, 2 usage or setup error.
# The whole run is summarised in "run-guest:" lines on stderr.

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"

msg() { echo "run-guest: $*" >&2; }
verbose() { [ $quiet -eq 1 ] || msg "$@"; }
usage_error() { msg "error: $*"; exit 2; }

backend=
share=
sock=
initrd=
build_dir=${VUFS_VM_BUILD_DIR:-/var/tmp/vufs-vm}
log=
backend_log=
tag=vufs
script=guest-basic.sh
params=()
append=
memory=512M
smp=2
queues=
reboot=0
expect_pass=
timeout_s=240
keep_listening=0
show=0
quiet=0
qemu_extra=()
backend_cmd=()

while [ $# -gt 0 ]; do
        case "$1" in
        --backend) backend=${2:?}; shift 2 ;;
        --share) share=${2:?}; shift 2 ;;
        --socket) sock=${2:?}; shift 2 ;;
        --initrd) initrd=${2:?}; shift 2 ;;
        --build-dir) build_dir=${2:?}; shift 2 ;;
        --log) log=${2:?}; shift 2 ;;
        --backend-log) backend_log=${2:?}; shift 2 ;;
        --tag) tag=${2:?}; shift 2 ;;
        --script) script=${2:?}; shift 2 ;;
        --param) params+=("${2:?}"); shift 2 ;;
        --append) append=${2:?}; shift 2 ;;
        --memory) memory=${2:?}; shift 2 ;;
        --smp) smp=${2:?}; shift 2 ;;
        --queues) queues=${2:?}; shift 2 ;;
        --reboot) reboot=1; shift ;;
        --expect-pass) expect_pass=${2:?}; shift 2 ;;
        --timeout) timeout_s=${2:?}; shift 2 ;;
        --keep-listening) keep_listening=1; shift ;;
        --show) show=1; shift ;;
        --quiet) quiet=1; shift ;;
        --qemu-arg) qemu_extra+=("${2:?}"); shift 2 ;;
        --) shift; backend_cmd=("$@"); break ;;
        -h|--help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) usage_error "unknown argument $1 (see --help)" ;;
        esac
done
[ -n "$expect_pass" ] || expect_pass=$((reboot + 1))

missing=$(vm_missing_prerequisites)
[ -z "$missing" ] || usage_error "missing: $(echo "$missing" | paste -sd';')"
qemu=$(vm_qemu)
kver=$(vm_kernel_version)
kernel=/boot/vmlinuz-$kver

workdir=$(mktemp -d "${TMPDIR:-/tmp}/vufs-run-guest.XXXXXX")
qemu_pid=
backend_pid=
cleanup() {
        local rc=$?
        trap - EXIT INT TERM
        if [ -n "$qemu_pid" ] && kill -0 "$qemu_pid" 2>/dev/null; then
                kill -KILL "$qemu_pid" 2>/dev/null || true
        fi
        if [ -n "$backend_pid" ] && kill -0 "$backend_pid" 2>/dev/null; then
                kill -TERM "$backend_pid" 2>/dev/null || true
                sleep 0.5
                kill -KILL "$backend_pid" 2>/dev/null || true
        fi
        wait 2>/dev/null || true
        rm -rf "$workdir"
        exit "$rc"
}
trap cleanup EXIT
trap 'msg "interrupted"; exit 130' INT TERM

[ -n "$sock" ] || sock=$workdir/vhost-user-fs.sock
[ -n "$log" ] || log=$workdir/console.log
[ -n "$backend_log" ] || backend_log=$workdir/backend.log
: > "$log"

if [ -n "$backend" ]; then
        [ ${#backend_cmd[@]} -eq 0 ] || usage_error "--backend and a BACKEND-COMMAND are exclusive"
        [ -n "$share" ] && [ -d "$share" ] || usage_error "--backend needs --share DIR (an existing directory)"
        case "$backend" in
        vufsd|vufsd:*)
                bin=${backend#vufsd}; bin=${bin#:}; bin=${bin:-${VUFSD_BINARY:-}}
                [ -n "$bin" ] && [ -x "$bin" ] || usage_error "vufsd binary not found (set VUFSD_BINARY or --backend vufsd:PATH)"
                backend_cmd=("$bin" --socket-path "$sock" --shared-dir "$share")
                # VUFSD_EXTRA_ARGS: more vufsd options (word-split), e.g. "--seccomp=log" to list
                # missing system calls, or "--sandbox=namespace --seccomp=kill" to be explicit.
                # shellcheck disable=SC2206
                [ -z "${VUFSD_EXTRA_ARGS:-}" ] || backend_cmd+=(${VUFSD_EXTRA_ARGS})
                [ -z "$queues" ] || backend_cmd+=(--num-request-queues "$queues")
                [ $keep_listening -eq 0 ] || backend_cmd+=(--keep-listening)
                ;;
        virtiofsd|virtiofsd:*)
                bin=${backend#virtiofsd}; bin=${bin#:}; bin=${bin:-/usr/lib/qemu/virtiofsd}
                [ -x "$bin" ] || usage_error "$bin not found (apt-get install qemu-system-x86)"
                backend_cmd=("$bin" "--socket-path=$sock" -o "source=$share" -o cache=auto -o sandbox=chroot)
                ;;
        *) usage_error "unknown backend $backend (vufsd or virtiofsd)" ;;
        esac
else
        for i in "${!backend_cmd[@]}"; do
                backend_cmd[$i]=${backend_cmd[$i]//@SOCK@/$sock}
                backend_cmd[$i]=${backend_cmd[$i]//@SHARE@/$share}
        done
fi

if [ -z "$initrd" ]; then
        initrd=$("$here/mkinitramfs.sh" "$build_dir/initramfs-$kver.cpio.gz" --kernel-version "$kver") ||
                usage_error "building the initramfs failed"
fi
[ -r "$initrd" ] || usage_error "initramfs $initrd not readable"

# A process that is gone or a zombie (our exited child before wait) is not alive.
alive() {
        local st
        st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
        [ -n "$st" ] && [ "$st" != Z ]
}

print_tail() {
        local what=$1 file=$2 n=${3:-60}
        [ -s "$file" ] || { msg "$what: (empty)"; return 0; }
        msg "---- last $n lines of $what ($file) ----"
        tail -n "$n" "$file" | tr -d '\r' | sed 's/^/    /' >&2
        msg "---- end of $what ----"
}

if [ ${#backend_cmd[@]} -gt 0 ]; then
        rm -f "$sock"
        : > "$backend_log"
        verbose "backend: ${backend_cmd[*]}"
        "${backend_cmd[@]}" > "$backend_log" 2>&1 &
        backend_pid=$!
        # The backend must be listening before QEMU connects.
        for _ in $(seq 100); do
                [ -S "$sock" ] && break
                alive "$backend_pid" || break
                sleep 0.1
        done
        if ! alive "$backend_pid" || [ ! -S "$sock" ]; then
                msg "FAIL: backend did not create $sock"
                print_tail "backend log" "$backend_log"
                exit 1
        fi
        sleep 0.2 # bind() comes before listen()
        verbose "backend pid $backend_pid listening on $sock"
else
        [ -S "$sock" ] || usage_error "no backend command and nothing listening on $sock"
fi

# no_timer_check: under TCG on a loaded host the kernel's IO-APIC timer test can miss its ticks and
# panic ("IO-APIC + timer doesn't work!"); the emulated timer works, so skip that test.
cmdline="console=ttyS0 quiet loglevel=3 edd=off panic=-1 no_timer_check rdinit=/init vufs.tag=$tag vufs.script=$script"
for p in "${params[@]}"; do
        cmdline+=" vufs.$p"
done
[ -z "$append" ] || cmdline+=" $append"

dev="vhost-user-fs-pci,chardev=char0,tag=$tag"
[ -z "$queues" ] || dev+=",num-request-queues=$queues"
# shellcheck disable=SC2054 # commas belong to QEMU option values
qemu_cmd=("$qemu" -accel tcg -machine pc -m "$memory" -smp "$smp"
          -nodefaults -no-user-config -display none -vga none
          -object "memory-backend-memfd,id=mem,size=$memory,share=on" -numa node,memdev=mem
          -chardev "socket,id=char0,path=$sock" -device "$dev"
          -chardev "file,id=con,path=$log" -serial chardev:con
          -kernel "$kernel" -initrd "$initrd" -append "$cmdline")
[ $reboot -eq 1 ] || qemu_cmd+=(-no-reboot)
qemu_cmd+=("${qemu_extra[@]}")

verbose "qemu: ${qemu_cmd[*]}"
start=$(date +%s.%N)
"${qemu_cmd[@]}" > "$workdir/qemu.log" 2>&1 &
qemu_pid=$!

show_pid=
if [ $show -eq 1 ]; then
        tail -n +1 -f --pid="$qemu_pid" "$log" | tr -d '\r' >&2 &
        show_pid=$!
fi

# Watch the run: QEMU exit, timeout, kernel panic, and the backend dying under a running guest.
failure=
passes_seen=0
backend_ticks=
clk_tck=$(getconf CLK_TCK 2>/dev/null || echo 100)
elapsed() { echo "$(date +%s.%N) $start" | awk '{ printf "%.1f", $1 - $2 }'; }
while alive "$qemu_pid"; do
        sleep 0.25
        # The backend's CPU time (utime stime), reported at the end: a busy-polling backend shows here.
        [ -z "$backend_pid" ] || backend_ticks=$(sed 's/.*) //' "/proc/$backend_pid/stat" 2>/dev/null | cut -d' ' -f12,13) || true
        if [ -n "$backend_pid" ] && ! alive "$backend_pid" && alive "$qemu_pid"; then
                failure="backend pid $backend_pid exited while the guest was running"
                break
        fi
        n=$(grep -ac 'VUFS-RESULT: PASS' "$log" || true)
        while [ "$n" -gt "$passes_seen" ]; do
                passes_seen=$((passes_seen + 1))
                verbose "boot $passes_seen passed after $(elapsed)s${backend_pid:+ (backend pid $backend_pid alive)}"
        done
        if grep -aq 'VUFS-RESULT: FAIL' "$log"; then
                sleep 1 # let the guest power off by itself
                alive "$qemu_pid" && failure="guest reported failure"
                break
        fi
        if grep -aq 'Kernel panic' "$log"; then
                failure="guest kernel panic"
                break
        fi
        if [ "$(awk -v e="$(elapsed)" -v t="$timeout_s" 'BEGIN { print (e > t) }')" = 1 ]; then
                failure="timeout after ${timeout_s}s"
                break
        fi
done
if alive "$qemu_pid"; then
        kill -KILL "$qemu_pid" 2>/dev/null || true
fi
qemu_status=0
wait "$qemu_pid" 2>/dev/null || qemu_status=$?
qemu_pid=
run_time=$(elapsed)
[ -z "$show_pid" ] || wait "$show_pid" 2>/dev/null || true

# The backend: exits by itself once QEMU is gone (or on SIGTERM with --keep-listening), status 0.
backend_status=
if [ -n "$backend_pid" ]; then
        if [ $keep_listening -eq 1 ] && alive "$backend_pid"; then
                sleep 0.5
                alive "$backend_pid" || { [ -n "$failure" ] || failure="backend exited after disconnect despite --keep-listening"; }
                kill -TERM "$backend_pid" 2>/dev/null || true
        fi
        for _ in $(seq 100); do
                alive "$backend_pid" || break
                sleep 0.1
        done
        if alive "$backend_pid"; then
                [ -n "$failure" ] || failure="backend pid $backend_pid still running 10s after QEMU exited"
                kill -KILL "$backend_pid" 2>/dev/null || true
        fi
        backend_status=0
        wait "$backend_pid" || backend_status=$?
        backend_pid=
        verbose "backend exited with status $backend_status; CPU time while the guest ran: $(echo "${backend_ticks:-0 0}" |
                awk -v hz="$clk_tck" '{ printf "%.2fs user, %.2fs system", $1 / hz, $2 / hz }')"
fi

tr -d '\r' < "$log" > "$workdir/console.clean"
passes=$(grep -ac 'VUFS-RESULT: PASS' "$workdir/console.clean" || true)
fails=$(grep -a 'VUFS-RESULT: FAIL' "$workdir/console.clean" | sed 's/.*VUFS-RESULT: //' | head -n 1 || true)
verbose "qemu exited with status $qemu_status after ${run_time}s; guest PASS lines: $passes (expected $expect_pass)"
[ $quiet -eq 1 ] || grep -a -E 'VUFS-(BOOT|MOUNTED|DONE):' "$workdir/console.clean" | sed 's/^/run-guest:   guest: /' >&2 || true

if [ -z "$failure" ]; then
        if [ -n "$fails" ]; then
                failure="guest: $fails"
        elif [ "$passes" -ne "$expect_pass" ]; then
                failure="guest printed $passes PASS lines, expected $expect_pass"
        elif [ "$qemu_status" -ne 0 ]; then
                failure="qemu exited with status $qemu_status"
        elif [ -n "$backend_status" ] && [ "$backend_status" -ne 0 ]; then
                failure="backend exited with status $backend_status"
        fi
fi

if [ -n "$failure" ]; then
        msg "FAIL: $failure"
        grep -a -E 'CHECK FAIL|VUFS-RESULT: FAIL' "$workdir/console.clean" | sed 's/^/run-guest:   /' >&2 || true
        print_tail "guest console" "$workdir/console.clean" 80
        print_tail "qemu output" "$workdir/qemu.log" 20
        print_tail "backend log" "$backend_log" 40
        exit 1
fi
msg "PASS (${run_time}s)"
exit 0
