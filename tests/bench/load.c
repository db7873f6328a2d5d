/* load.c: vufs-bench's load generator: backends, their files, and one load thread per request queue
 * driving FUSE operations at a fixed queue depth.
 *
 * The hot loop allocates nothing: every in-flight slot owns its request, reply and data buffers and an
 * indirect descriptor table in guest memory, built once per cell, and goes through one reserved ring
 * descriptor, as the Linux driver puts a multi-part request behind one indirect descriptor. */
#include "bench.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define SLOT_IN_BYTES 4096u
#define SLOT_OUT_BYTES 4096u
#define SLOT_MAX_DESC 80u
#define FORGET_TABLE 4096u
#define FORGET_FLUSH 1024u  /* distinct nodeids a load thread holds before it sends BATCH_FORGET */
#define FORGET_CHUNK 256u
#define WAIT_TIMEOUT_MS 20000

static const struct {
        const char *name;
        uint32_t io;
} workloads[_WL_MAX] = {
        [WL_GETATTR] = { "getattr", 0 },
        [WL_LOOKUP] = { "lookup", 0 },
        [WL_OPEN] = { "open-release", 0 },
        [WL_RANDREAD] = { "randread-4k", BENCH_SMALL_IO },
        [WL_SEQREAD] = { "seqread-128k", BENCH_BIG_IO },
        [WL_RANDWRITE] = { "randwrite-4k", BENCH_SMALL_IO },
        [WL_SEQWRITE] = { "seqwrite-128k", BENCH_BIG_IO },
        [WL_CREATE] = { "create-unlink", 0 },
        [WL_READDIR] = { "readdirplus-1000", 0 },
        [WL_MIX] = { "mix-70r30w-4k", BENCH_SMALL_IO },
};

const char *workload_name(Workload w) {
        return w < _WL_MAX ? workloads[w].name : "?";
}

int workload_from_name(const char *s) {
        for (unsigned i = 0; i < _WL_MAX; i++)
                if (streq(s, workloads[i].name) || strncmp(s, workloads[i].name, strlen(s)) == 0)
                        return (int) i;
        return -EINVAL;
}

uint32_t workload_io_size(Workload w) {
        return w < _WL_MAX ? workloads[w].io : 0;
}

uint64_t bench_now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

int bench_pin_self(int cpu) {
        cpu_set_t set;

        if (cpu < 0)
                return 0;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        return sched_setaffinity(0, sizeof set, &set) < 0 ? negative_errno() : 0;
}

/* ---- histogram ---- */

static unsigned hist_index(uint64_t v) {
        unsigned e;

        if (v < HIST_SUB)
                return (unsigned) v;
        e = 63u - (unsigned) __builtin_clzll(v); /* e >= 6 */
        if (e >= 6 + (HIST_BUCKETS / HIST_SUB) - 1)
                return HIST_BUCKETS - 1;
        return (e - 5) * HIST_SUB + (unsigned) ((v >> (e - 6)) & (HIST_SUB - 1));
}

static uint64_t hist_value(unsigned i) {
        unsigned e, m;

        if (i < HIST_SUB)
                return i;
        e = i / HIST_SUB + 5;
        m = i % HIST_SUB;
        /* The middle of the bucket. */
        return ((uint64_t) (HIST_SUB + m) << (e - 6)) + ((1ull << (e - 6)) >> 1);
}

void hist_add(Hist *h, uint64_t ns) {
        h->b[hist_index(ns)]++;
        h->count++;
}

void hist_merge(Hist *into, const Hist *from) {
        for (unsigned i = 0; i < HIST_BUCKETS; i++)
                into->b[i] += from->b[i];
        into->count += from->count;
}

uint64_t hist_quantile(const Hist *h, double q) {
        uint64_t want, seen = 0;

        if (h->count == 0)
                return 0;
        want = (uint64_t) (q * (double) h->count);
        if (want >= h->count)
                want = h->count - 1;
        for (unsigned i = 0; i < HIST_BUCKETS; i++) {
                seen += h->b[i];
                if (seen > want)
                        return hist_value(i);
        }
        return hist_value(HIST_BUCKETS - 1);
}

/* ---- backend CPU ---- */

typedef struct ProcEntry {
        pid_t pid, ppid;
        uint64_t ticks;
} ProcEntry;

static int read_stat(pid_t pid, ProcEntry *ret) {
        char path[64], buf[1024], *p;
        unsigned long long ut, st;
        long long cut, cst;
        int ppid, fd;
        ssize_t n;

        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
                return -EIO;
        buf[n] = 0;
        p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
        if (!p)
                return -EIO;
        /* After comm: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime */
        if (sscanf(p + 1, " %*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld", &ppid, &ut, &st, &cut,
                   &cst) != 5)
                return -EIO;
        *ret = (ProcEntry) { .pid = pid, .ppid = ppid, .ticks = ut + st + (uint64_t) MAX(cut, 0) + (uint64_t) MAX(cst, 0) };
        return 0;
}

int64_t proc_tree_cpu_ns(pid_t root) {
        ProcEntry all[4096];
        unsigned n = 0;
        uint64_t ticks = 0;
        long hz = sysconf(_SC_CLK_TCK);
        struct dirent *de;
        DIR *d;
        bool found = false;

        if (root <= 0)
                return -1;
        d = opendir("/proc");
        if (!d)
                return -1;
        while ((de = readdir(d)) && n < ELEMENTSOF(all)) {
                char *end;
                long pid = strtol(de->d_name, &end, 10);
                if (*end || pid <= 0)
                        continue;
                if (read_stat((pid_t) pid, &all[n]) == 0)
                        n++;
        }
        closedir(d);
        /* The root and every process whose parent chain reaches it (sandbox helpers, forks). */
        for (unsigned i = 0; i < n; i++) {
                pid_t p = all[i].pid;
                for (unsigned depth = 0; depth < 16 && p > 1; depth++) {
                        if (p == root) {
                                ticks += all[i].ticks;
                                if (all[i].pid == root)
                                        found = true;
                                break;
                        }
                        pid_t parent = 0;
                        for (unsigned j = 0; j < n; j++)
                                if (all[j].pid == p) {
                                        parent = all[j].ppid;
                                        break;
                                }
                        p = parent;
                }
        }
        if (!found)
                return -1;
        return (int64_t) (ticks * (1000000000ull / (uint64_t) (hz > 0 ? hz : 100)));
}

/* ---- backends ---- */

/* Splits a command on spaces, replacing {socket}, {dir}, {queues}; resolves argv[0] through PATH. */
static int expand_command(const char *cmd, const char *socket_path, const char *share, unsigned queues,
                          char ***ret) {
        _cleanup_free_ char *copy = strdup(cmd);
        char **argv = calloc(64, sizeof(char *));
        char *save = NULL, *tok;
        unsigned n = 0;

        if (!copy || !argv) {
                free(argv);
                return -ENOMEM;
        }
        for (tok = strtok_r(copy, " \t", &save); tok && n < 63; tok = strtok_r(NULL, " \t", &save)) {
                char out[4096], *w = out;
                for (const char *s = tok; *s && w < out + sizeof out - 1;) {
                        const char *rep = NULL;
                        char num[16];
                        size_t skip = 0;
                        if (strncmp(s, "{socket}", 8) == 0)
                                rep = socket_path, skip = 8;
                        else if (strncmp(s, "{dir}", 5) == 0)
                                rep = share, skip = 5;
                        else if (strncmp(s, "{queues}", 8) == 0) {
                                snprintf(num, sizeof num, "%u", queues);
                                rep = num, skip = 8;
                        }
                        if (rep) {
                                w += snprintf(w, (size_t) (out + sizeof out - 1 - w), "%s", rep);
                                s += skip;
                        } else
                                *w++ = *s++;
                }
                *w = 0;
                argv[n++] = strdup(out);
        }
        if (n == 0) {
                free(argv);
                return -EINVAL;
        }
        if (!strchr(argv[0], '/')) {
                const char *path = getenv("PATH") ?: "/usr/bin:/bin";
                _cleanup_free_ char *pcopy = strdup(path);
                char *s2 = NULL;
                for (char *dir = strtok_r(pcopy, ":", &s2); dir; dir = strtok_r(NULL, ":", &s2)) {
                        char *full;
                        if (asprintf(&full, "%s/%s", dir, argv[0]) < 0)
                                break;
                        if (access(full, X_OK) == 0) {
                                free(argv[0]);
                                argv[0] = full;
                                break;
                        }
                        free(full);
                }
        }
        *ret = argv;
        return 0;
}

static void free_argv(char **argv) {
        for (unsigned i = 0; argv && argv[i]; i++)
                free(argv[i]);
        free(argv);
}

_printf_(2, 3) static int backend_fail(BenchBackend *b, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(b->error, sizeof b->error, fmt, ap);
        va_end(ap);
        b->failed = true;
        return -EIO;
}

/* LOOKUP name; if missing, CREATE it and write size bytes of pattern. Returns the nodeid. */
static int ensure_file(BenchBackend *b, uint64_t parent, const char *name, uint64_t size, uint64_t *ret) {
        struct fuse_entry_out e;
        uint64_t fh;
        int r;

        r = fe_fuse_lookup(b->fuse, parent, name, &e);
        if (r == 0 && e.attr.size >= size) {
                *ret = e.nodeid;
                return 0;
        }
        if (r == 0)
                r = fe_fuse_open(b->fuse, e.nodeid, O_RDWR, &fh);
        else if (r == -ENOENT)
                r = fe_fuse_create(b->fuse, parent, name, O_RDWR | O_CREAT, 0100644, &e, &fh);
        if (r < 0)
                return backend_fail(b, "creating %s: %s (%s)", name, strerror(-r), b->fuse->last_problem);
        if (size > 0) {
                _cleanup_free_ uint8_t *buf = malloc(BENCH_BIG_IO);
                if (!buf)
                        return -ENOMEM;
                for (uint64_t off = 0; off < size; off += BENCH_BIG_IO) {
                        uint32_t n = (uint32_t) MIN((uint64_t) BENCH_BIG_IO, size - off);
                        fe_fuse_pattern(buf, n, off, 7);
                        r = fe_fuse_write(b->fuse, e.nodeid, fh, off, buf, n);
                        if (r != (int) n)
                                return backend_fail(b, "writing %s: %d (%s)", name, r, b->fuse->last_problem);
                }
        }
        (void) fe_fuse_release(b->fuse, e.nodeid, fh, false);
        *ret = e.nodeid;
        return 0;
}

static int setup_files(BenchBackend *b) {
        struct fuse_entry_out e;
        char name[32];
        int r;

        r = ensure_file(b, FUSE_ROOT_ID, "small", 4096, &b->small_node);
        if (r >= 0)
                r = ensure_file(b, FUSE_ROOT_ID, "data", b->file_size, &b->data_node);
        if (r >= 0)
                r = ensure_file(b, FUSE_ROOT_ID, "wdata", b->file_size, &b->wdata_node);
        if (r < 0)
                return r;
        r = fe_fuse_lookup(b->fuse, FUSE_ROOT_ID, "dir1000", &e);
        if (r == -ENOENT)
                r = fe_fuse_mkdir(b->fuse, FUSE_ROOT_ID, "dir1000", 040755, &e);
        if (r < 0)
                return backend_fail(b, "dir1000: %s", strerror(-r));
        b->dir_node = e.nodeid;
        if (fe_fuse_lookup(b->fuse, b->dir_node, "e0999", &e) != 0)
                for (unsigned i = 0; i < BENCH_DIR_ENTRIES; i++) {
                        uint64_t fh;
                        snprintf(name, sizeof name, "e%04u", i);
                        r = fe_fuse_create(b->fuse, b->dir_node, name, O_RDWR | O_CREAT, 0100644, &e, &fh);
                        if (r == -EEXIST)
                                continue;
                        if (r < 0)
                                return backend_fail(b, "dir1000/%s: %s", name, strerror(-r));
                        (void) fe_fuse_release(b->fuse, e.nodeid, fh, false);
                }
        r = fe_fuse_open(b->fuse, b->data_node, O_RDWR, &b->data_fh);
        if (r >= 0)
                r = fe_fuse_open(b->fuse, b->wdata_node, O_RDWR, &b->wdata_fh);
        if (r < 0)
                return backend_fail(b, "open: %s", strerror(-r));
        /* Warm the host page cache for the read workloads. */
        {
                _cleanup_free_ uint8_t *buf = malloc(BENCH_BIG_IO);
                if (!buf)
                        return -ENOMEM;
                for (uint64_t off = 0; off < b->file_size; off += BENCH_BIG_IO)
                        if (fe_fuse_read(b->fuse, b->data_node, b->data_fh, off, buf, BENCH_BIG_IO) < 0)
                                return backend_fail(b, "warming data: %s", b->fuse->last_problem);
        }
        return 0;
}

int bench_backend_start(BenchBackend **ret, const BackendSpec *spec, const BenchConfig *cfg, const char *topdir,
                        const char *socket_path, pid_t pid) {
        BenchBackend *b = calloc(1, sizeof *b);
        FeOptions opts;
        int r;

        if (!b)
                return -ENOMEM;
        pthread_mutex_init(&b->hiprio_lock, NULL);
        b->spec = spec;
        b->queues = cfg->queues;
        b->file_size = cfg->file_size;
        *ret = b;

        if (socket_path) {
                b->socket_path = strdup(socket_path);
                b->pid = pid;
        } else {
                char **argv = NULL;
                if (asprintf(&b->dir, "%s/%s", topdir, spec->name) < 0 || asprintf(&b->share, "%s/share", b->dir) < 0 ||
                    asprintf(&b->socket_path, "%s/sock", b->dir) < 0)
                        return -ENOMEM;
                if ((mkdir(b->dir, 0700) < 0 && errno != EEXIST) || (mkdir(b->share, 0755) < 0 && errno != EEXIST))
                        return backend_fail(b, "mkdir %s: %m", b->share);
                r = expand_command(spec->command, b->socket_path, b->share, cfg->queues, &argv);
                if (r < 0)
                        return backend_fail(b, "bad command: %s", spec->command);
                /* The child inherits the backend CPU (the load generator goes back to its own) and
                 * writes its output to DIR/backend.log, not into the report. */
                _cleanup_free_ char *log_path = NULL;
                int saved_out = -1, saved_err = -1, logfd = -1;
                if (asprintf(&log_path, "%s/backend.log", b->dir) >= 0)
                        logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                if (logfd >= 0) {
                        fflush(stdout);
                        fflush(stderr);
                        saved_out = dup(STDOUT_FILENO);
                        saved_err = dup(STDERR_FILENO);
                        dup2(logfd, STDOUT_FILENO);
                        dup2(logfd, STDERR_FILENO);
                }
                (void) bench_pin_self(cfg->backend_cpu);
                r = fe_backend_spawn(&b->proc, argv, b->socket_path, 15000);
                (void) bench_pin_self(cfg->load_cpu);
                if (logfd >= 0) {
                        dup2(saved_out, STDOUT_FILENO);
                        dup2(saved_err, STDERR_FILENO);
                        safe_close(saved_out);
                        safe_close(saved_err);
                        safe_close(logfd);
                }
                free_argv(argv);
                if (r < 0)
                        return backend_fail(b, "starting %s: %s", spec->command, strerror(-r));
                b->pid = b->proc->pid;
        }

        fe_options_init(&opts);
        opts.num_queues = 1 + cfg->queues;
        opts.queue_size = cfg->queue_size;
        opts.timeout_ms = WAIT_TIMEOUT_MS;
        /* Per slot: request, reply, two 128 KiB data areas (page aligned), the indirect table. */
        opts.mem_size = MAX(opts.mem_size, (uint64_t) 48 << 20) +
                        ALIGN_TO((uint64_t) cfg->queues * cfg->queue_size * 280 * 1024, (uint64_t) 2 << 20);
        r = fe_connect_and_start(&b->fe, b->socket_path, &opts);
        if (r < 0)
                return backend_fail(b, "vhost-user setup: %s (%s)", strerror(-r), b->fe ? b->fe->error : "connect");
        r = fe_fuse_new(&b->fuse, b->fe);
        if (r < 0)
                return r;
        r = fe_fuse_init(b->fuse);
        if (r < 0)
                return backend_fail(b, "FUSE_INIT: %s (%s)", strerror(-r), b->fuse->last_problem);
        r = setup_files(b);
        if (r < 0)
                return r;
        /* All but one descriptor of each request ring carry the load threads' indirect chains; the
         * last one stays with the FUSE client for setup calls. */
        for (unsigned q = 1; q <= cfg->queues; q++) {
                r = fe_vring_reserve_raw(b->fe->vq[q], cfg->queue_size - 1u);
                if (r < 0)
                        return backend_fail(b, "reserving ring %u: %s", q, strerror(-r));
                b->raw_first = (uint16_t) r;
        }
        return 0;
}

BenchBackend *bench_backend_free(BenchBackend *b) {
        if (!b)
                return NULL;
        fe_fuse_free(b->fuse);
        b->fe = fe_free(b->fe);
        if (b->proc) {
                (void) fe_backend_stop(b->proc, 5000);
                fe_backend_free(b->proc);
        }
        pthread_mutex_destroy(&b->hiprio_lock);
        free(b->dir);
        free(b->share);
        free(b->socket_path);
        free(b);
        return NULL;
}

/* ---- load threads ---- */

typedef struct Slot {
        uint16_t head;
        uint8_t *in, *out, *wdata, *rdata;
        uint64_t in_gpa, out_gpa, wdata_gpa, rdata_gpa, ind_gpa;
        struct vring_desc *ind;
        uint64_t mem_gpa;  /* the single allocation behind all of the above */
        size_t mem_len;
        unsigned n_desc;
        size_t in_len, data_len;
        uint32_t opcode;
        uint64_t unique;
        uint64_t op_start;
        int step;
        uint64_t nodeid, fh, off;
        unsigned entries;
        char name[48];
} Slot;

typedef struct ForgetTable {
        uint64_t key[FORGET_TABLE], count[FORGET_TABLE];
        unsigned used;
} ForgetTable;

typedef struct Loader {
        BenchBackend *b;
        Workload w;
        unsigned queue, qd;
        FeVring *vr;
        Slot *slots;
        uint64_t rng, next_unique, seq_off;
        const atomic_bool *measuring, *stop;
        pthread_t thread;
        bool started;

        Hist hist;
        uint64_t ops, requests, bytes;
        ForgetTable forget;
        int error;
        bool ring_dead; /* a completion never came: the ring cannot be reused */
        char errmsg[200];
} Loader;

static uint64_t rnd(Loader *l) {
        /* xorshift64* */
        l->rng ^= l->rng >> 12;
        l->rng ^= l->rng << 25;
        l->rng ^= l->rng >> 27;
        return l->rng * 0x2545F4914F6CDD1Dull;
}

_printf_(2, 3) static int load_fail(Loader *l, const char *fmt, ...) {
        va_list ap;
        if (l->error)
                return -EIO;
        va_start(ap, fmt);
        vsnprintf(l->errmsg, sizeof l->errmsg, fmt, ap);
        va_end(ap);
        l->error = -EIO;
        return -EIO;
}

static int forget_flush(Loader *l) {
        struct fuse_forget_one items[FORGET_CHUNK];
        BenchBackend *b = l->b;
        unsigned n = 0;
        int r = 0;

        if (l->forget.used == 0)
                return 0;
        pthread_mutex_lock(&b->hiprio_lock);
        for (unsigned i = 0; i < FORGET_TABLE && r >= 0; i++) {
                if (!l->forget.key[i])
                        continue;
                items[n++] = (struct fuse_forget_one) { .nodeid = l->forget.key[i], .nlookup = l->forget.count[i] };
                l->forget.key[i] = l->forget.count[i] = 0;
                if (n == FORGET_CHUNK) {
                        r = fe_fuse_batch_forget(b->fuse, items, n);
                        n = 0;
                }
        }
        if (r >= 0 && n > 0)
                r = fe_fuse_batch_forget(b->fuse, items, n);
        pthread_mutex_unlock(&b->hiprio_lock);
        l->forget.used = 0;
        if (r < 0)
                return load_fail(l, "BATCH_FORGET: %s", strerror(-r));
        return 0;
}

static void forget_add(Loader *l, uint64_t nodeid) {
        unsigned i;

        if (nodeid == 0)
                return;
        i = (unsigned) ((nodeid * 0x9E3779B97F4A7C15ull) >> 52) % FORGET_TABLE;
        while (l->forget.key[i] && l->forget.key[i] != nodeid)
                i = (i + 1) % FORGET_TABLE;
        if (!l->forget.key[i]) {
                l->forget.key[i] = nodeid;
                l->forget.used++;
        }
        l->forget.count[i]++;
}

/* Builds a request in s: the in header as its own descriptor, then each argument, then data pages;
 * the out header, the reply struct, then data pages. */
static void req_begin(Loader *l, Slot *s, uint32_t opcode, uint64_t nodeid) {
        struct fuse_in_header *h = (struct fuse_in_header *) s->in;

        s->opcode = opcode;
        s->unique = ((uint64_t) l->queue << 48) | (l->next_unique += 2);
        *h = (struct fuse_in_header) { .opcode = opcode, .unique = s->unique, .nodeid = nodeid, .pid = 1 };
        s->in_len = sizeof *h;
        s->data_len = 0;
        s->ind[0] = (struct vring_desc) { .addr = s->in_gpa, .len = sizeof *h };
        s->n_desc = 1;
}

static void *req_arg(Slot *s, size_t len) {
        void *p = s->in + s->in_len;

        s->ind[s->n_desc++] = (struct vring_desc) { .addr = s->in_gpa + s->in_len, .len = (uint32_t) len };
        s->in_len += len;
        return p;
}

static void req_pages(Slot *s, uint64_t gpa, uint32_t len, bool write) {
        for (uint32_t off = 0; off < len; off += 4096)
                s->ind[s->n_desc++] = (struct vring_desc) {
                        .addr = gpa + off,
                        .len = MIN(4096u, len - off),
                        .flags = write ? VRING_DESC_F_WRITE : 0,
                };
}

static void req_wdata(Slot *s, uint32_t len) {
        req_pages(s, s->wdata_gpa, len, false);
        s->data_len = len;
}

static void req_out(Slot *s, size_t reply_len, uint32_t rdata_len) {
        s->ind[s->n_desc++] = (struct vring_desc) { .addr = s->out_gpa, .len = 16, .flags = VRING_DESC_F_WRITE };
        if (reply_len)
                s->ind[s->n_desc++] = (struct vring_desc) {
                        .addr = s->out_gpa + 16, .len = (uint32_t) reply_len, .flags = VRING_DESC_F_WRITE };
        if (rdata_len)
                req_pages(s, s->rdata_gpa, rdata_len, true);
}

static void req_submit(Loader *l, Slot *s) {
        struct fuse_in_header *h = (struct fuse_in_header *) s->in;

        h->len = (uint32_t) (s->in_len + s->data_len);
        for (unsigned i = 0; i + 1 < s->n_desc; i++) {
                s->ind[i].flags |= VRING_DESC_F_NEXT;
                s->ind[i].next = (uint16_t) (i + 1);
        }
        l->vr->desc[s->head] = (struct vring_desc) {
                .addr = s->ind_gpa,
                .len = (uint32_t) (s->n_desc * sizeof(struct vring_desc)),
                .flags = VRING_DESC_F_INDIRECT,
        };
        fe_vring_put_avail(l->vr, s->head);
}

/* Checks the out header of a completed request; returns the FUSE error (0 or -errno), or -EPROTO. */
static int req_result(Loader *l, Slot *s, uint32_t used_len, size_t *ret_payload) {
        struct fuse_out_header oh;

        if (used_len < sizeof oh)
                return load_fail(l, "opcode %u: used.len %u", s->opcode, used_len), -EPROTO;
        memcpy(&oh, s->out, sizeof oh);
        if (oh.unique != s->unique || oh.len != used_len)
                return load_fail(l, "opcode %u: reply unique %" PRIu64 "/%" PRIu64 " len %u/%u", s->opcode, oh.unique,
                                 s->unique, oh.len, used_len),
                       -EPROTO;
        if (oh.error > 0 || oh.error < -4095)
                return load_fail(l, "opcode %u: reply error %d", s->opcode, oh.error), -EPROTO;
        *ret_payload = used_len - sizeof oh;
        return oh.error;
}

static void submit_read(Loader *l, Slot *s, uint64_t nodeid, uint64_t fh, uint64_t off, uint32_t size) {
        struct fuse_read_in *ri;

        req_begin(l, s, FUSE_READ, nodeid);
        ri = req_arg(s, sizeof *ri);
        *ri = (struct fuse_read_in) { .fh = fh, .offset = off, .size = size, .flags = O_RDWR };
        req_out(s, 0, size);
        req_submit(l, s);
}

static void submit_write(Loader *l, Slot *s, uint64_t nodeid, uint64_t fh, uint64_t off, uint32_t size) {
        struct fuse_write_in *wi;

        req_begin(l, s, FUSE_WRITE, nodeid);
        wi = req_arg(s, sizeof *wi);
        *wi = (struct fuse_write_in) { .fh = fh, .offset = off, .size = size, .flags = O_RDWR };
        req_wdata(s, size);
        req_out(s, sizeof(struct fuse_write_out), 0);
        req_submit(l, s);
}

static uint64_t rand_block(Loader *l, uint32_t size) {
        return (rnd(l) % (l->b->file_size / size)) * size;
}

static uint64_t next_seq(Loader *l, uint32_t size) {
        uint64_t off = l->seq_off;

        l->seq_off += size;
        if (l->seq_off + size > l->b->file_size)
                l->seq_off = 0;
        return off;
}

/* Starts a new operation on s (its first request). */
static void op_start(Loader *l, Slot *s) {
        BenchBackend *b = l->b;

        s->op_start = bench_now_ns();
        s->step = 0;
        switch (l->w) {
        case WL_GETATTR: {
                req_begin(l, s, FUSE_GETATTR, b->small_node);
                *(struct fuse_getattr_in *) req_arg(s, sizeof(struct fuse_getattr_in)) = (struct fuse_getattr_in) {};
                req_out(s, sizeof(struct fuse_attr_out), 0);
                req_submit(l, s);
                break;
        }
        case WL_LOOKUP:
                req_begin(l, s, FUSE_LOOKUP, FUSE_ROOT_ID);
                memcpy(req_arg(s, 6), "small", 6);
                req_out(s, sizeof(struct fuse_entry_out), 0);
                req_submit(l, s);
                break;
        case WL_OPEN:
                req_begin(l, s, FUSE_OPEN, b->small_node);
                *(struct fuse_open_in *) req_arg(s, sizeof(struct fuse_open_in)) =
                        (struct fuse_open_in) { .flags = O_RDONLY };
                req_out(s, sizeof(struct fuse_open_out), 0);
                req_submit(l, s);
                break;
        case WL_RANDREAD:
                submit_read(l, s, b->data_node, b->data_fh, rand_block(l, BENCH_SMALL_IO), BENCH_SMALL_IO);
                break;
        case WL_SEQREAD:
                submit_read(l, s, b->data_node, b->data_fh, next_seq(l, BENCH_BIG_IO), BENCH_BIG_IO);
                break;
        case WL_RANDWRITE:
                submit_write(l, s, b->wdata_node, b->wdata_fh, rand_block(l, BENCH_SMALL_IO), BENCH_SMALL_IO);
                break;
        case WL_SEQWRITE:
                submit_write(l, s, b->wdata_node, b->wdata_fh, next_seq(l, BENCH_BIG_IO), BENCH_BIG_IO);
                break;
        case WL_MIX:
                if (rnd(l) % 100 < 70)
                        submit_read(l, s, b->data_node, b->data_fh, rand_block(l, BENCH_SMALL_IO), BENCH_SMALL_IO);
                else
                        submit_write(l, s, b->data_node, b->data_fh, rand_block(l, BENCH_SMALL_IO), BENCH_SMALL_IO);
                break;
        case WL_CREATE: {
                struct fuse_create_in *ci;
                size_t len;

                snprintf(s->name, sizeof s->name, "c%u-%" PRIu64, l->queue,
                         __atomic_fetch_add(&b->create_seq, 1, __ATOMIC_RELAXED));
                len = strlen(s->name) + 1;
                req_begin(l, s, FUSE_CREATE, FUSE_ROOT_ID);
                ci = req_arg(s, sizeof *ci);
                *ci = (struct fuse_create_in) { .flags = O_RDWR | O_CREAT | O_EXCL, .mode = 0100644, .umask = 022 };
                memcpy(req_arg(s, len), s->name, len);
                req_out(s, sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out), 0);
                req_submit(l, s);
                break;
        }
        case WL_READDIR:
                s->entries = 0;
                req_begin(l, s, FUSE_OPENDIR, b->dir_node);
                *(struct fuse_open_in *) req_arg(s, sizeof(struct fuse_open_in)) =
                        (struct fuse_open_in) { .flags = O_RDONLY | O_DIRECTORY };
                req_out(s, sizeof(struct fuse_open_out), 0);
                req_submit(l, s);
                break;
        default:
                break;
        }
}

static void submit_release(Loader *l, Slot *s, uint32_t opcode, uint64_t nodeid, uint64_t fh, uint32_t flags) {
        req_begin(l, s, opcode, nodeid);
        *(struct fuse_release_in *) req_arg(s, sizeof(struct fuse_release_in)) =
                (struct fuse_release_in) { .fh = fh, .flags = flags };
        req_out(s, 0, 0);
        req_submit(l, s);
}

static void submit_readdirplus(Loader *l, Slot *s) {
        req_begin(l, s, FUSE_READDIRPLUS, l->b->dir_node);
        *(struct fuse_read_in *) req_arg(s, sizeof(struct fuse_read_in)) =
                (struct fuse_read_in) { .fh = s->fh, .offset = s->off, .size = BENCH_READDIR_BUF };
        req_out(s, 0, BENCH_READDIR_BUF);
        req_submit(l, s);
}

/* Walks a READDIRPLUS reply: counts names, notes the lookups it implies and the next offset.
 * Returns the number of entries, or -EPROTO. */
static int parse_direntplus(Loader *l, Slot *s, size_t len) {
        const uint8_t *p = s->rdata;
        size_t pos = 0;
        int n = 0;

        while (pos + FUSE_NAME_OFFSET_DIRENTPLUS <= len) {
                struct fuse_direntplus d;
                size_t sz;

                memcpy(&d, p + pos, sizeof d);
                sz = FUSE_DIRENTPLUS_SIZE(&d);
                if (d.dirent.namelen == 0 || d.dirent.namelen > 255 || pos + sz > len)
                        return load_fail(l, "READDIRPLUS: bad entry at %zu", pos), -EPROTO;
                forget_add(l, d.entry_out.nodeid);
                s->off = d.dirent.off;
                pos += sz;
                n++;
        }
        return n;
}

/* A request of s completed. Returns 1 when the operation is complete, 0 when its next request was
 * submitted, or a negative errno. */
static int op_complete(Loader *l, Slot *s, uint32_t used_len) {
        BenchBackend *b = l->b;
        size_t payload;
        int e = req_result(l, s, used_len, &payload);

        if (e == -EPROTO && l->error)
                return -EPROTO;
        if (e < 0)
                return load_fail(l, "%s: opcode %u failed: %s", workload_name(l->w), s->opcode, strerror(-e));

        switch (s->opcode) {
        case FUSE_GETATTR:
                return payload == sizeof(struct fuse_attr_out) ? 1 : load_fail(l, "GETATTR: %zu bytes", payload);
        case FUSE_LOOKUP: {
                struct fuse_entry_out eo;
                if (payload != sizeof eo)
                        return load_fail(l, "LOOKUP: %zu bytes", payload);
                memcpy(&eo, s->out + 16, sizeof eo);
                forget_add(l, eo.nodeid);
                return 1;
        }
        case FUSE_OPEN: {
                struct fuse_open_out oo;
                memcpy(&oo, s->out + 16, sizeof oo);
                submit_release(l, s, FUSE_RELEASE, b->small_node, oo.fh, O_RDONLY);
                return 0;
        }
        case FUSE_RELEASE:
                if (l->w != WL_CREATE)
                        return 1;
                req_begin(l, s, FUSE_UNLINK, FUSE_ROOT_ID);
                memcpy(req_arg(s, strlen(s->name) + 1), s->name, strlen(s->name) + 1);
                req_out(s, 0, 0);
                req_submit(l, s);
                return 0;
        case FUSE_UNLINK:
                forget_add(l, s->nodeid);
                return 1;
        case FUSE_READ:
                if (payload != (l->w == WL_SEQREAD ? BENCH_BIG_IO : BENCH_SMALL_IO))
                        return load_fail(l, "READ: %zu bytes", payload);
                return 1;
        case FUSE_WRITE: {
                struct fuse_write_out wo;
                memcpy(&wo, s->out + 16, sizeof wo);
                if (payload != sizeof wo || wo.size != s->data_len)
                        return load_fail(l, "WRITE: %u of %zu bytes", wo.size, s->data_len);
                return 1;
        }
        case FUSE_CREATE: {
                struct fuse_entry_out eo;
                struct fuse_open_out oo;
                if (payload != sizeof eo + sizeof oo)
                        return load_fail(l, "CREATE: %zu bytes", payload);
                memcpy(&eo, s->out + 16, sizeof eo);
                memcpy(&oo, s->out + 16 + sizeof eo, sizeof oo);
                /* Forgotten only after UNLINK, as the guest keeps its dentry until then: a backend
                 * may resolve the name through its inode table (the C virtiofsd fails UNLINK of a
                 * name whose inode it has already dropped with EIO). */
                s->nodeid = eo.nodeid;
                submit_release(l, s, FUSE_RELEASE, eo.nodeid, oo.fh, O_RDWR);
                return 0;
        }
        case FUSE_OPENDIR: {
                struct fuse_open_out oo;
                memcpy(&oo, s->out + 16, sizeof oo);
                s->fh = oo.fh;
                s->off = 0;
                submit_readdirplus(l, s);
                return 0;
        }
        case FUSE_READDIRPLUS: {
                int n;
                if (payload == 0) {
                        if (s->entries < BENCH_DIR_ENTRIES)
                                return load_fail(l, "READDIRPLUS: listing ended after %u entries", s->entries);
                        submit_release(l, s, FUSE_RELEASEDIR, b->dir_node, s->fh, O_RDONLY | O_DIRECTORY);
                        return 0;
                }
                n = parse_direntplus(l, s, payload);
                if (n <= 0)
                        return n < 0 ? n : load_fail(l, "READDIRPLUS: no entry in %zu bytes", payload);
                s->entries += (unsigned) n;
                submit_readdirplus(l, s);
                return 0;
        }
        case FUSE_RELEASEDIR:
                return 1;
        default:
                return load_fail(l, "unexpected opcode %u", s->opcode);
        }
}

static void *loader_main(void *userdata) {
        Loader *l = userdata;
        unsigned active = l->qd;

        for (unsigned i = 0; i < l->qd; i++)
                op_start(l, &l->slots[i]);
        fe_vring_notify(l->vr);

        while (active > 0) {
                bool any = false, submitted = false;
                uint32_t id, len;
                int r;

                while ((r = fe_vring_pop_used(l->vr, &id, &len, NULL)) == 1) {
                        Slot *s;
                        int k;

                        any = true;
                        if (id < l->b->raw_first || id >= l->b->raw_first + l->qd) {
                                load_fail(l, "used id %u is not one of ours", id);
                                l->ring_dead = true;
                                return NULL;
                        }
                        s = &l->slots[id - l->b->raw_first];
                        k = op_complete(l, s, len);
                        if (atomic_load_explicit(l->measuring, memory_order_relaxed))
                                l->requests++;
                        if (k == 0) {
                                submitted = true;
                                continue;
                        }
                        if (k == 1 && atomic_load_explicit(l->measuring, memory_order_relaxed)) {
                                hist_add(&l->hist, bench_now_ns() - s->op_start);
                                __atomic_store_n(&l->ops, l->ops + 1, __ATOMIC_RELAXED);
                                l->bytes += workload_io_size(l->w);
                        }
                        if (k == 1 && l->forget.used >= FORGET_FLUSH)
                                (void) forget_flush(l);
                        if (k == 1 && !l->error && !atomic_load_explicit(l->stop, memory_order_relaxed)) {
                                op_start(l, s);
                                submitted = true;
                        } else
                                active--;
                }
                if (r < 0) {
                        load_fail(l, "used ring: id %u not in flight", id);
                        l->ring_dead = true;
                        return NULL;
                }
                if (submitted)
                        fe_vring_notify(l->vr);
                if (!any && active > 0) {
                        r = fe_vring_wait(l->vr, WAIT_TIMEOUT_MS);
                        if (r < 0) {
                                load_fail(l, "no completion for %d ms (%u in flight)", WAIT_TIMEOUT_MS, active);
                                l->ring_dead = true;
                                return NULL;
                        }
                }
        }
        return NULL;
}

static int slots_new(Loader *l) {
        FeMem *mem = l->b->fe->mem;

        l->slots = calloc(l->qd, sizeof(Slot));
        if (!l->slots)
                return -ENOMEM;
        for (unsigned i = 0; i < l->qd; i++) {
                Slot *s = &l->slots[i];
                /* in | out | indirect table, then two page-aligned 128 KiB data areas. */
                size_t len = 4096 * 2 + SLOT_IN_BYTES + SLOT_OUT_BYTES + SLOT_MAX_DESC * 16 + 2 * BENCH_BIG_IO;
                uint64_t gpa, g;

                if (!fe_mem_alloc(mem, len, -1, &gpa))
                        return -ENOMEM;
                s->mem_gpa = gpa;
                s->mem_len = len;
                s->head = (uint16_t) (l->b->raw_first + i);
                g = ALIGN_TO(gpa, (uint64_t) 4096);
                s->wdata_gpa = g;
                s->rdata_gpa = g + BENCH_BIG_IO;
                s->in_gpa = g + 2 * BENCH_BIG_IO;
                s->out_gpa = s->in_gpa + SLOT_IN_BYTES;
                s->ind_gpa = s->out_gpa + SLOT_OUT_BYTES;
                s->wdata = fe_mem_gpa_to_host(mem, s->wdata_gpa, BENCH_BIG_IO);
                s->rdata = fe_mem_gpa_to_host(mem, s->rdata_gpa, BENCH_BIG_IO);
                s->in = fe_mem_gpa_to_host(mem, s->in_gpa, SLOT_IN_BYTES);
                s->out = fe_mem_gpa_to_host(mem, s->out_gpa, SLOT_OUT_BYTES);
                s->ind = fe_mem_gpa_to_host(mem, s->ind_gpa, SLOT_MAX_DESC * 16);
                if (!s->wdata || !s->rdata || !s->in || !s->out || !s->ind)
                        return -EFAULT;
                fe_fuse_pattern(s->wdata, BENCH_BIG_IO, i * BENCH_BIG_IO, 3);
        }
        return 0;
}

static void slots_free(Loader *l) {
        for (unsigned i = 0; l->slots && i < l->qd; i++)
                if (l->slots[i].mem_gpa || l->slots[i].mem_len)
                        fe_mem_release(l->b->fe->mem, l->slots[i].mem_gpa, l->slots[i].mem_len);
        free(l->slots);
        l->slots = NULL;
}

static void sleep_s(double s) {
        struct timespec ts = { .tv_sec = (time_t) s, .tv_nsec = (long) ((s - (double) (time_t) s) * 1e9) };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static double rusage_s(void) {
        struct rusage ru;

        getrusage(RUSAGE_SELF, &ru);
        return (double) ru.ru_utime.tv_sec + (double) ru.ru_stime.tv_sec +
               ((double) ru.ru_utime.tv_usec + (double) ru.ru_stime.tv_usec) / 1e6;
}

int bench_run_cell(BenchBackend *b, const BenchConfig *cfg, Workload w, unsigned qd, CellResult *ret) {
        _cleanup_free_ Loader *loaders = NULL;
        atomic_bool measuring = false, stop = false;
        int64_t cpu0 = -1, cpu1 = -1;
        double cl0 = 0, cl1 = 0;
        uint64_t t0 = 0, t1 = 0;
        Hist *all = NULL;
        int r = 0;

        *ret = (CellResult) {};
        if (b->failed) {
                snprintf(ret->error, sizeof ret->error, "%s", b->error);
                return -EIO;
        }
        if (qd < 1 || qd >= cfg->queue_size) {
                snprintf(ret->error, sizeof ret->error, "queue depth %u needs a ring larger than %u", qd,
                         cfg->queue_size);
                return -ERANGE;
        }
        loaders = calloc(b->queues, sizeof(Loader));
        all = calloc(1, sizeof(Hist));
        if (!loaders || !all) {
                free(all);
                return -ENOMEM;
        }
        for (unsigned q = 0; q < b->queues; q++) {
                Loader *l = &loaders[q];
                *l = (Loader) {
                        .b = b,
                        .w = w,
                        .queue = q + 1,
                        .qd = qd,
                        .vr = b->fe->vq[q + 1],
                        .rng = 0x9E3779B97F4A7C15ull * (q + 1) ^ bench_now_ns(),
                        .seq_off = (b->file_size / b->queues * q) & ~(uint64_t) (BENCH_BIG_IO - 1),
                        .measuring = &measuring,
                        .stop = &stop,
                };
                r = slots_new(l);
                if (r < 0) {
                        snprintf(ret->error, sizeof ret->error, "guest memory for %u slots: %s", qd, strerror(-r));
                        goto out;
                }
        }
        for (unsigned q = 0; q < b->queues; q++) {
                r = -pthread_create(&loaders[q].thread, NULL, loader_main, &loaders[q]);
                if (r < 0) {
                        atomic_store(&stop, true);
                        snprintf(ret->error, sizeof ret->error, "pthread_create: %s", strerror(-r));
                        goto join;
                }
                loaders[q].started = true;
        }
        sleep_s(cfg->warmup);
        cpu0 = proc_tree_cpu_ns(b->pid);
        cl0 = rusage_s();
        t0 = bench_now_ns();
        atomic_store(&measuring, true);
        sleep_s(cfg->seconds);
        /* Slow operations (a 1,000-entry listing on a loaded machine) may need longer than a short
         * window: extend it until one completes, up to the stall timeout. */
        for (unsigned waited = 0; waited < WAIT_TIMEOUT_MS / 20; waited++) {
                uint64_t done = 0;
                bool failed = false;
                for (unsigned q = 0; q < b->queues; q++) {
                        done += __atomic_load_n(&loaders[q].ops, __ATOMIC_RELAXED);
                        failed |= __atomic_load_n(&loaders[q].error, __ATOMIC_RELAXED) != 0;
                }
                if (done > 0 || failed)
                        break;
                sleep_s(0.02);
        }
        atomic_store(&measuring, false);
        t1 = bench_now_ns();
        cl1 = rusage_s();
        cpu1 = proc_tree_cpu_ns(b->pid);
        atomic_store(&stop, true);
join:
        for (unsigned q = 0; q < b->queues; q++)
                if (loaders[q].started)
                        pthread_join(loaders[q].thread, NULL);
        if (r < 0)
                goto out;

        ret->ok = true;
        ret->seconds = (double) (t1 - t0) / 1e9;
        for (unsigned q = 0; q < b->queues; q++) {
                Loader *l = &loaders[q];
                if (!l->ring_dead)
                        (void) forget_flush(l);
                if (l->error && ret->ok) {
                        ret->ok = false;
                        snprintf(ret->error, sizeof ret->error, "queue %u: %s", l->queue, l->errmsg);
                }
                if (l->ring_dead)
                        backend_fail(b, "queue %u unusable: %s", l->queue, l->errmsg);
                ret->ops += l->ops;
                ret->requests += l->requests;
                ret->bytes += l->bytes;
                hist_merge(all, &l->hist);
        }
        ret->ops_s = (double) ret->ops / ret->seconds;
        ret->mb_s = (double) ret->bytes / ret->seconds / 1e6;
        ret->p50_us = (double) hist_quantile(all, 0.5) / 1e3;
        ret->p99_us = (double) hist_quantile(all, 0.99) / 1e3;
        ret->p999_us = (double) hist_quantile(all, 0.999) / 1e3;
        ret->client_cpu_util = (cl1 - cl0) / ret->seconds;
        if (cpu0 >= 0 && cpu1 >= cpu0 && ret->ops > 0) {
                ret->cpu_us_per_op = (double) (cpu1 - cpu0) / 1e3 / (double) ret->ops;
                ret->backend_cpu_util = (double) (cpu1 - cpu0) / 1e9 / ret->seconds;
        } else {
                ret->cpu_us_per_op = -1;
                ret->backend_cpu_util = -1;
        }
        if (ret->ok && ret->ops == 0) {
                ret->ok = false;
                snprintf(ret->error, sizeof ret->error, "no operation completed in %.2f s", ret->seconds);
        }
out:
        for (unsigned q = 0; q < b->queues; q++)
                slots_free(&loaders[q]);
        free(all);
        if (r < 0)
                return r;
        return ret->ok ? 0 : -EIO;
}

int bench_run_idle(BenchBackend *b, const BenchConfig *cfg, double seconds, IdleResult *ret) {
        BenchConfig burst = *cfg;
        CellResult c;
        int64_t cpu0, cpu1;
        uint64_t t0, t1;
        int r;

        *ret = (IdleResult) {};
        if (!b->pid)
                return -ESRCH; /* nothing to account the CPU to */
        burst.seconds = 1;
        r = bench_run_cell(b, &burst, WL_GETATTR, 1, &c);
        if (r < 0)
                return r;
        /* Measured from the last reply on: an adaptive window still open then counts. */
        cpu0 = proc_tree_cpu_ns(b->pid);
        t0 = bench_now_ns();
        sleep_s(seconds);
        cpu1 = proc_tree_cpu_ns(b->pid);
        t1 = bench_now_ns();
        if (cpu0 < 0 || cpu1 < cpu0)
                return -ESRCH;
        ret->seconds = (double) (t1 - t0) / 1e9;
        ret->cpu_s = (double) (cpu1 - cpu0) / 1e9;
        ret->cpu_util = ret->cpu_s / ret->seconds;
        ret->ok = true;
        return 0;
}
