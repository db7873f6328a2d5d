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
#include "inode-map.h" /* STATX_MNT_IDS */

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
 * ret_stx, if given, gets the statx (STATX_BASIC_STATS and the mount id) of the opened fd, done for
 * the check anyway. */
struct statx;
int file_handle_open_checked(int mount_fd, const struct file_handle *h, uint64_t dev, uint64_t ino, int flags,
                             struct statx *ret_stx);

/* statmount(2) (Linux 6.8); its number is the same on every architecture of the common table. */
#ifndef SYS_statmount
#define SYS_statmount 457
#endif

/* How a mount seen for the first time is judged to show its whole filesystem (issue 31 finding 4):
 *   MOUNT_CHECK_STATMOUNT   ids are STATX_MNT_ID_UNIQUE ones: statmount(2) of that id says the
 *                           mount's root is its filesystem's root ("/"), at the moment it is asked.
 *                           An id is never reused, so the answer is about this very mount.
 *   MOUNT_CHECK_START_LIST  older kernels, or where statmount(2) may not be called (a seccomp filter
 *                           inherited from the service manager: systemd 252's libseccomp does not
 *                           know statmount, so its unit filter kills a process that calls it): ids are reused, so a list of ids read at one moment says
 *                           nothing about a mount seen later. The list from /proc/self/mountinfo
 *                           decides only the mounts asked for while the caller holds an fd on
 *                           them (the share's root at start, which pins its mount and its id);
 *                           mount_fds_seal() then drops it, and every mount seen after that counts
 *                           as a subtree: its inodes keep O_PATH fds. */
typedef enum MountCheck {
        MOUNT_CHECK_STATMOUNT,
        MOUNT_CHECK_START_LIST,
} MountCheck;

/* One fd per host mount the share spans, keyed by mount id (the unique one where the kernel has
 * it), opened when the mount's first inode is seen (that directory opened for reading: the mount
 * root when the guest crosses into a submount, the share root for the share's own mount). Each fd
 * is charged to the budget.
 *
 * Every lookup that remembers an inode by handle asks for its mount, so finding a known mount takes
 * no lock: the table is append-only, and an entry, once published by the release store of n, is
 * never written, moved or freed again until mount_fds_done(), which runs when no request does. A
 * reader's acquire load of n therefore sees entry[0..n) complete. A table entry never outlives its
 * id either: a mount with an fd is pinned (its id stays taken), and with STATX_MNT_ID_UNIQUE no id
 * comes back; with reused ids a refused entry (-EXDEV) may meet a new mount of that id, which is
 * refused as well, the safe way. */
typedef struct MountFds {
        /* Serialises inserters: held to look again and add an entry when a reader found none (one
         * statx, open and check, once per mount), never by a reader of a known mount. */
        pthread_mutex_t lock;
        FdBudget *budget;
        MountCheck check;
        bool unique_ids; /* keys are STATX_MNT_ID_UNIQUE ids */
        /* MOUNT_CHECK_START_LIST until sealed: the mounts that showed their filesystem's root in
         * /proc/self/mountinfo at start (before the sandbox hides /proc; no fd on procfs is kept);
         * owned. */
        int *whole_ids;
        size_t n_whole;
        bool allow_subtree; /* --allow-handles-beyond-share */
        /* Published entries: stored with release under lock after the entry is written, loaded
         * with acquire by readers. */
        _Atomic unsigned n;
        struct {
                uint64_t mnt_id;
                int fd; /* -EXDEV: a subtree mount, refused; its inodes keep fds */
        } entry[MOUNT_FDS_MAX];
} MountFds;

/* The ids of the mounts of this process's namespace that show their filesystem's root ("/" in the
 * root field of /proc/self/mountinfo; a bind mount of a subdirectory shows that directory). A
 * handle opens any inode of the filesystem (CAP_DAC_READ_SEARCH skips the kernel's check that it
 * lies below the mount), so on a subtree mount it reaches files outside the share. */
int mountinfo_whole_fs_mounts(int **ret_ids, size_t *ret_n);

/* Whether the mount with unique id mnt_id shows its filesystem's root, asked now (statmount(2)):
 * 1 or 0, or a negative errno (-ENOSYS before Linux 6.8, -ENOENT when it is gone). */
int mount_shows_whole_fs(uint64_t mnt_id);

/* Whether this process already runs under a seccomp filter (one its starter installed, such as a
 * systemd unit's SystemCallFilter=): such a filter may kill a call it does not know (statmount). */
bool seccomp_filter_inherited(void);

/* The id of fd's mount from statx(): STATX_MNT_ID_UNIQUE's if unique (-EOPNOTSUPP when the kernel
 * has none), else STATX_MNT_ID's. */
int mount_id_of_fd(int fd, bool unique, uint64_t *ret_id);

/* whole_ids (n_whole of them, from mountinfo_whole_fs_mounts(); MOUNT_CHECK_START_LIST only) taken
 * over; NULL: every mount counts as a subtree unless allow_subtree. unique_ids: the keys callers
 * pass are STATX_MNT_ID_UNIQUE ids (always so with MOUNT_CHECK_STATMOUNT; with the start list, where
 * the kernel has them but statmount(2) may not be called), while whole_ids are mountinfo's. */
void mount_fds_init(MountFds *m, FdBudget *budget, MountCheck check, bool unique_ids, int *whole_ids,
                    size_t n_whole, bool allow_subtree);
/* MOUNT_CHECK_START_LIST: the start list is dropped; mounts not in the table yet count as subtrees
 * from now on. Call before any other thread asks. No effect with MOUNT_CHECK_STATMOUNT. */
void mount_fds_seal(MountFds *m);
void mount_fds_done(MountFds *m);
/* The mount fd for mnt_id (fd's mount's id, as mount_id_of_fd() gives it: unique with
 * MOUNT_CHECK_STATMOUNT), opened from fd (an O_PATH fd on that mount) when it is the first: >= 0,
 * or -EXDEV (the mount is a subtree of its filesystem and allow_subtree is off), -ENFILE (budget
 * spent), -E2BIG (MOUNT_FDS_MAX mounts already), -ENOTDIR (fd is no directory: a file bind mount),
 * -ESTALE (fd is not on mount mnt_id) or open's errno. Valid until mount_fds_done(). Takes no lock
 * when mnt_id is in the table already; safe from any thread. */
int mount_fds_get(MountFds *m, uint64_t mnt_id, int fd);
unsigned mount_fds_count(MountFds *m);
