#!/bin/bash
# run-fuzz.sh TARGET SEED-DIR WORK-DIR: first replays every seed (the regression inputs included:
# a crash fixed once must stay fixed), then fuzzes for $VUFSD_FUZZ_SECONDS (default 60) on one
# core. New inputs go to WORK-DIR/corpus, crashes to WORK-DIR/crash-*; the seed dir is only read.
set -euo pipefail
target=$1 seeds=$2 work=$3
secs=${VUFSD_FUZZ_SECONDS:-60}

mkdir -p "$work/corpus"
# Relative paths: the FUSE target chroots itself after reading the corpora (fuzz-common.h).
cp -r "$seeds" "$work/seeds.new"
rm -rf "$work/seeds"
mv "$work/seeds.new" "$work/seeds"
cd "$work"
rm -rf fuzz-share.* crash-* leak-* timeout-* oom-*
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

echo "== replaying $(ls seeds | wc -l) seeds"
"$target" -runs=0 seeds
echo "== fuzzing for ${secs}s"
"$target" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -print_final_stats=1 corpus seeds 2>&1 | tee fuzz.log | grep -E "^#|ERROR|SUMMARY|stat::" | tail -n 40
status=${PIPESTATUS[0]}
if ls crash-* leak-* timeout-* oom-* >/dev/null 2>&1; then
        echo "FAIL: $(ls crash-* leak-* timeout-* oom-* 2>/dev/null | tr '\n' ' ')(in $work; see fuzz.log)"
        exit 1
fi
exit "$status"
