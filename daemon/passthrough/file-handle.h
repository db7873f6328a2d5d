/* file-handle.h: inodes remembered by file handle (name_to_handle_at) instead of an open fd, and
 * the one fd per host mount that open_by_handle_at needs (--inode-file-handles, issue 16). */
#pragma once

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fd-budget.h"

/* At most this many distinct mounts get a mount fd; inodes of further mounts keep an O_PATH fd. */
#define MOUNT_FDS_MAX 256

/* Room for the handle of any filesystem (MAX_HANDLE_SZ bytes after the header), with the header's
 * alignment: made on the stack, so that a lookup of a known inode allocates nothing; a node that
 * keeps the handle copies file_handle_size() bytes of it. */
typedef struct FileHandleBuf {
        struct file_handle fh;
        unsigned char room[MAX_HANDLE_SZ];
} FileHandleBuf;

/* Fills buf with the handle of the inode fd refers to (an O_PATH fd, not followed), and its mount
 * id, which is the id statx(STATX_MNT_ID) reports. 0, or -EOPNOTSUPP when the filesystem cannot
 * make handles, or name_to_handle_at's errno. */
int file_handle_of_fd(int fd, FileHandleBuf *buf, int *ret_mnt_id);

/* The same for name in dirfd, not following a final symlink. */
int file_handle_of_name(int dirfd, const char *name, FileHandleBuf *buf, int *ret_mnt_id);

/* Bytes a handle takes in memory (the inode's share of RSS in handle mode). */
size_t file_handle_size(const struct file_handle *h);

/* Opens h on the filesystem of mount_fd with flags (O_CLOEXEC added), and checks it is still the
 * inode (dev, ino) it was made of: a recycled inode number of another file, or a handle the
 * filesystem no longer resolves (the file was deleted), answers -ESTALE, never another file.
 * ret_stx, if given, gets the statx (STATX_BASIC_STATS | STATX_MNT_ID) of the opened fd, done for
 * the check anyway. */
struct statx;
int file_handle_open_checked(int mount_fd, const struct file_handle *h, uint64_t dev, uint64_t ino, int flags,
                             struct statx *ret_stx);

/* One fd per host mount the share spans, keyed by mount id, opened when the mount's first inode is
 * seen (that directory opened for reading: the mount root when the guest crosses into a submount,
 * the share root for the share's own mount). Each fd is charged to the budget.
 *
 * Every lookup that remembers an inode by handle asks for its mount, so finding a known mount takes
 * no lock: the table is append-only, and an entry, once published by the release store of n, is
 * never written, moved or freed again until mount_fds_done(), which runs when no request does. A
 * reader's acquire load of n therefore sees entry[0..n) complete. */
typedef struct MountFds {
        /* Serialises inserters: held to look again and add an entry when a reader found none (one
         * statx and open, once per mount), never by a reader of a known mount. */
        pthread_mutex_t lock;
        FdBudget *budget;
        /* The mounts that show their filesystem's root, from /proc/self/mountinfo at start (before
         * the sandbox hides /proc; no fd on procfs is kept); owned. */
        int *whole_ids;
        size_t n_whole;
        bool allow_subtree; /* --allow-handles-beyond-share */
        /* Published entries: stored with release under lock after the entry is written, loaded
         * with acquire by readers. */
        _Atomic unsigned n;
        struct {
                int mnt_id;
                int fd; /* -EXDEV: a subtree mount, refused; its inodes keep fds */
        } entry[MOUNT_FDS_MAX];
} MountFds;

/* The ids of the mounts of this process's namespace that show their filesystem's root ("/" in the
 * root field of /proc/self/mountinfo; a bind mount of a subdirectory shows that directory). A
 * handle opens any inode of the filesystem (CAP_DAC_READ_SEARCH skips the kernel's check that it
 * lies below the mount), so on a subtree mount it reaches files outside the share. */
int mountinfo_whole_fs_mounts(int **ret_ids, size_t *ret_n);

/* whole_ids (n_whole of them, from mountinfo_whole_fs_mounts()) taken over; NULL: every mount
 * counts as a subtree unless allow_subtree. */
void mount_fds_init(MountFds *m, FdBudget *budget, int *whole_ids, size_t n_whole, bool allow_subtree);
void mount_fds_done(MountFds *m);
/* The mount fd for mnt_id, opened from fd (an O_PATH fd on that mount) when it is the first: >= 0,
 * or -EXDEV (the mount is a subtree of its filesystem and allow_subtree is off), -ENFILE (budget
 * spent), -E2BIG (MOUNT_FDS_MAX mounts already), -ENOTDIR (fd is no directory: a file bind mount)
 * or open's errno. Valid until mount_fds_done(). Takes no lock when mnt_id is in the table already;
 * safe from any thread. */
int mount_fds_get(MountFds *m, int mnt_id, int fd);
unsigned mount_fds_count(MountFds *m);
