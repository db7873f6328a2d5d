#!/bin/bash
# test-shell-pipes.sh: no shell script of the tree that sets pipefail feeds a pipe into a reader
# that leaves early (grep -q, --quiet, --silent). Such a reader exits at its first match; the
# writer's next write then gets SIGPIPE, and pipefail turns the match into a failure. bash writes
# its builtins' output line by line, so `echo "$out" | grep -q FIRST-LINE` fails whenever grep
# runs before echo is done: on a loaded machine, now and then (this failed the systemd suite in CI).
# Write `grep -q PATTERN <<< "$out"` instead.
#
# Usage: test-shell-pipes.sh [SOURCE-DIR] (default: this script's tree). Exit 0 clean, 1 findings.
set -euo pipefail

top=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
found=0
while IFS= read -r -d '' f; do
        case "$f" in
        *.sh) ;;
        *) IFS= read -r first < "$f" || true; case "$first" in '#!'*sh*) ;; *) continue ;; esac ;;
        esac
        grep -Eq '^[[:space:]]*set -[a-z]*o pipefail' "$f" || continue
        # Lines that are not comments and pipe into an early-exiting grep.
        if hits=$(grep -nE '\|[[:space:]]*grep[[:space:]]+([^|]*[[:space:]])?(-[A-Za-z]*q[A-Za-z]*|--quiet|--silent)([[:space:]]|$)' "$f" |
                grep -vE '^[0-9]+:[[:space:]]*#'); then
                echo "$hits" | sed "s|^|${f#"$top"/}:|"
                found=1
        fi
done < <(find "$top" -type d \( -name .git -o -name 'build*' -o -name subprojects \) -prune -o -type f \
        \( -name '*.sh' -o -path "$top/.ci/*" -o -path "$top/tools/*" \) -print0)

if [ "$found" = 1 ]; then
        echo "test-shell-pipes: FAIL: the lines above pipe into grep -q under pipefail (use grep -q ... <<< \"\$var\")" >&2
        exit 1
fi
echo "test-shell-pipes: ok"
