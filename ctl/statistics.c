/* statistics.c: one GetStatistics snapshot of an instance, with its busy-poll setting and its
 * errors by errno. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus-name.h"
#include "fsctl.h"
#include "util.h"

/* ---- statistics ---- */

static void rows_free(Row *rows, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(rows[i].name);
        free(rows);
}

void snapshot_done(Snapshot *s) {
        free(s->thread_mode);
        for (size_t i = 0; i < s->n_exec; i++)
                free(s->exec_name[i]);
        rows_free(s->ops, s->n_ops);
        rows_free(s->queues, s->n_queues);
        free(s->errnos);
        *s = (Snapshot) {};
}

static int read_rows(sd_bus_message *m, Row **ret, size_t *ret_n) {
        Row *rows = NULL;
        size_t n = 0;
        int r;

        r = sd_bus_message_enter_container(m, 'a', "(ustttat)");
        while (r >= 0 && (r = sd_bus_message_enter_container(m, 'r', "ustttat")) > 0) {
                const char *name;
                const void *hist;
                size_t hist_size;
                Row *nr = realloc(rows, (n + 1) * sizeof *rows);
                if (!nr) {
                        r = -ENOMEM;
                        break;
                }
                rows = nr;
                rows[n] = (Row) {};
                r = sd_bus_message_read(m, "ustt", &rows[n].index, &name, &rows[n].requests, &rows[n].bytes);
                if (r >= 0)
                        r = sd_bus_message_read(m, "t", &rows[n].errors);
                if (r >= 0)
                        r = sd_bus_message_read_array(m, 't', &hist, &hist_size);
                if (r < 0)
                        break;
                memcpy(rows[n].hist, hist, MIN(hist_size, sizeof rows[n].hist));
                rows[n].name = strdup(name);
                n++;
                if (!rows[n - 1].name) {
                        r = -ENOMEM;
                        break;
                }
                r = sd_bus_message_exit_container(m);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        if (r < 0) {
                rows_free(rows, n);
                return r;
        }
        *ret = rows;
        *ret_n = n;
        return 0;
}

const char *errno_label(uint32_t code, char *buf, size_t size) {
        const char *n = code == 0 ? "other" : code <= INT32_MAX ? strerrorname_np((int) code) : NULL;

        if (n)
                return n;
        snprintf(buf, size, "%" PRIu32, code);
        return buf;
}

/* Calls one of the optional a(ut) methods (GetErrorCounts, GetLatencySums) and hands each pair to
 * take(). A daemon from before the method answers UnknownMethod (or the relay of one does), and a
 * system bus policy from before it denies it to the unprivileged: then this returns 0 without
 * calling take(), and the snapshot goes without, quietly. 1 when the reply was read. */
static int get_optional_pairs(sd_bus *bus, const char *name, const char *method, Snapshot *s,
                              int (*take)(Snapshot *s, uint32_t key, uint64_t value), sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        uint32_t key;
        uint64_t value;
        int r;

        r = sd_bus_call_method(bus, name, BUS_OBJECT_PATH, BUS_INTERFACE, method, &e, &reply, NULL);
        if (r < 0 && sd_bus_error_has_names(&e, SD_BUS_ERROR_UNKNOWN_METHOD, SD_BUS_ERROR_ACCESS_DENIED))
                return 0;
        if (r < 0) {
                sd_bus_error_move(error, &e);
                return r;
        }
        r = sd_bus_message_enter_container(reply, 'a', "(ut)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(ut)", &key, &value)) > 0)
                r = take(s, key, value);
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        return r < 0 ? r : 1;
}

/* GetErrorCounts: failed requests by errno. */
static int take_errno(Snapshot *s, uint32_t code, uint64_t count) {
        ErrnoCount *n = realloc(s->errnos, (s->n_errnos + 1) * sizeof *n);

        if (!n)
                return -ENOMEM;
        s->errnos = n;
        s->errnos[s->n_errnos++] = (ErrnoCount) { .code = code, .count = count };
        return 1;
}

/* GetLatencySums, into the opcode row with the same index: without it has_sum stays false, and
 * the histograms go without a _sum. */
static int take_latency_sum(Snapshot *s, uint32_t op, uint64_t sum) {
        for (size_t i = 0; i < s->n_ops; i++)
                if (s->ops[i].index == op) {
                        s->ops[i].latency_sum_us = sum;
                        s->ops[i].has_sum = true;
                }
        return 1;
}

/* A counter property (u) and the pause of its last event (t), as crash survival and live upgrade
 * publish them; false when the daemon has no such counter. */
static bool get_count_and_pause(sd_bus *bus, const char *name, const char *count, const char *pause, uint32_t *ret_count,
                                uint64_t *ret_pause) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;

        if (sd_bus_get_property_trivial(bus, name, BUS_OBJECT_PATH, BUS_INTERFACE, count, &e, 'u', ret_count) < 0)
                return false;
        (void) sd_bus_get_property_trivial(bus, name, BUS_OBJECT_PATH, BUS_INTERFACE, pause, &e, 't', ret_pause);
        return true;
}

/* Each of the n u64 properties into ret[]: false when the daemon lacks the first (an older one). */
static bool get_u64s(sd_bus *bus, const char *name, const char *const *props, uint64_t *const *ret, size_t n) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;

        for (size_t i = 0; i < n; i++) {
                if (sd_bus_get_property_trivial(bus, name, BUS_OBJECT_PATH, BUS_INTERFACE, props[i], &e, 't', ret[i]) < 0 &&
                    i == 0)
                        return false;
                sd_bus_error_free(&e);
        }
        return true;
}

int get_statistics(sd_bus *bus, const char *name, Snapshot *s, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *mode;
        int r;

        *s = (Snapshot) {};
        r = sd_bus_call_method(bus, name, BUS_OBJECT_PATH, BUS_INTERFACE, "GetStatistics", error, &reply, NULL);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "ttsu", &s->timestamp, &s->in_flight, &mode, &s->pool_size);
        if (r >= 0)
                r = (s->thread_mode = strdup(mode)) ? 0 : -ENOMEM;
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', "{st}");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'e', "st")) > 0) {
                const char *k;
                uint64_t v;
                r = sd_bus_message_read(reply, "st", &k, &v);
                if (r >= 0 && s->n_exec < ELEMENTSOF(s->exec_name)) {
                        s->exec_name[s->n_exec] = strdup(k);
                        s->exec_value[s->n_exec++] = v;
                }
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0)
                r = read_rows(reply, &s->ops, &s->n_ops);
        if (r >= 0)
                r = read_rows(reply, &s->queues, &s->n_queues);
        if (r >= 0)
                r = get_optional_pairs(bus, name, "GetErrorCounts", s, take_errno, error);
        if (r >= 0)
                s->has_errnos = r > 0;
        if (r >= 0)
                r = get_optional_pairs(bus, name, "GetLatencySums", s, take_latency_sum, error);
        if (r < 0 && !sd_bus_error_is_set(error))
                sd_bus_error_set_errnof(error, r, "Cannot parse the statistics: %s", strerror(-r));
        if (r >= 0) {
                /* Not part of GetStatistics: a separate read, optional (older daemons lack it). */
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
                _cleanup_free_ char *poll_mode = NULL;
                s->has_poll_usec = sd_bus_get_property_trivial(bus, name, BUS_OBJECT_PATH, BUS_INTERFACE,
                                                               "PollUSec", &e, 'u', &s->poll_usec) >= 0;
                sd_bus_error_free(&e);
                s->poll_auto = sd_bus_get_property_string(bus, name, BUS_OBJECT_PATH, BUS_INTERFACE, "PollMode",
                                                          &e, &poll_mode) >= 0 &&
                               streq(poll_mode, "auto");
                sd_bus_error_free(&e);
                s->has_restarts = get_count_and_pause(bus, name, "Restarts", "LastRestartPauseUSec", &s->restarts,
                                                      &s->restart_pause_usec);
                s->has_upgrades = get_count_and_pause(bus, name, "Upgrades", "LastUpgradePauseUSec", &s->upgrades,
                                                      &s->upgrade_pause_usec);
                s->has_takeover = get_u64s(bus, name,
                                           (const char *const[]) { "LastTakeoverReplayed", "LastTakeoverNodes",
                                                                   "LastTakeoverHandles" },
                                           (uint64_t *const[]) { &s->takeover_replayed, &s->takeover_nodes,
                                                                 &s->takeover_handles },
                                           3);
                s->has_locks = get_u64s(bus, name, (const char *const[]) { "LocksPending", "LocksLost" },
                                        (uint64_t *const[]) { &s->locks_pending, &s->locks_lost }, 2);
        }
        return r < 0 ? r : 0;
}

