/* survive-journal.h: the guest's session across a death of the serving process (docs/survival.md
 * "Nodes, handles and locks across a death"): the journal sink that keeps it with the keeper as it
 * changes, and the restore from it in the process that takes over. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Manager Manager;

/* What the keeper handed back: its entries and their fds (owned). */
typedef struct KeptJournal {
        struct KeptEntry *e;
        size_t n, cap;
        int error; /* the fetch's: -ESTALE when the keeper had dropped the journal */
} KeptJournal;
void kept_journal_done(KeptJournal *k);

/* With --crash-restarts: session changes go to the keeper from now on (false: no longer, as for a
 * process that handed its session to an upgrade and exits). */
void survive_journal_install(bool on);
/* Fetches the journal (before anything in this process could change it). */
int survive_journal_fetch(KeptJournal *k);
/* The session it describes re-created under the same node ids and fhs (after the FUSE_INIT
 * replay, before a ring runs), then the whole of it journaled again as this process holds it.
 * Returns the number of nodes restored; logs what was not. */
int survive_journal_restore(Manager *m, KeptJournal *k);
