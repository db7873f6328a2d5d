/* file-handle.c: name_to_handle_at/open_by_handle_at with the identity check, and the mount fds. */
#include "file-handle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util.h"

static struct file_handle *handle_of(int dirfd, const char *name, int flags, int *ret_mnt_id, int *ret_err) {
        /* MAX_HANDLE_SZ (128) holds every filesystem's handle; the result is trimmed to its size so
         * that a remembered inode costs what its handle needs (8 + 8..20 bytes on ext4/tmpfs/xfs). */
        struct {
                struct file_handle fh;
                unsigned char buf[MAX_HANDLE_SZ];
        } tmp = { .fh.handle_bytes = MAX_HANDLE_SZ };
        struct file_handle *h;
        int mnt_id;

        if (name_to_handle_at(dirfd, name, &tmp.fh, &mnt_id, flags) < 0) {
                *ret_err = negative_errno();
                return NULL;
        }
        h = malloc(sizeof(struct file_handle) + tmp.fh.handle_bytes);
        if (!h) {
                *ret_err = -ENOMEM;
                return NULL;
        }
        memcpy(h, &tmp.fh, sizeof(struct file_handle) + tmp.fh.handle_bytes);
        *ret_mnt_id = mnt_id;
        *ret_err = 0;
        return h;
}

struct file_handle *file_handle_of_fd(int fd, int *ret_mnt_id, int *ret_err) {
        return handle_of(fd, "", AT_EMPTY_PATH, ret_mnt_id, ret_err);
}

struct file_handle *file_handle_of_name(int dirfd, const char *name, int *ret_mnt_id, int *ret_err) {
        /* Flags 0: a symlink's own handle, as the O_PATH|O_NOFOLLOW lookup takes it. */
        return handle_of(dirfd, name, 0, ret_mnt_id, ret_err);
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
                  STATX_BASIC_STATS | STATX_MNT_ID, &stx) < 0) {
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

static bool is_mount_root(int fd) {
        struct statx stx;

        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) < 0)
                return false;
        return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

void mount_fds_init(MountFds *m, FdBudget *budget, int *whole_ids, size_t n_whole, bool allow_subtree) {
        memset(m, 0, sizeof *m);
        pthread_mutex_init(&m->lock, NULL);
        m->budget = budget;
        m->whole_ids = whole_ids;
        m->n_whole = n_whole;
        m->allow_subtree = allow_subtree;
}

static bool is_whole(const MountFds *m, int mnt_id) {
        for (size_t k = 0; k < m->n_whole; k++)
                if (m->whole_ids[k] == mnt_id)
                        return true;
        return false;
}

void mount_fds_done(MountFds *m) {
        for (unsigned k = 0; k < m->n; k++)
                if (m->entry[k].fd >= 0)
                        fd_budget_close(m->budget, m->entry[k].fd);
        m->n = 0;
        free(m->whole_ids);
        m->whole_ids = NULL;
        m->n_whole = 0;
        pthread_mutex_destroy(&m->lock);
}

int mount_fds_get(MountFds *m, int mnt_id, int fd) {
        int r = -E2BIG;

        pthread_mutex_lock(&m->lock);
        /* A linear scan: a share spans a handful of mounts, and the table is bounded. */
        for (unsigned k = 0; k < m->n; k++)
                if (m->entry[k].mnt_id == mnt_id) {
                        r = m->entry[k].fd;
                        goto out;
                }
        if (m->n >= MOUNT_FDS_MAX)
                goto out;
        if (!m->allow_subtree && (!is_mount_root(fd) || !is_whole(m, mnt_id))) {
                /* The directory must be the root of its mount, and the mount show the root of its
                 * filesystem: anything else is a subtree a handle could leave. Remembered, so the
                 * next inode of this mount does not check again. A mount made after the start is
                 * not in the list, and refused as well. */
                m->entry[m->n].mnt_id = mnt_id;
                r = m->entry[m->n].fd = -EXDEV;
                m->n++;
                goto out;
        }
        if (!fd_budget_take(m->budget)) {
                r = -ENFILE;
                goto out;
        }
        /* open_by_handle_at() refuses an O_PATH mount fd (EBADF): the directory opened for reading,
         * which the first inode of a mount is when the guest crosses into it (its root). */
        r = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (r < 0) {
                r = negative_errno();
                fd_budget_release(m->budget);
                goto out;
        }
        m->entry[m->n].mnt_id = mnt_id;
        m->entry[m->n].fd = r;
        m->n++;
out:
        pthread_mutex_unlock(&m->lock);
        return r;
}

unsigned mount_fds_count(MountFds *m) {
        unsigned n;

        pthread_mutex_lock(&m->lock);
        n = m->n;
        pthread_mutex_unlock(&m->lock);
        return n;
}
