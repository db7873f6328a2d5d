/* session-journal.c: the passthrough's session written out as it changes (session-journal.h). */
#include "session-journal.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>

#include "inode-fd-cache.h"
#include "locks.h"
#include "passthrough-internal.h"
#include "log.h"
#include "session-state.h"

static const JournalSink *_Atomic sink;

void journal_set_sink(const JournalSink *s) {
        atomic_store(&sink, s);
}

bool journal_active(void) {
        return atomic_load_explicit(&sink, memory_order_relaxed) != NULL;
}

/* A failed send means the keeper's journal no longer describes the session: the next process
 * would restore a part of it. Said once; the keeper drops a journal that misses an fd itself. */
static void sent(int r, const char *what) {
        static atomic_bool logged;

        if (r < 0 && !atomic_exchange(&logged, true))
                log_warning_errno(r, "Cannot keep %s for a process that takes over: %m", what);
}

void journal_node(const Inode *i, int fd) {
        const JournalSink *s = atomic_load_explicit(&sink, memory_order_relaxed);
        const Inode *parent = atomic_load_explicit(&i->parent, memory_order_relaxed);
        uint8_t buf[STATE_RECORD_HEADER_SIZE + 80 + 256 + STATE_HANDLE_MAX];
        StateNode n = {
                .id = i->nodeid, .nlookup = 1, .dev = i->key.dev, .ino = i->key.ino, .mnt_id = i->key.mnt_id,
                .type = i->type, .fd_slot = -1,
        };
        ssize_t len;

        if (!s || i->lost || i->pinned)
                return;
        /* Where the next process finds it: by name in its parent (the root or a node of the
         * journal), by its file handle, or through its fd when it has neither. */
        if (parent && i->name) {
                n.parent = parent->nodeid;
                n.name = i->name;
        }
        if (i->handle && i->handle->handle_bytes <= STATE_HANDLE_MAX) {
                n.handle_type = (uint32_t) i->handle->handle_type;
                n.handle_len = (uint16_t) i->handle->handle_bytes;
                memcpy(n.handle, i->handle->f_handle, n.handle_len);
        }
        if (n.parent == 0 && n.handle_len == 0 && fd >= 0)
                n.fd_slot = 0;
        else
                fd = -1;
        len = session_state_record_node(&n, buf, sizeof buf);
        if (len < 0) /* a name the format cannot carry: the node is re-found by the guest (ESTALE) */
                return;
        sent(s->put(JOURNAL_KEY_NODE | i->nodeid, 0, buf, (size_t) len, fd), "a node");
}

void journal_node_gone(uint64_t nodeid) {
        const JournalSink *s = atomic_load_explicit(&sink, memory_order_relaxed);

        if (s)
                sent(s->del(JOURNAL_KEY_NODE | nodeid, 0), "a forgotten node");
}

void journal_handle(Handle *h) {
        const JournalSink *s = atomic_load_explicit(&sink, memory_order_relaxed);
        uint8_t buf[2 * (STATE_RECORD_HEADER_SIZE + 64)];
        StateHandle x = { .fh = h->fh, .node = h->inode->nodeid, .open_flags = h->flags,
                          .flags = h->dir ? STATE_HANDLE_DIR : 0, .fd_slot = 0 };
        short flock_type = atomic_load(&h->flock_type);
        ssize_t len, more = 0;

        if (!s || h->fd < 0)
                return;
        len = session_state_record_handle(&x, buf, sizeof buf);
        if (len < 0)
                return;
        /* Its flock belongs to the open file, which the fd keeps: the record only says it is
         * there, for a saved session and a GETLK. */
        if (!h->dir && flock_type != F_UNLCK) {
                StateLock l = { .node = x.node, .fh = x.fh, .start = 0, .end = STATE_LOCK_END_MAX,
                                .kind = STATE_LOCK_FLOCK,
                                .type = flock_type == F_RDLCK ? STATE_LOCK_READ : STATE_LOCK_WRITE, .fd_slot = -1 };
                more = session_state_record_lock(&l, buf + len, sizeof buf - (size_t) len);
                if (more < 0)
                        more = 0;
        }
        sent(s->put(JOURNAL_KEY_HANDLE | h->fh, 0, buf, (size_t) (len + more), h->fd), "an open file");
}

void journal_handle_gone(uint64_t fh) {
        const JournalSink *s = atomic_load_explicit(&sink, memory_order_relaxed);

        if (s)
                sent(s->del(JOURNAL_KEY_HANDLE | fh, 0), "a released file");
}

/* The most ranges of one owner on one node an entry carries (one keeper record). */
#define PLOCK_ENTRY_RANGES 200u

void journal_plock(uint64_t nodeid, uint64_t owner, uint64_t fh, int fd, const LockRange *r, size_t n) {
        const JournalSink *s = atomic_load_explicit(&sink, memory_order_relaxed);
        uint8_t buf[PLOCK_ENTRY_RANGES * (STATE_RECORD_HEADER_SIZE + 56)];
        size_t pos = 0;

        if (!s)
                return;
        if (n == 0) {
                journal_plock_gone(nodeid, owner);
                return;
        }
        if (n > PLOCK_ENTRY_RANGES) {
                /* Kept by the OFD as long as this process lives; a death loses them. */
                log_warning("Lock owner %" PRIx64 " holds %zu ranges on node %" PRIu64 ", more than a crash survival "
                            "entry carries (%u): they do not survive a death of the serving process",
                            owner, n, nodeid, PLOCK_ENTRY_RANGES);
                journal_plock_gone(nodeid, owner);
                return;
        }
        for (size_t k = 0; k < n; k++) {
                StateLock l = { .owner = owner, .node = nodeid, .fh = fh, .start = r[k].start, .end = r[k].end,
                                .kind = STATE_LOCK_POSIX,
                                .type = r[k].type == F_RDLCK ? STATE_LOCK_READ : STATE_LOCK_WRITE,
                                .fd_slot = k == 0 ? 0 : -1 };
                ssize_t len = session_state_record_lock(&l, buf + pos, sizeof buf - pos);
                if (len < 0)
                        return;
                pos += (size_t) len;
        }
        sent(s->put(JOURNAL_KEY_POSIX | nodeid, owner, buf, pos, fd), "a lock");
}

void journal_plock_gone(uint64_t nodeid, uint64_t owner) {
        const JournalSink *s = atomic_load_explicit(&sink, memory_order_relaxed);

        if (s)
                sent(s->del(JOURNAL_KEY_POSIX | nodeid, owner), "a released lock");
}

void journal_reset(void) {
        const JournalSink *s = atomic_load_explicit(&sink, memory_order_relaxed);

        if (s)
                sent(s->reset(), "a new session");
}

/* ---- the whole session at once (a process that restored one) ---- */

static int all_node(Inode *i, uint64_t nlookup, void *ud) {
        uint64_t w = atomic_load(&i->fdword);

        /* Only a node without a name keeps its fd for good (keep_fd): that fd is stable while the
         * node lives, and it is the one a record carries. */
        journal_node(i, i->keep_fd ? fdw_fd(w) : -1);
        inode_unref(i);
        return 0;
}

static int all_handle(Handle *h, void *ud) {
        pthread_mutex_lock(&h->flock_lock);
        journal_handle(h);
        pthread_mutex_unlock(&h->flock_lock);
        handle_unref(h);
        return 0;
}

static int all_owner(uint64_t owner, uint64_t fh, int fd, const LockRange *r, size_t n, void *ud) {
        journal_plock(((Inode *) ud)->nodeid, owner, fh, fd, r, n);
        return 0;
}

static int all_locks(Inode *i, uint64_t nlookup, void *ud) {
        (void) plock_foreach(i, all_owner, i);
        inode_unref(i);
        return 0;
}

void passthrough_journal_all(Passthrough *p) {
        _cleanup_(inode_unrefp) Inode *root = get_inode(p, FS_ROOT_ID);

        if (!journal_active())
                return;
        journal_reset();
        (void) inode_map_foreach(p->inodes, all_node, NULL);
        (void) handle_map_foreach(p->handles, all_handle, NULL);
        if (root)
                (void) all_locks(inode_ref(root), 0, NULL);
        (void) inode_map_foreach(p->inodes, all_locks, NULL);
}
