#!/bin/bash
# bench-meta.sh: metadata workloads on a real source tree (the Linux kernel's, ~84,000 files) in a
# real Linux guest (QEMU, TCG), against several virtio-fs backends side by side in one run.
#
# The tree comes from Debian's linux-source-6.1 package (tools/install-bench-deps.sh installs it).
# On the host, once (cached in the build dir): the selected part of the tree is unpacked, made a git
# repository (one commit, packed; core.checkStat=minimal and core.trustctime=false so that a fresh
# extraction with the archive's mtimes matches the index and `git status` only stats), and archived
# as one plain tar. The guest reads that tar from a read-only virtio-blk disk, so no virtio-fs
# daemon is involved in reading it.
#
# Every backend serves its own share to the one guest through its own vhost-user-fs device. Per
# round, each step runs on every share in turn, rotating the order per step and round; the guest
# drops its caches (sync; drop_caches=3) before every step but the warm git status:
#   extract   tar -xf (GNU tar, as root: owners, modes, mtimes) + sync
#   find      find | wc -l (the count is checked)
#   stat      find -exec stat {} + (busybox stat of every entry)
#   du        du -s
#   git-cold  git status (caches dropped; the output must be empty: the tree is clean)
#   git-warm  git status again, right after git-cold on the same share
#   rm        rm -rf + sync
# The guest times each step (GNU date, ns) and announces it on the console; the host reads each
# daemon's CPU time (all threads and children, /proc/PID/stat) and QEMU's (the guest's, under TCG)
# at each announcement. With --host-baseline the same commands run first on the host itself, in a
# directory on the shares' file system: the floor the host's system calls set.
#
# Usage: bench-meta.sh [options]
#   --backends LIST   comma separated (default vufsd,vufsd-best,virtiofsd,guest-tmpfs):
#                       vufsd        vufsd with its defaults (only --socket-path, --shared-dir,
#                                    --bus=none, --log-level=warning)
#                       vufsd-best   vufsd with --best-args (default: --threads=inline
#                                    --cache=always --writeback)
#                       virtiofsd    QEMU's C virtiofsd as libvirt starts it: -o cache=auto
#                                    -o sandbox=chroot, its default thread pool
#                       vufsd+OPT+OPT...  vufsd with these options (e.g. vufsd+--cache=always): what
#                                    one setting costs or buys against the defaults
#                       guest-tmpfs  the guest's own tmpfs: the guest's cost without virtio-fs
#   --best-args ARGS  vufsd options of vufsd-best (one string, split on spaces)
#   --share-fs FS     what each share is: dir (default), a directory of the file system of
#                     $TMPDIR; ext4, a loop-mounted ext4 of its own, a whole file system, on which
#                     vufsd's default --inode-file-handles=prefer remembers inodes by file handle
#                     (on a subdirectory it reaches inodes through O_PATH fds, at most
#                     --max-inode-fds of them open: docs/security.md); the C daemon keeps one per
#                     inode, so a tree with more inodes than its fd limit fails there
#   --tree DIRS       parts of the tree, comma separated, relative to its top (e.g. fs,kernel);
#                     default: the whole tree
#   --steps LIST      default extract,find,stat,du,git,rm (git = git-cold + git-warm)
#   --rounds N        default 3; the report takes medians
#   --source FILE     default /usr/src/linux-source-6.1.tar.xz
#   --host-baseline   also time the steps on the host (default on; --no-host-baseline)
#   --out DIR         results.tsv, report.md, results.json, console log (default ./bench-meta-out)
#   --png FILE        chart (gnuplot)
#   --vufsd PATH      vufsd binary (default $VUFSD_BINARY, then build/daemon/vufsd)
#   --memory SIZE     guest RAM (default: enough for the tree on the guest tmpfs plus 1 GiB)
#   --timeout S       whole guest run (default: computed from the tree size)
#   --prepare-only    prepare (and cache) the tree and the initramfs, then exit
#   --vufsd-bus ADDR  the vufsd backends' --bus (default none): a D-Bus address lets a step hook read
#                     their per-opcode request counts (fsctl --address=ADDR --json stats)
#   --virtiofsd-args ARGS  more options for the C virtiofsd (one string, split on spaces), e.g. -d
#                     to log every request to DIR/backend.log (it slows that daemon down)
#   --step-hook CMD   runs CMD begin|end BACKEND STEP ROUND DIR on the host at each step's start and
#                     end (DIR: the backend's directory, with backend.log); for counting requests
#                     per step (docs/benchmarks.md), not for timing: it runs inside the measurement
#
# Prints the markdown report on stdout. Exit status 0 when every step ran and checked out on every
# backend.

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"
# shellcheck source=tests/vm/scratch-ext4.sh
. "$here/scratch-ext4.sh"

msg() { echo "bench-meta: $*" >&2; }
die() { msg "error: $*"; exit 2; }

backends=vufsd,vufsd-best,virtiofsd,guest-tmpfs
best_args="--threads=inline --cache=always --writeback"
tree=
steps=extract,find,stat,du,git,rm
rounds=3
source_tar=/usr/src/linux-source-6.1.tar.xz
host_baseline=1
out=$PWD/bench-meta-out
png=
vufsd=${VUFSD_BINARY:-$top/build/daemon/vufsd}
memory=
timeout_s=
prepare_only=0
virtiofsd=/usr/lib/qemu/virtiofsd
vufsd_bus=none
virtiofsd_args=
step_hook=
share_fs=dir

while [ $# -gt 0 ]; do
        case "$1" in
        --backends) backends=${2:?}; shift 2 ;;
        --best-args) best_args=${2:?}; shift 2 ;;
        --share-fs) share_fs=${2:?}; shift 2 ;;
        --tree) tree=${2:?}; shift 2 ;;
        --steps) steps=${2:?}; shift 2 ;;
        --rounds) rounds=${2:?}; shift 2 ;;
        --source) source_tar=${2:?}; shift 2 ;;
        --host-baseline) host_baseline=1; shift ;;
        --no-host-baseline) host_baseline=0; shift ;;
        --out) out=${2:?}; shift 2 ;;
        --png) png=${2:?}; shift 2 ;;
        --vufsd) vufsd=${2:?}; shift 2 ;;
        --memory) memory=${2:?}; shift 2 ;;
        --timeout) timeout_s=${2:?}; shift 2 ;;
        --prepare-only) prepare_only=1; shift ;;
        --vufsd-bus) vufsd_bus=${2:?}; shift 2 ;;
        --virtiofsd-args) virtiofsd_args=${2:?}; shift 2 ;;
        --step-hook) step_hook=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,62p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
        esac
done

for s in $(echo "$steps" | tr ',' ' '); do
        case "$s" in
        extract|find|stat|du|git|rm) ;;
        *) die "unknown step $s (extract, find, stat, du, git, rm)" ;;
        esac
done
case ",$steps," in *,extract,*) ;; *) die "--steps must include extract (every other step needs the tree)" ;; esac
case "$rounds" in ''|*[!0-9]*|0) die "--rounds must be a positive number" ;; esac
case "$share_fs" in dir|ext4) ;; *) die "--share-fs must be dir or ext4" ;; esac

missing=$(vm_missing_prerequisites)
[ -z "$missing" ] || die "missing: $(echo "$missing" | paste -sd';')"
[ "$(id -u)" = 0 ] || die "run as root (the daemons chroot into their shares)"
[ -r "$source_tar" ] || die "$source_tar not found (tools/install-bench-deps.sh installs linux-source-6.1)"
for c in git tar xz date $([ "$share_fs" = ext4 ] && echo mkfs.ext4 losetup); do
        command -v "$c" >/dev/null || die "$c is not installed"
done
grep -q 'GNU tar' <<< "$(tar --version 2>/dev/null)" || die "tar is not GNU tar"
kver=$(vm_kernel_version)
build_dir=${VUFS_VM_BUILD_DIR:-/var/tmp/vufs-vm}
mkdir -p "$out" "$build_dir"
out=$(cd "$out" && pwd)
busybox=$(vm_busybox)

# ---- the tree: unpacked, committed and archived once per source and --tree ----
top_name=$(basename "$source_tar"); top_name=${top_name%%.tar*}
tree_key=$( { stat -Lc '%n %s %Y' "$source_tar"; echo "tree=$tree"; echo "layout=3"; } | sha256sum | cut -c1-16)
cache=$build_dir/meta-$tree_key
tree_tar=$cache/tree.tar
if [ ! -s "$cache/entries" ] || [ ! -s "$tree_tar" ]; then
        msg "preparing the tree in $cache (once: unpack, git commit, tar)"
        rm -rf "$cache"
        mkdir -p "$cache/src"
        members=()
        if [ -n "$tree" ]; then
                for p in $(echo "$tree" | tr ',' ' '); do
                        members+=("$top_name/${p%/}")
                done
        fi
        nice xz -dc "$source_tar" | nice tar -x -C "$cache/src" "${members[@]}" ||
                die "unpacking $source_tar${tree:+ ($tree)} failed"
        [ -d "$cache/src/$top_name" ] || die "$source_tar has no top directory $top_name"
        (
                cd "$cache/src/$top_name"
                git init -q
                git config core.checkStat minimal
                git config core.trustctime false
                git config gc.auto 0
                git config core.compression 1
                git config user.name bench-meta
                git config user.email bench-meta@localhost
                # -f: every file, also what the tree's .gitignore names (Debian's linux-source
                # ignores everything at its top level: `git add -A` adds nothing there).
                nice git add -A -f || exit 1
                nice git commit -q -m "$top_name${tree:+ ($tree)}" || exit 1
                nice git repack -a -d -q --window=0 || exit 1
                git prune-packed || exit 1
                # Every file tracked, or git status in the guest would not stat them all; and clean,
                # or it would print (and read) more than stats. (No set -e in a subshell of ||.)
                files=$(find . -path ./.git -prune -o ! -type d -print | wc -l)
                tracked=$(git ls-files | wc -l)
                [ "$tracked" -eq "$files" ] || { echo "git tracks $tracked of $files files" >&2; exit 1; }
                [ -z "$(git status --porcelain | head -n 1)" ] || { echo "git status not clean" >&2; exit 1; }
        ) || die "making the git repository failed"
        (cd "$cache/src" && find "$top_name" | wc -l) > "$cache/entries.new"
        nice tar -c -f "$tree_tar.new" -C "$cache/src" "$top_name" || die "tar failed"
        du -sk "$cache/src/$top_name" | cut -f1 > "$cache/kib"
        rm -rf "$cache/src"
        mv -f "$tree_tar.new" "$tree_tar"
        mv -f "$cache/entries.new" "$cache/entries"
fi
entries=$(cat "$cache/entries")
tree_kib=$(cat "$cache/kib")
tar_mib=$(( $(stat -c %s "$tree_tar") / 1048576 ))
msg "tree: $top_name${tree:+ ($tree)}, $entries entries, $((tree_kib / 1024)) MiB on disk, tar $tar_mib MiB"

n_backends=$(echo "$backends" | tr ',' '\n' | grep -c .)
case ",$backends," in
*,guest-tmpfs,*) tmpfs_mib=$((tree_kib / 1024 + tree_kib / 4096)) ;;
*) tmpfs_mib=0 ;;
esac
[ -n "$memory" ] || memory=$(( (tmpfs_mib + 1024 + 255) / 256 * 256 ))M

work=$(mktemp -d "${TMPDIR:-/var/tmp}/vufs-bench-meta.XXXXXX")
pids=()
monitor_pid=
trap vm_bench_cleanup EXIT
trap 'msg interrupted; exit 130' INT TERM

log=$out/console.log
results=$out/results.tsv
: > "$log"
printf 'round\tbackend\tstep\tguest_ns\twall_ns\tdaemon_cpu_ns\tguest_cpu_ns\tcheck\tload1\tpeak_fds\tpeak_anon_kib\n' > "$results"

# ---- the host baseline: the same commands on the host, on the shares' file system ----
if [ $host_baseline -eq 1 ] && [ $prepare_only -eq 0 ]; then
        hb=$work/host
        mkdir -p "$hb"
        now() { date +%s%N; }
        host_step() { # ROUND STEP CHECK COMMAND...
                local r=$1 s=$2 want=$3 t0 t1 got
                shift 3
                t0=$(now)
                got=$("$@") || got="failed:$?"
                t1=$(now)
                local check=ok
                case "$got" in
                failed:*) check="bad:$got" ;;
                *) [ "$want" = - ] || [ "$got" = "$want" ] || check="bad:$got" ;;
                esac
                printf '%s\thost\t%s\t%s\t%s\t\t\t%s\t%s\t\t\n' "$r" "$s" $((t1 - t0)) $((t1 - t0)) "$check" \
                        "$(cut -d' ' -f1 /proc/loadavg)" >> "$results"
                msg "round $r host           $(printf '%-9s' "$s") $(awk -v n=$((t1 - t0)) 'BEGIN { printf "%8.2f s", n / 1e9 }') $check"
        }
        for ((r = 0; r < rounds; r++)); do
                for s in $(echo "$steps" | tr ',' ' '); do
                        case "$s" in
                        extract) host_step "$r" extract - sh -c "cd '$hb' && tar -xf '$tree_tar' && sync" ;;
                        find) host_step "$r" find "$entries" sh -c "$busybox find '$hb/$top_name' | wc -l" ;;
                        stat) host_step "$r" stat - sh -c "$busybox find '$hb/$top_name' -exec $busybox stat -c %s {} + > /dev/null" ;;
                        du) host_step "$r" du - sh -c "$busybox du -s '$hb/$top_name' > /dev/null" ;;
                        git)
                                gs="cd '$hb/$top_name' && git status --porcelain > '$work/git.out' && wc -l < '$work/git.out'"
                                host_step "$r" git-cold 0 sh -c "$gs"
                                host_step "$r" git-warm 0 sh -c "$gs" ;;
                        rm) host_step "$r" rm - sh -c "rm -rf '$hb/$top_name' && sync" ;;
                        esac
                done
                rm -rf "${hb:?}/$top_name"
        done
fi

# ---- the guest side: generated, so this file is the whole benchmark ----
guest_script=$build_dir/meta-bench.sh
cat > "$guest_script.new" <<'GUEST'
#!/bin/sh
# meta-bench.sh (written by tests/vm/bench-meta.sh): the metadata steps on every share, announced
# on the console for the host's CPU accounting. $1 = mount point of VUFS_TAG.
mnt=$1
top=$VUFS_TOP
case "$(/usr/bin/tar --version)" in *"GNU tar"*) ;; *) echo "VUFS-META-ERROR no GNU tar"; exit 1 ;; esac
[ -b /dev/vda ] || { echo "VUFS-META-ERROR no /dev/vda (the tree's tar)"; exit 1; }
i=0
for t in $(echo "$VUFS_TAGS" | tr ',' ' '); do
        if [ "$t" = "$VUFS_TAG" ]; then
                d=$mnt
        elif [ "$t" = tmpfs ]; then
                d=/b/tmpfs
                mkdir -p "$d"
                mount -t tmpfs -o size=90% tmpfs "$d" || { echo "VUFS-META-ERROR mount tmpfs"; exit 1; }
        else
                d=/b/$t
                mkdir -p "$d"
                mount -t virtiofs "$t" "$d" || { echo "VUFS-META-ERROR mount $t"; exit 1; }
        fi
        eval "dir_$i=$d tag_$i=$t"
        i=$((i + 1))
done
n=$i
now() { /usr/bin/date +%s%N; }
drop() {
        sync
        echo 3 > /proc/sys/vm/drop_caches
        usleep 300000
}
# run TAG STEP ROUND WANT COMMAND: times COMMAND (its output is the check value).
# (busybox sh has no locals: every variable here starts with run_)
run() {
        run_t=$1 run_s=$2 run_r=$3 run_want=$4
        shift 4
        echo "VUFS-META-BEGIN $run_t $run_s $run_r"
        usleep 200000
        run_t0=$(now)
        run_got=$(sh -c "$*" 2>/tmp/err) || run_got="failed:$?:$(head -c 200 /tmp/err | tr -s ' \n' '__')"
        run_t1=$(now)
        usleep 200000
        run_check=ok
        # A command that failed never checks out, whatever it was to print (a tar that stopped at
        # the daemon's ENFILE extracts part of the tree and prints nothing).
        case "$run_got" in
        failed:*) run_check="bad:$run_got" ;;
        *) [ "$run_want" = - ] || [ "$run_got" = "$run_want" ] ||
                run_check="bad:$(echo "$run_got" | head -c 200 | tr -s ' \n' '__')" ;;
        esac
        echo "VUFS-META-END $run_t $run_s $run_r $((run_t1 - run_t0)) $run_check"
}
round=0
while [ $round -lt "$VUFS_ROUNDS" ]; do
        j=0
        for s in $(echo "$VUFS_STEPS" | tr ',' ' '); do
                k=0
                while [ $k -lt $n ]; do
                        idx=$(( (k + j + round) % n ))
                        eval "d=\$dir_$idx t=\$tag_$idx"
                        drop
                        case "$s" in
                        extract) run "$t" extract $round - "cd $d && /usr/bin/tar -xf /dev/vda && sync" ;;
                        find) run "$t" find $round "$VUFS_ENTRIES" "find $d/$top | wc -l" ;;
                        stat) run "$t" stat $round - "find $d/$top -exec stat -c %s {} + > /dev/null" ;;
                        du) run "$t" du $round - "du -s $d/$top > /dev/null" ;;
                        git)
                                # Through a file: the status of a pipe into wc is wc's, and a git
                                # that fails prints nothing either.
                                gs="cd $d/$top && git status --porcelain > /tmp/git.out && wc -l < /tmp/git.out"
                                run "$t" git-cold $round 0 "$gs"
                                run "$t" git-warm $round 0 "$gs" ;;
                        rm) run "$t" rm $round - "rm -rf $d/$top && sync" ;;
                        esac
                        k=$((k + 1))
                done
                j=$((j + 1))
        done
        # A round leaves every share empty, whatever --steps said.
        k=0
        while [ $k -lt $n ]; do
                eval "d=\$dir_$k"
                rm -rf "$d/$top"
                k=$((k + 1))
        done
        round=$((round + 1))
done
sync
for t in $(echo "$VUFS_TAGS" | tr ',' ' '); do
        [ "$t" = "$VUFS_TAG" ] || umount "/b/$t"
done
echo "VUFS-META-FINISHED"
exit 0
GUEST
if cmp -s "$guest_script.new" "$guest_script"; then
        rm -f "$guest_script.new"
else
        mv -f "$guest_script.new" "$guest_script"
fi
msg "initramfs with GNU tar, git and date (built once, then cached in $build_dir)"
initrd=$("$here/mkinitramfs.sh" "$build_dir/initramfs-meta-$kver.cpio.gz" --kernel-version "$kver" \
        --script "$guest_script" --module virtio_blk \
        --extra-dyn "$(command -v tar)" --extra-dyn "$(command -v git)" --extra-dyn "$(command -v date)") ||
        die "building the initramfs failed"
if [ $prepare_only -eq 1 ]; then
        msg "prepared: $tree_tar and $initrd"
        exit 0
fi

# ---- the backends ----
# --share-fs ext4: DIR/share becomes the root of an ext4 of its own (sparse image in DIR), with
# room for the tree twice and an inode for every entry twice. vm_bench_cleanup takes it down.
vm_bench_mounts=()
make_share_fs() {
        local d=$1
        vm_bench_mounts+=("$d/share")
        scratch_ext4_mount "$d/share.img" "$d/share" $((tree_kib * 2 + 512 * 1024))K $((entries * 2 + 10000)) ||
                die "no ext4 for $d/share"
}
declare -A tag_name=() tag_pid=() tag_dir=()
qemu_args=()
tags=()
i=0
sock0=
for b in $(echo "$backends" | tr ',' ' '); do
        if [ "$b" = guest-tmpfs ]; then
                tag_name[tmpfs]=$b
                tags+=(tmpfs)
                continue
        fi
        t=b$i
        dir=$work/$b
        mkdir -p "$dir/share"
        [ "$share_fs" = dir ] || make_share_fs "$dir"
        sock=$dir/sock
        case "$b" in
        vufsd)
                cmd=("$vufsd" --socket-path="$sock" --shared-dir="$dir/share") ;;
        vufsd-best)
                # shellcheck disable=SC2206 # the options are words
                cmd=("$vufsd" --socket-path="$sock" --shared-dir="$dir/share" $best_args) ;;
        vufsd+*)
                IFS=+ read -r -a extra <<<"${b#vufsd+}"
                cmd=("$vufsd" --socket-path="$sock" --shared-dir="$dir/share" "${extra[@]}") ;;
        virtiofsd)
                [ -x "$virtiofsd" ] || die "$virtiofsd not installed (apt-get install qemu-system-x86)"
                # shellcheck disable=SC2206 # the options are words
                cmd=("$virtiofsd" --socket-path="$sock" -o source="$dir/share" -o cache=auto -o sandbox=chroot
                     $virtiofsd_args) ;;
        *) die "unknown backend $b (vufsd, vufsd-best, virtiofsd, guest-tmpfs)" ;;
        esac
        case "$b" in
        vufsd*)
                [ -x "$vufsd" ] || die "vufsd not found at $vufsd (--vufsd PATH or VUFSD_BINARY)"
                # No control bus unless --vufsd-bus (none runs here) and quiet logs: neither is on
                # the request path.
                cmd+=(--bus="$vufsd_bus" --log-level=warning) ;;
        esac
        vm_bench_start_backend "$b" "$dir" "$sock" "${cmd[@]}"
        msg "$t = $b (pid $pid): ${cmd[*]}"
        tag_name[$t]=$b
        tag_pid[$t]=$pid
        tag_dir[$t]=$dir
        # What the guest makes the daemon hold (issue 34): its serving process's open fds and
        # anonymous memory, sampled through the run; the monitor takes each step's peak.
        : > "$dir/usage"
        vm_sample_server "$sock" "$dir/usage" &
        pids+=($!)
        tags+=("$t")
        if [ -z "$sock0" ]; then
                sock0=$sock
                tag0=$t
        else
                qemu_args+=(--qemu-arg -chardev --qemu-arg "socket,id=cb$i,path=$sock"
                            --qemu-arg -device --qemu-arg "vhost-user-fs-pci,chardev=cb$i,tag=$t")
        fi
        i=$((i + 1))
done
[ -n "$sock0" ] || die "at least one virtio-fs backend is needed (the guest boots from its share)"
# The tree's tar, read-only, as the guest's first virtio disk (/dev/vda).
qemu_args+=(--qemu-arg -drive --qemu-arg "if=none,id=tree,file=$tree_tar,format=raw,readonly=on"
            --qemu-arg -device --qemu-arg "virtio-blk-pci,drive=tree")
sleep 0.3

# CPU time (ns) of a process: all its threads and waited-for children, plus any live children.
clk_tck=$(getconf CLK_TCK)
cpu_ns() {
        local pid=$1 total=0 p f
        [ -n "$pid" ] || { echo 0; return; }
        for p in "$pid" $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
                f=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null) || continue
                set -- $f
                total=$((total + ${12} + ${13} + ${14} + ${15}))
        done
        echo $((total * 1000000000 / clk_tck))
}
# QEMU, found by the socket on its command line (run-guest.sh starts it).
qemu_pid() {
        local p
        for p in /proc/[0-9]*; do
                [ "$(cat "$p/comm" 2>/dev/null)" = qemu-system-x86 ] || continue
                if grep -qx -- "socket,id=char0,path=$sock0" <<< "$(tr '\0' '\n' < "$p/cmdline" 2>/dev/null)"; then
                        echo "${p#/proc/}"
                        return 0
                fi
        done
}

(
        set +e
        declare -A begin_cpu=() begin_qcpu=() begin_wall=() begin_usage=()
        me=$BASHPID
        qpid=
        while read -r line; do
                line=${line//$'\r'/}
                case "$line" in
                *VUFS-META-BEGIN*)
                        set -- ${line#*VUFS-META-BEGIN }
                        [ -n "$qpid" ] || qpid=$(qemu_pid)
                        begin_cpu[$1]=$(cpu_ns "${tag_pid[$1]:-}")
                        begin_qcpu[$1]=$(cpu_ns "$qpid")
                        begin_wall[$1]=$(date +%s%N)
                        [ -z "${tag_dir[$1]:-}" ] || begin_usage[$1]=$(wc -l < "${tag_dir[$1]}/usage")
                        [ -z "$step_hook" ] || $step_hook begin "${tag_name[$1]}" "$2" "$3" "${tag_dir[$1]:-}"
                        ;;
                *VUFS-META-END*)
                        set -- ${line#*VUFS-META-END }
                        t=$1 step=$2 round=$3 gns=$4 check=${5:-none}
                        [ -z "$step_hook" ] || $step_hook end "${tag_name[$t]}" "$step" "$round" "${tag_dir[$t]:-}"
                        c=$(cpu_ns "${tag_pid[$t]:-}")
                        q=$(cpu_ns "$qpid")
                        w=$(date +%s%N)
                        dc= peak=$'\t'
                        [ -z "${tag_pid[$t]:-}" ] || dc=$((c - ${begin_cpu[$t]:-$c}))
                        # The step's peaks: the samples taken since its beginning.
                        [ -z "${tag_dir[$t]:-}" ] || peak=$(tail -n +$((${begin_usage[$t]:-0} + 1)) "${tag_dir[$t]}/usage" |
                                awk '$1 > f { f = $1 } $2 > r { r = $2 } END { printf "%d\t%d", f, r }')
                        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "${tag_name[$t]}" "$step" "$gns" \
                                $((w - ${begin_wall[$t]:-$w})) "$dc" $((q - ${begin_qcpu[$t]:-$q})) "$check" \
                                "$(cut -d' ' -f1 /proc/loadavg)" "$peak" >> "$results"
                        printf 'bench-meta: round %s %-14s %-9s %8.2f s  daemon CPU %s  %s\n' "$round" "${tag_name[$t]}" \
                                "$step" "$(awk -v n="$gns" 'BEGIN { print n / 1e9 }')" \
                                "$([ -n "$dc" ] && awk -v n="$dc" 'BEGIN { printf "%.2f s", n / 1e9 }' || echo -)" "$check" >&2
                        ;;
                *VUFS-META-ERROR*) echo "bench-meta: guest: ${line#*VUFS-META-ERROR }" >&2 ;;
                esac
        done < <(tail -n +1 -F --pid="$me" "$log" 2>/dev/null)
) &
monitor_pid=$!

n_steps=$(echo "$steps" | tr ',' '\n' | grep -c .)
# Under TCG on the loaded development machine the whole tree takes about 3 minutes per backend and
# step set; allow 3x that, scaled by the tree, plus the boot.
[ -n "$timeout_s" ] || timeout_s=$(( n_backends * rounds * (30 + entries * 3 * n_steps / 600) + 600 ))
msg "guest: $n_steps steps x $n_backends backends x $rounds round(s), $memory RAM (timeout ${timeout_s}s)"
tag_list=$(IFS=,; echo "${tags[*]}")
rc=0
"$here/run-guest.sh" --initrd "$initrd" --socket "$sock0" --tag "$tag0" --script meta-bench.sh \
        --param "tags=$tag_list" --param "steps=$steps" --param "rounds=$rounds" --param "top=$top_name" \
        --param "entries=$entries" --memory "$memory" --log "$log" \
        --timeout "$timeout_s" --quiet "${qemu_args[@]}" || rc=$?
sleep 1
kill "$monitor_pid" 2>/dev/null || true
wait "$monitor_pid" 2>/dev/null || true
monitor_pid=

# ---- the report ----
load=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$results" "$out" "$backends" "$png" "$rounds" "$entries" "$tree_kib" "${tree:-all}" "$load" \
        "$best_args" "$host_baseline" "$share_fs" <<'PY'
import csv, json, statistics, subprocess, sys, os
(results, out, backends, png, rounds, entries, tree_kib, tree, load, best_args,
 host_baseline, share_fs) = sys.argv[1:13]
backends = backends.split(",")
cols = backends + (["host"] if host_baseline == "1" else [])
rows = list(csv.DictReader(open(results), delimiter="\t"))
steps, data, bad = [], {}, []
for r in rows:
    if r["step"] not in steps:
        steps.append(r["step"])
    d = data.setdefault((r["step"], r["backend"]), {"t": [], "cpu": [], "gcpu": [], "fds": [], "anon": []})
    # Peaks count whether or not the step succeeded: a daemon that ran out of fds shows how many.
    if r.get("peak_fds"):
        d["fds"].append(int(r["peak_fds"]))
        d["anon"].append(int(r["peak_anon_kib"]) / 1024)
    if r["check"] != "ok":
        bad.append("%s %s round %s: %s" % (r["backend"], r["step"], r["round"], r["check"]))
        continue
    d["t"].append(int(r["guest_ns"]) / 1e9)
    if r["daemon_cpu_ns"]:
        d["cpu"].append(int(r["daemon_cpu_ns"]) / 1e9)
    if r["guest_cpu_ns"]:
        d["gcpu"].append(int(r["guest_cpu_ns"]) / 1e9)

def med(v):
    return statistics.median(v) if v else None

def cell(step, b, key="t"):
    d = data.get((step, b))
    return med(d[key]) if d else None

def fmt(v, unit=" s"):
    if v is None:
        return "n/a"
    return ("%.2f" if v < 10 else "%.1f" if v < 100 else "%.0f") % v + unit

def spread(step, b):
    d = data.get((step, b))
    if not d or len(d["t"]) < 2:
        return ""
    return " (%s-%s)" % (fmt(min(d["t"]), ""), fmt(max(d["t"]), ""))

names = {"vufsd": "vufsd defaults", "vufsd-best": "vufsd best", "virtiofsd": "C virtiofsd",
         "guest-tmpfs": "guest tmpfs", "host": "host (bare)"}
summary = []
L = []
# Ratios to the C daemon when it ran; the virtio-fs part (a share over the guest's tmpfs) of the C
# daemon, else of vufsd's defaults.
mine = [b for b in backends if b.startswith("vufsd")] if "virtiofsd" in backends else []
ref = "virtiofsd" if "virtiofsd" in backends else "vufsd"
L.append("| step | " + " | ".join([names.get(b, b) for b in cols] + ["%s / C" % names.get(b, b) for b in mine]) +
         " |")
L.append("|---|" + "---|" * (len(cols) + len(mine)))
for s in steps:
    c = cell(s, "virtiofsd")
    ratios = []
    for b in mine:
        v = cell(s, b)
        ratios.append("%.2f×" % (v / c) if v is not None and c else "n/a")
    L.append("| %s | %s |" % (s, " | ".join([fmt(cell(s, b)) + spread(s, b) for b in cols] + ratios)))
    summary.append({"step": s,
                    "seconds": {b: cell(s, b) for b in cols},
                    "daemon_cpu_s": {b: cell(s, b, "cpu") for b in backends},
                    "guest_cpu_s": {b: cell(s, b, "gcpu") for b in backends},
                    "rounds": {b: data.get((s, b), {}).get("t", []) for b in cols}})

daemons = [b for b in backends if b.startswith("vufsd") or b == "virtiofsd"]
C = []
C.append("| step | " + " | ".join("%s: daemon CPU (share of the step) / guest CPU" % names.get(b, b) for b in daemons) +
         " | virtio-fs part (%s − guest tmpfs) | who decides |" % ("C daemon" if ref == "virtiofsd" else names[ref]))
C.append("|---|" + "---|" * (len(daemons) + 2))
for x in summary:
    s = x["step"]
    cells = []
    for b in daemons:
        t, cpu, g = cell(s, b), cell(s, b, "cpu"), cell(s, b, "gcpu")
        cells.append("%s (%s) / %s" % (fmt(cpu), "%.0f %%" % (100 * cpu / t) if cpu is not None and t else "n/a",
                                       fmt(g)))
    tc, tt = cell(s, ref), cell(s, "guest-tmpfs")
    part = tc - tt if tc is not None and tt is not None else None
    # Who decides the step's time. The guest, when the share costs little over the guest's own
    # tmpfs. The daemon, when its CPU is a large part of the step. The guest's CPU (TCG), when QEMU is
    # busy for most of the step: every FUSE request is guest kernel code, a virtqueue kick and an
    # interrupt, all emulated. Otherwise nobody is busy: the time goes to wake-ups between them.
    dshare = [cell(s, b, "cpu") / cell(s, b) for b in daemons if cell(s, b, "cpu") is not None and cell(s, b)]
    gshare = [cell(s, b, "gcpu") / cell(s, b) for b in daemons if cell(s, b, "gcpu") is not None and cell(s, b)]
    dtop = max(dshare) if dshare else 0
    gmed = statistics.median(gshare) if gshare else 0
    if part is not None and tc and part < 0.25 * tc:
        who = "the guest: the share adds %.0f %% to its own tmpfs" % (100 * part / tt if tt else 0)
    elif dtop >= 0.35:
        who = "the daemon: up to %.0f %% of the step on its CPU" % (100 * dtop)
    elif gmed >= 0.5:
        who = "the guest's CPU (TCG): QEMU busy %.0f %% of the step, the daemon %.0f %% or less" % (100 * gmed, 100 * dtop)
    else:
        who = "wake-ups: QEMU busy %.0f %%, the daemon %.0f %% or less" % (100 * gmed, 100 * dtop)
    x["who"] = who
    C.append("| %s | %s | %s | %s |" % (s, " | ".join(cells), fmt(part) if part is not None else "n/a", who))

# What the guest made each daemon hold: the highest of the step's peaks over the rounds.
P = ["| step | " + " | ".join("%s: peak fds / anon MiB" % names.get(b, b) for b in daemons) + " |",
     "|---|" + "---|" * len(daemons)]
for x in summary:
    s = x["step"]
    cells = []
    for b in daemons:
        d = data.get((s, b))
        cells.append("%d / %.0f" % (max(d["fds"]), max(d["anon"])) if d and d["fds"] else "n/a")
        x.setdefault("peak_fds", {})[b] = max(d["fds"]) if d and d["fds"] else None
        x.setdefault("peak_anon_mib", {})[b] = max(d["anon"]) if d and d["anon"] else None
    P.append("| %s | %s |" % (s, " | ".join(cells)))

loads = sorted(float(r["load1"]) for r in rows if r.get("load1") and r["backend"] != "host")
if loads:
    load = "%s; 1-minute load average during the guest's steps %.1f-%.1f (median %.1f)" % (
        load, loads[0], loads[-1], statistics.median(loads))
hdr = ("Linux source tree (`linux-source-6.1`, %s), %s entries, %d MiB; %s round(s), medians "
       "(in parentheses: fastest-slowest round); guest seconds per step, measured in the guest "
       "(QEMU TCG, 2 vCPUs); each share %s; vufsd best = `%s`; load average at the end %s." %
       (tree if tree != "all" else "the whole tree", entries, int(tree_kib) // 1024, rounds,
        "a directory on the host's file system" if share_fs == "dir" else "a loop-mounted ext4 of its own",
        best_args, load))
report = ["#### Step times", "", hdr, ""] + L + ["", "#### CPU per step and what decides it", "",
          "Daemon CPU: utime + stime of the daemon and its children over the step; guest CPU: QEMU's "
          "(the guest under TCG: vCPU threads and QEMU's main loop). Who decides: the guest when the "
          "reference share (the C daemon's, else vufsd's defaults) takes under 25 % longer than the guest's own tmpfs; the daemon when its CPU "
          "is at least 35 % of the step; the guest's CPU when QEMU is busy at least half of the step "
          "(median over the daemons); wake-ups otherwise.", ""] + C + ["", "#### What the daemons held",
          "", "Peaks per step of the serving process's open fds and anonymous memory (RSS without the "
          "guest's RAM, which is shared), sampled every 0.2 s; the highest over the rounds.", ""] + P
if bad:
    report += ["", "**Failed or wrong steps** (left out of the medians):", ""] + ["- " + b for b in bad]
open(os.path.join(out, "report.md"), "w").write("\n".join(report) + "\n")
json.dump({"backends": backends, "columns": cols, "entries": int(entries), "tree": tree, "load": load,
           "best_args": best_args, "steps": summary, "bad": bad},
          open(os.path.join(out, "results.json"), "w"), indent=1)
print("\n".join(report))
if png:
    dat = os.path.join(out, "chart.dat")
    # Relative to the C daemon when it ran, else to the guest's own tmpfs.
    cref = "virtiofsd" if "virtiofsd" in backends else "guest-tmpfs" if "guest-tmpfs" in backends else None
    shown = [b for b in cols if b != "host" and b != cref]
    with open(dat, "w") as f:
        f.write("step " + " ".join('"%s"' % names.get(b, b) for b in shown) + "\n")
        for x in summary:
            c = x["seconds"].get(cref) if cref else 1.0
            f.write('"%s" ' % x["step"] + " ".join(
                "%.4f" % (x["seconds"][b] / c) if c and x["seconds"].get(b) is not None else "NaN"
                for b in shown) + "\n")
        f.write("\n\nstep " + " ".join('"%s"' % names.get(b, b) for b in daemons) + "\n")
        for x in summary:
            f.write('"%s" ' % x["step"] + " ".join(
                "%.4f" % x["daemon_cpu_s"][b] if x["daemon_cpu_s"].get(b) is not None else "NaN"
                for b in daemons) + "\n")
    gp = """set terminal pngcairo size 1100,760 font 'sans,9'
set output '%s'
set multiplot layout 2,1
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set grid ytics
set key outside right top font ',8'
set xtics scale 0
set datafile missing 'NaN'
set yrange [0:*]
set title 'Linux tree in the guest: %s (lower is faster)'
plot for [i=2:%d] '%s' index 0 using i:xtic(1) title columnheader(i), 1 lc rgb 'black' dt 2 notitle
set title 'host daemon CPU seconds per step'
plot for [i=2:%d] '%s' index 1 using i:xtic(1) title columnheader(i)
unset multiplot
""" % (png, "step time relative to the C virtiofsd" if cref == "virtiofsd" else
       "step time relative to a tmpfs in the guest" if cref else "seconds per step",
       len(shown) + 1, dat, len(daemons) + 1, dat)
    subprocess.run(["gnuplot"], input=gp.encode(), check=True)
PY

n_steps_timed=$(echo ",$steps," | sed 's/,git,/,git-cold,git-warm,/' | tr ',' '\n' | grep -c .)
got=$(awk -F'\t' 'NR > 1 && $2 != "host"' "$results" | wc -l)
failed=$(awk -F'\t' 'NR > 1 && $8 != "ok"' "$results" | wc -l)
want=$(( n_steps_timed * n_backends * rounds ))
msg "results in $out ($got of $want guest steps recorded, $failed failed or wrong)"
if [ $rc -ne 0 ] || [ "$failed" -ne 0 ] || [ "$got" -ne "$want" ]; then
        msg "FAIL (guest run status $rc)"
        exit 1
fi
exit 0
