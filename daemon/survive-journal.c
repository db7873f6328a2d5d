/* survive-journal.c: the guest's session across a death of the serving process (survive-journal.h). */
#include "survive-journal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "keeper.h"
#include "log.h"
#include "manager.h"
#include "passthrough-state.h"
#include "session-journal.h"
#include "session-state.h"

typedef struct KeptEntry {
        uint8_t *data;
        size_t len;
        int fd;
} KeptEntry;

static const JournalSink keeper_sink = {
        .put = keeper_journal_put,
        .del = keeper_journal_del,
        .reset = keeper_journal_reset,
};

void survive_journal_install(bool on) {
        journal_set_sink(on ? &keeper_sink : NULL);
}

void kept_journal_done(KeptJournal *k) {
        for (size_t i = 0; i < k->n; i++) {
                free(k->e[i].data);
                safe_close(k->e[i].fd);
        }
        free(k->e);
        *k = (KeptJournal) {};
}

static int collect(uint64_t a, uint64_t b, const uint8_t *data, size_t len, int fd, void *ud) {
        KeptJournal *k = ud;
        uint8_t *copy;

        if (k->n == k->cap) {
                size_t cap = k->cap ? k->cap * 2 : 256;
                KeptEntry *e = realloc(k->e, cap * sizeof *e);
                if (!e) {
                        safe_close(fd);
                        return -ENOMEM;
                }
                k->e = e;
                k->cap = cap;
        }
        copy = malloc(MAX(len, (size_t) 1));
        if (!copy) {
                safe_close(fd);
                return -ENOMEM;
        }
        memcpy(copy, data, len);
        k->e[k->n++] = (KeptEntry) { copy, len, fd };
        return 0;
}

int survive_journal_fetch(KeptJournal *k) {
        int r = keeper_journal_fetch(collect, k);

        k->error = r;
        return r;
}

int survive_journal_restore(Manager *m, KeptJournal *k) {
        _cleanup_(session_state_freep) SessionState *s = NULL;
        _cleanup_free_ StateJournalEntry *entries = NULL;
        _cleanup_free_ int32_t *fd_entry = NULL;
        _cleanup_free_ int *fds = NULL;
        StateSession session = { .proto_major = 7 };
        PtStateOptions o = { .by_handle = passthrough_uses_handles(m->passthrough),
                             .guest_error = true, .same_host = true };
        PtStateReport rep = {};
        char why[256] = "";
        size_t dropped = 0;
        int n_slots, r;

        if (k->error < 0) {
                log_warning_errno(k->error, "No record of the guest's nodes and open files was kept (%m): its node ids "
                                            "answer ESTALE, its open files EBADF");
                passthrough_journal_all(m->passthrough); /* a journal of this process's own from now on */
                return 0;
        }
        if (!fuse_server_get_session(m->fs, &session.init_flags) || k->n == 0) {
                passthrough_journal_all(m->passthrough);
                return 0;
        }
        entries = calloc(MAX(k->n, (size_t) 1), sizeof *entries);
        fd_entry = calloc(MAX(k->n, (size_t) 1), sizeof *fd_entry);
        fds = calloc(MAX(k->n, (size_t) 1), sizeof *fds);
        if (!entries || !fd_entry || !fds)
                return -ENOMEM;
        for (size_t i = 0; i < k->n; i++)
                entries[i] = (StateJournalEntry) { k->e[i].data, k->e[i].len, k->e[i].fd };
        n_slots = session_state_from_journal(&session, entries, k->n, passthrough_max_nodes(m->passthrough), &s,
                                             &dropped, fd_entry, why, sizeof why);
        if (n_slots < 0) {
                log_error_errno(n_slots, "The kept record of the guest's session is unusable (%s): its node ids answer "
                                         "ESTALE, its open files EBADF",
                                why[0] ? why : strerror(-n_slots));
                passthrough_journal_all(m->passthrough);
                return 0;
        }
        /* The load takes the fds it uses (set to -1 in fds): each entry's fd moves there. */
        for (int32_t slot = 0; slot < n_slots; slot++) {
                KeptEntry *e = &k->e[fd_entry[slot]];
                fds[slot] = e->fd;
                e->fd = -1;
        }
        r = passthrough_state_load(m->passthrough, &o, s, fds, (size_t) n_slots, &rep);
        for (int32_t slot = 0; slot < n_slots; slot++)
                safe_close(fds[slot]);
        if (r < 0) {
                log_error_errno(r, "Cannot restore the guest's session after the death of the serving process: %s",
                                rep.first_problem[0] ? rep.first_problem : strerror(-r));
                return r;
        }
        if (dropped > 0 || rep.nodes_lost > 0 || rep.handles_lost > 0 || rep.locks_lost > 0)
                log_warning("Restored the guest's session with losses: %zu records left out of step, %zu nodes, %zu "
                            "handles, %zu locks not found%s%s",
                            dropped, rep.nodes_lost, rep.handles_lost, rep.locks_lost, rep.first_problem[0] ? "; the first: " : "",
                            rep.first_problem);
        log_info("Restored the guest's session: %zu nodes, %zu open files, %zu lock ranges, under their ids",
                 rep.nodes, rep.handles, rep.locks);
        m->restored_nodes = rep.nodes;
        m->restored_handles = rep.handles;
        passthrough_journal_all(m->passthrough);
        return (int) MIN(rep.nodes, (size_t) INT32_MAX);
}
