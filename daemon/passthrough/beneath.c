/* beneath.c: host opens that stay beneath the share root. */
#include "beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

/* Cleared on the first ENOSYS (a kernel before 5.6, or a container's filter that refuses the
 * call): every later open takes the fallback without asking again. An atomic, not a lock: one
 * flag, written at most once in the normal case, read on every open. */
static atomic_bool have_openat2 = true;

void beneath_use_openat2(bool use) {
        atomic_store(&have_openat2, use);
}

static int open_beneath(int dirfd, const char *name, int flags, mode_t mode) {
        struct open_how how = {
                .flags = (uint64_t) (flags | O_NOFOLLOW),
                .mode = (flags & (O_CREAT | __O_TMPFILE)) ? mode : 0,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        int fd;

        /* One component cannot leave dirfd unless it is ".." (or holds a '/', which makes it more
         * than one); O_NOFOLLOW keeps its last (only) component from being followed. */
        if (strchr(name, '/') || strcmp(name, "..") == 0)
                return -EXDEV;
        if (atomic_load_explicit(&have_openat2, memory_order_relaxed)) {
                fd = (int) syscall(SYS_openat2, dirfd, name, &how, sizeof how);
                if (fd >= 0)
                        return fd;
                if (errno != ENOSYS)
                        return negative_errno();
                atomic_store(&have_openat2, false);
        }
        fd = openat(dirfd, name, flags | O_NOFOLLOW, mode);
        return fd < 0 ? negative_errno() : fd;
}

int beneath_openat(FdBudget *b, int dirfd, const char *name, int flags, mode_t mode) {
        int fd;

        if (!fd_budget_take(b))
                return -ENFILE;
        fd = open_beneath(dirfd, name, flags, mode);
        if (fd < 0)
                fd_budget_release(b);
        return fd;
}

int beneath_open_path(FdBudget *b, int dirfd, const char *path, int flags) {
        _cleanup_free_ char *copy = strdup(path);
        char *name, *slash;
        int at = -1, fd;

        if (!copy)
                return -ENOMEM;
        for (name = copy; (slash = strchr(name, '/')); name = slash + 1) {
                *slash = '\0';
                fd = beneath_openat(b, at >= 0 ? at : dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
                fd_budget_close(b, at);
                if (fd < 0)
                        return fd;
                at = fd;
        }
        fd = beneath_openat(b, at >= 0 ? at : dirfd, name, flags, 0);
        fd_budget_close(b, at);
        return fd;
}

static int key_of(int fd, InodeKey *ret) {
        struct statx stx;

        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_SYNC_AS_STAT,
                  STATX_INO | STATX_TYPE | STATX_MNT_IDS, &stx) < 0)
                return negative_errno();
        *ret = inode_key_from_statx(&stx);
        return 0;
}

/* The same directory on the same mount; the mount only where the kernel told both. */
static bool same_place(const InodeKey *a, const InodeKey *b) {
        return a->dev == b->dev && a->ino == b->ino && (a->mnt_id == 0 || b->mnt_id == 0 || a->mnt_id == b->mnt_id);
}

/* Whether the directory fd is root or lies beneath it: 1, 0 (it does not), or a negative errno. */
static int is_beneath(int fd, const InodeKey *root) {
        _cleanup_close_ int owned = -1;
        InodeKey k, up_k;
        int at = fd, up, r;

        r = key_of(at, &k);
        if (r < 0)
                return r;
        for (unsigned depth = 0; depth < BENEATH_MAX_DEPTH; depth++) {
                if (same_place(&k, root))
                        return 1;
                /* ".." of a directory outside the sandbox's root walks the host's tree, which is
                 * what is being checked here: only its identity is read, nothing is opened for
                 * I/O. In the namespace sandbox the kernel itself refuses (ENOENT) a ".." that
                 * would leave the share's bind mount. */
                up = openat(at, "..", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (up < 0)
                        return errno == ENOENT ? 0 : negative_errno();
                safe_close(owned);
                owned = at = up;
                r = key_of(at, &up_k);
                if (r < 0)
                        return r;
                if (same_place(&up_k, &k))
                        return 0; /* the top of the process's tree, and root was not on the way */
                k = up_k;
        }
        return 0;
}

int beneath_open_parent(FdBudget *b, int dirfd, const InodeKey *root) {
        int fd, r;

        if (!fd_budget_take(b))
                return -ENFILE;
        fd = openat(dirfd, "..", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                fd_budget_release(b);
                return negative_errno();
        }
        r = is_beneath(fd, root);
        if (r <= 0) {
                fd_budget_close(b, fd);
                return r < 0 ? r : -ENOENT;
        }
        return fd;
}
