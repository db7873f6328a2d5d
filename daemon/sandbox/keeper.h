/* keeper.h: state the serving process keeps outside itself so that the next one can take over when
 * it dies (docs/survival.md).
 *
 * The keeper is the supervisor (sandbox.c): outside the sandbox, confined by its own lockdown, and
 * it reads nothing the guest sends. The serving process stores records in a few slots over the
 * supervisor channel (a SEQPACKET socket: one message per record, whole or not at all, so a death
 * in the middle of a store leaves the previous record), each with the fds it names (SCM_RIGHTS):
 * the frontend connection, the guest memory, the rings' eventfds and in-flight tables. The keeper
 * never looks inside a record: it replaces the slot's record and fds, and hands them back on a
 * fetch. The process that fetches them validates them as frontend input. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define KEEPER_SLOTS 4
#define KEEPER_MAX_RECORD 16384
#define KEEPER_MAX_FDS 128

enum {
        KEEPER_SLOT_DEVICE = 0,  /* device-snapshot.h's record: the frontend's configuration */
        KEEPER_SLOT_SESSION = 1, /* the guest's FUSE_INIT, replayed into the next process's server */
        KEEPER_SLOT_UPGRADE = 2, /* live upgrade (upgrade.h): a small record and the sealed memfd of
                                  * the session's stream; empty while no upgrade is under way */
        /* The fds of that session (one per node and open handle): any number, so this slot is a
         * list that grows (KEEPER_TAG_APPEND) and is fetched KEEPER_MAX_FDS at a time from an
         * index; a store replaces it. Its record is empty. */
        KEEPER_SLOT_UPGRADE_FDS = 3,
};

/* At most this many fds in the list slot (each is one node or handle of the guest's session). */
#define KEEPER_MAX_LIST_FDS (1u << 20)

/* The first byte of a message on the supervisor channel that is not a notification. */
enum {
        KEEPER_TAG_STORE = 0x01, /* daemon -> keeper: slot byte, record, fds */
        KEEPER_TAG_FETCH = 0x02, /* daemon -> keeper: slot byte */
        KEEPER_TAG_RECORD = 0x03, /* keeper -> daemon: slot byte, record (empty: none), fds */
        KEEPER_TAG_CHANNEL = 0x04, /* spawner -> supervisor: a new control channel's end (one fd) */
        KEEPER_TAG_APPEND = 0x05,  /* daemon -> keeper: slot byte (the list slot), fds added to it */
        /* The session journal (keeper-journal.c): no slot byte, a key of two u64 words. */
        KEEPER_TAG_JPUT = 0x06,   /* daemon -> keeper: key, the entry's bytes, at most one fd */
        KEEPER_TAG_JDEL = 0x07,   /* daemon -> keeper: key */
        KEEPER_TAG_JCLEAR = 0x08, /* daemon -> keeper: every entry goes (a new session) */
        KEEPER_TAG_JFETCH = 0x09, /* daemon -> keeper: u32 index to go on from */
        KEEPER_TAG_JBEGIN = 0x0a, /* daemon -> keeper: changes go to a new journal from now on */
        KEEPER_TAG_JCOMMIT = 0x0b, /* daemon -> keeper: the new journal replaces the old one */
};

/* The slot byte of the keeper's answer to a journal fetch (no slot of its own). */
#define KEEPER_SLOT_JOURNAL 0xffu
/* Bounds of the journal: an entry fits one record message; the entries and their bytes stay
 * within what a session's nodes (--max-nodes, 1 Mi by default) and handles describe. */
#define KEEPER_JOURNAL_MAX_ENTRY (KEEPER_MAX_RECORD - 32)
#define KEEPER_JOURNAL_MAX_ENTRIES (4u << 20)
#define KEEPER_JOURNAL_MAX_BYTES (384ull << 20)
#define KEEPER_JOURNAL_BATCH (60u << 10)

/* ---- the supervisor's side ---- */

/* Whether buf (a message read from the channel, n bytes) is the keeper's; if so it is handled:
 * fds (n_fds, taken) stored or closed, a fetch answered on ctl. */
bool keeper_handle(int ctl, const void *buf, size_t n, int *fds, size_t n_fds);
/* Drops every record and fd (the daemon is gone for good). */
void keeper_clear(void);
/* The journal's messages (a KEEPER_TAG_J* first byte): handled like keeper_handle()'s. */
bool keeper_journal_handle(int ctl, const uint8_t *p, size_t n, int *fds, size_t n_fds);
/* A journal message that did not arrive whole (its fd could not be received): the journal can no
 * longer be trusted to describe the session, so it goes, broken until the next clear. */
void keeper_journal_fail(void);
void keeper_journal_clear(void);

/* One message with fds (borrowed) on a SEQPACKET socket: whole or not at all. Both retry when a
 * signal interrupts them (EINTR): a fetch that gave up would leave the keeper's answer in the
 * channel, and the next fetch would take it for its own. */
struct iovec;
struct msghdr;
int keeper_send_fds(int sock, const struct iovec *iov, size_t n_iov, const int *fds, size_t n_fds);
/* One message and its fds (MSG_CMSG_CLOEXEC) into mh: its length, or -errno. */
ssize_t keeper_recv(int sock, struct msghdr *mh);

/* ---- the serving process's side ---- */

/* Stores a record and its fds (borrowed) in slot; replaces what was there. */
int keeper_store(unsigned slot, const void *record, size_t len, const int *fds, size_t n_fds);
/* Fetches slot's record into buf (size bytes) and its fds (at most max, owned by the caller).
 * Returns the record's length, 0 when the slot is empty. */
int keeper_fetch(unsigned slot, void *buf, size_t size, int *fds, size_t max, size_t *ret_n_fds);

/* The list slot (KEEPER_SLOT_UPGRADE_FDS): replaces it with the n fds (borrowed), sent
 * KEEPER_MAX_FDS per message; and fetches all of it (*ret malloc'd, n_want fds expected). */
int keeper_store_list(const int *fds, size_t n);
int keeper_fetch_list(size_t n_want, int **ret);

/* The journal: an entry for key (a, b) replaced (data, len bytes; fd borrowed, -1 for none) or
 * removed; all removed; and all of them fetched, fn called for each with its fd (owned by fn, -1
 * for none). The fetch is -ESTALE when the keeper dropped the journal for a bound. */
int keeper_journal_put(uint64_t a, uint64_t b, const void *data, size_t len, int fd);
int keeper_journal_del(uint64_t a, uint64_t b);
int keeper_journal_reset(void);
/* A process that took over rebuilds the journal (it may die meanwhile): from begin on its changes
 * go to a new journal, which replaces the one a fetch answers from at commit. */
int keeper_journal_begin(void);
int keeper_journal_commit(void);
int keeper_journal_fetch(int (*fn)(uint64_t a, uint64_t b, const uint8_t *data, size_t len, int fd, void *ud),
                         void *ud);
