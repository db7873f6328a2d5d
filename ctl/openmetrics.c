/* openmetrics.c: fsctl stats --format=openmetrics: the statistics and settings of one or every
 * instance in the Prometheus text format, for the node exporter's textfile collector
 * (docs/monitoring.md). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bus-name.h"
#include "fsctl.h"
#include "util.h"

/* How long one instance may take to answer one call. A wedged instance costs this once (its first
 * call fails and it is left out), so the others are still written well within the timer's period. */
#define METRICS_CALL_TIMEOUT_USEC (2ULL * 1000 * 1000)

/* One instance: its name (the "vm" label), and what was read from it. */
typedef struct Vm {
        char *bus_name;
        char *name;
        bool up; /* read completely; false: only vufsd_up 0 is written for it */
        Props p;
        Snapshot s;
} Vm;

/* The family being written: its header goes out before its first sample, so a family without
 * samples (every instance down, an older daemon) leaves no empty header behind. */
typedef struct Writer {
        FILE *f;
        const char *name, *type, *help;
        bool header_done;
} Writer;

/* ---- the text format ---- */

static bool utf8_valid(const char *s) {
        for (const unsigned char *p = (const unsigned char *) s; *p;) {
                unsigned n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2 : (*p & 0xf8) == 0xf0 ? 3 : 4;
                if (n == 4 || (n == 1 && *p < 0xc2))
                        return false;
                p++;
                for (unsigned i = 0; i < n; i++, p++)
                        if ((*p & 0xc0) != 0x80)
                                return false;
        }
        return true;
}

/* A label value: backslash, double quote and newline escaped (the only escapes of the format). */
static void label_value(FILE *f, const char *v) {
        for (const char *p = v; *p; p++)
                if (*p == '\\' || *p == '"')
                        fprintf(f, "\\%c", *p);
                else if (*p == '\n')
                        fputs("\\n", f);
                else
                        fputc(*p, f);
}

static void family(Writer *w, const char *name, const char *type, const char *help) {
        w->name = name;
        w->type = type;
        w->help = help;
        w->header_done = false;
}

/* name+suffix{vm="...",key="val" and then the caller's labels and value. */
static void sample_begin(Writer *w, const char *suffix, const Vm *vm, const char *key, const char *val) {
        if (!w->header_done) {
                fprintf(w->f, "# HELP %s %s\n# TYPE %s %s\n", w->name, w->help, w->name, w->type);
                w->header_done = true;
        }
        fprintf(w->f, "%s%s{vm=\"", w->name, suffix);
        label_value(w->f, vm->name);
        fputc('"', w->f);
        if (key) {
                fprintf(w->f, ",%s=\"", key);
                label_value(w->f, val);
                fputc('"', w->f);
        }
}

static void sample_u64(Writer *w, const Vm *vm, const char *key, const char *val, uint64_t v) {
        sample_begin(w, "", vm, key, val);
        fprintf(w->f, "} %" PRIu64 "\n", v);
}

/* A value kept in µs, written in seconds (the base unit). */
static void sample_usec(Writer *w, const char *suffix, const Vm *vm, const char *key, const char *val, uint64_t us) {
        sample_begin(w, suffix, vm, key, val);
        fprintf(w->f, "} %" PRIu64 ".%06" PRIu64 "\n", us / 1000000, us % 1000000);
}

/* ---- what is written ---- */

/* One number per instance, from its properties. */
typedef struct Scalar {
        const char *name, *type, *help;
        bool usec;            /* kept in µs: written in seconds */
        bool budget;          /* FdsUsed and friends: only from daemons that have them */
        size_t offset;        /* in Props */
        size_t size;          /* of that field: 4 or 8 bytes (an int for "b") */
} Scalar;

#define FIELD(f) offsetof(Props, f), sizeof(((Props *) 0)->f)
static const Scalar scalars[] = {
        { "vufsd_connected", "gauge", "1 while a frontend (QEMU) is connected.", false, false, FIELD(connected) },
        { "vufsd_frontend_connections_total", "counter", "Frontend connections accepted since the daemon started.",
          false, false, FIELD(connections) },
        { "vufsd_uptime_seconds", "gauge", "Time since the daemon started.", true, false, FIELD(uptime_usec) },
        { "vufsd_in_flight_requests", "gauge", "Requests popped from the rings and not answered yet.", false, false,
          FIELD(in_flight) },
        { "vufsd_thread_pool_size", "gauge", "Configured worker threads for the pool and auto modes.", false, false,
          FIELD(pool_size) },
        { "vufsd_poll_window_seconds", "gauge",
          "Busy-poll window of the request queues (0 = off; under auto the longest it spins).", true, false,
          FIELD(poll_usec) },
        { "vufsd_open_fds", "gauge", "File descriptors held for the guest, charged to the fd budget.", false, true,
          FIELD(fds_used) },
        { "vufsd_max_fds", "gauge", "The fd budget: at vufsd_open_fds = vufsd_max_fds opens fail with ENFILE.",
          false, true, FIELD(fd_budget_max) },
        { "vufsd_restarts_total", "counter",
          "Serving processes started after one died of a signal (--crash-restarts; docs/survival.md).", false, false,
          FIELD(restarts) },
        { "vufsd_last_restart_pause_seconds", "gauge",
          "From the last death of a serving process to the next one serving the kept connection.", true, false,
          FIELD(restart_pause_usec) },
        { "vufsd_upgrades_total", "counter",
          "Live upgrades (fsctl upgrade) that started the binary now installed (docs/survival.md).", false, false,
          FIELD(upgrades) },
        { "vufsd_upgrade_failures_total", "counter",
          "Live upgrades that fell back to the running code (the new binary missing or refusing the session).",
          false, false, FIELD(upgrade_failures) },
        { "vufsd_last_upgrade_pause_seconds", "gauge",
          "From the last upgrade stopping the rings to the new serving process resuming them.", true, false,
          FIELD(upgrade_pause_usec) },
        { "vufsd_last_takeover_replayed_requests", "gauge",
          "Requests the last takeover (after a death or an upgrade) ran again or answered from the in-flight tables.",
          false, false, FIELD(takeover_replayed) },
        { "vufsd_last_takeover_restored_nodes", "gauge",
          "Nodes the last takeover restored under their ids (docs/survival.md).", false, false, FIELD(takeover_nodes) },
        { "vufsd_last_takeover_restored_handles", "gauge", "Open files the last takeover restored under their ids.",
          false, false, FIELD(takeover_handles) },
        { "vufsd_locks_pending", "gauge",
          "The guest's locks a migration found held on this host and vufsd retries (docs/migration.md).", false, false,
          FIELD(locks_pending) },
        { "vufsd_locks_lost_total", "counter", "Such locks not taken within --migration-lock-timeout.", false, false,
          FIELD(locks_lost) },
        { "vufsd_nodes", "gauge", "Inodes the guest made the daemon remember.", false, true, FIELD(nodes_used) },
        { "vufsd_max_nodes", "gauge", "The node budget (--max-nodes).", false, true, FIELD(node_budget_max) },
};
#undef FIELD

static uint64_t scalar_value(const Scalar *sc, const Props *p) {
        if (sc->offset == offsetof(Props, connected))
                return p->connected > 0; /* -1 when the daemon did not say */
        const char *field = (const char *) p + sc->offset;
        if (sc->size == sizeof(uint64_t))
                return *(const uint64_t *) field;
        return (uint64_t) *(const uint32_t *) field; /* uint32_t, or the int of "b" (0 or 1) */
}

/* A setting as an info-style gauge: 1, with the setting's value as a label. */
typedef struct Info {
        const char *name, *help, *label;
        size_t offset; /* a char * in Props */
} Info;

static const Info infos[] = {
        { "vufsd_build_info", "The daemon's version.", "version", offsetof(Props, version) },
        { "vufsd_thread_mode_info", "Where requests run: inline, pool or auto.", "mode", offsetof(Props, thread_mode) },
        { "vufsd_cache_policy_info", "The cache policy: never, metadata, auto or always.", "policy",
          offsetof(Props, cache_policy) },
        { "vufsd_poll_mode_info", "The busy-poll mode: auto, fixed or off.", "mode", offsetof(Props, poll_mode) },
};

/* The executor's counters (GetStatistics), by name; rows of one family follow each other. */
typedef struct ExecMetric {
        const char *counter, *name, *type, *help, *key, *val;
        bool usec;
} ExecMetric;

static const ExecMetric exec_metrics[] = {
        { "mode_switches", "vufsd_executor_mode_switches_total", "counter",
          "Switches of thread mode or pool size that changed something.", NULL, NULL, false },
        { "inline_runs", "vufsd_executor_runs_total", "counter",
          "Requests run: by their queue thread (inline), on the pool, or on a helper thread (waits).", "where",
          "inline", false },
        { "pool_runs", "vufsd_executor_runs_total", NULL, NULL, "where", "pool", false },
        { "helper_runs", "vufsd_executor_runs_total", NULL, NULL, "where", "helper", false },
        { "auto_inline", "vufsd_executor_auto_choices_total", "counter",
          "Requests auto mode kept inline or handed to the pool.", "choice", "inline", false },
        { "auto_pool", "vufsd_executor_auto_choices_total", NULL, NULL, "choice", "pool", false },
        { "live_workers", "vufsd_executor_pool_workers", "gauge", "Pool workers alive.", NULL, NULL, false },
        { "pool_queued", "vufsd_executor_pool_queued_requests", "gauge", "Requests waiting for a pool worker.", NULL,
          NULL, false },
        { "live_helpers", "vufsd_executor_helper_threads", "gauge", "Helper threads alive.", NULL, NULL, false },
        { "polls", "vufsd_poll_windows_total", "counter", "Busy-poll windows started (all request queues).", NULL,
          NULL, false },
        { "poll_hits", "vufsd_poll_hits_total", "counter", "Busy-poll windows that found requests before sleeping.",
          NULL, NULL, false },
        { "poll_usec", "vufsd_poll_spin_seconds_total", "counter", "CPU time spent spinning in busy-poll windows.",
          NULL, NULL, true },
        { "poll_contended", "vufsd_poll_contended_total", "counter",
          "Looks of auto polling that found the queue thread preempted (each pauses polling).", NULL, NULL, false },
};

/* Counters of the rows of GetStatistics, per opcode ("opcode" label) or per virtqueue ("queue"). */
typedef struct RowMetric {
        const char *name, *help;
        size_t offset; /* a uint64_t in Row */
} RowMetric;

static const RowMetric opcode_metrics[] = {
        { "vufsd_requests_total", "FUSE requests answered, by opcode.", offsetof(Row, requests) },
        { "vufsd_request_errors_total", "FUSE requests answered with an error, by opcode.", offsetof(Row, errors) },
        { "vufsd_request_bytes_total", "Payload bytes of READ and WRITE, by opcode.", offsetof(Row, bytes) },
};

static const RowMetric queue_metrics[] = {
        { "vufsd_queue_requests_total", "Requests answered, by virtqueue.", offsetof(Row, requests) },
        { "vufsd_queue_request_errors_total", "Requests answered with an error, by virtqueue.", offsetof(Row, errors) },
        { "vufsd_queue_request_bytes_total", "Payload bytes of READ and WRITE, by virtqueue.", offsetof(Row, bytes) },
};

static void write_rows(Writer *w, const Vm *vms, size_t n, const RowMetric *m, size_t n_m, bool queues) {
        for (size_t i = 0; i < n_m; i++) {
                family(w, m[i].name, "counter", m[i].help);
                for (size_t v = 0; v < n; v++) {
                        const Row *rows = queues ? vms[v].s.queues : vms[v].s.ops;
                        size_t n_rows = queues ? vms[v].s.n_queues : vms[v].s.n_ops;
                        for (size_t k = 0; vms[v].up && k < n_rows; k++)
                                sample_u64(w, &vms[v], queues ? "queue" : "opcode", rows[k].name,
                                           *(const uint64_t *) ((const char *) &rows[k] + m[i].offset));
                }
        }
}

/* GetErrorCounts: failed requests by errno, all opcodes together (none from an older daemon). */
static void write_errnos(Writer *w, const Vm *vms, size_t n) {
        family(w, "vufsd_errors_by_errno_total", "counter",
               "FUSE requests answered with an error, by errno (all opcodes; \"other\": above the daemon's table).");
        for (size_t v = 0; v < n; v++)
                for (size_t k = 0; vms[v].up && k < vms[v].s.n_errnos; k++) {
                        char buf[16];
                        sample_u64(w, &vms[v], "errno", errno_label(vms[v].s.errnos[k].code, buf, sizeof buf),
                                   vms[v].s.errnos[k].count);
                }
}

/* The latency histogram per opcode: vufsd's own buckets, cumulative, in seconds, with the sum of
 * the latencies (GetLatencySums; none from a daemon without it: the text format does not require
 * one, docs/monitoring.md). */
static void write_histograms(Writer *w, const Vm *vms, size_t n) {
        family(w, "vufsd_request_duration_seconds", "histogram",
               "Time from popping a request to its reply, by opcode.");
        for (size_t v = 0; v < n; v++)
                for (size_t k = 0; vms[v].up && k < vms[v].s.n_ops; k++) {
                        const Row *row = &vms[v].s.ops[k];
                        uint64_t cum = 0;
                        for (unsigned b = 0; b < HIST_BUCKETS; b++) {
                                cum += row->hist[b];
                                sample_begin(w, "_bucket", &vms[v], "opcode", row->name);
                                if (b + 1 < HIST_BUCKETS)
                                        fprintf(w->f, ",le=\"%.7g\"} %" PRIu64 "\n",
                                                (double) stats_hist_bucket_upper_us(b) / 1e6, cum);
                                else
                                        fprintf(w->f, ",le=\"+Inf\"} %" PRIu64 "\n", cum);
                        }
                        sample_begin(w, "_count", &vms[v], "opcode", row->name);
                        fprintf(w->f, "} %" PRIu64 "\n", cum);
                        if (row->has_sum)
                                sample_usec(w, "_sum", &vms[v], "opcode", row->name, row->latency_sum_us);
                }
}

static void write_exec(Writer *w, const Vm *vms, size_t n) {
        for (size_t i = 0; i < ELEMENTSOF(exec_metrics);) {
                size_t end = i + 1;
                while (end < ELEMENTSOF(exec_metrics) && streq(exec_metrics[end].name, exec_metrics[i].name))
                        end++;
                family(w, exec_metrics[i].name, exec_metrics[i].type, exec_metrics[i].help);
                for (size_t v = 0; v < n; v++)
                        for (size_t j = i; vms[v].up && j < end; j++)
                                for (size_t k = 0; k < vms[v].s.n_exec; k++) {
                                        const ExecMetric *m = &exec_metrics[j];
                                        if (!vms[v].s.exec_name[k] || !streq(vms[v].s.exec_name[k], m->counter))
                                                continue;
                                        if (m->usec)
                                                sample_usec(w, "", &vms[v], m->key, m->val, vms[v].s.exec_value[k]);
                                        else
                                                sample_u64(w, &vms[v], m->key, m->val, vms[v].s.exec_value[k]);
                                }
                i = end;
        }
}

static void write_all(FILE *f, const Vm *vms, size_t n) {
        Writer w = { .f = f };

        family(&w, "vufsd_up", "gauge",
               "1 when fsctl read the instance, 0 when it did not answer in time (then it has no other series).");
        for (size_t v = 0; v < n; v++)
                sample_u64(&w, &vms[v], NULL, NULL, vms[v].up);
        for (size_t i = 0; i < ELEMENTSOF(scalars); i++) {
                family(&w, scalars[i].name, scalars[i].type, scalars[i].help);
                for (size_t v = 0; v < n; v++) {
                        const Props *p = &vms[v].p;
                        if (!vms[v].up || (scalars[i].budget && !p->has_budgets) ||
                            (scalars[i].offset == offsetof(Props, poll_usec) && !p->has_poll_usec) ||
                            ((scalars[i].offset == offsetof(Props, restarts) ||
                              scalars[i].offset == offsetof(Props, restart_pause_usec)) && !p->has_restarts) ||
                            ((scalars[i].offset == offsetof(Props, upgrades) ||
                              scalars[i].offset == offsetof(Props, upgrade_failures) ||
                              scalars[i].offset == offsetof(Props, upgrade_pause_usec)) && !p->has_upgrades) ||
                            ((scalars[i].offset == offsetof(Props, takeover_replayed) ||
                              scalars[i].offset == offsetof(Props, takeover_nodes) ||
                              scalars[i].offset == offsetof(Props, takeover_handles)) && !p->has_takeover) ||
                            ((scalars[i].offset == offsetof(Props, locks_pending) ||
                              scalars[i].offset == offsetof(Props, locks_lost)) && !p->has_locks))
                                continue;
                        if (scalars[i].usec)
                                sample_usec(&w, "", &vms[v], NULL, NULL, scalar_value(&scalars[i], p));
                        else
                                sample_u64(&w, &vms[v], NULL, NULL, scalar_value(&scalars[i], p));
                }
        }
        for (size_t i = 0; i < ELEMENTSOF(infos); i++) {
                family(&w, infos[i].name, "gauge", infos[i].help);
                for (size_t v = 0; v < n; v++) {
                        const char *val = *(char *const *) ((const char *) &vms[v].p + infos[i].offset);
                        if (vms[v].up && val)
                                sample_u64(&w, &vms[v], infos[i].label, val, 1);
                }
        }
        write_exec(&w, vms, n);
        write_rows(&w, vms, n, opcode_metrics, ELEMENTSOF(opcode_metrics), false);
        write_errnos(&w, vms, n);
        write_histograms(&w, vms, n);
        write_rows(&w, vms, n, queue_metrics, ELEMENTSOF(queue_metrics), true);
}

/* ---- reading ---- */

static void vms_free_one(Vm *vm) {
        free(vm->bus_name);
        free(vm->name);
        props_done(&vm->p);
        snapshot_done(&vm->s);
        *vm = (Vm) {};
}

static void vms_free(Vm *vms, size_t n) {
        for (size_t i = 0; vms && i < n; i++)
                vms_free_one(&vms[i]);
        free(vms);
}

/* Reads one instance. Returns 1 when read, 0 when it is gone (no series), or a negative errno (its
 * message printed) when it did not answer or is not vufsd. */
static int vm_read(sd_bus *bus, Vm *vm, bool all) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        if (all) {
                r = check_owner(bus, vm->bus_name);
                if (r < 0)
                        return r == ERR_NO_INSTANCE ? 0 : r;
        }
        r = get_all_properties(bus, vm->bus_name, &vm->p, &error);
        if (r >= 0)
                r = get_statistics(bus, vm->bus_name, &vm->s, &error);
        if (r >= 0)
                return 1;
        if (all && sd_bus_error_has_names(&error, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                return 0; /* exited since ListNames */
        return bus_error_errno(&error, r, "stats --format=openmetrics");
}

/* Replaces path with data: a new file in the same directory (not named *.prom, which the textfile
 * collector would read half-written), renamed over it. */
static int write_atomically(const char *path, const char *data, size_t len) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -1;
        const char *what = "write";

        if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
                return -ENOMEM;
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0) {
                fprintf(stderr, "fsctl: cannot create a file next to %s: %s\n", path, strerror(errno));
                return ERR_FAILED;
        }
        /* Readable by the node exporter's user; mkostemp() made it 0600. */
        if (fchmod(fd, 0644) < 0)
                what = "chmod";
        else {
                for (size_t off = 0; off < len;) {
                        ssize_t k = write(fd, data + off, len - off);
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k <= 0) {
                                off = 0;
                                break;
                        }
                        off += (size_t) k;
                        if (off == len)
                                what = NULL;
                }
                if (len == 0)
                        what = NULL;
        }
        if (!what && close(TAKE_FD(fd)) < 0)
                what = "close";
        if (!what && rename(tmp, path) < 0)
                what = "rename";
        if (what) {
                fprintf(stderr, "fsctl: cannot write %s (%s of %s failed): %s\n", path, what, tmp, strerror(errno));
                (void) unlink(tmp);
                return ERR_FAILED;
        }
        return 0;
}

int openmetrics_stats(sd_bus *bus, const char *name) {
        _cleanup_(strv_freep) char **names = NULL;
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, n = 0;
        Vm *vms = NULL;
        FILE *f;
        int r = 0, n_names;

        (void) sd_bus_set_method_call_timeout(bus, METRICS_CALL_TIMEOUT_USEC);
        if (name) {
                names = calloc(2, sizeof *names);
                if (!names || !(names[0] = strdup(name)))
                        return -ENOMEM;
                n_names = 1;
        } else {
                n_names = list_instance_names(bus, &names);
                if (n_names < 0)
                        return n_names;
        }
        vms = calloc((size_t) n_names + 1, sizeof *vms);
        if (!vms)
                return -ENOMEM;
        for (int i = 0; i < n_names && r >= 0; i++) {
                const char *element = names[i] + strlen(BUS_NAME_PREFIX);
                Vm *vm = &vms[n++];
                int k;

                /* Label values are UTF-8: a name that is not keeps its (ASCII) bus name spelling. */
                if (bus_instance_unescape(element, &vm->name) < 0 || !utf8_valid(vm->name)) {
                        free(vm->name);
                        vm->name = strdup(element);
                }
                vm->bus_name = strdup(names[i]);
                if (!vm->name || !vm->bus_name) {
                        r = -ENOMEM;
                        break;
                }
                arg_instance = vm->name; /* for bus_error_errno()'s messages */
                k = vm_read(bus, vm, !name);
                if (k < 0 && name)
                        r = k; /* the one instance asked for: its failure is the command's */
                else if (k == 0)
                        vms_free_one(&vms[--n]); /* gone: no series */
                else
                        vm->up = k > 0;
        }
        if (r < 0) {
                vms_free(vms, n);
                return r;
        }

        f = open_memstream(&buf, &len);
        if (!f) {
                vms_free(vms, n);
                return -ENOMEM;
        }
        write_all(f, vms, n);
        vms_free(vms, n);
        if (fclose(f) != 0)
                return -ENOMEM;
        if (arg_output)
                return write_atomically(arg_output, buf, len);
        if (fwrite(buf, 1, len, stdout) != len || fflush(stdout) != 0)
                return ERR_FAILED;
        return 0;
}
