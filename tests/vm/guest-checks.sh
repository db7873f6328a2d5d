#!/bin/sh
# Sourced (never run) by the guest scripts (busybox sh): the check counter and helpers they share.
# mkinitramfs.sh always packs it as /scripts/guest-checks.sh next to the scripts that source it.
# check DESC CMD...: runs CMD, prints "CHECK ok N: DESC" or "CHECK FAIL N: DESC" plus the first 20
# lines of CMD's output; $n counts the checks, $failures the failed ones (the scripts exit with it).
# run_fio (fio with verification, checked from its JSON report) for guest-fio-verify.sh and
# guest-survive.sh.
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

# fail DESC: counts one failed check of the script's own making and prints it.
fail() {
        failures=$((failures + 1))
        echo "CHECK FAIL $n: $*"
}

# expect WHAT EXPECTED ACTUAL
expect() {
        [ "$2" = "$3" ] && return 0
        echo "$1: expected '$2', got '$3'"
        return 1
}

# Sums one fio JSON report: prints "JOBS READ_IOS READ_BYTES WRITE_IOS WRITE_BYTES BADJOBS",
# BADJOBS naming the jobs with an error ("-" for none).
fio_sums() {
        awk '
                /"jobname" :/ { split($0, q, "\""); job = q[4]; jobs++; sec = "" }
                /"error" :/ { v = $3; sub(/,$/, "", v); if (v + 0 != 0) bad = bad job "=" v "," }
                /"(read|write|trim|sync)" : \{/ { split($0, q, "\""); sec = q[2] }
                /"(io_bytes|total_ios)" :/ && (sec == "read" || sec == "write") {
                        v = $3; sub(/,$/, "", v); split($1, q, "\""); sum[sec, q[2]] += v
                }
                END {
                        printf "%d %d %d %d %d %s\n", jobs, sum["read", "total_ios"], sum["read", "io_bytes"],
                                sum["write", "total_ios"], sum["write", "io_bytes"], bad == "" ? "-" : bad
                }
        ' "$1"
}

# Runs fio on a job file and checks the result: DESC JOBFILE NJOBS MODE [fio options...]
# MODE write: every job's written bytes were all read back and verified; MODE verify: the
# verify_only pass read back as much as the write pass wrote (WRITTEN_BEFORE in $written).
# With FIO_TIMEOUT=SECONDS a fio that runs longer is ended (a hung guest process fails, not hangs).
# Adds to total_ios, total_written and total_verified.
run_fio() {
        desc=$1 file=$2 njobs=$3 mode=$4
        shift 4
        n=$((n + 1))
        t0=$(cut -d' ' -f1 /proc/uptime)
        # shellcheck disable=SC2086 # "timeout SECONDS" or nothing
        ${FIO_TIMEOUT:+timeout $FIO_TIMEOUT} fio --output-format=json "$@" "$file" > /tmp/fio.json 2> /tmp/fio.err
        rc=$?
        t1=$(cut -d' ' -f1 /proc/uptime)
        # shellcheck disable=SC2046 # six words
        set -- $(fio_sums /tmp/fio.json)
        jobs=$1 rios=$2 rd=$3 wios=$4 wr=$5 bad=$6
        # fio reports a verification failure on stderr ("verify: bad magic header ...") and as the
        # job's error (EILSEQ); an I/O error as the job's error and "fio: ... error=" on stderr.
        errlines=$(grep -c -E 'verify:|error=|fio: (io_u|pid)' /tmp/fio.err)
        secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
        # A verify_only run counts the writes it replays without doing them.
        if [ "$mode" = write ]; then
                ios=$((rios + wios))
                what="$desc: $jobs jobs, $ios I/Os, $wr bytes written, $rd bytes read and verified, ${secs}s"
        else
                ios=$rios
                what="$desc: $jobs jobs, $ios reads, $rd bytes verified, ${secs}s"
        fi
        ok=1
        if [ $rc -ne 0 ] || [ "$bad" != - ] || [ "$errlines" -ne 0 ] || [ "$jobs" -ne "$njobs" ]; then
                ok=0
                fail "$what: fio exit $rc, jobs with errors: $bad, error lines: $errlines"
        elif [ "$mode" = write ] && [ "$rd" -ne "$wr" ]; then
                ok=0
                fail "$what: verified $rd of $wr written bytes"
        elif [ "$mode" = verify ] && [ "$rd" -ne "$written" ]; then
                ok=0
                fail "$what: verified $rd bytes, the write pass wrote $written"
        fi
        if [ $ok = 1 ]; then
                echo "CHECK ok $n: $what"
        else
                head -n 20 /tmp/fio.err | sed 's/^/    /'
                [ -s /tmp/fio.json ] || echo "    (no JSON report)"
        fi
        [ "$mode" = write ] && written=$wr
        total_ios=$((total_ios + ios))
        [ "$mode" = write ] && total_written=$((total_written + wr))
        total_verified=$((total_verified + rd))
}

# Writes dirty pages and drops the guest's caches: the next read comes from the host.
drop_caches() {
        sync
        echo 3 > /proc/sys/vm/drop_caches
}
