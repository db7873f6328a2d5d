/* dir-stream.h: buffered getdents64 on a directory fd, continued across READDIR requests. */
#pragma once

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
 * Owned by one directory handle and used under its dir_lock. The buffer exists only while a listing
 * is in progress: it is freed when the directory has been read to its end. */
typedef struct DirStream {
        char *buf;
        size_t len, pos;   /* bytes in buf, and the next unsent entry's position in it */
        uint64_t next_off; /* offset of the entry at pos (what the guest passes to continue) */
        bool positioned;   /* the fd's position matches next_off + what buf holds */
        bool eof;          /* the fd is at the end: getdents64 returned 0 */
} DirStream;

#define DIR_STREAM_BUF_SIZE 16384u

/* Positions the stream at off: keeps the buffer if off is where the last listing stopped. */
int dir_stream_seek(DirStream *s, int fd, uint64_t off);

/* The next entry (not consumed), reading more from fd when the buffer is used up. 1 with *ret set,
 * 0 at the end of the directory, negative errno on a read error. */
int dir_stream_peek(DirStream *s, int fd, const struct linux_dirent64 **ret);

/* Marks the entry returned by the last peek as sent. */
void dir_stream_consume(DirStream *s);

/* Frees the buffer (the handle is going away). */
void dir_stream_done(DirStream *s);
