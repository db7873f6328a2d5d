/* dir-stream.h: buffered getdents64 on a directory fd, continued across READDIR requests. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What getdents64(2) returns, one record per entry (the kernel's layout; glibc has no header). */
struct linux_dirent64 {
        uint64_t d_ino;
        int64_t d_off;
        unsigned short d_reclen;
        unsigned char d_type;
        char d_name[];
};

/* A guest lists a directory with one READDIR(PLUS) request per reply buffer (4 KiB from Linux), each
 * naming the offset where the last one stopped. Seeking and reading the directory again for every
 * request would make the kernel produce most entries many times over (a 1,000-entry directory is
 * about 40 requests), so the entries read but not yet sent are kept here, with the offset that
 * follows the last entry sent: a request at that offset continues from the buffer; any other offset
 * seeks the fd and starts over, as the guest asked.
 *
 * Owned by one directory handle and used under its dir_lock, between dir_stream_seek() (which
 * starts every request) and dir_stream_end(). The buffer exists only while a listing is in
 * progress: it is freed when the directory has been read to its end, and the buffers of all
 * streams of a pool together stay within the pool's cap (below). */
typedef struct DirStreamPool DirStreamPool;

typedef struct DirStream {
        char *buf;
        size_t len, pos;   /* bytes in buf, and the next unsent entry's position in it */
        uint64_t next_off; /* offset of the entry at pos (what the guest passes to continue) */
        bool positioned;   /* the fd's position matches next_off + what buf holds */
        bool eof;          /* the fd is at the end: getdents64 returned 0 */

        /* Under pool->lock: the stream is idle (between requests) with a buffer, and may be
         * dropped by another stream's dir_stream_peek(). */
        DirStreamPool *pool;
        struct DirStream *lru_prev, *lru_next;
        bool lru_listed;
} DirStream;

#define DIR_STREAM_BUF_SIZE 16384u

/* Every open directory handle of a guest may hold a buffer until RELEASEDIR: without a bound that
 * is DIR_STREAM_BUF_SIZE per handle, about 16 GiB for the million handles the fd budget allows.
 * A pool caps the buffered bytes of all its streams: a stream that needs a buffer while the pool
 * is full takes it from the least recently used idle stream, which loses its read-ahead but not
 * its place (it seeks to next_off and reads again at its next request). Streams in the middle of
 * a request are never dropped, so the pool may go above its cap by at most one buffer per request
 * running at that moment. */
struct DirStreamPool {
        /* Guards the LRU list, used and drops, and the buffer fields of listed (idle) streams: a
         * few pointer operations per READDIR request, and the owner of a listed stream takes it
         * off the list under this lock before it touches its buffer. One lock rather than atomics:
         * the list and the byte count change together. */
        pthread_mutex_t lock;
        DirStream *lru_head, *lru_tail; /* idle streams with a buffer, least recently used first */
        uint64_t used, max;             /* buffered bytes, and the cap */
        uint64_t drops;                 /* buffers taken from idle streams because of the cap */
};

#define DIR_STREAM_DEFAULT_CAP (64ull << 20) /* 4096 buffers */
#define DIR_STREAM_MAX_CAP (1ull << 40)

/* max 0 = DIR_STREAM_DEFAULT_CAP; below one buffer it is raised to one. */
void dir_stream_pool_init(DirStreamPool *p, uint64_t max);
void dir_stream_pool_done(DirStreamPool *p);
uint64_t dir_stream_pool_used(DirStreamPool *p);
uint64_t dir_stream_pool_drops(DirStreamPool *p);

/* A new stream's state, its buffers counted in pool (NULL: not counted, no cap). */
void dir_stream_init(DirStream *s, DirStreamPool *pool);

/* Starts a request: positions the stream at off, keeping the buffer if off is where the last
 * listing stopped (and the pool did not drop it since). Every request that called it calls
 * dir_stream_end() when done with the stream. */
int dir_stream_seek(DirStream *s, int fd, uint64_t off);

/* The next entry (not consumed), reading more from fd when the buffer is used up. 1 with *ret set,
 * 0 at the end of the directory, negative errno on a read error. */
int dir_stream_peek(DirStream *s, int fd, const struct linux_dirent64 **ret);

/* Marks the entry returned by the last peek as sent. */
void dir_stream_consume(DirStream *s);

/* Ends a request: the buffer, if any, becomes the most recently used idle one of the pool. */
void dir_stream_end(DirStream *s);

/* Frees the buffer (the handle is going away). */
void dir_stream_done(DirStream *s);
