#!/bin/bash
# install-deps.sh: installs every Debian 12 package vufsd needs to build, test and demo.
# Run as root. Safe to run again: apt-get skips what is installed.
set -euo pipefail

packages=(
        # build
        meson ninja-build pkg-config gcc libc6-dev python3
        libsystemd-dev libglib2.0-dev libseccomp-dev check
        # fuzzing and sanitizer runtimes
        clang libclang-rt-14-dev
        # real-guest tests and the demo: QEMU, a kernel with virtiofs, busybox for the initramfs
        qemu-system-x86 qemu-system-common linux-image-amd64 busybox-static cpio
        # control plane tests: a real dbus-daemon; setpriv for the unprivileged caller
        dbus util-linux
        # the conformance run's host check that no guest-made file carries a file capability
        libcap2-bin
        # unprivileged vufsd with subordinate id ranges: the setuid newuidmap/newgidmap helpers
        uidmap
        # systemd tests: a debootstrapped root booted with systemd-nspawn
        debootstrap systemd-container
        # benchmarks: fio in the guest, charts; the metadata benchmark (and its check, vm-bench-meta):
        # git and GNU tar in the guest, xz, an ext4 of its own per share on a loop device
        fio gnuplot-nox git xz-utils e2fsprogs
        # metrics tests: promtool and a real Prometheus, the node exporter's textfile collector
        prometheus prometheus-node-exporter
)

if [ "$(id -u)" != 0 ]; then
        echo "install-deps.sh: run as root (it calls apt-get)" >&2
        exit 1
fi

missing=()
for p in "${packages[@]}"; do
        [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
        echo "Installing: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q "${missing[@]}"
fi
