/* output.c: how fsctl shows what it read: the status page, statistics tables, the --watch screen
 * and their JSON forms. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "fsctl.h"
#include "util.h"

/* ---- JSON output: hand written, every string escaped ---- */

/* The two-character escape of c, or NULL where it has none. */
static const char *json_escape(unsigned char c) {
        switch (c) {
        case '"':
                return "\\\"";
        case '\\':
                return "\\\\";
        case '\n':
                return "\\n";
        case '\t':
                return "\\t";
        case '\r':
                return "\\r";
        default:
                return NULL;
        }
}

static void json_string(FILE *f, const char *s) {
        fputc('"', f);
        for (const unsigned char *p = (const unsigned char *) (s ?: ""); *p; p++) {
                const char *e = json_escape(*p);

                if (e)
                        fputs(e, f);
                else if (*p < 0x20 || *p == 0x7f)
                        fprintf(f, "\\u%04x", *p);
                else
                        fputc(*p, f); /* D-Bus strings are valid UTF-8: copy as is */
        }
        fputc('"', f);
}

static void json_key(FILE *f, bool *first, const char *key) {
        fputs(*first ? "" : ",", f);
        *first = false;
        json_string(f, key);
        fputc(':', f);
}

static void json_str(FILE *f, bool *first, const char *key, const char *v) {
        json_key(f, first, key);
        json_string(f, v);
}

static void json_u64(FILE *f, bool *first, const char *key, uint64_t v) {
        json_key(f, first, key);
        fprintf(f, "%" PRIu64, v);
}


static void print_features(const char *label, uint64_t v, const char *const names[64]) {
        printf("%-16s 0x%" PRIx64, label, v);
        if (v) {
                fputs(" (", stdout);
                bool first = true;
                for (unsigned b = 0; b < 64; b++)
                        if (v & (1ULL << b)) {
                                printf("%s", first ? "" : " ");
                                first = false;
                                if (names[b])
                                        fputs(names[b], stdout);
                                else
                                        printf("bit%u", b);
                        }
                fputc(')', stdout);
        }
        fputc('\n', stdout);
}

static const char *const virtio_feature_names[64] = {
        [VIRTIO_F_NOTIFY_ON_EMPTY] = "NOTIFY_ON_EMPTY",
        [VIRTIO_F_ANY_LAYOUT] = "ANY_LAYOUT",
        [VIRTIO_RING_F_INDIRECT_DESC] = "INDIRECT_DESC",
        [VIRTIO_RING_F_EVENT_IDX] = "EVENT_IDX",
        [30] = "PROTOCOL_FEATURES", /* vhost-user's VHOST_USER_F_PROTOCOL_FEATURES */
        [VIRTIO_F_VERSION_1] = "VERSION_1",
        [VIRTIO_F_ACCESS_PLATFORM] = "ACCESS_PLATFORM",
        [VIRTIO_F_RING_PACKED] = "RING_PACKED",
        [VIRTIO_F_IN_ORDER] = "IN_ORDER",
};

/* vhost-user protocol feature bits (the vhost-user specification's numbering). */
static const char *const protocol_feature_names[64] = {
        [0] = "MQ",
        [1] = "LOG_SHMFD",
        [2] = "RARP",
        [3] = "REPLY_ACK",
        [4] = "NET_MTU",
        [5] = "BACKEND_REQ",
        [6] = "CROSS_ENDIAN",
        [7] = "CRYPTO_SESSION",
        [8] = "PAGEFAULT",
        [9] = "CONFIG",
        [10] = "BACKEND_SEND_FD",
        [11] = "HOST_NOTIFIER",
        [12] = "INFLIGHT_SHMFD",
        [13] = "RESET_DEVICE",
        [14] = "INBAND_NOTIFICATIONS",
        [15] = "CONFIGURE_MEM_SLOTS",
        [16] = "STATUS",
};

static void format_duration(char *buf, size_t len, uint64_t usec) {
        uint64_t s = usec / 1000000;

        if (s >= 86400)
                snprintf(buf, len, "%" PRIu64 "d %" PRIu64 "h %" PRIu64 "min", s / 86400, s % 86400 / 3600,
                         s % 3600 / 60);
        else if (s >= 3600)
                snprintf(buf, len, "%" PRIu64 "h %" PRIu64 "min %" PRIu64 "s", s / 3600, s % 3600 / 60, s % 60);
        else if (s >= 60)
                snprintf(buf, len, "%" PRIu64 "min %" PRIu64 "s", s / 60, s % 60);
        else
                snprintf(buf, len, "%.1fs", usec / 1e6);
}

void json_props(FILE *f, const char *bus_name, const Props *p) {
        bool first = true;

        fputc('{', f);
        json_str(f, &first, "instance", p->instance);
        json_str(f, &first, "bus_name", bus_name);
        json_str(f, &first, "version", p->version);
        json_str(f, &first, "shared_directory", p->shared_directory);
        json_str(f, &first, "socket", p->socket);
        json_key(f, &first, "connected");
        fputs(p->connected > 0 ? "true" : "false", f);
        json_u64(f, &first, "connections", p->connections);
        json_u64(f, &first, "request_queues", p->request_queues);
        json_u64(f, &first, "running_queues", p->running_queues);
        json_u64(f, &first, "negotiated_features", p->features);
        json_u64(f, &first, "negotiated_protocol_features", p->protocol_features);
        json_str(f, &first, "thread_mode", p->thread_mode);
        json_u64(f, &first, "pool_size", p->pool_size);
        json_str(f, &first, "cache_policy", p->cache_policy);
        if (p->has_poll_usec) {
                json_u64(f, &first, "poll_usec", p->poll_usec);
        }
        if (p->poll_mode) {
                json_str(f, &first, "poll_mode", p->poll_mode);
        }
        json_key(f, &first, "options");
        fputc('[', f);
        for (char **o = p->options; o && *o; o++) {
                if (o != p->options)
                        fputc(',', f);
                json_string(f, *o);
        }
        fputc(']', f);
        json_u64(f, &first, "uptime_usec", p->uptime_usec);
        json_u64(f, &first, "in_flight", p->in_flight);
        fputc('}', f);
}


/* fsctl status, as text. */
void print_status(const char *name, const Props *p) {
        char up[64];

        format_duration(up, sizeof up, p->uptime_usec);
        printf("%-16s %s\n", "Instance:", p->instance);
        printf("%-16s %s\n", "Bus name:", name);
        printf("%-16s %s\n", "Version:", p->version);
        printf("%-16s %s\n", "Shared dir:", p->shared_directory);
        printf("%-16s %s\n", "Socket:", *p->socket ? p->socket : "(unnamed)");
        printf("%-16s %s (%" PRIu32 " connection%s since start)\n", "Connected:", p->connected > 0 ? "yes" : "no",
               p->connections, p->connections == 1 ? "" : "s");
        printf("%-16s %" PRIu32 " request queue%s, %" PRIu32 " virtqueue%s running\n", "Queues:",
               p->request_queues, p->request_queues == 1 ? "" : "s", p->running_queues,
               p->running_queues == 1 ? "" : "s");
        if (streq(p->thread_mode, "inline"))
                printf("%-16s inline (pool size %" PRIu32 " kept for pool/auto)\n", "Threads:", p->pool_size);
        else
                printf("%-16s %s, %" PRIu32 " worker%s\n", "Threads:", p->thread_mode, p->pool_size,
                       p->pool_size == 1 ? "" : "s");
        printf("%-16s %s\n", "Cache:", p->cache_policy);
        if (p->has_poll_usec) {
                if (p->poll_mode && streq(p->poll_mode, "auto"))
                        printf("%-16s auto, at most %" PRIu32 " us per request queue\n", "Busy poll:", p->poll_usec);
                else if (p->poll_usec > 0)
                        printf("%-16s %" PRIu32 " us per request queue\n", "Busy poll:", p->poll_usec);
                else
                        printf("%-16s off\n", "Busy poll:");
        }
        printf("%-16s", "Options:");
        for (char **o = p->options; o && *o; o++)
                printf(" %s", *o);
        fputc('\n', stdout);
        print_features("Features:", p->features, virtio_feature_names);
        print_features("Protocol:", p->protocol_features, protocol_feature_names);
        if (p->has_inode_fds)
                printf("%-16s %" PRIu64 " of at most %" PRIu64 " cached (--max-inode-fds)\n", "Inode fds:",
                       p->inode_fds_cached, p->inode_fds_max);
        printf("%-16s %" PRIu64 "\n", "In flight:", p->in_flight);
        printf("%-16s %s\n", "Uptime:", up);
}

/* ---- statistics ---- */

/* The upper bound in µs of the bucket holding quantile q (0 when empty); *open for the last,
 * unbounded bucket, whose lower bound is then returned. */
static uint64_t hist_quantile(const uint64_t *h, double q, bool *open) {
        uint64_t total = 0, cum = 0, target;

        *open = false;
        for (unsigned b = 0; b < HIST_BUCKETS; b++)
                total += h[b];
        if (total == 0)
                return 0;
        target = (uint64_t) ceil(q * (double) total);
        if (target < 1)
                target = 1;
        for (unsigned b = 0; b < HIST_BUCKETS; b++) {
                cum += h[b];
                if (cum >= target) {
                        if (b == HIST_BUCKETS - 1) {
                                *open = true;
                                return stats_hist_open_lower_us();
                        }
                        return stats_hist_bucket_upper_us(b);
                }
        }
        return 0;
}

static void format_usec(char *buf, size_t len, uint64_t us, bool open, bool empty) {
        if (empty)
                snprintf(buf, len, "-");
        else if (us < 1000)
                snprintf(buf, len, "%s%" PRIu64 "us", open ? ">" : "", us);
        else if (us < 1000000)
                snprintf(buf, len, "%s%.1fms", open ? ">" : "", us / 1e3);
        else
                snprintf(buf, len, "%s%.2fs", open ? ">" : "", us / 1e6);
}

static void format_bytes(char *buf, size_t len, double b) {
        static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
        unsigned u = 0;

        while (b >= 1024 && u + 1 < ELEMENTSOF(units)) {
                b /= 1024;
                u++;
        }
        if (u == 0)
                snprintf(buf, len, "%.0f%s", b, units[u]);
        else
                snprintf(buf, len, "%.1f%s", b, units[u]);
}

/* "off", "50us" or "auto", for headers; a static buffer (one use per printf). */
static const char *format_poll(uint32_t us, bool is_auto) {
        static char buf[32];

        if (is_auto)
                return "auto";
        if (us == 0)
                return "off";
        snprintf(buf, sizeof buf, "%" PRIu32 "us", us);
        return buf;
}

static bool hist_empty(const uint64_t *h) {
        for (unsigned b = 0; b < HIST_BUCKETS; b++)
                if (h[b])
                        return false;
        return true;
}

static void print_rows_table(const char *title, const Row *rows, size_t n) {
        printf("%-16s %12s %10s %8s %9s %9s\n", title, "REQUESTS", "BYTES", "ERRORS", "P50", "P99");
        for (size_t i = 0; i < n; i++) {
                char bytes[32], p50[32], p99[32];
                bool o50, o99, empty = hist_empty(rows[i].hist);
                uint64_t v50 = hist_quantile(rows[i].hist, 0.5, &o50), v99 = hist_quantile(rows[i].hist, 0.99, &o99);

                format_bytes(bytes, sizeof bytes, (double) rows[i].bytes);
                format_usec(p50, sizeof p50, v50, o50, empty);
                format_usec(p99, sizeof p99, v99, o99, empty);
                printf("%-16s %12" PRIu64 " %10s %8" PRIu64 " %9s %9s\n", rows[i].name, rows[i].requests, bytes,
                       rows[i].errors, p50, p99);
        }
}

static void json_rows(FILE *f, const Row *rows, size_t n) {
        fputc('[', f);
        for (size_t i = 0; i < n; i++) {
                bool first = true, open;
                if (i)
                        fputc(',', f);
                fputc('{', f);
                json_u64(f, &first, "index", rows[i].index);
                json_str(f, &first, "name", rows[i].name);
                json_u64(f, &first, "requests", rows[i].requests);
                json_u64(f, &first, "bytes", rows[i].bytes);
                json_u64(f, &first, "errors", rows[i].errors);
                json_key(f, &first, "latency_histogram");
                fputc('[', f);
                for (unsigned b = 0; b < HIST_BUCKETS; b++)
                        fprintf(f, "%s%" PRIu64, b ? "," : "", rows[i].hist[b]);
                fputc(']', f);
                json_u64(f, &first, "p50_usec", hist_quantile(rows[i].hist, 0.5, &open));
                json_u64(f, &first, "p99_usec", hist_quantile(rows[i].hist, 0.99, &open));
                if (rows[i].has_sum)
                        json_u64(f, &first, "latency_sum_usec", rows[i].latency_sum_us);
                fputc('}', f);
        }
        fputc(']', f);
}

void print_snapshot(const Snapshot *s) {
        if (arg_json) {
                bool first = true;
                fputc('{', stdout);
                json_str(stdout, &first, "instance", arg_instance);
                json_u64(stdout, &first, "timestamp_usec", s->timestamp);
                json_u64(stdout, &first, "in_flight", s->in_flight);
                json_str(stdout, &first, "thread_mode", s->thread_mode);
                json_u64(stdout, &first, "pool_size", s->pool_size);
                if (s->has_poll_usec) {
                        json_u64(stdout, &first, "poll_usec", s->poll_usec);
                        json_str(stdout, &first, "poll_mode", s->poll_auto ? "auto" : s->poll_usec ? "fixed" : "off");
                }
                json_key(stdout, &first, "executor");
                fputc('{', stdout);
                bool efirst = true;
                for (size_t i = 0; i < s->n_exec; i++) {
                        json_key(stdout, &efirst, s->exec_name[i]);
                        printf("%" PRIu64, s->exec_value[i]);
                }
                fputc('}', stdout);
                json_key(stdout, &first, "opcodes");
                json_rows(stdout, s->ops, s->n_ops);
                json_key(stdout, &first, "queues");
                json_rows(stdout, s->queues, s->n_queues);
                if (s->has_restarts) {
                        json_u64(stdout, &first, "restarts", s->restarts);
                        json_u64(stdout, &first, "last_restart_pause_usec", s->restart_pause_usec);
                }
                if (s->has_upgrades) {
                        json_u64(stdout, &first, "upgrades", s->upgrades);
                        json_u64(stdout, &first, "last_upgrade_pause_usec", s->upgrade_pause_usec);
                }
                if (s->has_takeover) {
                        json_u64(stdout, &first, "last_takeover_replayed", s->takeover_replayed);
                        json_u64(stdout, &first, "last_takeover_nodes", s->takeover_nodes);
                        json_u64(stdout, &first, "last_takeover_handles", s->takeover_handles);
                }
                if (s->has_locks) {
                        json_u64(stdout, &first, "locks_pending", s->locks_pending);
                        json_u64(stdout, &first, "locks_lost", s->locks_lost);
                }
                if (s->has_errnos) {
                        bool first_errno = true;
                        json_key(stdout, &first, "errors_by_errno");
                        fputc('{', stdout);
                        for (size_t i = 0; i < s->n_errnos; i++) {
                                char buf[16];
                                json_u64(stdout, &first_errno, errno_label(s->errnos[i].code, buf, sizeof buf),
                                         s->errnos[i].count);
                        }
                        fputc('}', stdout);
                }
                fputs("}\n", stdout);
                return;
        }
        printf("Instance %s: threads %s (pool size %" PRIu32 ")", arg_instance, s->thread_mode, s->pool_size);
        if (s->has_poll_usec)
                printf(", busy poll %s", format_poll(s->poll_usec, s->poll_auto));
        printf(", %" PRIu64 " in flight\n", s->in_flight);
        fputs("Executor:", stdout);
        for (size_t i = 0; i < s->n_exec; i++)
                printf(" %s=%" PRIu64, s->exec_name[i], s->exec_value[i]);
        if (s->has_restarts && s->restarts > 0)
                printf("\nRestarts: %" PRIu32 " (the last paused the guest %.1f ms)", s->restarts,
                       (double) s->restart_pause_usec / 1000.0);
        if (s->has_upgrades && s->upgrades > 0)
                printf("\nUpgrades: %" PRIu32 " (the last paused the guest %.1f ms)", s->upgrades,
                       (double) s->upgrade_pause_usec / 1000.0);
        if (s->has_takeover && ((s->has_restarts && s->restarts > 0) || (s->has_upgrades && s->upgrades > 0)))
                printf("\nLast takeover: %" PRIu64 " requests replayed, %" PRIu64 " nodes and %" PRIu64
                       " open files restored",
                       s->takeover_replayed, s->takeover_nodes, s->takeover_handles);
        if (s->has_locks && (s->locks_pending > 0 || s->locks_lost > 0))
                printf("\nMigrated locks: %" PRIu64 " pending, %" PRIu64 " lost", s->locks_pending, s->locks_lost);
        if (s->n_errnos > 0)
                fputs("\nErrors:", stdout);
        for (size_t i = 0; i < s->n_errnos; i++) {
                char buf[16];
                printf(" %s=%" PRIu64, errno_label(s->errnos[i].code, buf, sizeof buf), s->errnos[i].count);
        }
        fputs("\n\n", stdout);
        if (s->n_ops == 0)
                fputs("No requests since the last reset.\n", stdout);
        else
                print_rows_table("OPCODE", s->ops, s->n_ops);
        fputc('\n', stdout);
        print_rows_table("QUEUE", s->queues, s->n_queues);
}

/* One refresh of --watch: rates between two snapshots. */
typedef struct Rate {
        const char *name;
        double req_s, mb_s, err_s;
        uint64_t hist[HIST_BUCKETS];
} Rate;

static const Row *find_row(const Row *rows, size_t n, uint32_t index) {
        for (size_t i = 0; i < n; i++)
                if (rows[i].index == index)
                        return &rows[i];
        return NULL;
}

static int rate_cmp(const void *a, const void *b) {
        const Rate *x = a, *y = b;
        return x->req_s < y->req_s ? 1 : x->req_s > y->req_s ? -1 : strcmp(x->name, y->name);
}

void print_watch(const Snapshot *prev, const Snapshot *cur, bool tty) {
        double dt = (double) (cur->timestamp - prev->timestamp) / 1e6;
        _cleanup_free_ Rate *rates = calloc(cur->n_ops + 1, sizeof *rates);
        Rate total = { .name = "TOTAL" };
        size_t n = 0;

        if (!rates || dt <= 0)
                return;
        for (size_t i = 0; i < cur->n_ops; i++) {
                const Row *c = &cur->ops[i], *p = find_row(prev->ops, prev->n_ops, c->index);
                Rate *r = &rates[n];
                /* A reset between two refreshes makes counters go down: start from zero then. */
                bool reset = p && c->requests < p->requests;

                r->name = c->name;
                r->req_s = (double) (c->requests - (p && !reset ? p->requests : 0)) / dt;
                r->mb_s = (double) (c->bytes - (p && !reset ? p->bytes : 0)) / dt / 1e6;
                r->err_s = (double) (c->errors - (p && !reset && c->errors >= p->errors ? p->errors : 0)) / dt;
                for (unsigned b = 0; b < HIST_BUCKETS; b++)
                        r->hist[b] = c->hist[b] - (p && !reset && c->hist[b] >= p->hist[b] ? p->hist[b] : 0);
                if (r->req_s <= 0 && r->err_s <= 0)
                        continue;
                total.req_s += r->req_s;
                total.mb_s += r->mb_s;
                total.err_s += r->err_s;
                for (unsigned b = 0; b < HIST_BUCKETS; b++)
                        total.hist[b] += r->hist[b];
                n++;
        }
        qsort(rates, n, sizeof *rates, rate_cmp);

        if (arg_json) {
                bool first = true;
                fputc('{', stdout);
                json_str(stdout, &first, "instance", arg_instance);
                json_u64(stdout, &first, "timestamp_usec", cur->timestamp);
                json_u64(stdout, &first, "interval_usec", cur->timestamp - prev->timestamp);
                json_str(stdout, &first, "thread_mode", cur->thread_mode);
                json_u64(stdout, &first, "pool_size", cur->pool_size);
                if (cur->has_poll_usec) {
                        json_u64(stdout, &first, "poll_usec", cur->poll_usec);
                }
                json_u64(stdout, &first, "in_flight", cur->in_flight);
                json_key(stdout, &first, "opcodes");
                fputc('[', stdout);
                for (size_t i = 0; i <= n; i++) {
                        const Rate *r = i < n ? &rates[i] : &total;
                        bool f2 = true, open;
                        if (i)
                                fputc(',', stdout);
                        fputc('{', stdout);
                        json_str(stdout, &f2, "name", r->name);
                        json_key(stdout, &f2, "requests_per_sec");
                        printf("%.3f", r->req_s);
                        json_key(stdout, &f2, "mb_per_sec");
                        printf("%.6f", r->mb_s);
                        json_key(stdout, &f2, "errors_per_sec");
                        printf("%.3f", r->err_s);
                        json_u64(stdout, &f2, "p50_usec", hist_quantile(r->hist, 0.5, &open));
                        json_u64(stdout, &f2, "p99_usec", hist_quantile(r->hist, 0.99, &open));
                        fputc('}', stdout);
                }
                fputs("]}\n", stdout);
                fflush(stdout);
                return;
        }

        if (tty)
                fputs("\033[H\033[2J", stdout);
        else
                fputc('\n', stdout);
        {
                char clock[16];
                time_t t = time(NULL);
                struct tm tm;
                strftime(clock, sizeof clock, "%H:%M:%S", localtime_r(&t, &tm));
                printf("vufsd %s  %s  threads %s (pool %" PRIu32 ")%s%s  in flight %" PRIu64 "  every %.1fs\n",
                       arg_instance, clock, cur->thread_mode, cur->pool_size, cur->has_poll_usec ? "  poll " : "",
                       cur->has_poll_usec ? format_poll(cur->poll_usec, cur->poll_auto) : "", cur->in_flight, dt);
        }
        printf("%-16s %10s %9s %8s %9s %9s\n", "OPCODE", "REQ/S", "MB/S", "ERR/S", "P50", "P99");
        for (size_t i = 0; i <= n; i++) {
                const Rate *r = i < n ? &rates[i] : &total;
                char p50[32], p99[32];
                bool o50, o99, empty = hist_empty(r->hist);
                uint64_t v50 = hist_quantile(r->hist, 0.5, &o50), v99 = hist_quantile(r->hist, 0.99, &o99);

                format_usec(p50, sizeof p50, v50, o50, empty);
                format_usec(p99, sizeof p99, v99, o99, empty);
                printf("%-16s %10.1f %9.2f %8.1f %9s %9s\n", r->name, r->req_s, r->mb_s, r->err_s, p50, p99);
        }
        fflush(stdout);
}

