/* share-dir.c: the shared directory resolved once from "/", each directory on the way checked. */
#include "share-dir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

#define SYMLINKS_MAX 40 /* as the kernel's own walk */
#define DEPTH_MAX 256

/* The walk so far: the fd of each directory from "/" down, and the path shown in messages. */
typedef struct Walk {
        int fd[DEPTH_MAX];
        size_t shown_len[DEPTH_MAX]; /* length of shown at each depth */
        unsigned depth;
        char shown[PATH_MAX];
        uid_t trusted;
} Walk;

static void walk_pop_to(Walk *w, unsigned depth) {
        while (w->depth > depth)
                safe_close(w->fd[--w->depth]);
        w->shown[w->shown_len[w->depth - 1]] = '\0';
}

static bool trusted_owner(const Walk *w, uid_t uid) {
        return uid == 0 || uid == w->trusted;
}

/* Whether the directory on top may have name looked up in it, and whether its entries must be
 * checked too (sticky and writable by others): 1, 0, or -EPERM with *ret_why. */
static int check_dir(const Walk *w, const struct stat *st, char **ret_why) {
        const char *shown = w->shown[0] ? w->shown : "/";

        if (!trusted_owner(w, st->st_uid)) {
                if (asprintf(ret_why, "%s is owned by uid %u, who could point the path elsewhere", shown,
                             (unsigned) st->st_uid) < 0)
                        *ret_why = NULL;
                return -EPERM;
        }
        if (!(st->st_mode & (S_IWGRP | S_IWOTH)))
                return 0;
        if (st->st_mode & S_ISVTX)
                return 1;
        if (asprintf(ret_why, "%s is writable by %s without the sticky bit: anyone who may write it could "
                     "swap the next component", shown, st->st_mode & S_IWOTH ? "everyone" : "its group") < 0)
                *ret_why = NULL;
        return -EPERM;
}

static int push(Walk *w, int fd, const char *name) {
        size_t len = w->shown_len[w->depth - 1], n = strlen(name);

        if (w->depth >= DEPTH_MAX || len + 1 + n >= sizeof w->shown) {
                safe_close(fd);
                return -ENAMETOOLONG;
        }
        w->shown[len] = '/';
        memcpy(w->shown + len + 1, name, n + 1);
        w->shown_len[w->depth] = len + 1 + n;
        w->fd[w->depth++] = fd;
        return 0;
}

/* One component looked up in the directory on top: a directory is pushed; a symlink's target put
 * in front of rest (*rest then reallocated). */
static int step(Walk *w, const char *name, char **rest, unsigned *links, char **ret_why) {
        _cleanup_close_ int fd = -1;
        struct stat dir, st;
        int sticky;

        if (fstat(w->fd[w->depth - 1], &dir) < 0)
                return negative_errno();
        sticky = check_dir(w, &dir, ret_why);
        if (sticky < 0)
                return sticky;
        fd = openat(w->fd[w->depth - 1], name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
                return negative_errno();
        if (sticky && !trusted_owner(w, st.st_uid)) {
                if (asprintf(ret_why, "%s/%s is owned by uid %u in a directory others may write: its owner "
                             "could rename it or swap it", w->shown, name, (unsigned) st.st_uid) < 0)
                        *ret_why = NULL;
                return -EPERM;
        }
        if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX], *joined;
                ssize_t n;

                if (++*links > SYMLINKS_MAX)
                        return -ELOOP;
                n = readlinkat(fd, "", target, sizeof target - 1);
                if (n < 0)
                        return negative_errno();
                target[n] = '\0';
                if (asprintf(&joined, "%s/%s", target, *rest) < 0)
                        return -ENOMEM;
                free(*rest);
                *rest = joined;
                if (target[0] == '/')
                        walk_pop_to(w, 1);
                return 0;
        }
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        return push(w, TAKE_FD(fd), name);
}

int share_dir_open(const char *path, uid_t trusted_uid, char **ret_why) {
        _cleanup_free_ char *rest = NULL;
        unsigned links = 0;
        Walk w = { .trusted = trusted_uid };
        int r = 0, fd;

        *ret_why = NULL;
        if (!path || path[0] != '/')
                return -EINVAL;
        rest = strdup(path);
        if (!rest)
                return -ENOMEM;
        w.fd[0] = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (w.fd[0] < 0)
                return negative_errno();
        w.depth = 1;
        while (r >= 0) {
                char *slash, *name;
                _cleanup_free_ char *cur = TAKE_PTR(rest);

                name = cur + strspn(cur, "/");
                if (!*name)
                        break;
                slash = strchr(name, '/');
                rest = strdup(slash ? slash + 1 : "");
                if (!rest) {
                        r = -ENOMEM;
                        break;
                }
                if (slash)
                        *slash = '\0';
                if (streq(name, "."))
                        continue;
                if (streq(name, "..")) {
                        /* The directory the walk came from: what the kernel's ".." is too, this walk
                         * having crossed each mount and symlink itself. */
                        if (w.depth > 1)
                                walk_pop_to(&w, w.depth - 1);
                        continue;
                }
                r = step(&w, name, &rest, &links, ret_why);
        }
        fd = r;
        if (r >= 0) {
                fd = w.fd[w.depth - 1];
                w.fd[w.depth - 1] = -1;
        }
        for (unsigned k = 0; k < w.depth; k++)
                safe_close(w.fd[k]);
        if (r == -EPERM && !*ret_why)
                return -ENOMEM;
        return fd;
}
