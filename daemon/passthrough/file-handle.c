/* file-handle.c: name_to_handle_at/open_by_handle_at with the identity check, and the mount fds. */
#include "file-handle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util.h"

static int handle_of(int dirfd, const char *name, int flags, FileHandleBuf *buf, int *ret_mnt_id) {
        /* MAX_HANDLE_SZ (128) holds every filesystem's handle; the kernel writes handle_bytes, the
         * size this handle needs (8..20 bytes on ext4/tmpfs/xfs), which is what a node copies. */
        buf->fh.handle_bytes = MAX_HANDLE_SZ;
        if (name_to_handle_at(dirfd, name, &buf->fh, ret_mnt_id, flags) < 0)
                return negative_errno();
        return 0;
}

int file_handle_of_fd(int fd, FileHandleBuf *buf, int *ret_mnt_id) {
        return handle_of(fd, "", AT_EMPTY_PATH, buf, ret_mnt_id);
}

int file_handle_of_name(int dirfd, const char *name, FileHandleBuf *buf, int *ret_mnt_id) {
        /* Flags 0: a symlink's own handle, as the O_PATH|O_NOFOLLOW lookup takes it. */
        return handle_of(dirfd, name, 0, buf, ret_mnt_id);
}

size_t file_handle_size(const struct file_handle *h) {
        return sizeof *h + h->handle_bytes;
}

int file_handle_open_checked(int mount_fd, const struct file_handle *h, uint64_t dev, uint64_t ino, int flags,
                             struct statx *ret_stx) {
        struct statx stx;
        int fd;

        /* open_by_handle_at() takes a non-const handle but does not write it. */
        fd = open_by_handle_at(mount_fd, (struct file_handle *)h, flags | O_CLOEXEC);
        if (fd < 0) {
                int r = negative_errno();
                /* The filesystem no longer knows the inode: the file was deleted (and its last
                 * user is gone). ENOENT/ESTALE both mean that; ENFILE/EMFILE/ENOMEM/EPERM stay. */
                return r == -ENOENT ? -ESTALE : r;
        }
        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_SYNC_AS_STAT,
                  STATX_BASIC_STATS | STATX_MNT_IDS, &stx) < 0) {
                int r = negative_errno();
                safe_close(fd);
                return r;
        }
        /* The handle carries a generation on the filesystems that recycle inode numbers, so the
         * kernel already refuses a recycled one; this check holds where it does not. */
        if (makedev(stx.stx_dev_major, stx.stx_dev_minor) != dev || stx.stx_ino != ino) {
                safe_close(fd);
                return -ESTALE;
        }
        if (ret_stx)
                *ret_stx = stx;
        return fd;
}

int mountinfo_whole_fs_mounts(int **ret_ids, size_t *ret_n) {
        _cleanup_free_ char *buf = NULL;
        _cleanup_free_ int *ids = NULL;
        size_t size = 0, len = 0, n = 0, cap = 0;
        _cleanup_close_ int fd = -1;

        fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        for (;;) {
                ssize_t k;
                if (len + 4096 + 1 > size) {
                        char *nb = realloc(buf, size = size ? size * 2 : 65536);
                        if (!nb)
                                return -ENOMEM;
                        buf = nb;
                }
                k = read(fd, buf + len, size - len - 1);
                if (k < 0)
                        return negative_errno();
                if (k == 0)
                        break;
                len += (size_t)k;
        }
        buf[len] = 0;
        for (char *line = buf, *next; line && *line; line = next) {
                int id, parent;
                unsigned maj, min;
                char root[8];
                next = strchr(line, '\n');
                if (next)
                        *next++ = 0;
                /* "36 35 98:0 /mnt1 /mnt/parent ...": id, parent id, st_dev, root, mount point. The
                 * root is compared with "/" only: a longer one does not fit and is not "/". */
                if (sscanf(line, "%d %d %u:%u %7s", &id, &parent, &maj, &min, root) != 5 || strcmp(root, "/") != 0)
                        continue;
                if (n == cap) {
                        int *ni = realloc(ids, (cap = cap ? cap * 2 : 64) * sizeof *ids);
                        if (!ni)
                                return -ENOMEM;
                        ids = ni;
                }
                ids[n++] = id;
        }
        *ret_ids = TAKE_PTR(ids);
        *ret_n = n;
        return 0;
}

/* statmount(2)'s request and the head of its answer, as the kernel's uapi (linux/mount.h, Linux
 * 6.8) has them; the installed headers may be older. */
struct mount_id_req {
        uint32_t size;
        uint32_t spare;
        uint64_t mnt_id;
        uint64_t param;
};
struct mount_stat {
        uint32_t size, mnt_opts;
        uint64_t mask;
        uint32_t sb_dev_major, sb_dev_minor;
        uint64_t sb_magic;
        uint32_t sb_flags, fs_type;
        uint64_t mnt_id, mnt_parent_id;
        uint32_t mnt_id_old, mnt_parent_id_old;
        uint64_t mnt_attr, mnt_propagation, mnt_peer_group, mnt_master, propagate_from;
        uint32_t mnt_root, mnt_point;
        uint64_t spare2[50];
        char str[];
};
#define STATMOUNT_MNT_ROOT_ 0x00000008U

int mount_shows_whole_fs(uint64_t mnt_id) {
        struct mount_id_req req = { .size = sizeof req, .mnt_id = mnt_id, .param = STATMOUNT_MNT_ROOT_ };
        /* The root as a path below the filesystem's root: "/" is all this asks, a longer one
         * (EOVERFLOW past the buffer) is a subtree. */
        union {
                struct mount_stat sm;
                char buf[sizeof(struct mount_stat) + 256];
        } u;

        if (syscall(SYS_statmount, &req, &u.sm, sizeof u, 0) < 0)
                return errno == EOVERFLOW ? 0 : negative_errno();
        if (!(u.sm.mask & STATMOUNT_MNT_ROOT_) || u.sm.mnt_root >= sizeof u - sizeof u.sm)
                return 0;
        return streq(u.sm.str + u.sm.mnt_root, "/");
}

bool seccomp_filter_inherited(void) {
        _cleanup_close_ int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        char buf[8192];
        const char *p;
        ssize_t n;

        if (fd < 0)
                return true; /* cannot tell: the cautious answer */
        n = read(fd, buf, sizeof buf - 1);
        if (n <= 0)
                return true;
        buf[n] = 0;
        p = strstr(buf, "\nSeccomp:");
        return !p || strtol(p + strlen("\nSeccomp:"), NULL, 10) != 0;
}

int mount_id_of_fd(int fd, bool unique, uint64_t *ret_id) {
        unsigned want = unique ? STATX_MNT_ID_UNIQUE : STATX_MNT_ID;
        struct statx stx;

        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, want, &stx) < 0)
                return negative_errno();
        if (!(stx.stx_mask & want))
                return -EOPNOTSUPP;
        *ret_id = stx.stx_mnt_id;
        return 0;
}

static bool is_mount_root(int fd) {
        struct statx stx;

        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) < 0)
                return false;
        return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

void mount_fds_init(MountFds *m, FdBudget *budget, MountCheck check, bool unique_ids, int *whole_ids,
                    size_t n_whole, bool allow_subtree) {
        memset(m, 0, sizeof *m);
        pthread_mutex_init(&m->lock, NULL);
        m->budget = budget;
        m->check = check;
        m->unique_ids = unique_ids || check == MOUNT_CHECK_STATMOUNT;
        m->whole_ids = whole_ids;
        m->n_whole = n_whole;
        m->allow_subtree = allow_subtree;
}

void mount_fds_seal(MountFds *m) {
        pthread_mutex_lock(&m->lock); /* see MountFds.lock */
        free(m->whole_ids);
        m->whole_ids = NULL;
        m->n_whole = 0;
        pthread_mutex_unlock(&m->lock);
}

/* Under lock, mfd an fd on the mount that is asked for (so the mount and its id are taken while
 * this asks): 1 when it is the mount mnt_id and shows its whole filesystem, as m->check decides; 0
 * when it does not; -ESTALE when mfd is on another mount than mnt_id (nothing to remember). */
static int is_whole_locked(const MountFds *m, uint64_t mnt_id, int mfd) {
        uint64_t id, listed;

        if (mount_id_of_fd(mfd, m->unique_ids, &id) < 0 || id != mnt_id)
                return -ESTALE;
        if (!is_mount_root(mfd))
                return 0;
        if (m->check == MOUNT_CHECK_STATMOUNT)
                return mount_shows_whole_fs(mnt_id) > 0;
        /* The list has mountinfo's ids: mfd pins its mount, so its reused-kind id names it now. */
        if (!m->unique_ids)
                listed = id;
        else if (mount_id_of_fd(mfd, false, &listed) < 0)
                return 0;
        for (size_t k = 0; k < m->n_whole; k++)
                if ((uint64_t)m->whole_ids[k] == listed)
                        return 1;
        return 0;
}

void mount_fds_done(MountFds *m) {
        /* No request runs any more: plain loads. */
        unsigned n = atomic_load_explicit(&m->n, memory_order_relaxed);

        for (unsigned k = 0; k < n; k++)
                if (m->entry[k].fd >= 0)
                        fd_budget_close(m->budget, m->entry[k].fd);
        atomic_store_explicit(&m->n, 0, memory_order_relaxed);
        free(m->whole_ids);
        m->whole_ids = NULL;
        m->n_whole = 0;
        pthread_mutex_destroy(&m->lock);
}

/* Whether mnt_id is among entry[from..n), its fd (or -EXDEV) in *ret. A linear scan: a share spans
 * a handful of mounts, and the table is bounded. */
static bool find(const MountFds *m, unsigned from, unsigned n, uint64_t mnt_id, int *ret) {
        for (unsigned k = from; k < n; k++)
                if (m->entry[k].mnt_id == mnt_id) {
                        *ret = m->entry[k].fd;
                        return true;
                }
        return false;
}

/* Under lock: publishes entry n as (mnt_id, fd). The release store orders the entry's writes
 * before the count a reader loads with acquire: it never sees a half-written entry. */
static int publish_locked(MountFds *m, unsigned n, uint64_t mnt_id, int fd) {
        m->entry[n].mnt_id = mnt_id;
        m->entry[n].fd = fd;
        atomic_store_explicit(&m->n, n + 1, memory_order_release);
        return fd;
}

int mount_fds_get(MountFds *m, uint64_t mnt_id, int fd) {
        unsigned seen, n;
        int r, mfd;

        /* Lock-free hit path: see MountFds in file-handle.h for why it is safe. */
        seen = atomic_load_explicit(&m->n, memory_order_acquire);
        if (find(m, 0, seen, mnt_id, &r))
                return r;

        pthread_mutex_lock(&m->lock);
        /* Another inserter may have added it since: only entries past seen are new. Relaxed: n is
         * written only under this lock. */
        n = atomic_load_explicit(&m->n, memory_order_relaxed);
        if (find(m, seen, n, mnt_id, &r))
                goto out;
        r = -E2BIG;
        if (n >= MOUNT_FDS_MAX)
                goto out;
        if (!fd_budget_take(m->budget)) {
                r = -ENFILE;
                goto out;
        }
        /* open_by_handle_at() refuses an O_PATH mount fd (EBADF): the directory opened for reading,
         * which the first inode of a mount is when the guest crosses into it (its root). Opened
         * before the check, so that the mount checked is the one kept. */
        mfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (mfd < 0) {
                r = negative_errno();
                fd_budget_release(m->budget);
                goto out;
        }
        r = m->allow_subtree ? 1 : is_whole_locked(m, mnt_id, mfd);
        if (r <= 0) {
                fd_budget_close(m->budget, mfd);
                /* The directory must be the root of its mount, and the mount show the root of its
                 * filesystem, asked now: anything else is a subtree a handle could leave.
                 * Remembered, so the next inode of this mount does not ask again. */
                if (r == 0)
                        r = publish_locked(m, n, mnt_id, -EXDEV);
                goto out;
        }
        r = publish_locked(m, n, mnt_id, mfd);
out:
        pthread_mutex_unlock(&m->lock);
        return r;
}

unsigned mount_fds_count(MountFds *m) {
        return atomic_load_explicit(&m->n, memory_order_acquire);
}
