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

/* Whether this thread already has its own fs_struct (umask, cwd) instead of the process's. */
static _Thread_local bool thread_fs_private;

int credentials_enter(Credentials *c, uid_t uid, gid_t gid, bool umask_valid, mode_t umask_value) {
        int r;

        *c = (Credentials) {};
        if (umask_valid) {
                if (!thread_fs_private) {
                        /* umask is per fs_struct, shared by all threads; a private copy lets each
                         * request thread carry its caller's umask without racing the others. */
                        if (unshare(CLONE_FS) < 0)
                                return negative_errno();
                        thread_fs_private = true;
                }
                c->old_umask = umask(umask_value & 0777);
                c->umask_set = true;
        }
        if (!credentials_can_switch() || (uid == 0 && gid == 0))
                return 0;
        /* gid first: once the euid is not 0 the thread may no longer change its gid. */
        r = thread_setresgid(-1, gid, -1);
        if (r < 0)
                goto fail;
        r = thread_setresuid(-1, uid, -1);
        if (r < 0) {
                (void) thread_setresgid(-1, 0, -1);
                goto fail;
        }
        c->switched = true;
        return 0;
fail:
        if (c->umask_set)
                umask(c->old_umask);
        c->umask_set = false;
        /* EINVAL: an id the user namespace does not map (docs/id-mapping.md); the guest gets EPERM,
         * the answer for an identity it may not act as, not a puzzling "invalid argument". */
        return r == -EINVAL ? -EPERM : r;
}

void credentials_leave(Credentials *c) {
        if (c->switched) {
                /* The saved set-user-id stayed 0, so going back is always allowed; failing here
                 * would leave the thread unprivileged, which only makes later requests fail. */
                (void) thread_setresuid(-1, 0, -1);
                (void) thread_setresgid(-1, 0, -1);
                c->switched = false;
        }
        if (c->umask_set) {
                umask(c->old_umask);
                c->umask_set = false;
        }
}
