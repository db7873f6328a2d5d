#!/bin/bash
# The README's demo: vufsd serves a directory to a throwaway Linux guest (QEMU, TCG) that mounts it with
# `mount -t virtiofs`, reads the host's files and writes its own; then the host shows what the guest wrote.
#
# Usage: demo.sh [--share DIR] [--backend vufsd|virtiofsd] [BUILD-DIR | VUFSD-BINARY]
#   BUILD-DIR      a meson build directory containing daemon/vufsd (default: the repository's build/)
#   VUFSD-BINARY   the vufsd binary itself (or set VUFSD_BINARY)
#   --share DIR    directory to serve (default /var/tmp/vufsd-demo; created, and kept afterwards)
#   --backend      virtiofsd runs the same demo with QEMU's C virtiofsd, for comparison

set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"

die() { echo "demo: error: $*" >&2; exit 1; }

share=/var/tmp/vufsd-demo
backend=vufsd
target=
while [ $# -gt 0 ]; do
        case "$1" in
        --share) share=${2:?}; shift 2 ;;
        --backend) backend=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) target=$1; shift ;;
        esac
done

missing=$(vm_missing_prerequisites)
[ -z "$missing" ] || die "missing: $(echo "$missing" | paste -sd';')"

build_dir=$repo/build
if [ -n "$target" ] && [ -d "$target" ]; then
        build_dir=$(cd "$target" && pwd)
        bin=$build_dir/daemon/vufsd
elif [ -n "$target" ]; then
        bin=$target
else
        bin=${VUFSD_BINARY:-$build_dir/daemon/vufsd}
fi
case "$backend" in
vufsd)
        [ -x "$bin" ] || die "vufsd not found at $bin (build it: meson setup build && meson compile -C build)"
        bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
        backend_arg=vufsd:$bin
        ;;
virtiofsd) backend_arg=virtiofsd ;;
*) die "unknown backend $backend (vufsd or virtiofsd)" ;;
esac
cache_dir=/var/tmp/vufs-vm
[ ! -d "$build_dir" ] || cache_dir=$build_dir/tests/vm

mkdir -p "$share"
share=$(cd "$share" && pwd)
rm -rf "$share/from-guest"
cat > "$share/hello-from-host.txt" <<EOF
Hello from the host $(hostname), $(date -u '+%Y-%m-%d %H:%M:%S UTC').
This file lives in $share and the guest reads it through virtio-fs.
EOF

kver=$(vm_kernel_version)
echo "vufsd demo: $backend serves $share to a throwaway guest"
echo "            (QEMU $(qemu-system-x86_64 --version | sed -n '1s/.*version \([^ ]*\).*/\1/p'), TCG, Linux $kver, busybox initramfs); booting takes ~10 s"
start=$(date +%s)
"$here/run-guest.sh" --backend "$backend_arg" --share "$share" --script guest-demo.sh \
        --build-dir "$cache_dir" --show --quiet --timeout 180 ||
        die "the guest run failed (details above)"

echo
echo "================ back on the host, $(($(date +%s) - start)) s later: what the guest wrote ================"
echo "host\$ ls -l $share/from-guest"
ls -l "$share/from-guest"
echo "host\$ cat $share/from-guest/hello.txt"
cat "$share/from-guest/hello.txt"
echo "host\$ (cd $share/from-guest && sha256sum -c random.bin.sha256)"
(cd "$share/from-guest" && sha256sum -c random.bin.sha256) || die "the guest's file does not match its checksum"
echo
echo "Done: $backend served $share, the guest mounted it, read the host's file and wrote its own."
