/* passthrough-state.h: the passthrough's part of a session's state (its nodes and open handles)
 * saved into a SessionState and restored from one (daemon/state/session-state.h). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "passthrough.h"
#include "session-state.h"

/* How nodes are described when saving and found when loading (the Rust virtiofsd's migration
 * options; docs/migration.md). */
typedef struct PtStateOptions {
        /* --migration-mode=file-handles: every node goes as its file handle, opened on the
         * destination; needs a destination that may use handles on its share (--inode-file-handles
         * in force there). Otherwise (find-paths) every node goes as its path from the share's
         * root, from the kernel's name of the node's fd at the moment of saving. */
        bool by_handle;
        /* --migration-confirm-paths: each path is opened again from the root when saving and must
         * lead to the node's very inode (device and inode number), or the node goes without one. */
        bool confirm_paths;
        /* --migration-verify-handles: find-paths sends each node's file handle too, and the
         * destination requires the file it finds by path to have that handle (same filesystem). */
        bool verify_handles;
        /* --migration-on-error=guest-error: a node or handle the destination cannot find becomes one
         * whose every use fails (EIO for nodes, EBADF for handles) instead of failing the load. */
        bool guest_error;
        /* The session of a process of this daemon that died or handed over, on this very host
         * (crash survival, live upgrade): a node must be the inode the record names (device and
         * inode number), is found by its name where that still leads to it even when its fd came
         * along (that fd lies on the previous process's copy of the share's mount), else through
         * its fd or one of its open files; a node or handle not found is left out (unknown:
         * ESTALE and EBADF, so that the guest looks it up again) rather than kept answering EIO. */
        bool same_host;
        /* --migration-lock-timeout: how long a lock the load finds held on this host (pending) is
         * retried before it is lost (locks.c). */
        uint64_t lock_timeout_usec;
} PtStateOptions;

typedef struct PtStateReport {
        size_t nodes, handles;            /* saved, or restored */
        size_t nodes_lost, handles_lost;  /* without a way to find them (save), or not found (load) */
        size_t locks;                     /* lock ranges saved, or taken again */
        size_t locks_lost;                /* load, guest-error: not taken again (an error other than a conflict) */
        size_t locks_pending;             /* load: held on this host now, retried (pending) */
        char first_pending[192];          /* the first of them */
        size_t nodes_unnamed;             /* load: restored nodes with no parent node and name, outside the clock */
        char first_problem[256];          /* the first node or handle that was lost, and why */
} PtStateReport;

/* Adds every node the guest holds, every open handle and every lock the guest holds (each range of
 * each POSIX lock owner, each flock) to s (the session record is the caller's).
 * Only while no request runs (the rings are stopped). Nodes the source cannot describe (deleted
 * while the guest holds them, outside the share, a path that no longer confirms) are saved
 * without a location and counted in rep. */
int passthrough_state_save(Passthrough *p, const PtStateOptions *o, SessionState *s, PtStateReport *rep);

/* The fds a save hands over beside the stream (a process passing its session to another, with
 * SCM_RIGHTS): fds[k] is the fd of fd slot k, a duplicate the caller closes (passthrough_state_fds_done()). */
typedef struct PtStateFds {
        int *fds;
        size_t n, cap;
} PtStateFds;
void passthrough_state_fds_done(PtStateFds *f);

/* passthrough_state_save() that also hands over fds: every node that holds an O_PATH fd, every
 * handle with an open file and every POSIX lock owner's OFD (on its first range: the locks come
 * with the open file description) gets an fd slot in its record and a duplicate of that fd in *fds, so
 * the receiver takes them (passthrough_state_load()) instead of locating the files again — even
 * one deleted meanwhile. Nodes remembered by file handle hold no fd and go as saving describes
 * them. */
int passthrough_state_save_fds(Passthrough *p, const PtStateOptions *o, SessionState *s, PtStateFds *fds,
                               PtStateReport *rep);

/* Re-creates the nodes and handles of s, with the same nodeids and fhs, on a passthrough whose
 * session has just been reset, then takes every lock again without waiting (a POSIX range on its
 * owner's OFD, opened as the guest's first SETLK opens it, or the one handed over; a flock on its
 * handle's file). fds (n_fds of them, may be NULL): fds passed beside the stream; a record's
 * fd_slot takes fds[slot] (set to -1 in the array) instead of locating the file. Restored nodes
 * whose path's directory is the root or another restored node get it as their parent and name and
 * join the clock of cached inode fds; the rest keep their fd (rep->nodes_unnamed). Anything not
 * found fails the load (with the reason in rep->first_problem) unless o->guest_error. A lock that
 * conflicts with one held on this host (the source vufsd's own, until its session ends) does not:
 * it is pending (rep->locks_pending), retried until o->lock_timeout_usec from now, then lost (its
 * owner holds nothing on that node and the handle it was taken through answers EBADF). On failure
 * the caller resets the session. */
int passthrough_state_load(Passthrough *p, const PtStateOptions *o, const SessionState *s, int *fds, size_t n_fds,
                           PtStateReport *rep);
