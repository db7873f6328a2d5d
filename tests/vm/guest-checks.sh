#!/bin/sh
# Sourced (never run) by the guest scripts (busybox sh): the check counter and helpers they share.
# mkinitramfs.sh always packs it as /scripts/guest-checks.sh next to the scripts that source it.
# check DESC CMD...: runs CMD, prints "CHECK ok N: DESC" or "CHECK FAIL N: DESC" plus the first 20
# lines of CMD's output; $n counts the checks, $failures the failed ones (the scripts exit with it).
# shellcheck shell=sh disable=SC2034 # n and failures are read by the script that sources this

n=0
failures=0
check() {
        desc=$1
        shift
        n=$((n + 1))
        if "$@" > /tmp/check.out 2>&1; then
                echo "CHECK ok $n: $desc"
        else
                failures=$((failures + 1))
                echo "CHECK FAIL $n: $desc"
                head -n 20 /tmp/check.out | sed 's/^/    /'
        fi
}

# expect WHAT EXPECTED ACTUAL
expect() {
        [ "$2" = "$3" ] && return 0
        echo "$1: expected '$2', got '$3'"
        return 1
}
