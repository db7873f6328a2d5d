#!/bin/bash
# bench-report.sh: runs the benchmarks and rewrites the tables and charts of docs/benchmarks.md.
#
# Each part's tables live in docs/benchmarks.md between two marker lines,
#   <!-- bench-report: PART begin -->  ...  <!-- bench-report: PART end -->
# which this script replaces with the part's fresh report (a part without markers is appended at the
# end); the prose around them is written by hand and says when it was measured. Charts are written
# next to the document. Parts (default: all, in this order):
#   vufs-bench        tests/bench/vufs-bench --compare plus vufsd with every setting at its default
#                     (vufsd-defaults), QD 1 and 16, on the --bench-fs file system
#                     -> docs/benchmarks-vufs-bench.png                      (~25 min with 5 rounds)
#   vufs-bench-tmpfs  open-release and create-unlink on tmpfs (no block allocator, no journal: the
#                     daemons' own cost of a create is most of the CPU)      (~3 min)
#   poll              the polling targets: vufsd's defaults against fixed --poll-us windows (0, 10,
#                     25, 50, 100) and the C virtiofsd on getattr, lookup, 4 KiB read and write at
#                     QD 1 and 16, and each backend's CPU with a connected guest idle for 10 s
#                                                                            (~13 min with 5 rounds)
#   guest-fio         tests/vm/bench-guest.sh, the seeds' full fio matrix in a real guest
#                     -> docs/benchmarks-guest.png                           (~25 min with 2 rounds)
#   meta              tests/vm/bench-meta.sh, the Linux source tree in a real guest: extract, find,
#                     stat, du, git status, rm -rf; vufsd defaults, vufsd best, the C virtiofsd
#                     -> docs/benchmarks-meta.png                            (see --meta-tree)
#
# Usage: tools/bench-report.sh [options]     (as root, on the machine to describe, built tree)
#   --parts LIST      comma separated parts (default vufs-bench,vufs-bench-tmpfs,poll,guest-fio,meta)
#   --rounds N        rounds of every part (default: 5 for vufs-bench and poll, 2 for guest-fio, 3 for meta)
#   --bench-fs FS     what the vufs-bench and poll parts work on: ext4 (default), a fresh ext4 for
#                     each part, made with mkfs.ext4's defaults (journal included) on a loop device
#                     over a sparse image in --out; or dir, --out's own file system as it is
#   --meta-tree DIRS  bench-meta.sh --tree (default: the whole tree, ~84,000 entries; under TCG on
#                     a 2-CPU machine that is hours: fs,kernel,mm,include is ~9,200 entries)
#   --meta-backends L bench-meta.sh --backends (default vufsd,vufsd-best,virtiofsd,guest-tmpfs)
#   --meta-share-fs F bench-meta.sh --share-fs: dir (default) or ext4 (a whole file system per share;
#                     needed for a tree with more inodes than the daemons' fd limit)
#   --quick           a smoke run of the machinery: 1 round, short cells, reduced fio matrix,
#                     a 100-file tree (the numbers mean nothing; use with --doc elsewhere)
#   --doc FILE        the document to rewrite (default docs/benchmarks.md); charts go beside it
#   --build DIR       meson build directory (default build; compiled first)
#   --out DIR         raw results of every part (default /var/tmp/vufs-bench-report)
#
# tools/install-bench-deps.sh installs what the parts need on a fresh Debian 12 machine.

# shellcheck disable=SC2054 # the commas belong to option values
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD

msg() { echo "bench-report: $*" >&2; }
die() { msg "error: $*"; exit 2; }

parts=vufs-bench,vufs-bench-tmpfs,poll,guest-fio,meta
rounds=
bench_fs=ext4
meta_tree=
meta_backends=
meta_share_fs=
quick=0
doc=$top/docs/benchmarks.md
build=$top/build
out=/var/tmp/vufs-bench-report

while [ $# -gt 0 ]; do
        case "$1" in
        --parts) parts=${2:?}; shift 2 ;;
        --rounds) rounds=${2:?}; shift 2 ;;
        --bench-fs) bench_fs=${2:?}; shift 2 ;;
        --meta-tree) meta_tree=${2:?}; shift 2 ;;
        --meta-backends) meta_backends=${2:?}; shift 2 ;;
        --meta-share-fs) meta_share_fs=${2:?}; shift 2 ;;
        --quick) quick=1; shift ;;
        --doc) doc=${2:?}; shift 2 ;;
        --build) build=${2:?}; shift 2 ;;
        --out) out=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
        esac
done
for p in $(echo "$parts" | tr ',' ' '); do
        case "$p" in
        vufs-bench|vufs-bench-tmpfs|poll|guest-fio|meta) ;;
        *) die "unknown part $p" ;;
        esac
done
case "$bench_fs" in
ext4|dir) ;;
*) die "--bench-fs takes ext4 or dir" ;;
esac
[ "$(id -u)" = 0 ] || die "run as root (the C virtiofsd and the guest benchmarks need it)"
[ -f "$doc" ] || die "$doc not found"
doc=$(cd "$(dirname "$doc")" && pwd)/$(basename "$doc")
docdir=$(dirname "$doc")
mkdir -p "$out"

msg "building $build"
[ -d "$build" ] || meson setup "$build" --buildtype=debugoptimized >&2
nice meson compile -C "$build" >&2
vufsd=$build/daemon/vufsd
bench=$build/tests/bench/vufs-bench
[ -x "$vufsd" ] && [ -x "$bench" ] || die "vufsd or vufs-bench missing in $build"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit+=" (with uncommitted changes)"

machine() {
        local cpus model
        cpus=$(nproc)
        model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
        echo "$cpus CPUs ($model), Linux $(uname -r), QEMU $(qemu-system-x86_64 --version 2>/dev/null | sed -n 's/.*version \([0-9.]*\).*/\1/p')"
}
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# splice PART FILE: replaces PART's block in the document with FILE (or appends it).
splice() {
        python3 - "$doc" "$1" "$2" <<'PY'
import sys
doc, part, new = sys.argv[1:4]
text = open(doc).read()
begin, end = "<!-- bench-report: %s begin -->" % part, "<!-- bench-report: %s end -->" % part
block = begin + "\n" + open(new).read().rstrip("\n") + "\n\n" + end
i, j = text.find(begin), text.find(end)
if i >= 0 and j > i:
    text = text[:i] + block + text[j + len(end):]
else:
    text = text.rstrip("\n") + "\n\n" + block + "\n"
open(doc, "w").write(text)
PY
}

# header CMD LOAD_BEFORE: the provenance line of a block; it names the working file system when the
# part set fs_desc.
header() {
        printf '_Regenerated by `tools/bench-report.sh` on %s at commit %s; %s; load average %s before, %s after;%s command: `%s`._\n\n' \
                "$(date -u +%Y-%m-%d)" "$commit" "$(machine)" "$2" "$(loadavg)" \
                "${fs_desc:+ working directory on $fs_desc;}" "$1"
}

# bench_dir PART: sets work, the working directory of a vufs-bench or poll part, and fs_desc.
# The default is a fresh ext4 per part (tests/vm/scratch-ext4.sh says why /var/tmp as it is would
# mix its history into the cells); unmount_bench_fs takes it down after the part and on exit.
# shellcheck source=tests/vm/scratch-ext4.sh
. "$top/tests/vm/scratch-ext4.sh"
bench_mnt=
unmount_bench_fs() {
        [ -n "$bench_mnt" ] || return 0
        scratch_ext4_remove "$bench_mnt.img" "$bench_mnt"
        bench_mnt=
}
trap unmount_bench_fs EXIT
bench_dir() {
        local d=$out/$1
        if [ "$bench_fs" = dir ]; then
                fs_desc="$(findmnt -no FSTYPE -T "$out") ($out, as it is)"
                work=$d/work
                mkdir -p "$work"
                return
        fi
        bench_mnt=$d/fs
        scratch_ext4_mount "$bench_mnt.img" "$bench_mnt" 8G || die "no scratch ext4 for $1 (use --bench-fs dir)"
        fs_desc="a fresh 8 GiB ext4 (mkfs.ext4 defaults, with a journal) on a loop device"
        work=$bench_mnt/work
        mkdir -p "$work"
}

status=0
for part in $(echo "$parts" | tr ',' ' '); do
        dir=$out/$part
        rm -rf "$dir"
        mkdir -p "$dir"
        before=$(loadavg)
        fs_desc=
        msg "part $part (load average $before)"
        case "$part" in
        vufs-bench|vufs-bench-tmpfs)
                r=${rounds:-5}
                args=(--compare -r "$r")
                [ $quick -eq 0 ] || args=(--compare -r 1 --warmup 0.1 --file-size 8 --bare-time 0.1)
                # vufsd with nothing but what the harness needs: what a user gets without options.
                backends=(-b "vufsd-defaults=$vufsd --socket-path={socket} --shared-dir={dir} --bus=none --log-level=warning"
                          -b vufsd-inline -b vufsd-pool -b vufsd-auto -b vufsd-poll -b virtiofsd-0 -b virtiofsd-pool)
                if [ "$part" = vufs-bench-tmpfs ]; then
                        mkdir -p /dev/shm/vufs-bench-report
                        args+=(-w open-release,create-unlink -t "$([ $quick -eq 0 ] && echo 1.5 || echo 0.3)"
                               --dir /dev/shm/vufs-bench-report)
                        backends=(-b "vufsd-defaults=$vufsd --socket-path={socket} --shared-dir={dir} --bus=none --log-level=warning"
                                  -b vufsd-inline -b vufsd-auto -b virtiofsd-0 -b virtiofsd-pool)
                else
                        [ $quick -eq 0 ] || args+=(-t 0.3)
                        bench_dir "$part"
                        args+=(--dir "$work" --png "$docdir/benchmarks-vufs-bench.png")
                fi
                cmd=("$bench" "${args[@]}" "${backends[@]}" --json "$dir/results.json" --markdown "$dir/report.md")
                VUFSD_BINARY=$vufsd "${cmd[@]}" > "$dir/stdout.md" 2> "$dir/stderr.log" || {
                        unmount_bench_fs; msg "$part failed (see $dir/stderr.log)"; status=1; continue; }
                [ "$part" != vufs-bench-tmpfs ] || rm -rf /dev/shm/vufs-bench-report
                unmount_bench_fs
                shown="vufs-bench ${args[*]} -b vufsd-defaults=... (and the six presets)"
                ;;
        poll)
                r=${rounds:-5}
                args=(-r "$r" -w getattr,lookup,randread-4k,randwrite-4k -q 1,16 --idle 10)
                [ $quick -eq 0 ] || args=(-r 1 -w getattr,randread-4k -q 1,16 -t 0.3 --warmup 0.1 --file-size 8
                                          --bare-time 0.1 --idle 1)
                base="$vufsd --socket-path={socket} --shared-dir={dir} --bus=none --log-level=warning"
                # Fixed windows run inline, the mode a fixed window is meant for (docs/threading.md).
                backends=(-b "vufsd-defaults=$base")
                for us in 0 10 25 50 100; do
                        backends+=(-b "vufsd-poll-us-$us=$base --threads=inline --poll-us=$us ")
                done
                backends+=(-b virtiofsd-0)
                bench_dir "$part"
                args+=(--dir "$work")
                cmd=("$bench" "${args[@]}" "${backends[@]}" --json "$dir/results.json" --markdown "$dir/report.md")
                VUFSD_BINARY=$vufsd "${cmd[@]}" > "$dir/stdout.md" 2> "$dir/stderr.log" || {
                        unmount_bench_fs; msg "$part failed (see $dir/stderr.log)"; status=1; continue; }
                unmount_bench_fs
                shown="vufs-bench ${args[*]} -b vufsd-defaults=... -b vufsd-poll-us-N=... --threads=inline --poll-us=N (N = 0 10 25 50 100) -b virtiofsd-0"
                ;;
        guest-fio)
                r=${rounds:-2}
                args=(--matrix full --rounds "$r" --runtime 3)
                [ $quick -eq 0 ] || args=(--matrix seqread:psync:1,randwrite:libaio:1 --rounds 1 --runtime 1)
                args+=(--backends vufsd-defaults,vufsd-inline,vufsd-pool4,vufsd-auto4,virtiofsd-0,virtiofsd-4)
                cmd=("$top/tests/vm/bench-guest.sh" "${args[@]}" --vufsd "$vufsd" --out "$dir"
                     --png "$docdir/benchmarks-guest.png")
                "${cmd[@]}" > "$dir/stdout.md" 2> "$dir/stderr.log" || {
                        msg "$part failed (see $dir/stderr.log)"; status=1; continue; }
                shown="tests/vm/bench-guest.sh ${args[*]}"
                ;;
        meta)
                r=${rounds:-3}
                args=(--rounds "$r")
                [ -z "$meta_tree" ] || args+=(--tree "$meta_tree")
                [ $quick -eq 0 ] || args=(--rounds 1 --tree fs/ext4,fs/fuse)
                [ -z "$meta_backends" ] || args+=(--backends "$meta_backends")
                [ -z "$meta_share_fs" ] || args+=(--share-fs "$meta_share_fs")
                cmd=("$top/tests/vm/bench-meta.sh" "${args[@]}" --vufsd "$vufsd" --out "$dir"
                     --png "$docdir/benchmarks-meta.png")
                "${cmd[@]}" > "$dir/stdout.md" 2> "$dir/stderr.log" || {
                        msg "$part failed (see $dir/stderr.log)"; status=1; continue; }
                shown="tests/vm/bench-meta.sh ${args[*]}"
                ;;
        esac
        { header "$shown" "$before"; cat "$dir/report.md"; } > "$dir/block.md"
        splice "$part" "$dir/block.md"
        msg "part $part: $doc updated"
done
exit $status
