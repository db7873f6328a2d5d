/* state-internal.h: the SessionState behind session-state.h, shared by the files of daemon/state/. */
#pragma once

/* session-state.h (util.h) before glib.h: GLib undefines and redefines MIN/MAX compatibly, not the
 * reverse. */
#include "session-state.h"
#include <glib.h>

struct SessionState {
        StateSession session;
        bool has_session;
        GArray *nodes;   /* StateNode, names owned */
        GArray *handles; /* StateHandle */
        GArray *locks;   /* StateLock */
        /* uint64_t* node id (inside nodes) -> index + 1; built by state_check_relations(), dropped
         * when nodes change. */
        GHashTable *index;
};

/* Writes the message into err (when given) and returns r. */
int state_error(char *err, size_t errlen, int r, const char *fmt, ...) _printf_(4, 5);
int state_check_name(const char *name, size_t len, char *err, size_t errlen);
int state_check_node(const StateNode *n, char *err, size_t errlen);
int state_check_handle(const StateHandle *h, char *err, size_t errlen);
int state_check_lock(const StateLock *l, char *err, size_t errlen);
/* The checks between records (session-state.h), then the nodes reordered parents first and
 * indexed by id. */
int state_check_relations(SessionState *s, char *err, size_t errlen);
/* Reads count records (UINT32_MAX: up to the end of buf) into s, each checked alone; at most
 * max_nodes nodes. */
int state_read_records(SessionState *s, const uint8_t *buf, size_t len, uint32_t count, uint64_t max_nodes, char *err,
                       size_t errlen);
