#!/bin/bash
# bench-guest.sh: fio inside a real Linux guest (QEMU, TCG) against several virtio-fs backends at once.
#
# Every backend serves its own share to one guest through its own vhost-user-fs device (tags b0, b1,
# ...). The guest runs each fio job on every share in turn (A B C, then B C A, ...), so all backends
# see the same guest and the same moment's machine load. The host reads each daemon's CPU time
# (utime + stime of all its threads, /proc/PID/stat) when the guest announces a job's start and end
# on the console, and reports guest IOPS and host daemon CPU per I/O.
#
# Usage: bench-guest.sh [options]
#   --backends LIST   comma separated: vufsd-defaults (no options), vufsd-nopoll (no options but
#                     --poll-us=0), vufsd-other (no options, the --vufsd-other binary: two builds
#                     side by side), vufsd-inline, vufsd-poolN,
#                     vufsd-autoN, virtiofsd-N
#                     (default vufsd-inline,vufsd-pool4,vufsd-auto4,virtiofsd-0,virtiofsd-4)
#   --matrix M        reduced (default, 8 jobs), full (the seeds' 30: seqread randread seqwrite
#                     randwrite randrw x psync mmap libaio x 1 and 4 jobs), or a list RW:ENGINE:JOBS,...
#   --runtime S       seconds per fio job (default 4)
#   --size MIB        file per fio job thread (default 16)
#   --iodepth N       libaio queue depth (default 16, as the published virtiofs-tests)
#   --rounds N        repeat the matrix; the report takes medians (default 1)
#   --out DIR         results.tsv, report.md, results.json, console log (default ./bench-guest-out)
#   --png FILE        chart (gnuplot)
#   --pin CPUS        taskset the daemons to CPUS (default: no pinning; QEMU's TCG threads use both CPUs)
#   --vufsd PATH      vufsd binary (default $VUFSD_BINARY, then build/daemon/vufsd)
#   --vufsd-other PATH  the vufsd-other backend's binary
#   --memory SIZE     guest RAM (default 1G: the initramfs carries fio and its libraries)
#   --timeout S       whole guest run (default: computed from the matrix)
#
# Prints the markdown report on stdout. Exit status 0 when every job ran on every backend.

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"

msg() { echo "bench-guest: $*" >&2; }
die() { msg "error: $*"; exit 2; }

backends=vufsd-inline,vufsd-pool4,vufsd-auto4,virtiofsd-0,virtiofsd-4
matrix=reduced
runtime=4
size=16
iodepth=16
rounds=1
out=$PWD/bench-guest-out
png=
pin=
vufsd=${VUFSD_BINARY:-$top/build/daemon/vufsd}
vufsd_other=
memory=1G
timeout_s=
virtiofsd=/usr/lib/qemu/virtiofsd

while [ $# -gt 0 ]; do
        case "$1" in
        --backends) backends=${2:?}; shift 2 ;;
        --matrix) matrix=${2:?}; shift 2 ;;
        --runtime) runtime=${2:?}; shift 2 ;;
        --size) size=${2:?}; shift 2 ;;
        --iodepth) iodepth=${2:?}; shift 2 ;;
        --rounds) rounds=${2:?}; shift 2 ;;
        --out) out=${2:?}; shift 2 ;;
        --png) png=${2:?}; shift 2 ;;
        --pin) pin=${2:?}; shift 2 ;;
        --vufsd) vufsd=${2:?}; shift 2 ;;
        --vufsd-other) vufsd_other=${2:?}; shift 2 ;;
        --memory) memory=${2:?}; shift 2 ;;
        --timeout) timeout_s=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
        esac
done

case "$matrix" in
reduced)
        matrix=seqread:psync:1,randread:psync:1,seqwrite:psync:1,randwrite:psync:1,randrw:psync:1
        matrix+=,randread:libaio:1,randread:psync:4,randwrite:mmap:1
        ;;
full)
        list=()
        for rw in seqread randread seqwrite randwrite randrw; do
                for eng in psync mmap libaio; do
                        for nj in 1 4; do
                                list+=("$rw:$eng:$nj")
                        done
                done
        done
        matrix=$(IFS=,; echo "${list[*]}")
        ;;
esac
n_jobs=$(echo "$matrix" | tr ',' '\n' | grep -c .)

missing=$(vm_missing_prerequisites)
[ -z "$missing" ] || die "missing: $(echo "$missing" | paste -sd';')"
command -v fio >/dev/null || die "fio is not installed (apt-get install fio)"
[ "$(id -u)" = 0 ] || die "run as root (the daemons chroot into their shares)"
kver=$(vm_kernel_version)
build_dir=${VUFS_VM_BUILD_DIR:-/var/tmp/vufs-vm}
mkdir -p "$out" "$build_dir"
out=$(cd "$out" && pwd)

work=$(mktemp -d "${TMPDIR:-/var/tmp}/vufs-bench-guest.XXXXXX")
pids=()
monitor_pid=
trap vm_bench_cleanup EXIT
trap 'msg interrupted; exit 130' INT TERM

# ---- the guest side: generated, so this file is the whole benchmark ----
guest_script=$build_dir/fio-bench.sh
cat > "$guest_script.new" <<'GUEST'
#!/bin/sh
# fio-bench.sh (written by tests/vm/bench-guest.sh): runs the fio matrix on every virtio-fs tag,
# announcing each job on the console for the host's CPU accounting. $1 = mount point of VUFS_TAG.
mnt=$1
i=0
for t in $(echo "$VUFS_TAGS" | tr ',' ' '); do
        if [ "$t" = "$VUFS_TAG" ]; then
                d=$mnt
        else
                d=/b/$t
                mkdir -p "$d"
                mount -t virtiofs "$t" "$d" || { echo "VUFS-BENCH-ERROR mount $t"; exit 1; }
        fi
        eval "dir_$i=$d tag_$i=$t"
        i=$((i + 1))
done
n=$i
round=0
while [ $round -lt "$VUFS_ROUNDS" ]; do
        j=0
        for job in $(echo "$VUFS_MATRIX" | tr ',' ' '); do
                rw=${job%%:*}
                rest=${job#*:}
                eng=${rest%%:*}
                nj=${rest#*:}
                case "$rw" in
                seqread) fiorw=read ;;
                seqwrite) fiorw=write ;;
                *) fiorw=$rw ;;
                esac
                case "$eng" in
                libaio) extra="--direct=1 --iodepth=$VUFS_IODEPTH" ;;
                psync) extra="--direct=1" ;;
                *) extra="" ;;
                esac
                k=0
                while [ $k -lt $n ]; do
                        idx=$(( (k + j + round) % n ))
                        eval "d=\$dir_$idx t=\$tag_$idx"
                        sync
                        echo 3 > /proc/sys/vm/drop_caches
                        echo "VUFS-BENCH-BEGIN $t $rw-$eng-$nj $round"
                        usleep 400000
                        fio --name=bench --directory="$d" --filename_format='bench.$jobnum' --rw="$fiorw" \
                                --rwmixread=75 --bs=4k --size="${VUFS_SIZE}M" --runtime="$VUFS_RUNTIME" --time_based \
                                --ioengine="$eng" $extra --numjobs="$nj" --group_reporting --thread --minimal \
                                > /tmp/fio.out 2>&1
                        res=$(grep '^3;' /tmp/fio.out | tail -n 1)
                        [ -n "$res" ] || sed 's/^/VUFS-BENCH-FIO: /' /tmp/fio.out | tail -n 5
                        echo "VUFS-BENCH-END $t $rw-$eng-$nj $round ${res:-none}"
                        usleep 400000
                        k=$((k + 1))
                done
                j=$((j + 1))
        done
        round=$((round + 1))
done
for t in $(echo "$VUFS_TAGS" | tr ',' ' '); do
        [ "$t" = "$VUFS_TAG" ] || umount "/b/$t"
done
exit 0
GUEST
if cmp -s "$guest_script.new" "$guest_script"; then
        rm -f "$guest_script.new"
else
        mv -f "$guest_script.new" "$guest_script"
fi
msg "initramfs with fio (built once, then cached in $build_dir)"
initrd=$("$here/mkinitramfs.sh" "$build_dir/initramfs-bench-$kver.cpio.gz" --kernel-version "$kver" \
        --script "$guest_script" --extra-dyn "$(command -v fio)") || die "building the initramfs failed"

# ---- the backends ----
declare -A tag_name=() tag_pid=()
qemu_args=()
tags=()
i=0
for b in $(echo "$backends" | tr ',' ' '); do
        t=b$i
        dir=$work/$b
        mkdir -p "$dir/share"
        sock=$dir/sock
        # The fio files exist before the guest starts: no layout phase, same data everywhere.
        for n in 0 1 2 3; do
                dd if=/dev/zero of="$dir/share/bench.$n" bs=1M count="$size" status=none
        done
        case "$b" in
        vufsd-defaults)
                cmd=("$vufsd" --socket-path="$sock" --shared-dir="$dir/share") ;;
        vufsd-nopoll)
                cmd=("$vufsd" --socket-path="$sock" --shared-dir="$dir/share" --poll-us=0) ;;
        vufsd-other)
                [ -x "$vufsd_other" ] || die "vufsd-other needs --vufsd-other PATH (an executable)"
                cmd=("$vufsd_other" --socket-path="$sock" --shared-dir="$dir/share") ;;
        vufsd-inline)
                cmd=("$vufsd" --socket-path="$sock" --shared-dir="$dir/share" --threads=inline) ;;
        vufsd-pool*|vufsd-auto*)
                mode=${b#vufsd-}; mode=${mode%%[0-9]*}
                nthreads=${b#vufsd-$mode}; nthreads=${nthreads:-4}
                cmd=("$vufsd" --socket-path="$sock" --shared-dir="$dir/share" --threads="$mode" --thread-pool-size="$nthreads") ;;
        virtiofsd-*)
                [ -x "$virtiofsd" ] || die "$virtiofsd not installed (apt-get install qemu-system-x86)"
                cmd=("$virtiofsd" --socket-path="$sock" -o source="$dir/share" -o cache=auto -o sandbox=chroot
                     --thread-pool-size="${b#virtiofsd-}") ;;
        *) die "unknown backend $b" ;;
        esac
        case "$b" in
        vufsd-defaults|vufsd-nopoll|vufsd-other)
                # Every setting at its default (but busy polling, for nopoll): what a user gets
                # without options, and what the default spin costs or gains against it.
                [ -x "$vufsd" ] || die "vufsd not found at $vufsd (--vufsd PATH or VUFSD_BINARY)"
                cmd+=(--bus=none --log-level=warning) ;;
        vufsd-*)
                [ -x "$vufsd" ] || die "vufsd not found at $vufsd (--vufsd PATH or VUFSD_BINARY)"
                # Both daemons drop the guest's O_DIRECT on host opens by default;
                # VUFSD_BENCH_DIRECT_IO=1 measures vufsd passing it through.
                cmd+=(--cache=auto --sandbox=chroot --bus=none --log-level=warning)
                [ "${VUFSD_BENCH_DIRECT_IO:-0}" = 0 ] || cmd+=(-o allow_direct_io) ;;
        esac
        [ -z "$pin" ] || cmd=(taskset -c "$pin" "${cmd[@]}")
        vm_bench_start_backend "$b" "$dir" "$sock" "${cmd[@]}"
        msg "$t = $b (pid $pid): ${cmd[*]}"
        tag_name[$t]=$b
        tag_pid[$t]=$pid
        tags+=("$t")
        if [ $i -eq 0 ]; then
                sock0=$sock
        else
                qemu_args+=(--qemu-arg -chardev --qemu-arg "socket,id=cb$i,path=$sock"
                            --qemu-arg -device --qemu-arg "vhost-user-fs-pci,chardev=cb$i,tag=$t")
        fi
        i=$((i + 1))
done
n_backends=$i
sleep 0.3

# CPU time (ns) of a daemon: all its threads and waited-for children, plus any live children.
clk_tck=$(getconf CLK_TCK)
cpu_ns() {
        local pid=$1 total=0 p f
        for p in "$pid" $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
                f=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null) || continue
                set -- $f
                total=$((total + ${12} + ${13} + ${14} + ${15}))
        done
        echo $((total * 1000000000 / clk_tck))
}

log=$out/console.log
results=$out/results.tsv
: > "$log"
printf 'round\tbackend\tjob\tread_ios\twrite_ios\tread_iops\twrite_iops\tcpu_ns\twall_ns\n' > "$results"
(
        set +e
        declare -A begin_cpu=() begin_wall=()
        me=$BASHPID
        while read -r line; do
                line=${line//$'\r'/}
                case "$line" in
                *VUFS-BENCH-BEGIN*)
                        set -- ${line#*VUFS-BENCH-BEGIN }
                        begin_cpu[$1]=$(cpu_ns "${tag_pid[$1]}")
                        begin_wall[$1]=$(date +%s%N)
                        ;;
                *VUFS-BENCH-END*)
                        set -- ${line#*VUFS-BENCH-END }
                        t=$1 job=$2 round=$3 terse=${4:-none}
                        c=$(cpu_ns "${tag_pid[$t]}")
                        w=$(date +%s%N)
                        echo "$terse" | awk -F';' -v r="$round" -v b="${tag_name[$t]}" -v j="$job" \
                                -v c=$((c - ${begin_cpu[$t]:-$c})) -v w=$((w - ${begin_wall[$t]:-$w})) '
                                NF > 50 && $5 == 0 { printf "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", r, b, j, $6 / 4, $47 / 4, $8, $49, c, w }
                                NF <= 50 || $5 != 0 { printf "%s\t%s\t%s\tFAILED\t\t\t\t\t\n", r, b, j }' >> "$results"
                        printf 'bench-guest: round %s %-14s %-20s %s\n' "$round" "${tag_name[$t]}" "$job" \
                                "$(tail -n 1 "$results" | awk -F'\t' '$4 != "FAILED" { printf "%6.0f IOPS  %6.1f us CPU/IO", $6 + $7, ($4 + $5) ? $8 / 1000 / ($4 + $5) : 0 } $4 == "FAILED" { print "FAILED" }')" >&2
                        ;;
                esac
        done < <(tail -n +1 -F --pid="$me" "$log" 2>/dev/null)
) &
monitor_pid=$!

[ -n "$timeout_s" ] || timeout_s=$(( n_jobs * n_backends * rounds * (runtime + 12) + 300 ))
msg "guest: $n_jobs jobs x $n_backends backends x $rounds round(s), ${runtime}s each (timeout ${timeout_s}s)"
tag_list=$(IFS=,; echo "${tags[*]}")
rc=0
"$here/run-guest.sh" --initrd "$initrd" --socket "$sock0" --tag b0 --script fio-bench.sh \
        --param "tags=$tag_list" --param "matrix=$matrix" --param "runtime=$runtime" --param "size=$size" \
        --param "iodepth=$iodepth" --param "rounds=$rounds" --memory "$memory" --log "$log" \
        --timeout "$timeout_s" --quiet "${qemu_args[@]}" || rc=$?
sleep 1
kill "$monitor_pid" 2>/dev/null || true
wait "$monitor_pid" 2>/dev/null || true
monitor_pid=

# ---- the report ----
python3 - "$results" "$out" "$backends" "$png" "$runtime" "$size" "$iodepth" "$rounds" <<'PY'
import csv, json, statistics, subprocess, sys, os
results, out, backends, png, runtime, size, iodepth, rounds = sys.argv[1:9]
backends = backends.split(",")
rows = list(csv.DictReader(open(results), delimiter="\t"))
jobs = []
data = {}
for r in rows:
    if r["job"] not in jobs:
        jobs.append(r["job"])
    if r["read_ios"] == "FAILED":
        data.setdefault((r["job"], r["backend"]), {"failed": True})
        continue
    d = data.setdefault((r["job"], r["backend"]), {"iops": [], "cpu": []})
    ios = int(r["read_ios"]) + int(r["write_ios"])
    d.setdefault("iops", []).append(float(r["read_iops"]) + float(r["write_iops"]))
    if ios:
        d.setdefault("cpu", []).append(int(r["cpu_ns"]) / 1000 / ios)

def med(v):
    return statistics.median(v) if v else None

anchor = [b for b in backends if b.startswith("virtiofsd")]
mine = [b for b in backends if b.startswith("vufsd")]
lines = []
lines.append("| fio job | " + " | ".join(backends) + " | vufsd best / C best | CPU/IO vufsd lowest / C lowest |")
lines.append("|---|" + "---|" * (len(backends) + 2))
summary = []
for j in jobs:
    cells, iops, cpu = [], {}, {}
    for b in backends:
        d = data.get((j, b))
        if not d or d.get("failed") or not d.get("iops"):
            cells.append("FAILED")
            continue
        iops[b] = med(d["iops"])
        cpu[b] = med(d.get("cpu", []))
        cells.append("%.0f / %s" % (iops[b], "%.1f µs" % cpu[b] if cpu[b] is not None else "n/a"))
    cb = max((iops[b] for b in anchor if b in iops), default=None)
    vb = max((iops[b] for b in mine if b in iops), default=None)
    cc = min((cpu[b] for b in anchor if cpu.get(b) is not None), default=None)
    vc = min((cpu[b] for b in mine if cpu.get(b) is not None), default=None)
    ratio = vb / cb if cb and vb else None
    cratio = vc / cc if cc and vc else None
    summary.append({"job": j, "iops": iops, "cpu_us_per_io": cpu, "ratio": ratio, "cpu_ratio": cratio})
    lines.append("| %s | %s | %s | %s |" % (j, " | ".join(cells),
                 "%.2f×%s" % (ratio, "" if ratio >= 1 else " **<1**") if ratio else "n/a",
                 "%.2f%s" % (cratio, "" if cratio < 1 else " **≥1**") if cratio else "n/a"))
report = ["### Guest fio (QEMU TCG, one guest, every backend on its own device)", "",
          "Cells: guest IOPS (read+write) / host daemon CPU per I/O; medians of %s round(s); "
          "4 KiB blocks, %s s per job, %s MiB per job thread, libaio iodepth %s; psync and libaio "
          "with O_DIRECT in the guest, mmap after dropping the guest's caches." % (rounds, runtime, size, iodepth), ""]
report += lines
open(os.path.join(out, "report.md"), "w").write("\n".join(report) + "\n")
json.dump({"backends": backends, "jobs": summary}, open(os.path.join(out, "results.json"), "w"), indent=1)
print("\n".join(report))
if png:
    dat = os.path.join(out, "chart.dat")
    with open(dat, "w") as f:
        f.write("job " + " ".join('"%s"' % b for b in backends) + "\n")
        for s in summary:
            cb = max((s["iops"][b] for b in anchor if b in s["iops"]), default=None)
            f.write('"%s" ' % s["job"] + " ".join(
                ("%.4f" % (s["iops"][b] / cb)) if cb and b in s["iops"] else "NaN" for b in backends) + "\n")
        f.write("\n\njob " + " ".join('"%s"' % b for b in backends) + "\n")
        for s in summary:
            cc = min((s["cpu_us_per_io"][b] for b in anchor if s["cpu_us_per_io"].get(b) is not None), default=None)
            f.write('"%s" ' % s["job"] + " ".join(
                ("%.4f" % (s["cpu_us_per_io"][b] / cc)) if cc and s["cpu_us_per_io"].get(b) is not None else "NaN"
                for b in backends) + "\n")
    gp = """set terminal pngcairo size 1100,760 font 'sans,9'
set output '%s'
set multiplot layout 2,1
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set grid ytics
set key outside right top font ',8'
set xtics rotate by -30 scale 0
set datafile missing 'NaN'
set yrange [0:*]
set title 'guest fio IOPS relative to the C virtiofsd best mode'
plot for [i=2:%d] '%s' index 0 using i:xtic(1) title columnheader(i), 1 lc rgb 'black' dt 2 notitle
set title 'host daemon CPU per I/O relative to the C virtiofsd lowest'
plot for [i=2:%d] '%s' index 1 using i:xtic(1) title columnheader(i), 1 lc rgb 'black' dt 2 notitle
unset multiplot
""" % (png, len(backends) + 1, dat, len(backends) + 1, dat)
    subprocess.run(["gnuplot"], input=gp.encode(), check=True)
PY

failed=$(awk -F'\t' 'NR > 1 && $4 == "FAILED"' "$results" | wc -l)
got=$(( $(wc -l < "$results") - 1 ))
want=$(( n_jobs * n_backends * rounds ))
msg "results in $out ($got of $want jobs recorded, $failed failed)"
if [ $rc -ne 0 ] || [ "$failed" -ne 0 ] || [ "$got" -ne "$want" ]; then
        msg "FAIL (guest run status $rc)"
        exit 1
fi
exit 0
