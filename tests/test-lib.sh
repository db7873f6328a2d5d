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
