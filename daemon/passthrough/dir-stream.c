/* dir-stream.c: buffered getdents64 on a directory fd, continued across READDIR requests. */
#include "dir-stream.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

void dir_stream_pool_init(DirStreamPool *p, uint64_t max) {
        *p = (DirStreamPool) {};
        pthread_mutex_init(&p->lock, NULL);
        p->max = max == 0 ? DIR_STREAM_DEFAULT_CAP : MAX(max, (uint64_t) DIR_STREAM_BUF_SIZE);
}

void dir_stream_pool_done(DirStreamPool *p) {
        pthread_mutex_destroy(&p->lock);
}

uint64_t dir_stream_pool_used(DirStreamPool *p) {
        uint64_t u;

        pthread_mutex_lock(&p->lock);
        u = p->used;
        pthread_mutex_unlock(&p->lock);
        return u;
}

uint64_t dir_stream_pool_drops(DirStreamPool *p) {
        uint64_t d;

        pthread_mutex_lock(&p->lock);
        d = p->drops;
        pthread_mutex_unlock(&p->lock);
        return d;
}

void dir_stream_init(DirStream *s, DirStreamPool *pool) {
        *s = (DirStream) { .pool = pool };
}

/* The LRU list, under p->lock. */
static void lru_unlink(DirStreamPool *p, DirStream *s) {
        if (s->lru_prev)
                s->lru_prev->lru_next = s->lru_next;
        else
                p->lru_head = s->lru_next;
        if (s->lru_next)
                s->lru_next->lru_prev = s->lru_prev;
        else
                p->lru_tail = s->lru_prev;
        s->lru_prev = s->lru_next = NULL;
        s->lru_listed = false;
}

static void lru_append(DirStreamPool *p, DirStream *s) {
        s->lru_prev = p->lru_tail;
        s->lru_next = NULL;
        if (p->lru_tail)
                p->lru_tail->lru_next = s;
        else
                p->lru_head = s;
        p->lru_tail = s;
        s->lru_listed = true;
}

/* The owner takes its stream off the idle list: from here to dir_stream_end() nobody else touches
 * its buffer. Whatever the pool dropped meanwhile is visible now (the lock orders it). */
static void dir_stream_claim(DirStream *s) {
        if (!s->pool)
                return;
        pthread_mutex_lock(&s->pool->lock);
        if (s->lru_listed)
                lru_unlink(s->pool, s);
        pthread_mutex_unlock(&s->pool->lock);
}

/* Gives the buffer back. Also for a stream that may be listed (dir_stream_done()): buf is read
 * under the lock, since the pool may be dropping it at this moment. */
static void dir_stream_drop(DirStream *s) {
        char *buf;

        if (s->pool) {
                pthread_mutex_lock(&s->pool->lock);
                if (s->lru_listed)
                        lru_unlink(s->pool, s);
                if (s->buf)
                        s->pool->used -= DIR_STREAM_BUF_SIZE;
                buf = s->buf;
                s->buf = NULL;
                pthread_mutex_unlock(&s->pool->lock);
        } else {
                buf = s->buf;
                s->buf = NULL;
        }
        s->len = s->pos = 0;
        free(buf);
}

/* A buffer for s within the pool's cap: when the pool is full, the least recently used idle
 * stream's buffer is taken over (that stream seeks back to its next_off at its next request, so
 * its listing goes on where it stopped); when no stream is idle, one more is allocated. */
static int dir_stream_get_buffer(DirStream *s) {
        DirStreamPool *p = s->pool;
        DirStream *v;

        if (p) {
                pthread_mutex_lock(&p->lock);
                v = p->lru_head;
                if (v && p->used + DIR_STREAM_BUF_SIZE > p->max) {
                        lru_unlink(p, v);
                        s->buf = v->buf;
                        v->buf = NULL;
                        v->len = v->pos = 0;
                        v->positioned = false; /* the fd stands past what the buffer held */
                        p->drops++;
                        pthread_mutex_unlock(&p->lock);
                        return 0;
                }
                p->used += DIR_STREAM_BUF_SIZE;
                pthread_mutex_unlock(&p->lock);
        }
        s->buf = malloc(DIR_STREAM_BUF_SIZE);
        if (!s->buf) {
                if (p) {
                        pthread_mutex_lock(&p->lock);
                        p->used -= DIR_STREAM_BUF_SIZE;
                        pthread_mutex_unlock(&p->lock);
                }
                return -ENOMEM;
        }
        return 0;
}

int dir_stream_seek(DirStream *s, int fd, uint64_t off) {
        dir_stream_claim(s);
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
                        int r = dir_stream_get_buffer(s);
                        if (r < 0)
                                return r;
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

void dir_stream_end(DirStream *s) {
        if (!s->pool)
                return;
        pthread_mutex_lock(&s->pool->lock);
        if (s->buf && !s->lru_listed)
                lru_append(s->pool, s);
        pthread_mutex_unlock(&s->pool->lock);
}

void dir_stream_done(DirStream *s) {
        dir_stream_drop(s);
        s->positioned = false;
}
