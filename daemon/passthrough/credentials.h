/* credentials.h: per-thread identity switching for requests that act as the guest caller. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* What credentials_enter() changed, so credentials_leave() can undo exactly that. */
typedef struct Credentials {
        bool switched;
        bool umask_set;
        mode_t old_umask;
} Credentials;

/* Drops every supplementary group of the process (CVE-2022-0358: a daemon acting as a guest user
 * must not keep root's groups). Call once at start, before any thread is created. */
int credentials_drop_supplementary_groups(void);

/* True when the daemon can switch identities (effective uid 0). Decided once at first call. */
bool credentials_can_switch(void);

/* Makes the calling thread act as uid/gid (effective ids only, raw syscalls so other threads keep
 * theirs) and, when umask_valid, gives the thread the request's umask. The thread's umask is made
 * private to it (unshare(CLONE_FS)) the first time. Without privileges the ids stay as they are. */
int credentials_enter(Credentials *c, uid_t uid, gid_t gid, bool umask_valid, mode_t umask_value);

/* Back to effective uid/gid 0 and the previous umask. Safe on a Credentials never entered. */
void credentials_leave(Credentials *c);
