#!/bin/bash
# Builds the busybox initramfs that boots the real-guest tests: virtiofs modules, /init, guest scripts.
#
# Usage: mkinitramfs.sh OUT.cpio.gz [options]
#   --kernel-version V   modules of this kernel (default: the newest /boot/vmlinuz-* with a /lib/modules dir)
#   --script FILE        a guest script, stored as /scripts/BASENAME (repeatable; default: every
#                        guest-*.sh next to this file); the kernel command line picks one (vufs.script=).
#                        guest-checks.sh (the helpers the scripts source) is always packed too
#   --extra SRC[:DEST]   copy a file (or static binary) to DEST in the image (default: its own path)
#   --extra-dyn BIN      copy a dynamically linked binary to its own path plus every library `ldd` lists
#   --module NAME        load one more kernel module (with its dependencies) before mounting
#   --force              rebuild even if OUT is up to date
#
# OUT is rebuilt only when its key changes; the key (OUT.key) covers the kernel version, the module files,
# busybox, this script, guest-init.sh, guest-checks.sh and every script and extra file. Prints OUT's path on success.

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() {
        echo "mkinitramfs: error: $*" >&2
        exit 1
}

out=
kver=
force=0
scripts=()
extras=()
extra_dyn=()
modules=(virtio virtio_ring virtio_pci fuse virtiofs)

while [ $# -gt 0 ]; do
        case "$1" in
        --kernel-version) kver=${2:?}; shift 2 ;;
        --script) scripts+=("${2:?}"); shift 2 ;;
        --extra) extras+=("${2:?}"); shift 2 ;;
        --extra-dyn) extra_dyn+=("${2:?}"); shift 2 ;;
        --module) modules+=("${2:?}"); shift 2 ;;
        --force) force=1; shift ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1" ;;
        *) [ -z "$out" ] || die "more than one output file given"; out=$1; shift ;;
        esac
done
[ -n "$out" ] || die "usage: mkinitramfs.sh OUT.cpio.gz [--script FILE] [--extra SRC[:DEST]] [--extra-dyn BIN]"

# shellcheck source=tests/vm/common.sh
. "$here/common.sh"

if [ -z "$kver" ]; then
        kver=$(vm_kernel_version) || die "no kernel found (need /boot/vmlinuz-VERSION and /lib/modules/VERSION; apt-get install linux-image-amd64)"
fi
moddir=/lib/modules/$kver
[ -f "$moddir/modules.dep" ] || die "$moddir/modules.dep missing (kernel $kver not installed?)"

busybox=$(vm_busybox) || die "busybox not found (apt-get install busybox-static)"
if ldd "$busybox" >/dev/null 2>&1; then
        # A dynamic busybox works too as long as its libraries come along.
        extra_dyn+=("$busybox")
fi

if [ ${#scripts[@]} -eq 0 ]; then
        for s in "$here"/guest-*.sh; do
                case "$s" in
                "$here/guest-init.sh" | "$here/guest-checks.sh") ;;
                *) scripts+=("$s") ;;
                esac
        done
fi
for s in "${scripts[@]}"; do
        [ -f "$s" ] || die "guest script $s not found"
done

# Resolve module names to files in dependency order (dependencies first), using modules.dep.
# Built-in modules (modules.builtin) need nothing.
declare -A mod_seen=()
mod_files=()
mod_path_of() {
        local name=$1 alt
        alt=$(printf '%s' "$name" | tr '_-' '-_')
        awk -F: -v a="/$name.ko" -v b="/$alt.ko" '
                { p = $1; sub(/\.(xz|zst|gz)$/, "", p) }
                substr(p, length(p) - length(a) + 1) == a || substr(p, length(p) - length(b) + 1) == b { print $1; exit }
        ' "$moddir/modules.dep"
}
mod_is_builtin() {
        local name=$1 alt
        alt=$(printf '%s' "$name" | tr '_-' '-_')
        grep -qE "/($name|$alt)\.ko\$" "$moddir/modules.builtin" 2>/dev/null
}
mod_add_file() {
        local rel=$1 dep deps
        [ -z "${mod_seen[$rel]:-}" ] || return 0
        mod_seen[$rel]=1
        deps=$(awk -F: -v m="$rel" '$1 == m { print $2; exit }' "$moddir/modules.dep")
        for dep in $deps; do
                mod_add_file "$dep"
        done
        mod_files+=("$rel")
}
for m in "${modules[@]}"; do
        rel=$(mod_path_of "$m")
        if [ -z "$rel" ]; then
                mod_is_builtin "$m" && continue
                die "kernel module $m not found in $moddir/modules.dep (and not built in)"
        fi
        mod_add_file "$rel"
done

# The cache key: everything that ends up in the image.
key=$({
        echo "kernel $kver"
        echo "modules ${mod_files[*]}"
        for rel in "${mod_files[@]}"; do stat -Lc '%n %s %Y' "$moddir/$rel"; done
        sha256sum "$busybox" "$0" "$here/guest-init.sh" "$here/guest-checks.sh" "$here/common.sh" "${scripts[@]}"
        for e in "${extras[@]}"; do echo "extra $e"; sha256sum "${e%%:*}"; done
        for e in "${extra_dyn[@]}"; do echo "dyn $e"; sha256sum "$e"; ldd "$e" 2>/dev/null || true; done
} | sha256sum | cut -d' ' -f1)

mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
exec 9>"$out.lock"
flock 9
if [ $force -eq 0 ] && [ -s "$out" ] && [ "$(cat "$out.key" 2>/dev/null)" = "$key" ]; then
        echo "$out"
        exit 0
fi

stage=$(mktemp -d "${TMPDIR:-/tmp}/vufs-initramfs.XXXXXX")
trap 'rm -rf "$stage"' EXIT

mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,tmp,run,mnt,etc/vufs,scripts,lib/modules/"$kver"}
cp "$busybox" "$stage/bin/busybox"
cp "$here/guest-init.sh" "$stage/init"
chmod 0755 "$stage/init" "$stage/bin/busybox"
# The kernel opens /dev/console before running /init; without the node /init starts with no stdio
# (it re-opens the console after mounting devtmpfs anyway).
mknod -m 0600 "$stage/dev/console" c 5 1 2>/dev/null || true

# Modules, decompressed on the host: busybox insmod reads plain ELF only.
: > "$stage/etc/vufs/modules"
for rel in "${mod_files[@]}"; do
        src=$moddir/$rel
        base=$(basename "$rel")
        case "$base" in
        *.ko.xz) base=${base%.xz}; xz -dc "$src" > "$stage/lib/modules/$kver/$base" ;;
        *.ko.zst) base=${base%.zst}; zstd -qdc "$src" > "$stage/lib/modules/$kver/$base" ;;
        *.ko.gz) base=${base%.gz}; gzip -dc "$src" > "$stage/lib/modules/$kver/$base" ;;
        *.ko) cp "$src" "$stage/lib/modules/$kver/$base" ;;
        *) die "unexpected module file $src" ;;
        esac
        echo "$base" >> "$stage/etc/vufs/modules"
done
echo "$kver" > "$stage/etc/vufs/kernel-version"

for s in "${scripts[@]}"; do
        install -m 0755 "$s" "$stage/scripts/$(basename "$s")"
done
# The helpers every guest script sources from its own directory (check, expect).
install -m 0644 "$here/guest-checks.sh" "$stage/scripts/guest-checks.sh"

copy_to_stage() {
        local src=$1 dest=$2
        [ -e "$src" ] || die "extra file $src not found"
        mkdir -p "$stage/$(dirname "$dest")"
        cp -L "$src" "$stage/$dest"
}
for e in "${extras[@]}"; do
        src=${e%%:*}
        dest=$src
        [ "$e" = "$src" ] || dest=${e#*:}
        copy_to_stage "$src" "$dest"
done
for bin in "${extra_dyn[@]}"; do
        [ -x "$bin" ] || die "extra binary $bin not found or not executable"
        [ "$bin" = "$busybox" ] || copy_to_stage "$bin" "$bin"
        # Lines look like "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)".
        ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u |
        while read -r lib; do
                copy_to_stage "$lib" "$lib"
        done
done

tmp_out=$(mktemp "$out.XXXXXX")
(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) | gzip -1 > "$tmp_out"
chmod 0644 "$tmp_out"
mv -f "$tmp_out" "$out"
echo "$key" > "$out.key"
echo "$out"
