#!/bin/bash
# install-bench-deps.sh: the Debian 12 packages the benchmarks need beyond tools/install-deps.sh
# (which it runs first). Kept apart because CI does not run the benchmarks and should not download
# a kernel source tree: linux-source-6.1 gives /usr/src/linux-source-6.1.tar.xz (~140 MB, about
# 84,000 files unpacked), the tree tests/vm/bench-meta.sh works on. Run as root; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh

packages=(
        # the source tree of tests/vm/bench-meta.sh
        linux-source-6.1
        # in the guest of tests/vm/bench-meta.sh (copied into its initramfs) and on the host
        git tar coreutils xz-utils
        # the reports and charts (tools/bench-report.sh)
        python3 gnuplot-nox fio
)

missing=()
for p in "${packages[@]}"; do
        [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
        echo "Installing: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
