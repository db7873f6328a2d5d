/* dir-stream.c: buffered getdents64 on a directory fd, continued across READDIR requests. */
#include "dir-stream.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

static void dir_stream_drop(DirStream *s) {
        free(s->buf);
        s->buf = NULL;
        s->len = s->pos = 0;
}

int dir_stream_seek(DirStream *s, int fd, uint64_t off) {
        if (off > INT64_MAX)
                return -EINVAL;
        if (s->positioned && off == s->next_off)
                return 0;
        s->positioned = false;
        dir_stream_drop(s);
        if (lseek(fd, (off_t) off, SEEK_SET) < 0)
                return negative_errno();
        s->next_off = off;
        s->eof = false;
        s->positioned = true;
        return 0;
}

/* Checks one record of a buffer the kernel filled: a record that does not fit is a kernel bug, but
 * nothing past the buffer is ever read because of one. */
static bool record_valid(const DirStream *s) {
        const struct linux_dirent64 *d = (const struct linux_dirent64 *) (s->buf + s->pos);
        size_t left = s->len - s->pos;

        return left >= offsetof(struct linux_dirent64, d_name) + 1 && d->d_reclen <= left &&
               d->d_reclen > offsetof(struct linux_dirent64, d_name) &&
               memchr(d->d_name, 0, d->d_reclen - offsetof(struct linux_dirent64, d_name));
}

int dir_stream_peek(DirStream *s, int fd, const struct linux_dirent64 **ret) {
        ssize_t n;

        if (!s->positioned)
                return -EIO; /* only after a failed seek: the caller reports that instead */
        if (s->pos >= s->len) {
                if (s->eof)
                        return 0;
                if (!s->buf) {
                        s->buf = malloc(DIR_STREAM_BUF_SIZE);
                        if (!s->buf)
                                return -ENOMEM;
                }
                n = syscall(SYS_getdents64, fd, s->buf, DIR_STREAM_BUF_SIZE);
                if (n < 0) {
                        int r = negative_errno();
                        /* Where the fd stands after a failed read is unknown: seek next time. */
                        s->positioned = false;
                        dir_stream_drop(s);
                        return r;
                }
                s->pos = 0;
                s->len = (size_t) n;
                if (n == 0) {
                        /* Listed to the end: the buffer is not needed until the guest seeks. */
                        s->eof = true;
                        dir_stream_drop(s);
                        return 0;
                }
        }
        if (!record_valid(s)) {
                s->positioned = false;
                dir_stream_drop(s);
                return -EIO;
        }
        *ret = (const struct linux_dirent64 *) (s->buf + s->pos);
        return 1;
}

void dir_stream_consume(DirStream *s) {
        const struct linux_dirent64 *d = (const struct linux_dirent64 *) (s->buf + s->pos);

        s->pos += d->d_reclen;
        s->next_off = (uint64_t) d->d_off;
}

void dir_stream_done(DirStream *s) {
        dir_stream_drop(s);
        s->positioned = false;
}
