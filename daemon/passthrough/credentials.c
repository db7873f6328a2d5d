/* credentials.c: per-thread uid/gid/umask switching for guest requests. */
#include "credentials.h"

#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

/* glibc's setresuid()/setresgid() change every thread of the process (the setxid broadcast); the
 * raw system calls change only the calling thread, which is what per-request identities need. */
static int thread_setresuid(uid_t r, uid_t e, uid_t s) {
        return syscall(SYS_setresuid, r, e, s) < 0 ? negative_errno() : 0;
}
static int thread_setresgid(gid_t r, gid_t e, gid_t s) {
        return syscall(SYS_setresgid, r, e, s) < 0 ? negative_errno() : 0;
}
/* glibc's setgroups() is process-wide too; the system call sets the calling thread's groups. */
static int thread_setgroups(size_t n, const gid_t *groups) {
        return syscall(SYS_setgroups, n, groups) < 0 ? negative_errno() : 0;
}

int credentials_drop_supplementary_groups(void) {
        if (!credentials_can_switch())
                return 0;
        if (setgroups(0, NULL) < 0)
                return negative_errno();
        return 0;
}

bool credentials_can_switch(void) {
        /* 0 = unknown, 1 = yes, 2 = no; the first caller decides, before any switching happens. */
        static _Atomic int state = 0;
        int s = atomic_load(&state);

        if (s == 0) {
                s = geteuid() == 0 ? 1 : 2;
                atomic_store(&state, s);
        }
        return s == 1;
}

/* Whether this thread already has its own fs_struct (umask, cwd) instead of the process's, and then
 * its umask. Only this file changes the umask of a thread with its own fs_struct, so the copy is
 * exact, and a request whose umask is the thread's already (a guest's 022 against the daemon's 022,
 * nearly every create) costs no umask() going in or coming out: two of a create's system calls,
 * which made create-unlink at queue depth 16 1.09-1.10x faster (docs/benchmarks.md). */
static _Thread_local bool thread_fs_private;
static _Thread_local mode_t thread_umask;

int credentials_enter(Credentials *c, uid_t uid, gid_t gid, const gid_t *groups, unsigned n_groups, bool umask_valid,
                      mode_t umask_value) {
        int r;

        *c = (Credentials){};
        /* (uid_t)-1 means "unchanged" to setresuid(): a caller with it would act as root. It is
         * no identity the daemon acts as: EPERM, like an id the user namespace does not map. */
        if (uid == (uid_t)-1 || gid == (gid_t)-1)
                return -EPERM;
        for (unsigned k = 0; k < n_groups; k++)
                if (groups[k] == (gid_t)-1)
                        return -EPERM;
        if (umask_valid) {
                mode_t want = umask_value & 0777;

                if (!thread_fs_private) {
                        /* umask is per fs_struct, shared by all threads; a private copy lets each
                         * request thread carry its caller's umask without racing the others. */
                        if (unshare(CLONE_FS) < 0)
                                return negative_errno();
                        thread_fs_private = true;
                        /* Reading the inherited umask means setting one: once per thread. */
                        thread_umask = umask(0777);
                        umask(thread_umask);
                }
                if (want != thread_umask) {
                        c->old_umask = umask(want);
                        c->umask_set = true;
                        thread_umask = want;
                }
        }
        if (!credentials_can_switch())
                return 0;
        /* Groups, then gid, then uid: once the euid is not 0 the thread has no CAP_SETGID left.
         * Only what differs from the thread's own (root, no groups) is switched. */
        if (n_groups > 0) {
                r = thread_setgroups(n_groups, groups);
                if (r == -EPERM)
                        /* A user namespace with setgroups denied: act without the group, as for a
                         * guest that does not send it (docs/id-mapping.md). */
                        r = 0;
                else if (r < 0)
                        goto fail;
                else
                        c->groups_set = true;
        }
        if (gid != 0) {
                r = thread_setresgid(-1, gid, -1);
                if (r < 0)
                        goto fail;
                c->gid_set = true;
        }
        if (uid != 0) {
                r = thread_setresuid(-1, uid, -1);
                if (r < 0)
                        goto fail;
                c->uid_set = true;
        }
        c->switched = c->groups_set || c->gid_set || c->uid_set;
        return 0;
fail:
        c->switched = true;
        credentials_leave(c);
        /* EINVAL: an id the user namespace does not map (docs/id-mapping.md); the guest gets EPERM,
         * the answer for an identity it may not act as, not a puzzling "invalid argument". */
        return r == -EINVAL ? -EPERM : r;
}

void credentials_leave(Credentials *c) {
        if (c->switched) {
                /* The saved set-user-id stayed 0, so going back is always allowed; failing here
                 * would leave the thread unprivileged, which only makes later requests fail. uid
                 * first: it gives the thread back the capabilities the others need. */
                if (c->uid_set)
                        (void)thread_setresuid(-1, 0, -1);
                if (c->gid_set)
                        (void)thread_setresgid(-1, 0, -1);
                if (c->groups_set)
                        (void)thread_setgroups(0, NULL);
                c->switched = c->uid_set = c->gid_set = c->groups_set = false;
        }
        if (c->umask_set) {
                umask(c->old_umask);
                thread_umask = c->old_umask;
                c->umask_set = false;
        }
}
