#!/bin/bash
# bench-meta-count-hook.sh: a --step-hook for bench-meta.sh that saves each backend's FUSE requests
# per opcode over every step: vufsd's from its statistics (needs --vufsd-bus ADDR), the C
# virtiofsd's from its request log (needs --virtiofsd-args -d).
#
# Usage: bench-meta.sh --vufsd-bus ADDR --virtiofsd-args -d \
#            --step-hook "tests/vm/bench-meta-count-hook.sh OUTDIR ADDR FSCTL" ...
# then OUTDIR/BACKEND-STEP-ROUND.counts holds "COUNT OPCODE" lines. With more than one vufsd
# backend on the bus, only the first found is read (fsctl picks the only instance).
set -euo pipefail
out=$1 addr=$2 fsctl=$3 phase=$4 backend=$5 step=$6 round=$7 dir=$8
mkdir -p "$out"
base=$out/$backend-$step-$round
case "$backend" in
vufsd*)
        "$fsctl" --address="$addr" --json stats > "$base.$phase.json"
        if [ "$phase" = end ]; then
                python3 - "$base.begin.json" "$base.end.json" > "$base.counts" <<'PY'
import json, sys
b, e = (json.load(open(f)) for f in sys.argv[1:3])
before = {o["name"]: o["requests"] for o in b["opcodes"]}
for o in sorted(e["opcodes"], key=lambda o: before.get(o["name"], 0) - o["requests"]):
    n = o["requests"] - before.get(o["name"], 0)
    if n:
        print(n, o["name"])
PY
        fi ;;
virtiofsd)
        lines=$(wc -l < "$dir/backend.log")
        if [ "$phase" = begin ]; then
                echo "$lines" > "$base.begin.lines"
        else
                sed -n "$(($(cat "$base.begin.lines") + 1)),${lines}p" "$dir/backend.log" |
                        grep -o 'opcode: [A-Z_0-9]*' | sed 's/opcode: //' | sort | uniq -c | sort -rn |
                        sed 's/^ *//' > "$base.counts"
        fi ;;
esac
