# Helpers shared by the host-side real-guest scripts (sourced by bash, not run).
# shellcheck shell=bash

# The kernel the guest boots: VUFS_VM_KERNEL_VERSION, or the newest version that has both
# /boot/vmlinuz-VERSION and /lib/modules/VERSION/modules.dep.
vm_kernel_version() {
        local v best=
        if [ -n "${VUFS_VM_KERNEL_VERSION:-}" ]; then
                [ -r "/boot/vmlinuz-$VUFS_VM_KERNEL_VERSION" ] || return 1
                echo "$VUFS_VM_KERNEL_VERSION"
                return 0
        fi
        for v in $(ls /boot 2>/dev/null | sed -n 's/^vmlinuz-//p' | sort -V); do
                [ -r "/boot/vmlinuz-$v" ] && [ -f "/lib/modules/$v/modules.dep" ] && best=$v
        done
        [ -n "$best" ] || return 1
        echo "$best"
}

vm_busybox() {
        local b
        for b in /bin/busybox /usr/bin/busybox "$(command -v busybox 2>/dev/null || true)"; do
                if [ -n "$b" ] && [ -x "$b" ]; then
                        echo "$b"
                        return 0
                fi
        done
        return 1
}

vm_qemu() {
        command -v qemu-system-x86_64 2>/dev/null
}

# Missing prerequisites, one per line (empty when everything is there).
vm_missing_prerequisites() {
        vm_qemu >/dev/null || echo "qemu-system-x86_64 (apt-get install qemu-system-x86)"
        vm_kernel_version >/dev/null || echo "a kernel in /boot with its modules (apt-get install linux-image-amd64)"
        vm_busybox >/dev/null || echo "busybox (apt-get install busybox-static)"
        command -v cpio >/dev/null || echo "cpio (apt-get install cpio)"
}

# Exits 77 (skip), or 1 with VUFS_VM_REQUIRED=1, when a prerequisite is missing; returns otherwise.
# Usage: vm_require_prerequisites PREFIX [COMMAND...]: PREFIX starts the messages; each COMMAND must be
# in PATH as well (tools/install-deps.sh installs the test's tools).
vm_require_prerequisites() {
        local prefix=$1 missing c
        shift
        missing=$(vm_missing_prerequisites)
        for c in "$@"; do
                command -v "$c" >/dev/null || missing+=$'\n'"$c (tools/install-deps.sh installs it)"
        done
        missing=$(sed '/^$/d' <<<"$missing")
        [ -n "$missing" ] || return 0
        echo "$prefix: missing prerequisites:" >&2
        sed "s/^/$prefix:   /" <<<"$missing" >&2
        [ "${VUFS_VM_REQUIRED:-0}" != 1 ] || exit 1
        echo "$prefix: SKIP" >&2
        exit 77
}

# Checks what a conformance run boots with and exits 1 (with PREFIX: FAIL: ...) when it is not there:
# the vufsd binary, the probe (a static executable: the guest is a bare initramfs without a dynamic
# loader) and the conformance document listing the known differences.
# Usage: vm_require_conformance_inputs PREFIX VUFSD_BIN PROBE PROBE_VARIABLE DOC
vm_require_conformance_inputs() {
        local prefix=$1 vufsd_bin=$2 probe=$3 probe_var=$4 doc=$5
        if [ -z "$vufsd_bin" ] || [ ! -x "$vufsd_bin" ]; then
                echo "$prefix: FAIL: vufsd binary '$vufsd_bin' not found (set VUFSD_BINARY)" >&2
                exit 1
        fi
        if [ -z "$probe" ] || [ ! -x "$probe" ]; then
                # VUFS_LOCKS names vufs-locks, VUFS_POSIX vufs-posix.
                echo "$prefix: FAIL: $(tr 'A-Z_' 'a-z-' <<<"$probe_var") binary '$probe' not found (set $probe_var)" >&2
                exit 1
        fi
        [ -r "$doc" ] || { echo "$prefix: FAIL: $doc not found" >&2; exit 1; }
        if ldd "$probe" >/dev/null 2>&1; then
                echo "$prefix: FAIL: $probe is dynamically linked" >&2
                exit 1
        fi
}

# Writes COUNT files of random data under DIR plus DIR/SHA256SUMS.
# Usage: vm_make_data DIR NAME:SIZE...  (SIZE in bytes)
vm_make_data() {
        local dir=$1 spec name size
        shift
        mkdir -p "$dir"
        for spec in "$@"; do
                name=${spec%%:*}
                size=${spec#*:}
                head -c "$size" /dev/urandom > "$dir/$name"
        done
        (cd "$dir" && sha256sum -- "${@%%:*}" > SHA256SUMS)
}

# vm_check ok|fail DESC: one verdict of a host-side test, printed through the caller's msg
# ("ok: DESC" or "FAIL: DESC") and counted in vm_passes and vm_failures.
vm_passes=0
vm_failures=0
vm_check() {
        if [ "$1" = ok ]; then
                vm_passes=$((vm_passes + 1))
                msg "ok: $2"
        else
                vm_failures=$((vm_failures + 1))
                msg "FAIL: $2"
        fi
}

# Starts a private dbus-daemon for tests that drive vufsd over D-Bus (everyone may own and call
# anything). Usage: vm_private_bus DIR (bus.conf, bus.sock and dbus.log go there); sets VM_BUS_PID
# and VM_BUS_ADDRESS, or returns 1 with the daemon's log on stderr. The caller kills VM_BUS_PID.
vm_private_bus() {
        local dir=$1
        cat >"$dir/bus.conf" <<BUSCONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$dir/bus.sock</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
BUSCONF
        dbus-daemon --config-file="$dir/bus.conf" --nofork --print-address=3 3>"$dir/bus.address" 2>"$dir/dbus.log" &
        # shellcheck disable=SC2034 # for the caller
        VM_BUS_PID=$!
        for _ in $(seq 100); do
                [ -s "$dir/bus.address" ] && break
                sleep 0.05
        done
        VM_BUS_ADDRESS=$(head -n1 "$dir/bus.address")
        if [ -z "$VM_BUS_ADDRESS" ]; then
                cat "$dir/dbus.log" >&2
                return 1
        fi
}

# For the benchmarks (bench-guest.sh, bench-meta.sh), which define msg and die and keep their
# backends' pids in the array pids, an optional monitor in monitor_pid and scratch space in work.
# vm_bench_start_backend NAME DIR SOCK CMD...: runs CMD in the background with its output in
# DIR/backend.log, adds it to pids and sets pid; dies with the log when SOCK does not appear in
# 10 s or the process exits first.
vm_bench_start_backend() {
        local name=$1 dir=$2 sock=$3
        shift 3
        "$@" > "$dir/backend.log" 2>&1 &
        pid=$!
        pids+=("$pid")
        for _ in $(seq 100); do
                [ -S "$sock" ] && break
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
        done
        [ -S "$sock" ] || { cat "$dir/backend.log" >&2; die "$name did not start"; }
}

# The benchmarks' EXIT trap: stops the monitor and every backend (SIGTERM, then SIGKILL), reaps
# them, takes down the scratch file systems the benchmark listed in vm_bench_mounts (MNT, with its
# image at MNT.img; after the daemons, which hold them; tests/vm/scratch-ext4.sh), removes work and exits with the status the script was leaving with.
# shellcheck disable=SC2154 # monitor_pid and work belong to the benchmark that sources this
vm_bench_cleanup() {
        local rc=$? p
        trap - EXIT INT TERM
        [ -z "$monitor_pid" ] || kill "$monitor_pid" 2>/dev/null || true
        for p in "${pids[@]}"; do
                kill -TERM "$p" 2>/dev/null || true
        done
        sleep 0.3
        for p in "${pids[@]}"; do
                kill -KILL "$p" 2>/dev/null || true
        done
        wait 2>/dev/null || true
        for p in ${vm_bench_mounts[@]+"${vm_bench_mounts[@]}"}; do
                scratch_ext4_remove "$p.img" "$p"
        done
        rm -rf "$work"
        exit "$rc"
}

# vm_sample_server SOCK FILE: every 0.2 s, "fds rss_kB" of the process with the most fds among those
# whose command line names SOCK (the sandboxed server, not its supervisor; QEMU, whose -chardev
# names it too, left out), appended to FILE until killed. Anonymous memory only: the guest RAM a
# backend maps (shared memfd) is not its own.
vm_sample_server() {
        local sock=$1 file=$2 p best bestn n rss
        while :; do
                best= bestn=-1
                for p in $(grep -laF -- "$sock" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
                        case "$(cat "/proc/$p/comm" 2>/dev/null)" in qemu*) continue ;; esac
                        n=$(ls "/proc/$p/fd" 2>/dev/null | wc -l) || continue
                        [ "$n" -gt "$bestn" ] && best=$p bestn=$n
                done
                if [ -n "$best" ]; then
                        rss=$(awk '/^RssAnon:/ { print $2 }' "/proc/$best/status" 2>/dev/null || echo 0)
                        echo "$bestn ${rss:-0}" >> "$file"
                fi
                sleep 0.2
        done
}
