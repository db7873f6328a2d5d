/* seccomp-filter.h: the system-call allowlist (libseccomp) and what happens outside it. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef enum SyscallFilter {
        SYSCALL_FILTER_NONE, /* no filter */
        SYSCALL_FILTER_KILL, /* the process dies with SIGSYS (default) */
        SYSCALL_FILTER_LOG,  /* allowed, but the kernel logs it (audit / dmesg): find missing entries */
        SYSCALL_FILTER_TRAP, /* SIGSYS to the thread: vufsd names the call on stderr, then dies */
        _SYSCALL_FILTER_MAX,
        _SYSCALL_FILTER_INVALID = -EINVAL,
} SyscallFilter;

const char *syscall_filter_to_string(SyscallFilter f);
SyscallFilter syscall_filter_from_string(const char *s);

/* kill, or none in sanitizer builds (their runtimes ptrace and read /proc at exit). */
SyscallFilter syscall_filter_default(void);

/* Loads the allowlist with action f for everything else, on every thread of the process (TSYNC).
 * Needs no-new-privs (capabilities_apply()) or CAP_SYS_ADMIN. SYSCALL_FILTER_NONE does nothing.
 * file_handles adds name_to_handle_at and open_by_handle_at (--inode-file-handles in use);
 * make_handles adds name_to_handle_at alone (live migration sends or checks file handles:
 * --migration-mode=file-handles, --migration-verify-handles), which makes a handle and opens
 * nothing. */
int seccomp_install(SyscallFilter f, bool file_handles, bool make_handles);

/* The supervisor's own, smaller allowlist (sandbox.c): kill and wait4 only on child, files only
 * when socket_files (removing the socket at the end), and with control what sd-bus does on the
 * connections it already has (the control plane, control-relay.c). Needs no-new-privs. */
int seccomp_install_supervisor(SyscallFilter f, pid_t child, bool socket_files, bool control);

/* Number of system calls the allowlist names that exist on this architecture. */
size_t seccomp_allowlist_size(void);
