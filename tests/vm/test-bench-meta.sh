#!/bin/bash
# The metadata benchmark's own checks, on a small made-up tree in a real guest (bench-meta.sh):
#   1. shares on a directory, vufsd under an fd limit smaller than the tree (ulimit -n 400: a budget
#      of 144 fds for 482 entries) with --max-inode-fds above it, so that every inode keeps an
#      O_PATH fd as before issue 34: the extraction stops at ENFILE, and the benchmark must say so
#      for extract, find and both git status steps (it once reported the failed tar and a git that
#      printed nothing as "ok") and exit 1;
#   2. the same directory share and limit with vufsd's defaults: at most a quarter of the budget in
#      cached inode fds, the others re-opened by name (issue 34), so every step checks out;
#   3. the same limit with --share-fs ext4: each share a file system of its own, where vufsd's
#      default --inode-file-handles=prefer remembers inodes by handle, so every step checks out;
#   4. the tree's git repository tracks every file although the tree's .gitignore ignores its top
#      level, as Debian's linux-source does (git add -A once committed nothing there, and git
#      status "checked out" on an empty index).
# Usage: test-bench-meta.sh [VUFSD-BINARY]. Exit 0 pass, 1 fail, 77 skipped.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"
msg() { echo "test-bench-meta: $*" >&2; }
vufsd_bin=${1:-${VUFSD_BINARY:-}}
vm_require_prerequisites test-bench-meta mkfs.ext4 losetup git xz
[ -x "$vufsd_bin" ] || { msg "FAIL: vufsd binary '$vufsd_bin' not found"; exit 1; }
[ "$(id -u)" = 0 ] || { msg "skipped: needs root (loop mounts)"; exit 77; }

tmp=$(mktemp -d "${VUFS_VM_TMPDIR:-/var/tmp}/vufs-test-bench-meta.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# 30 directories of 15 files and a .gitignore: 482 entries with the top directory (and .git, made
# by bench-meta). Its own tree cache and initramfs, so that the repository checked is this one.
export VUFS_VM_BUILD_DIR=$tmp/cache
mkdir -p "$tmp/src/metatree"
printf '/*\n' > "$tmp/src/metatree/.gitignore"
for d in $(seq 30); do
        mkdir "$tmp/src/metatree/d$d"
        for f in $(seq 15); do
                echo "file $d/$f" > "$tmp/src/metatree/d$d/f$f.c"
        done
done
tar -C "$tmp/src" -cJf "$tmp/metatree.tar.xz" metatree

fail=0
# bench STATUS LABEL BACKEND OPTIONS...: runs bench-meta.sh under the small fd limit, expects STATUS.
bench() {
        local want=$1 label=$2 backend=$3 rc=0
        shift 3
        (ulimit -n 400; TMPDIR=$tmp "$here/bench-meta.sh" --source "$tmp/metatree.tar.xz" --rounds 1 --backends "$backend" \
                --steps extract,find,git --no-host-baseline --vufsd "$vufsd_bin" --out "$tmp/$label" "$@" \
                > "$tmp/$label.md" 2> "$tmp/$label.err") || rc=$?
        if [ $rc -ne "$want" ]; then
                msg "FAIL: $label: bench-meta.sh exited $rc, expected $want"
                tail -n 20 "$tmp/$label.err" >&2
                fail=1
        fi
}
# check LABEL STEP PATTERN [BACKEND]: the step's check column in results.tsv for BACKEND (default
# vufsd) matches PATTERN (a glob).
check() {
        local got
        got=$(awk -F'\t' -v s="$2" -v b="${4:-vufsd}" '$2 == b && $3 == s { print $8 }' "$tmp/$1/results.tsv" 2>/dev/null)
        # shellcheck disable=SC2053 # $3 is a glob on purpose
        if [[ -n "$got" && "$got" == $3 ]]; then
                msg "ok: $1 $2: ${got:0:60}"
        else
                msg "FAIL: $1 $2: check '${got:0:120}', expected $3"
                fail=1
        fi
}

pinned=vufsd+--max-inode-fds=1000000
bench 1 pinned "$pinned"
check pinned extract 'bad:failed:*Too_many_open_files*' "$pinned" # (blanks are _ in a check)
check pinned find 'bad:*' "$pinned"
check pinned git-cold 'bad:*' "$pinned"
check pinned git-warm 'bad:*' "$pinned"
grep -q 'Failed or wrong steps' "$tmp/pinned.md" || { msg "FAIL: pinned: the report does not list the failed steps"; fail=1; }

bench 0 dir vufsd
for s in extract find git-cold git-warm; do
        check dir "$s" ok
done

bench 0 ext4 vufsd --share-fs ext4
for s in extract find git-cold git-warm; do
        check ext4 "$s" ok
done
if grep -qF " $tmp/" /proc/mounts; then
        msg "FAIL: a share is still mounted after bench-meta.sh"
        fail=1
fi

mkdir "$tmp/x"
tar -xf "$(echo "$tmp"/cache/meta-*/tree.tar)" -C "$tmp/x" metatree/.git
tracked=$(git --git-dir="$tmp/x/metatree/.git" ls-files | wc -l)
if [ "$tracked" -eq 451 ]; then
        msg "ok: the tree's repository tracks all 451 files"
else
        msg "FAIL: the tree's repository tracks $tracked files, not 451"
        fail=1
fi

if [ $fail -eq 0 ]; then msg "PASS"; else msg "FAIL"; fi
exit $fail
