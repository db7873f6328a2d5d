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
