/* keeper-journal.c: the session journal the keeper holds for crash survival (keeper.h,
 * docs/survival.md "Nodes, handles and locks across a death").
 *
 * The serving process describes its session one entry at a time (a node, an open handle, a lock
 * owner's ranges on a node: session-state.h's journal) and sends each change as it happens: an
 * entry replaced (with at most one fd, the file it stands for) or removed, by a key of two 64-bit
 * words. The keeper never looks inside an entry: it keeps the newest bytes and fd per key and
 * hands all of them to the next process on a fetch. Bounded (KEEPER_JOURNAL_MAX_*): past a bound
 * the journal is dropped whole and marked broken until the next clear, so that the next process
 * resumes without it (node ids answer ESTALE, as without a journal) rather than from a part. */
#include "keeper.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "sandbox.h"
#include "util.h"

typedef struct Entry {
        uint64_t a, b;
        int fd;
        uint32_t len;
        uint8_t data[];
} Entry;

/* Open addressing over a power-of-two array of Entry pointers; TOMB marks a removed slot. The
 * supervisor's filter allows brk and mmap but not mremap: the table grows by malloc, copy, free. */
#define TOMB ((Entry *) 1)

typedef struct Table {
        Entry **slot;
        size_t cap, used, tombs; /* used: live entries */
        uint64_t bytes;
        size_t fds; /* fds held */
        bool broken;
} Table;

/* Two tables: the journal a fetch answers from, and, while a process that took over rebuilds it
 * (KEEPER_TAG_JBEGIN .. KEEPER_TAG_JCOMMIT), the one it writes, which replaces the first only when
 * whole: that process can die in the middle, and the next one then restores from the first. */
static Table tables[2];
static unsigned active;
static bool staging;
static size_t lent_max; /* the most fds the supervisor lends both tables together */

/* What the serving process writes to: the staged table while one is built. */
#define J tables[staging ? 1 - active : active]

/* The journal's share of the supervisor's fd table: its open-file limit less a reserve for what it
 * does itself (its loop, the bus, a fetch's answer), so that a serving process sending fds cannot
 * leave the supervisor without any. */
static size_t max_fds(void) {
        struct rlimit rl;

        if (lent_max == 0) {
                if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
                        rl.rlim_cur = 1024;
                lent_max = rl.rlim_cur > 1024 ? (size_t) rl.rlim_cur - 512 : (size_t) rl.rlim_cur / 2;
        }
        return lent_max;
}

static size_t hash_key(uint64_t a, uint64_t b) {
        uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
        return (size_t) (h ^ h >> 29);
}

static void entry_free(Entry *e) {
        if (!e || e == TOMB)
                return;
        if (e->fd >= 0)
                J.fds--;
        safe_close(e->fd);
        J.bytes -= sizeof *e + e->len;
        free(e);
}

static void journal_drop(void) {
        for (size_t i = 0; i < J.cap; i++)
                entry_free(J.slot[i]);
        free(J.slot);
        J.slot = NULL;
        J.cap = J.used = J.tombs = 0;
        J.bytes = 0;
}

void keeper_journal_fail(void) {
        journal_drop();
        J.broken = true;
}

/* The slot of (a, b), or of the first free place for it (*found false). */
static size_t find(uint64_t a, uint64_t b, bool *found) {
        size_t mask = J.cap - 1, i = hash_key(a, b) & mask, free_at = SIZE_MAX;

        for (;; i = (i + 1) & mask) {
                Entry *e = J.slot[i];
                if (!e) {
                        *found = false;
                        return free_at != SIZE_MAX ? free_at : i;
                }
                if (e == TOMB) {
                        if (free_at == SIZE_MAX)
                                free_at = i;
                        continue;
                }
                if (e->a == a && e->b == b) {
                        *found = true;
                        return i;
                }
        }
}

static bool grow(void) {
        size_t cap = J.cap ? J.cap * 2 : 1024;
        Entry **old = J.slot;
        size_t old_cap = J.cap;

        /* Only live entries move: a table full of tombs is rebuilt at the same size. */
        if (J.cap && (J.used + 1) * 4 < J.cap * 3 / 2)
                cap = J.cap;
        J.slot = calloc(cap, sizeof *J.slot);
        if (!J.slot) {
                J.slot = old;
                return false;
        }
        J.cap = cap;
        J.tombs = 0;
        for (size_t i = 0; i < old_cap; i++)
                if (old[i] && old[i] != TOMB) {
                        bool found;
                        J.slot[find(old[i]->a, old[i]->b, &found)] = old[i];
                }
        free(old);
        return true;
}

static void journal_put(uint64_t a, uint64_t b, const uint8_t *data, size_t len, int fd) {
        Entry *e;
        size_t i;
        bool found;

        if (J.broken || len > KEEPER_JOURNAL_MAX_ENTRY) {
                safe_close(fd);
                if (!J.broken)
                        keeper_journal_fail();
                return;
        }
        if ((J.used + J.tombs + 1) * 4 > J.cap * 3 && !grow()) {
                safe_close(fd);
                keeper_journal_fail();
                return;
        }
        i = find(a, b, &found);
        /* The bounds hold for both tables together: a staged journal does not double them. */
        if ((!found && tables[0].used + tables[1].used >= KEEPER_JOURNAL_MAX_ENTRIES) ||
            tables[0].bytes + tables[1].bytes + sizeof *e + len > KEEPER_JOURNAL_MAX_BYTES ||
            (fd >= 0 && tables[0].fds + tables[1].fds >= max_fds()) || !(e = malloc(sizeof *e + len))) {
                safe_close(fd);
                keeper_journal_fail();
                return;
        }
        *e = (Entry) { .a = a, .b = b, .fd = fd, .len = (uint32_t) len };
        memcpy(e->data, data, len);
        J.bytes += sizeof *e + len;
        if (fd >= 0)
                J.fds++;
        if (found)
                entry_free(J.slot[i]);
        else {
                if (J.slot[i] == TOMB)
                        J.tombs--;
                J.used++;
        }
        J.slot[i] = e;
}

static void journal_del(uint64_t a, uint64_t b) {
        size_t i;
        bool found;

        if (J.cap == 0)
                return;
        i = find(a, b, &found);
        if (!found)
                return;
        entry_free(J.slot[i]);
        J.slot[i] = TOMB;
        J.used--;
        J.tombs++;
}

/* A fetch from slot index `from` on: as many entries as fit one message (and KEEPER_MAX_FDS fds),
 * after a header of the next index to ask for (0: done), the entry count and the broken flag. */
static void journal_fetch(int ctl, uint32_t from) {
        static uint8_t buf[KEEPER_JOURNAL_BATCH];
        const Table *t = &tables[active]; /* never the one being staged */
        uint8_t hdr[2] = { KEEPER_TAG_RECORD, KEEPER_SLOT_JOURNAL };
        int fds[KEEPER_MAX_FDS];
        uint32_t next = 0, count = 0, flags = t->broken ? 1u : 0u;
        size_t pos = 12, n_fds = 0;
        struct iovec iov[2] = { { hdr, sizeof hdr }, { buf, 0 } };

        for (size_t i = from; i < t->cap; i++) {
                Entry *e = t->slot[i];
                int32_t fdi = -1;
                if (!e || e == TOMB)
                        continue;
                if (pos + 24 + e->len > sizeof buf || (e->fd >= 0 && n_fds == KEEPER_MAX_FDS)) {
                        next = (uint32_t) i;
                        break;
                }
                if (e->fd >= 0) {
                        fdi = (int32_t) n_fds;
                        fds[n_fds++] = e->fd;
                }
                memcpy(buf + pos, &e->a, 8);
                memcpy(buf + pos + 8, &e->b, 8);
                memcpy(buf + pos + 16, &e->len, 4);
                memcpy(buf + pos + 20, &fdi, 4);
                memcpy(buf + pos + 24, e->data, e->len);
                pos += 24 + e->len;
                count++;
        }
        memcpy(buf, &next, 4);
        memcpy(buf + 4, &count, 4);
        memcpy(buf + 8, &flags, 4);
        iov[1].iov_len = pos;
        (void) keeper_send_fds(ctl, iov, 2, fds, n_fds);
}

bool keeper_journal_handle(int ctl, const uint8_t *p, size_t n, int *fds, size_t n_fds) {
        uint64_t a, b;
        uint32_t from = 0;

        switch (p[0]) {
        case KEEPER_TAG_JPUT:
                if (n < 17 || n_fds > 1) {
                        for (size_t i = 0; i < n_fds; i++)
                                safe_close(fds[i]);
                        keeper_journal_fail();
                        return true;
                }
                memcpy(&a, p + 1, 8);
                memcpy(&b, p + 9, 8);
                journal_put(a, b, p + 17, n - 17, n_fds ? fds[0] : -1);
                return true;
        case KEEPER_TAG_JDEL:
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                if (n != 17)
                        return true;
                memcpy(&a, p + 1, 8);
                memcpy(&b, p + 9, 8);
                journal_del(a, b);
                return true;
        case KEEPER_TAG_JCLEAR:
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                journal_drop();
                J.broken = false;
                return true;
        case KEEPER_TAG_JBEGIN:
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                staging = true;
                journal_drop(); /* a staged table a dead process left */
                J.broken = false;
                return true;
        case KEEPER_TAG_JCOMMIT:
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                if (!staging)
                        return true;
                staging = false;
                journal_drop(); /* the old journal */
                active = 1 - active;
                return true;
        case KEEPER_TAG_JFETCH:
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                if (n >= 5)
                        memcpy(&from, p + 1, 4);
                journal_fetch(ctl, from);
                return true;
        default:
                return false;
        }
}

void keeper_journal_clear(void) {
        staging = false;
        for (unsigned k = 0; k < 2; k++) {
                active = k;
                journal_drop();
                J.broken = false;
        }
        active = 0;
}

/* ---- the serving process's side ---- */

int keeper_journal_put(uint64_t a, uint64_t b, const void *data, size_t len, int fd) {
        uint8_t hdr[17] = { KEEPER_TAG_JPUT };
        struct iovec iov[2] = { { hdr, sizeof hdr }, { (void *) data, len } };
        int ctl = sandbox_channel_fd();

        if (ctl < 0)
                return -ENOTCONN;
        if (len > KEEPER_JOURNAL_MAX_ENTRY)
                return -E2BIG;
        memcpy(hdr + 1, &a, 8);
        memcpy(hdr + 9, &b, 8);
        return keeper_send_fds(ctl, iov, 2, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
}

int keeper_journal_del(uint64_t a, uint64_t b) {
        uint8_t msg[17] = { KEEPER_TAG_JDEL };
        int ctl = sandbox_channel_fd();

        if (ctl < 0)
                return -ENOTCONN;
        memcpy(msg + 1, &a, 8);
        memcpy(msg + 9, &b, 8);
        return keeper_send_fds(ctl, &(struct iovec) { msg, sizeof msg }, 1, NULL, 0);
}

static int send_tag(uint8_t tag) {
        int ctl = sandbox_channel_fd();

        if (ctl < 0)
                return -ENOTCONN;
        return keeper_send_fds(ctl, &(struct iovec) { &tag, 1 }, 1, NULL, 0);
}

int keeper_journal_reset(void) {
        return send_tag(KEEPER_TAG_JCLEAR);
}

int keeper_journal_begin(void) {
        return send_tag(KEEPER_TAG_JBEGIN);
}

int keeper_journal_commit(void) {
        return send_tag(KEEPER_TAG_JCOMMIT);
}

int keeper_journal_fetch(int (*fn)(uint64_t a, uint64_t b, const uint8_t *data, size_t len, int fd, void *ud),
                         void *ud) {
        static uint8_t buf[KEEPER_JOURNAL_BATCH];
        uint32_t from = 0;
        int ctl = sandbox_channel_fd();

        if (ctl < 0)
                return -ENOTCONN;
        for (;;) {
                uint8_t req[5] = { KEEPER_TAG_JFETCH }, got[2];
                union {
                        struct cmsghdr align;
                        char buf[CMSG_SPACE(sizeof(int) * KEEPER_MAX_FDS)];
                } control;
                struct iovec iov[2] = { { got, sizeof got }, { buf, sizeof buf } };
                struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = &control,
                                     .msg_controllen = sizeof control };
                int fds[KEEPER_MAX_FDS], r = 0;
                size_t n_fds = 0, pos = 12;
                uint32_t next, count, flags;
                ssize_t n;

                memcpy(req + 1, &from, 4);
                r = keeper_send_fds(ctl, &(struct iovec) { req, sizeof req }, 1, NULL, 0);
                if (r < 0)
                        return r;
                n = keeper_recv(ctl, &mh);
                if (n < 0)
                        return (int) n;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                                for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
                                        int fd = ((int *) CMSG_DATA(c))[i];
                                        if (n_fds < KEEPER_MAX_FDS)
                                                fds[n_fds++] = fd;
                                        else
                                                safe_close(fd);
                                }
                /* The keeper is outside the sandbox, but what it hands back was written by a
                 * serving process that may have been taken over: every length is checked. */
                if (n < 14 || got[0] != KEEPER_TAG_RECORD || got[1] != KEEPER_SLOT_JOURNAL ||
                    (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
                        r = -EBADMSG;
                n -= 2;
                if (r >= 0) {
                        memcpy(&next, buf, 4);
                        memcpy(&count, buf + 4, 4);
                        memcpy(&flags, buf + 8, 4);
                        if (flags & 1)
                                r = -ESTALE; /* the keeper dropped it: a bound was passed */
                        else if (next != 0 && next <= from)
                                r = -EBADMSG;
                }
                for (uint32_t k = 0; r >= 0 && k < count; k++) {
                        uint64_t a, b;
                        uint32_t len;
                        int32_t fdi;
                        int fd = -1;
                        if ((size_t) n - pos < 24) {
                                r = -EBADMSG;
                                break;
                        }
                        memcpy(&a, buf + pos, 8);
                        memcpy(&b, buf + pos + 8, 8);
                        memcpy(&len, buf + pos + 16, 4);
                        memcpy(&fdi, buf + pos + 20, 4);
                        if ((size_t) n - pos - 24 < len || fdi < -1 || fdi >= (int32_t) n_fds ||
                            (fdi >= 0 && fds[fdi] < 0)) {
                                r = -EBADMSG;
                                break;
                        }
                        if (fdi >= 0) {
                                fd = fds[fdi];
                                fds[fdi] = -1;
                        }
                        r = fn(a, b, buf + pos + 24, len, fd, ud); /* fd taken */
                        pos += 24 + len;
                }
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                if (r < 0)
                        return r;
                if (next == 0)
                        return 0;
                from = next;
        }
}
