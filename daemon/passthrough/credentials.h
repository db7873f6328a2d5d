/* credentials.h: per-thread identity switching for requests that act as the guest caller. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* What credentials_enter() changed, so credentials_leave() can undo exactly that. */
typedef struct Credentials {
        bool switched; /* any of the three below */
        bool uid_set, gid_set, groups_set;
        bool umask_set; /* the umask differed, old_umask is to be restored */
        mode_t old_umask;
} Credentials;

/* Drops every supplementary group of the process (CVE-2022-0358: a daemon acting as a guest user
 * must not keep root's groups). Call once at start, before any thread is created. */
int credentials_drop_supplementary_groups(void);

/* True when the daemon can switch identities (effective uid 0). Decided once at first call. */
bool credentials_can_switch(void);

/* Makes the calling thread act as uid/gid with the supplementary groups (effective ids only, raw
 * syscalls so other threads keep theirs; what is already the thread's, uid 0, gid 0, no groups, is
 * not switched) and, when umask_valid, gives the thread the request's umask (no system call when it
 * is the thread's already). The thread's umask is made private to it (unshare(CLONE_FS)) the first
 * time; after that, only these two functions may change it. Without privileges the ids stay as they
 * are. -EPERM for the id (uid_t)-1 (setresuid() would take it as "unchanged") and for an id the
 * kernel refuses. Where setgroups is denied (a user namespace) the groups are left out. */
int credentials_enter(Credentials *c, uid_t uid, gid_t gid, const gid_t *groups, unsigned n_groups, bool umask_valid,
                      mode_t umask_value);

/* Back to effective uid/gid 0, no supplementary groups and the previous umask. Safe on a
 * Credentials never entered. */
void credentials_leave(Credentials *c);
