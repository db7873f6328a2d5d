/* session-journal.h: the passthrough's session written out as it changes, for the process that
 * takes over after a death (crash survival, docs/survival.md "Nodes, handles and locks across a
 * death").
 *
 * Every change a guest could still rely on after the serving process dies goes to a sink as one
 * entry of session-state.h's journal, keyed by what it describes: a node when it is created or
 * moves (its parent and name, or its fd when it has no name), an open handle with its fd (and its
 * flock), a POSIX lock owner's ranges on a node with its OFD; and the key's removal when the node
 * is freed, the handle released, the owner's entry dropped. An entry reaches the sink before the
 * guest can learn of what it describes (before the reply that names a new node id or fh), so that
 * what the guest holds is always described. The sink (survive.c) hands entries to the keeper.
 * Without a sink (no --crash-restarts, the unit tests) every call is one relaxed load. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "handle-map.h"
#include "inode-map.h"
#include "lock-set.h"

typedef struct JournalSink {
        /* Replace the entry of key (a, b) with len bytes and fd (borrowed, -1: none). */
        int (*put)(uint64_t a, uint64_t b, const void *data, size_t len, int fd);
        int (*del)(uint64_t a, uint64_t b);
        /* Every entry goes (a new session). */
        int (*reset)(void);
} JournalSink;

/* Keys: the kind in the top two bits of a, the node id or fh below (ids stay below 2^62,
 * STATE_ID_MAX); b is the lock owner of a POSIX entry, 0 otherwise. */
#define JOURNAL_KEY_NODE (1ull << 62)
#define JOURNAL_KEY_HANDLE (2ull << 62)
#define JOURNAL_KEY_POSIX (3ull << 62)

/* Installs sink (static storage; NULL: none). Before requests run, or with them stopped. */
void journal_set_sink(const JournalSink *sink);
bool journal_active(void);

/* A new node, or one whose parent and name changed: called where the change is made, under the
 * lock that orders changes of that node (the shard lock at creation, the path lock after). */
void journal_node(const Inode *i, int fd);
void journal_node_gone(uint64_t nodeid);
/* A handle opened, or its flock changed (under its flock lock). */
void journal_handle(Handle *h);
void journal_handle_gone(uint64_t fh);
/* A POSIX lock owner's ranges on a node after a change (under the owner's lock); no ranges
 * removes its entry. fd: its OFD. */
void journal_plock(uint64_t nodeid, uint64_t owner, uint64_t fh, int fd, const LockRange *r, size_t n);
void journal_plock_gone(uint64_t nodeid, uint64_t owner);
/* A new session: every entry goes. */
void journal_reset(void);

/* Every entry again from what the passthrough holds now (after a restore, the keeper's journal
 * replaced whole): reset, then each node, handle and lock owner. Requests stopped. */
typedef struct Passthrough Passthrough;
void passthrough_journal_all(Passthrough *p);
