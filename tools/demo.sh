#!/bin/bash
# demo.sh: the main job for a new user: installs what is needed, builds vufsd, and serves a
# directory (default /var/tmp/vufsd-demo) to a throwaway QEMU guest that mounts it with
# `mount -t virtiofs`, does some I/O and shows the result. Run as root on Debian 12.
# Arguments are passed to tests/vm/demo.sh (--share DIR, --backend virtiofsd, --help).
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh
[ -d build ] || meson setup build
meson compile -C build
exec tests/vm/demo.sh "$@" build
