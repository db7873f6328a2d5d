#!/bin/bash
# test-all.sh: installs what is needed, builds, and runs every test suite: the plain build, then
# the ASan+UBSan and TSan builds, the fuzz targets, and a benchmark smoke run. Run as root on
# Debian 12. Exits non-zero if anything fails; the last line counts the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD

tools/install-deps.sh

passed=0
failed=0
failed_names=()
# The last lines each failed test wrote, printed before the totals so that the end of the CI output
# (often all that is kept of a failed run) says why a test failed, not only which.
failure_tails=$(mktemp)
trap 'rm -f "$failure_tails"' EXIT

# Adds the results of one meson test run (from its JSON log) to the totals, and each failed test's
# failure lines and last 40 lines of output to $failure_tails.
count_results() {
        local log=$1/meson-logs/testlog${2:+-$2}.json
        [ -f "$log" ] || return 0
        read -r p f names < <(python3 - "$log" "$failure_tails" <<'PY'
import json, re, sys
p = f = 0
bad = []
with open(sys.argv[2], "a") as tails:
    for line in open(sys.argv[1]):
        t = json.loads(line)
        if t["result"] in ("OK", "EXPECTEDFAIL"):
            p += 1
        elif t["result"] != "SKIP":
            f += 1
            bad.append(t["name"])
            out = ((t.get("stdout") or "") + (t.get("stderr") or "")).rstrip("\n").split("\n")
            # check's failure lines (file:line:F: or :E:) and "not ok"/"FAIL" lines first: the
            # daemon's log on stderr would otherwise push them out of the tail.
            why = [l for l in out if re.search(r":[EF]:|^not ok|FAIL|ERROR: AddressSanitizer|runtime error", l)][:20]
            tails.write(f"---- {t['name']} ({t['result']}, {sys.argv[1]}) ----\n")
            if why:
                tails.write("failure lines:\n" + "\n".join(why) + "\n")
            tails.write(f"last {min(len(out), 40)} lines:\n" + "\n".join(out[-40:]) + "\n")
print(p, f, ",".join(bad) or "-")
PY
)
        passed=$((passed + p))
        failed=$((failed + f))
        [ "$names" = "-" ] || failed_names+=("$1: $names")
}

# Runs one meson test invocation; a failure is counted, not fatal, so every suite runs.
run_suite() {
        local dir=$1 setup=$2
        shift 2
        echo "=== meson test -C $dir ${setup:+--setup=$setup} $*"
        rm -f "$dir"/meson-logs/testlog*.json
        meson test -C "$dir" ${setup:+--setup=$setup} --print-errorlogs "$@" || true
        count_results "$dir" "$setup"
}

setup_build() {
        local dir=$1
        shift
        if [ -d "$dir" ]; then
                meson setup --reconfigure "$dir" "$@" >/dev/null
        else
                meson setup "$dir" "$@"
        fi
        meson compile -C "$dir"
}

export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-120}

# 1. Plain build with -Werror: every suite, the real-guest and systemd ones included. vm-huge is a
# measurement (a guest walking 200,000 files, ~10 min; docs/benchmarks.md), not a CI test.
setup_build build --werror
run_suite build "" --no-suite vm-huge

# 2. ASan+UBSan: everything that does not boot a guest (hostile input included).
setup_build build-asan --werror -Db_sanitize=address,undefined -Db_lundef=false
run_suite build-asan asan --no-suite vm --no-suite vm-huge --no-suite systemd --no-suite bench

# 3. ThreadSanitizer: the threading code and its stress test.
setup_build build-tsan --werror -Db_sanitize=thread -Db_lundef=false
run_suite build-tsan tsan --suite unit --suite stress

# 4. Fuzzing: the libFuzzer targets (clang, ASan+UBSan), each replaying its seeds and then fuzzing
#    for VUFSD_FUZZ_SECONDS (60 s by default; docs/fuzzing.md).
#    Only the targets are built here (with -Werror): the clang build of the rest is not this stage's
#    business, and a warning there must not stop the fuzzing.
fuzz_opts=(--werror -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false)
if [ -d build-fuzz ]; then
        CC=clang meson setup --reconfigure build-fuzz "${fuzz_opts[@]}" >/dev/null
else
        CC=clang meson setup build-fuzz "${fuzz_opts[@]}"
fi
meson compile -C build-fuzz tests/fuzz/fuzz-vhost-user tests/fuzz/fuzz-virtqueue tests/fuzz/fuzz-fuse tests/fuzz/fuzz-vhost-sequence \
        tests/fuzz/fuzz-xattr-map tests/fuzz/fuzz-id-map tests/fuzz/fuzz-id-translate tests/fuzz/fuzz-state \
        tests/fuzz/fuzz-survive
run_suite build-fuzz "" --no-rebuild --suite fuzz

echo
if [ ${#failed_names[@]} -gt 0 ]; then
        cat "$failure_tails"
        printf 'failed: %s\n' "${failed_names[@]}"
fi
echo "vufsd tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
