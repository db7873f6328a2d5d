# test-lib.sh: counters, checks and skips shared by the shell tests of the bus suite (sourced by bash).
# shellcheck shell=bash

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok - $*"; }
fail() { failed=$((failed + 1)); echo "FAIL - $*"; }
check() { # check DESCRIPTION COMMAND...: the command must succeed
        local what=$1
        shift
        if "$@"; then ok "$what"; else fail "$what"; fi
}
# The last line of a test: the counts, and its exit status (0 only when nothing failed).
test_summary() {
        echo "$passed passed, $failed failed"
        [ "$failed" = 0 ]
}

# Exits 77 (skip) unless the test runs as root; REASON says what root is for.
test_require_root() {
        if [ "$(id -u)" != 0 ]; then
                echo "SKIP: needs root to $1"
                exit 77
        fi
}
# Exits 77 (skip) when one of the commands is not installed.
test_require_tools() {
        local tool
        for tool in "$@"; do
                if ! command -v "$tool" >/dev/null; then
                        echo "SKIP: $tool is not installed"
                        exit 77
                fi
        done
}

# The end of a test: every daemon in vufsd_pids stops on SIGTERM with status 0, and its LOGs hold no
# sanitizer report.
test_stop_daemons() { # test_stop_daemons LOG...
        local p rc
        # shellcheck disable=SC2154 # vufsd_pids: the daemons the sourcing test started
        for p in "${vufsd_pids[@]}"; do
                kill "$p" 2>/dev/null
                wait "$p"
                rc=$?
                if [ $rc = 0 ]; then ok "vufsd $p exits 0 on SIGTERM"; else fail "vufsd $p exited $rc on SIGTERM"; fi
        done
        if grep -hE "ERROR: (Address|Leak|Thread)Sanitizer|runtime error:" "$@"; then
                fail "sanitizer reports from vufsd (above)"
        else
                ok "no sanitizer report from vufsd"
        fi
}

# The start of a test on its own bus: T, a temporary directory named after PREFIX; the arrays pids
# (ended at exit), vufsd_pids (for test_stop_daemons) and stopped (processes sent SIGSTOP, continued
# at exit); an EXIT trap doing that and removing T; a private dbus-daemon at $VM_BUS_ADDRESS
# (tests/vm/common.sh). Needs SRC, the source tree.
test_private_bus() { # test_private_bus PREFIX
        T=$(mktemp -d "/tmp/vufsd-$1.XXXXXX")
        pids=()
        vufsd_pids=()
        stopped=()
        trap test_private_bus_cleanup EXIT
        # shellcheck source=tests/vm/common.sh
        . "$SRC/tests/vm/common.sh"
        vm_private_bus "$T" || { echo "dbus-daemon did not start"; exit 1; }
        pids+=("$VM_BUS_PID")
}
test_private_bus_cleanup() {
        local p
        for p in "${stopped[@]}"; do kill -CONT "$p" 2>/dev/null; done
        for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
        for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
        rm -rf "$T"
}
