/* vufs-bench.c: drives vhost-user-fs backends with FUSE load and compares them side by side. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "harness.h"
#include "util.h"

#define MAX_BACKENDS 12
#define MAX_QDS 8

typedef struct Options {
        BenchConfig cfg;
        bool workloads[_WL_MAX];
        unsigned qds[MAX_QDS], n_qds;
        BackendSpec backends[MAX_BACKENDS];
        unsigned n_backends;
        bool compare, smoke, keep;
        unsigned pool_size, poll_us;
        const char *vufsd, *virtiofsd;
        const char *socket_path;
        pid_t socket_pid;
        double bare_time;
        double idle_time; /* 0: no idle measurement */
        const char *json_path, *md_path, *png_path, *topdir;
} Options;

/* Results of every cell: [run][qd][workload][backend]. */
typedef struct Results {
        unsigned runs, n_qds, n_backends;
        CellResult *cells;
        IdleResult idle[MAX_BACKENDS];
} Results;

static CellResult *cell(Results *r, unsigned run, unsigned qi, unsigned w, unsigned b) {
        return &r->cells[((run * r->n_qds + qi) * _WL_MAX + w) * r->n_backends + b];
}

static void usage(void) {
        printf("Usage: vufs-bench [OPTIONS] [-- BACKEND-COMMAND...]\n"
               "\n"
               "A vhost-user-fs frontend that negotiates as QEMU does and drives FUSE requests at a\n"
               "fixed queue depth; reports ops/s, MB/s, latency percentiles and the backend's CPU per op.\n"
               "\n"
               "Backends (commands take {socket} {dir} {queues} placeholders):\n"
               "  -b, --backend=NAME[=CMD]  add a backend; presets without CMD: vufsd-inline,\n"
               "                            vufsd-pool, vufsd-auto, vufsd-poll (inline, --poll-us),\n"
               "                            virtiofsd-0, virtiofsd-pool\n"
               "      --compare             all six presets, interleaved, with ratios to the C virtiofsd\n"
               "      --pool-size=N         N of the pool presets (default 4)\n"
               "      --poll-us=N           busy-poll window of vufsd-poll (default 50)\n"
               "      --vufsd=PATH          vufsd binary (default $VUFSD_BINARY, the build tree, or installed)\n"
               "      --virtiofsd=PATH      C virtiofsd (default " FE_VIRTIOFSD_PATH ")\n"
               "      --socket=PATH         use an already running backend instead (files are set up over FUSE)\n"
               "      --pid=PID             its process, for CPU accounting\n"
               "\n"
               "Load:\n"
               "  -w, --workloads=LIST      comma separated or 'all': getattr, lookup, open-release,\n"
               "                            randread-4k, seqread-128k, randwrite-4k, seqwrite-128k,\n"
               "                            create-unlink, readdirplus-1000, mix-70r30w-4k\n"
               "  -q, --qd=LIST             queue depths per request queue (default 1,16)\n"
               "  -Q, --queues=N            request queues (default 1)\n"
               "  -t, --time=SECONDS        measured time per cell (default 2)\n"
               "      --warmup=SECONDS      unmeasured time before it (default 0.3)\n"
               "  -r, --runs=N              rounds; every number is the median of the rounds (default 3)\n"
               "      --file-size=MIB       data files (default 64)\n"
               "      --queue-size=N        ring size (default 128, as QEMU)\n"
               "      --cpus=B,L|none       backend CPU and load CPU (default: last CPU and CPU 0)\n"
               "      --bare-time=SECONDS   bare system call loop per workload on the backend CPU\n"
               "                            (default 0.5, 0 = skip)\n"
               "      --idle=SECONDS        after the rounds, each backend's CPU while the guest sends\n"
               "                            nothing for SECONDS after a 1 s getattr burst (default 0 = skip)\n"
               "\n"
               "Output (a markdown report is always printed):\n"
               "      --markdown=FILE  --json=FILE  --png=FILE (gnuplot)\n"
               "      --dir=DIR             working directory (default a new /tmp/vufs-bench.XXXXXX)\n"
               "      --keep                keep the working directory\n"
               "      --smoke               a few seconds: every workload, QD 1 and 4, small files;\n"
               "                            exits 1 if anything fails (the CI run)\n"
               "  -v, --verbose\n");
}

static const char *default_vufsd(void) {
        const char *e = getenv("VUFSD_BINARY");

        if (e && *e)
                return e;
#ifdef VUFSD_BUILD_PATH
        if (access(VUFSD_BUILD_PATH, X_OK) == 0)
                return VUFSD_BUILD_PATH;
#endif
#ifdef VUFSD_INSTALL_PATH
        return VUFSD_INSTALL_PATH;
#else
        return "vufsd";
#endif
}

static int add_backend(Options *o, const char *arg) {
        const char *eq = strchr(arg, '=');
        BackendSpec *s;
        char *cmd = NULL, *name;
        const char *sandbox = geteuid() == 0 ? "chroot" : "none";

        if (o->n_backends >= MAX_BACKENDS)
                return -E2BIG;
        name = eq ? strndup(arg, (size_t) (eq - arg)) : strdup(arg);
        if (!name)
                return -ENOMEM;
        s = &o->backends[o->n_backends];
        *s = (BackendSpec) { .name = name, .max_queues = 16 };
        if (eq) {
                cmd = strdup(eq + 1);
                s->vufsd = strstr(cmd, "vufsd ") != NULL;
                s->is_anchor = strstr(cmd, "virtiofsd") != NULL && !s->vufsd;
                s->is_auto = s->vufsd && strstr(cmd, "--threads=auto") != NULL;
                s->polls = s->vufsd && strstr(cmd, "--poll-us=") != NULL && strstr(cmd, "--poll-us=0 ") == NULL;
        } else if (strncmp(name, "vufsd-", 6) == 0) {
                char mode[16], pool[32] = "";
                snprintf(mode, sizeof mode, "%s", name + 6);
                bool poll = streq(mode, "poll");
                if (!streq(mode, "inline") && !streq(mode, "pool") && !streq(mode, "auto") && !poll) {
                        fprintf(stderr, "unknown vufsd preset %s (inline, pool, auto, poll)\n", name);
                        free(name);
                        return -EINVAL;
                }
                if (poll) /* inline with a busy-poll window */
                        snprintf(pool, sizeof pool, " --poll-us=%u", o->poll_us);
                else if (!streq(mode, "inline"))
                        snprintf(pool, sizeof pool, " --thread-pool-size=%u", o->pool_size);
                if (asprintf(&cmd,
                             "%s --socket-path={socket} --shared-dir={dir} --threads=%s%s --cache=auto "
                             "--sandbox=%s --bus=none --num-request-queues={queues} --log-level=warning",
                             o->vufsd, poll ? "inline" : mode, pool, sandbox) < 0)
                        return -ENOMEM;
                if (!streq(mode, "inline")) {
                        free(name);
                        if (asprintf(&name, "vufsd-%s%u", mode, poll ? o->poll_us : o->pool_size) < 0)
                                return -ENOMEM;
                }
                s->name = name;
                s->vufsd = true;
                s->is_auto = streq(mode, "auto");
                s->polls = poll;
                s->preset = true;
        } else if (streq(name, "virtiofsd-0") || streq(name, "virtiofsd-pool")) {
                unsigned n = streq(name, "virtiofsd-0") ? 0 : o->pool_size;
                if (asprintf(&cmd,
                             "%s --socket-path={socket} -o source={dir} -o cache=auto -o sandbox=chroot "
                             "--thread-pool-size=%u -o log_level=warn",
                             o->virtiofsd, n) < 0)
                        return -ENOMEM;
                free(name);
                if (asprintf(&name, "virtiofsd-%u", n) < 0)
                        return -ENOMEM;
                s->name = name;
                s->is_anchor = true;
                s->max_queues = 1;
                if (access(o->virtiofsd, X_OK) < 0) {
                        fprintf(stderr, "vufs-bench: %s is not installed; skipping %s\n", o->virtiofsd, name);
                        free(name);
                        free(cmd);
                        return 0;
                }
        } else {
                fprintf(stderr, "unknown backend preset %s (give NAME=COMMAND)\n", name);
                free(name);
                return -EINVAL;
        }
        s->command = cmd;
        o->n_backends++;
        return 0;
}

static int parse_list(const char *arg, unsigned *out, unsigned max) {
        _cleanup_free_ char *copy = strdup(arg);
        char *save = NULL;
        unsigned n = 0;

        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                char *end;
                unsigned long v = strtoul(t, &end, 10);
                if (*end || v == 0 || v > 1024 || n >= max)
                        return -EINVAL;
                out[n++] = (unsigned) v;
        }
        return n == 0 ? -EINVAL : (int) n;
}

static int parse_args(Options *o, int argc, char *argv[]) {
        enum {
                ARG_WARMUP = 0x100,
                ARG_FILE_SIZE,
                ARG_QUEUE_SIZE,
                ARG_CPUS,
                ARG_BARE_TIME,
                ARG_IDLE,
                ARG_COMPARE,
                ARG_POOL_SIZE,
                ARG_POLL_US,
                ARG_VUFSD,
                ARG_VIRTIOFSD,
                ARG_SOCKET,
                ARG_PID,
                ARG_JSON,
                ARG_MD,
                ARG_PNG,
                ARG_DIR,
                ARG_KEEP,
                ARG_SMOKE,
        };
        static const struct option options[] = {
                { "backend", required_argument, NULL, 'b' },
                { "compare", no_argument, NULL, ARG_COMPARE },
                { "pool-size", required_argument, NULL, ARG_POOL_SIZE },
                { "poll-us", required_argument, NULL, ARG_POLL_US },
                { "vufsd", required_argument, NULL, ARG_VUFSD },
                { "virtiofsd", required_argument, NULL, ARG_VIRTIOFSD },
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "pid", required_argument, NULL, ARG_PID },
                { "workloads", required_argument, NULL, 'w' },
                { "qd", required_argument, NULL, 'q' },
                { "queues", required_argument, NULL, 'Q' },
                { "time", required_argument, NULL, 't' },
                { "warmup", required_argument, NULL, ARG_WARMUP },
                { "runs", required_argument, NULL, 'r' },
                { "file-size", required_argument, NULL, ARG_FILE_SIZE },
                { "queue-size", required_argument, NULL, ARG_QUEUE_SIZE },
                { "cpus", required_argument, NULL, ARG_CPUS },
                { "bare-time", required_argument, NULL, ARG_BARE_TIME },
                { "idle", required_argument, NULL, ARG_IDLE },
                { "json", required_argument, NULL, ARG_JSON },
                { "markdown", required_argument, NULL, ARG_MD },
                { "png", required_argument, NULL, ARG_PNG },
                { "dir", required_argument, NULL, ARG_DIR },
                { "keep", no_argument, NULL, ARG_KEEP },
                { "smoke", no_argument, NULL, ARG_SMOKE },
                { "verbose", no_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *backend_args[MAX_BACKENDS], *workloads = NULL, *qds = NULL;
        unsigned n_backend_args = 0;
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        int c, r;

        o->cfg = (BenchConfig) {
                .seconds = 2,
                .warmup = 0.3,
                .runs = 3,
                .queues = 1,
                .file_size = 64ull << 20,
                .queue_size = 128,
                .backend_cpu = ncpu > 1 ? (int) ncpu - 1 : -1,
                .load_cpu = ncpu > 1 ? 0 : -1,
        };
        o->pool_size = 4;
        o->poll_us = 50;
        o->bare_time = 0.5;
        o->virtiofsd = FE_VIRTIOFSD_PATH;

        while ((c = getopt_long(argc, argv, "b:w:q:Q:t:r:vh", options, NULL)) >= 0)
                switch (c) {
                case 'b':
                        if (n_backend_args >= MAX_BACKENDS)
                                return -E2BIG;
                        backend_args[n_backend_args++] = optarg;
                        break;
                case ARG_COMPARE:
                        o->compare = true;
                        break;
                case ARG_POOL_SIZE:
                        o->pool_size = (unsigned) strtoul(optarg, NULL, 10);
                        if (o->pool_size < 1 || o->pool_size > 1024)
                                return -EINVAL;
                        break;
                case ARG_POLL_US:
                        o->poll_us = (unsigned) strtoul(optarg, NULL, 10);
                        if (o->poll_us < 1 || o->poll_us > 1000000)
                                return -EINVAL;
                        break;
                case ARG_VUFSD:
                        o->vufsd = optarg;
                        break;
                case ARG_VIRTIOFSD:
                        o->virtiofsd = optarg;
                        break;
                case ARG_SOCKET:
                        o->socket_path = optarg;
                        break;
                case ARG_PID:
                        o->socket_pid = (pid_t) strtol(optarg, NULL, 10);
                        break;
                case 'w':
                        workloads = optarg;
                        break;
                case 'q':
                        qds = optarg;
                        break;
                case 'Q':
                        o->cfg.queues = (unsigned) strtoul(optarg, NULL, 10);
                        if (o->cfg.queues < 1 || o->cfg.queues > 16)
                                return -EINVAL;
                        break;
                case 't':
                        o->cfg.seconds = strtod(optarg, NULL);
                        break;
                case ARG_WARMUP:
                        o->cfg.warmup = strtod(optarg, NULL);
                        break;
                case 'r':
                        o->cfg.runs = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case ARG_FILE_SIZE:
                        o->cfg.file_size = strtoull(optarg, NULL, 10) << 20;
                        break;
                case ARG_QUEUE_SIZE:
                        o->cfg.queue_size = (uint16_t) strtoul(optarg, NULL, 10);
                        if (o->cfg.queue_size < 2 || (o->cfg.queue_size & (o->cfg.queue_size - 1)) ||
                            o->cfg.queue_size > 1024)
                                return -EINVAL;
                        break;
                case ARG_CPUS:
                        if (streq(optarg, "none"))
                                o->cfg.backend_cpu = o->cfg.load_cpu = -1;
                        else if (sscanf(optarg, "%d,%d", &o->cfg.backend_cpu, &o->cfg.load_cpu) != 2)
                                return -EINVAL;
                        break;
                case ARG_BARE_TIME:
                        o->bare_time = strtod(optarg, NULL);
                        break;
                case ARG_IDLE:
                        o->idle_time = strtod(optarg, NULL);
                        if (!(o->idle_time >= 0 && o->idle_time <= 3600))
                                return -EINVAL;
                        break;
                case ARG_JSON:
                        o->json_path = optarg;
                        break;
                case ARG_MD:
                        o->md_path = optarg;
                        break;
                case ARG_PNG:
                        o->png_path = optarg;
                        break;
                case ARG_DIR:
                        o->topdir = optarg;
                        break;
                case ARG_KEEP:
                        o->keep = true;
                        break;
                case ARG_SMOKE:
                        o->smoke = true;
                        break;
                case 'v':
                        o->cfg.verbose = true;
                        break;
                case 'h':
                        usage();
                        exit(0);
                default:
                        return -EINVAL;
                }

        if (o->smoke) {
                o->cfg.seconds = 0.2;
                o->cfg.warmup = 0.05;
                o->cfg.runs = 1;
                o->cfg.file_size = 4ull << 20;
                o->bare_time = 0.05;
                if (!qds)
                        qds = "1,4";
        }
        if (o->cfg.seconds <= 0 || o->cfg.warmup < 0 || o->cfg.runs < 1 || o->cfg.file_size < (1ull << 20))
                return -EINVAL;

        if (!workloads || streq(workloads, "all"))
                for (unsigned i = 0; i < _WL_MAX; i++)
                        o->workloads[i] = true;
        else {
                _cleanup_free_ char *copy = strdup(workloads);
                char *save = NULL;
                for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                        int w = workload_from_name(t);
                        if (w < 0) {
                                fprintf(stderr, "unknown workload %s\n", t);
                                return -EINVAL;
                        }
                        o->workloads[w] = true;
                }
        }
        r = parse_list(qds ?: "1,16", o->qds, MAX_QDS);
        if (r < 0)
                return r;
        o->n_qds = (unsigned) r;

        if (!o->vufsd)
                o->vufsd = default_vufsd();
        if (optind < argc) {
                /* -- COMMAND...: one custom backend. */
                size_t len = 0;
                char *cmd, *arg;
                for (int i = optind; i < argc; i++)
                        len += strlen(argv[i]) + 1;
                cmd = calloc(1, len + 16);
                if (!cmd)
                        return -ENOMEM;
                strcpy(cmd, "custom=");
                for (int i = optind; i < argc; i++) {
                        strcat(cmd, argv[i]);
                        if (i + 1 < argc)
                                strcat(cmd, " ");
                }
                arg = cmd;
                r = add_backend(o, arg);
                free(cmd);
                if (r < 0)
                        return r;
        }
        for (unsigned i = 0; i < n_backend_args; i++) {
                r = add_backend(o, backend_args[i]);
                if (r < 0)
                        return r;
        }
        if (o->socket_path) {
                if (o->n_backends > 0 || o->compare) {
                        fprintf(stderr, "--socket drives exactly one backend\n");
                        return -EINVAL;
                }
                o->backends[0] = (BackendSpec) { .name = strdup("socket"), .max_queues = 16 };
                o->n_backends = 1;
        } else if (o->n_backends == 0) {
                const char *set[] = { "vufsd-inline", "vufsd-pool", "vufsd-auto", "vufsd-poll", "virtiofsd-0",
                                      "virtiofsd-pool" };
                unsigned n = o->compare ? ELEMENTSOF(set) : 1;
                if (o->smoke)
                        set[1] = "vufsd-auto", set[2] = "vufsd-poll", set[3] = "virtiofsd-0", n = o->compare ? 4 : 3;
                for (unsigned i = 0; i < n; i++) {
                        if (geteuid() != 0 && strncmp(set[i], "virtiofsd", 9) == 0)
                                continue; /* the C virtiofsd needs root */
                        r = add_backend(o, set[i]);
                        if (r < 0)
                                return r;
                }
        }
        if (o->n_backends == 0)
                return -EINVAL;
        return 0;
}

/* ---- statistics over runs ---- */

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n) {
        if (n == 0)
                return NAN;
        qsort(v, n, sizeof *v, cmp_double);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct Median {
        unsigned ok_runs;
        double ops_s, mb_s, p50_us, p99_us, p999_us, cpu_us_per_op, backend_util, client_util;
        double ops_min, ops_max;
        const char *error;
} Median;

static void compute_median(Results *res, unsigned qi, unsigned w, unsigned b, Median *m) {
        double v[8][64];
        unsigned n = 0, ncpu = 0;

        *m = (Median) { .ops_s = NAN, .cpu_us_per_op = NAN, .ops_min = INFINITY, .ops_max = 0 };
        for (unsigned run = 0; run < res->runs && run < 64; run++) {
                CellResult *c = cell(res, run, qi, w, b);
                if (!c->ok) {
                        if (c->error[0])
                                m->error = c->error;
                        continue;
                }
                v[0][n] = c->ops_s;
                v[1][n] = c->mb_s;
                v[2][n] = c->p50_us;
                v[3][n] = c->p99_us;
                v[4][n] = c->p999_us;
                v[6][n] = c->backend_cpu_util;
                v[7][n] = c->client_cpu_util;
                if (c->cpu_us_per_op >= 0)
                        v[5][ncpu++] = c->cpu_us_per_op;
                m->ops_min = MIN(m->ops_min, c->ops_s);
                m->ops_max = MAX(m->ops_max, c->ops_s);
                n++;
        }
        m->ok_runs = n;
        if (n == 0)
                return;
        m->ops_s = median(v[0], n);
        m->mb_s = median(v[1], n);
        m->p50_us = median(v[2], n);
        m->p99_us = median(v[3], n);
        m->p999_us = median(v[4], n);
        m->cpu_us_per_op = ncpu ? median(v[5], ncpu) : NAN;
        m->backend_util = median(v[6], n);
        m->client_util = median(v[7], n);
}

/* Per qd and workload: which C mode and which vufsd mode won, and the targets. */
typedef struct Summary {
        int c_best, v_best, v_best_fixed, v_auto; /* backend index or -1 */
        double c_ops, v_ops, ratio, target, auto_ratio;
        double c_cpu, v_cpu, cpu_ratio; /* lowest CPU/op of each side */
        bool met;
} Summary;

/* The median over rounds of a's ops/s divided by b's in the same round. Rounds run the backends
 * back to back, so a pair shares the machine's state of that moment: on a noisy machine this ratio
 * is far steadier than the ratio of the two medians (which may come from different rounds). */
static double paired_ratio(Results *res, unsigned qi, unsigned w, unsigned a, unsigned b) {
        double v[64];
        unsigned n = 0;

        for (unsigned run = 0; run < res->runs && run < 64; run++) {
                CellResult *ca = cell(res, run, qi, w, a), *cb = cell(res, run, qi, w, b);
                if (ca->ok && cb->ok && cb->ops_s > 0)
                        v[n++] = ca->ops_s / cb->ops_s;
        }
        return n ? median(v, n) : NAN;
}

static void summarize(Options *o, Results *res, unsigned qi, unsigned w, Median *meds, double bare_ops, Summary *s) {
        *s = (Summary) { .c_best = -1, .v_best = -1, .v_best_fixed = -1, .v_auto = -1, .ratio = NAN, .target = NAN,
                         .auto_ratio = NAN, .c_cpu = NAN, .v_cpu = NAN, .cpu_ratio = NAN };
        for (unsigned b = 0; b < o->n_backends; b++)
                if (o->backends[b].is_auto && meds[b].ok_runs > 0 && s->v_auto < 0)
                        s->v_auto = (int) b;
        for (unsigned b = 0; b < o->n_backends; b++) {
                const BackendSpec *spec = &o->backends[b];
                Median *m = &meds[b];
                if (m->ok_runs == 0)
                        continue;
                if (spec->is_anchor) {
                        if (s->c_best < 0 || m->ops_s > s->c_ops)
                                s->c_best = (int) b, s->c_ops = m->ops_s;
                        if (!isnan(m->cpu_us_per_op) && (isnan(s->c_cpu) || m->cpu_us_per_op < s->c_cpu))
                                s->c_cpu = m->cpu_us_per_op;
                } else if (spec->vufsd) {
                        if (s->v_best < 0 || m->ops_s > s->v_ops)
                                s->v_best = (int) b, s->v_ops = m->ops_s;
                        /* Auto against the fixed threading modes (inline, pool N) with the same
                         * busy-poll setting and otherwise the same kind of command line. */
                        if (!spec->is_auto && s->v_auto >= 0 && spec->polls == o->backends[s->v_auto].polls &&
                            spec->preset == o->backends[s->v_auto].preset &&
                            (s->v_best_fixed < 0 || m->ops_s > meds[s->v_best_fixed].ops_s))
                                s->v_best_fixed = (int) b;
                        if (!isnan(m->cpu_us_per_op) && (isnan(s->v_cpu) || m->cpu_us_per_op < s->v_cpu))
                                s->v_cpu = m->cpu_us_per_op;
                }
        }
        if (s->c_best >= 0 && s->v_best >= 0) {
                s->ratio = s->v_ops / s->c_ops;
                s->target = 1.3 * s->c_ops;
                if (bare_ops > 0)
                        s->target = MIN(s->target, 0.85 * bare_ops);
                s->met = s->v_ops >= s->target;
                s->cpu_ratio = s->v_cpu / s->c_cpu;
        }
        if (s->v_auto >= 0 && s->v_best_fixed >= 0)
                s->auto_ratio = paired_ratio(res, qi, w, (unsigned) s->v_auto, (unsigned) s->v_best_fixed);
}

/* ---- output ---- */

static void fmt_num(char *buf, size_t len, double v) {
        if (isnan(v))
                snprintf(buf, len, "n/a");
        else if (v >= 1e6)
                snprintf(buf, len, "%.2fM", v / 1e6);
        else if (v >= 1e4)
                snprintf(buf, len, "%.1fk", v / 1e3);
        else if (v >= 100)
                snprintf(buf, len, "%.0f", v);
        else
                snprintf(buf, len, "%.2f", v);
}

static void machine_info(char *buf, size_t len) {
        char model[128] = "?", line[256];
        struct utsname u;
        double load[3] = {};
        FILE *f = fopen("/proc/cpuinfo", "re");

        while (f && fgets(line, sizeof line, f))
                if (strncmp(line, "model name", 10) == 0) {
                        char *p = strchr(line, ':');
                        if (p) {
                                snprintf(model, sizeof model, "%s", p + 2);
                                model[strcspn(model, "\n")] = 0;
                        }
                        break;
                }
        if (f)
                fclose(f);
        uname(&u);
        getloadavg(load, 3);
        snprintf(buf, len, "%ld CPUs (%s), Linux %s, load average %.2f %.2f %.2f",
                 sysconf(_SC_NPROCESSORS_ONLN), model, u.release, load[0], load[1], load[2]);
}

static void print_markdown(FILE *f, Options *o, Results *res, BareResult *bare, const char *machine_start,
                           const char *machine_end) {
        char a[32], b2[32], c2[32];

        fprintf(f, "### vufs-bench\n\n");
        fprintf(f, "- machine: %s (at start); %s (at end)\n", machine_start, machine_end);
        fprintf(f, "- %u run(s) of %.1f s per cell after %.1f s warm-up, medians; %u request queue(s), ring %u, "
                   "files %" PRIu64 " MiB\n",
                o->cfg.runs, o->cfg.seconds, o->cfg.warmup, o->cfg.queues, o->cfg.queue_size, o->cfg.file_size >> 20);
        if (o->cfg.backend_cpu >= 0)
                fprintf(f, "- backend pinned to CPU %d, load generator to CPU %d\n", o->cfg.backend_cpu, o->cfg.load_cpu);
        else
                fprintf(f, "- no CPU pinning\n");
        fprintf(f, "- backends:\n");
        for (unsigned b = 0; b < o->n_backends; b++)
                fprintf(f, "  - `%s`: `%s`\n", o->backends[b].name, o->backends[b].command ?: o->socket_path);
        fprintf(f, "\n");

        if (o->bare_time > 0) {
                fprintf(f, "#### Bare system calls on the backend CPU (one thread, no FUSE)\n\n");
                fprintf(f, "| workload | syscalls per op | ops/s | ns/op | 85 %% limit (ops/s) |\n|---|---|---|---|---|\n");
                for (unsigned w = 0; w < _WL_MAX; w++) {
                        if (!o->workloads[w] || bare[w].ops_s <= 0)
                                continue;
                        fmt_num(a, sizeof a, bare[w].ops_s);
                        fmt_num(b2, sizeof b2, 0.85 * bare[w].ops_s);
                        fprintf(f, "| %s | %s | %s | %.0f | %s |\n", workload_name(w), bare_describe(w), a,
                                bare[w].ns_per_op, b2);
                }
                fprintf(f, "\n");
        }

        for (unsigned qi = 0; qi < res->n_qds; qi++) {
                Median meds[_WL_MAX][MAX_BACKENDS];
                Summary sum[_WL_MAX];
                bool have_anchor = false, have_auto = false;

                for (unsigned w = 0; w < _WL_MAX; w++) {
                        if (!o->workloads[w])
                                continue;
                        for (unsigned b = 0; b < o->n_backends; b++)
                                compute_median(res, qi, w, b, &meds[w][b]);
                        summarize(o, res, qi, w, meds[w], bare[w].ops_s, &sum[w]);
                        have_anchor |= sum[w].c_best >= 0 && sum[w].v_best >= 0;
                        have_auto |= sum[w].v_auto >= 0 && sum[w].v_best_fixed >= 0;
                }

                fprintf(f, "#### Queue depth %u: operations per second\n\n| workload |", o->qds[qi]);
                for (unsigned b = 0; b < o->n_backends; b++)
                        fprintf(f, " %s |", o->backends[b].name);
                if (have_anchor)
                        fprintf(f, " vufsd best / C best | target | met |");
                if (have_auto)
                        fprintf(f, " auto / best fixed |");
                fprintf(f, "\n|---|");
                for (unsigned b = 0; b < o->n_backends + (have_anchor ? 3 : 0) + (have_auto ? 1 : 0); b++)
                        fprintf(f, "---|");
                fprintf(f, "\n");
                for (unsigned w = 0; w < _WL_MAX; w++) {
                        Summary *s = &sum[w];
                        if (!o->workloads[w])
                                continue;
                        fprintf(f, "| %s |", workload_name(w));
                        for (unsigned b = 0; b < o->n_backends; b++) {
                                Median *m = &meds[w][b];
                                if (m->ok_runs == 0) {
                                        fprintf(f, " %s |", o->cfg.queues > o->backends[b].max_queues ? "n/a" : "FAILED");
                                        continue;
                                }
                                fmt_num(a, sizeof a, m->ops_s);
                                fprintf(f, " %s%s |", a, (int) b == s->v_best || (int) b == s->c_best ? "*" : "");
                        }
                        if (have_anchor) {
                                fmt_num(a, sizeof a, s->target);
                                fprintf(f, " %.2f× | %s | %s |", s->ratio, a,
                                        isnan(s->ratio) ? "n/a" : s->met ? "yes" : "**no**");
                        }
                        if (have_auto) {
                                if (isnan(s->auto_ratio))
                                        fprintf(f, " n/a |");
                                else
                                        fprintf(f, " %.2f%s |", s->auto_ratio, s->auto_ratio >= 0.95 ? "" : " **<0.95**");
                        }
                        fprintf(f, "\n");
                }
                fprintf(f, "\n\\* best of its side. Target: 1.3× the C virtiofsd's best mode, capped at 85 %% of the "
                           "bare system call rate.%s\n\n",
                        have_auto ? " Auto / best fixed: auto's ops/s over the best fixed threading mode's (same "
                                    "busy-poll setting; presets against presets, so the sandbox is the "
                                    "same) in the same round, median over rounds."
                                  : "");

                fprintf(f, "#### Queue depth %u: backend CPU per operation (µs, all threads)\n\n| workload |",
                        o->qds[qi]);
                for (unsigned b = 0; b < o->n_backends; b++)
                        fprintf(f, " %s |", o->backends[b].name);
                if (have_anchor)
                        fprintf(f, " vufsd lowest / C lowest |");
                fprintf(f, " bare ns/op |\n|---|");
                for (unsigned b = 0; b < o->n_backends + (have_anchor ? 1 : 0) + 1; b++)
                        fprintf(f, "---|");
                fprintf(f, "\n");
                for (unsigned w = 0; w < _WL_MAX; w++) {
                        if (!o->workloads[w])
                                continue;
                        fprintf(f, "| %s |", workload_name(w));
                        for (unsigned b = 0; b < o->n_backends; b++) {
                                Median *m = &meds[w][b];
                                if (m->ok_runs == 0 || isnan(m->cpu_us_per_op))
                                        fprintf(f, " n/a |");
                                else
                                        fprintf(f, " %.2f (%.0f %%) |", m->cpu_us_per_op, 100 * m->backend_util);
                        }
                        if (have_anchor)
                                fprintf(f, " %.2f%s |", sum[w].cpu_ratio,
                                        sum[w].cpu_ratio <= 0.7 ? "" : " **>0.7**");
                        if (bare[w].ops_s > 0)
                                fprintf(f, " %.0f |\n", bare[w].ns_per_op);
                        else
                                fprintf(f, " n/a |\n");
                }
                fprintf(f, "\n(in parentheses: backend CPU utilisation, 100 %% = one CPU)\n\n");

                fprintf(f, "#### Queue depth %u: latency per operation p50 / p99 / p99.9 (µs), MB/s\n\n| workload |",
                        o->qds[qi]);
                for (unsigned b = 0; b < o->n_backends; b++)
                        fprintf(f, " %s |", o->backends[b].name);
                fprintf(f, "\n|---|");
                for (unsigned b = 0; b < o->n_backends; b++)
                        fprintf(f, "---|");
                fprintf(f, "\n");
                for (unsigned w = 0; w < _WL_MAX; w++) {
                        if (!o->workloads[w])
                                continue;
                        fprintf(f, "| %s |", workload_name(w));
                        for (unsigned b = 0; b < o->n_backends; b++) {
                                Median *m = &meds[w][b];
                                if (m->ok_runs == 0) {
                                        fprintf(f, " n/a |");
                                        continue;
                                }
                                fmt_num(a, sizeof a, m->p50_us);
                                fmt_num(b2, sizeof b2, m->p99_us);
                                fmt_num(c2, sizeof c2, m->p999_us);
                                fprintf(f, " %s / %s / %s", a, b2, c2);
                                if (workload_io_size(w))
                                        fprintf(f, ", %.0f MB/s", m->mb_s);
                                fprintf(f, " |");
                        }
                        fprintf(f, "\n");
                }
                fprintf(f, "\n");

                /* Errors, once. */
                for (unsigned w = 0; w < _WL_MAX; w++)
                        for (unsigned b = 0; o->workloads[w] && b < o->n_backends; b++)
                                if (meds[w][b].error)
                                        fprintf(f, "- QD %u %s %s: %s\n", o->qds[qi], workload_name(w),
                                                o->backends[b].name, meds[w][b].error);
        }

        if (o->idle_time > 0) {
                fprintf(f, "#### A connected guest doing nothing\n\n");
                fprintf(f, "Backend CPU over %.0f s with no request, right after a 1 s getattr burst at QD 1 "
                           "(an adaptive poller has learnt the pace and may be spinning when the guest stops):\n\n",
                        o->idle_time);
                fprintf(f, "| backend | CPU in the window | share of a CPU |\n|---|---|---|\n");
                for (unsigned b = 0; b < o->n_backends; b++) {
                        const IdleResult *i = &res->idle[b];
                        if (!i->ok)
                                fprintf(f, "| %s | n/a | n/a |\n", o->backends[b].name);
                        else
                                fprintf(f, "| %s | %.2f s | %.2f %% |\n", o->backends[b].name, i->cpu_s,
                                        100 * i->cpu_util);
                }
                fprintf(f, "\n");
        }
}

static void json_str(FILE *f, const char *s) {
        fputc('"', f);
        for (; s && *s; s++) {
                if (*s == '"' || *s == '\\')
                        fprintf(f, "\\%c", *s);
                else if ((unsigned char) *s < 0x20)
                        fprintf(f, "\\u%04x", *s);
                else
                        fputc(*s, f);
        }
        fputc('"', f);
}

static void json_num(FILE *f, double v) {
        if (isnan(v) || isinf(v))
                fprintf(f, "null");
        else
                fprintf(f, "%.6g", v);
}

static int write_json(const char *path, Options *o, Results *res, BareResult *bare, const char *machine) {
        FILE *f = fopen(path, "we");

        if (!f)
                return negative_errno();
        fprintf(f, "{\n  \"machine\": ");
        json_str(f, machine);
        fprintf(f, ",\n  \"config\": {\"seconds\": %g, \"warmup\": %g, \"runs\": %u, \"queues\": %u, \"queue_size\": %u, "
                   "\"file_size\": %" PRIu64 ", \"backend_cpu\": %d, \"load_cpu\": %d},\n",
                o->cfg.seconds, o->cfg.warmup, o->cfg.runs, o->cfg.queues, o->cfg.queue_size, o->cfg.file_size,
                o->cfg.backend_cpu, o->cfg.load_cpu);
        fprintf(f, "  \"backends\": [");
        for (unsigned b = 0; b < o->n_backends; b++) {
                fprintf(f, "%s{\"name\": ", b ? ", " : "");
                json_str(f, o->backends[b].name);
                fprintf(f, ", \"command\": ");
                json_str(f, o->backends[b].command ?: o->socket_path);
                fprintf(f, ", \"anchor\": %s, \"vufsd\": %s}", o->backends[b].is_anchor ? "true" : "false",
                        o->backends[b].vufsd ? "true" : "false");
        }
        fprintf(f, "],\n  \"bare\": {");
        for (unsigned w = 0, first = 1; w < _WL_MAX; w++) {
                if (!o->workloads[w] || bare[w].ops_s <= 0)
                        continue;
                fprintf(f, "%s\"%s\": {\"ops_s\": ", first ? "" : ", ", workload_name(w));
                json_num(f, bare[w].ops_s);
                fprintf(f, ", \"ns_per_op\": ");
                json_num(f, bare[w].ns_per_op);
                fprintf(f, ", \"limit_85\": ");
                json_num(f, 0.85 * bare[w].ops_s);
                fprintf(f, "}");
                first = 0;
        }
        fprintf(f, "},\n  \"results\": [");
        bool first = true;
        for (unsigned qi = 0; qi < res->n_qds; qi++)
                for (unsigned w = 0; w < _WL_MAX; w++) {
                        Median meds[MAX_BACKENDS];
                        Summary s;
                        if (!o->workloads[w])
                                continue;
                        for (unsigned b = 0; b < o->n_backends; b++)
                                compute_median(res, qi, w, b, &meds[b]);
                        summarize(o, res, qi, w, meds, bare[w].ops_s, &s);
                        for (unsigned b = 0; b < o->n_backends; b++) {
                                Median *m = &meds[b];
                                fprintf(f, "%s\n    {\"qd\": %u, \"workload\": \"%s\", \"backend\": ", first ? "" : ",",
                                        o->qds[qi], workload_name(w));
                                first = false;
                                json_str(f, o->backends[b].name);
                                fprintf(f, ", \"ok_runs\": %u, \"ops_s\": ", m->ok_runs);
                                json_num(f, m->ops_s);
                                fprintf(f, ", \"mb_s\": ");
                                json_num(f, m->mb_s);
                                fprintf(f, ", \"p50_us\": ");
                                json_num(f, m->p50_us);
                                fprintf(f, ", \"p99_us\": ");
                                json_num(f, m->p99_us);
                                fprintf(f, ", \"p999_us\": ");
                                json_num(f, m->p999_us);
                                fprintf(f, ", \"cpu_us_per_op\": ");
                                json_num(f, m->cpu_us_per_op);
                                fprintf(f, ", \"backend_cpu_util\": ");
                                json_num(f, m->backend_util);
                                fprintf(f, ", \"client_cpu_util\": ");
                                json_num(f, m->client_util);
                                fprintf(f, ", \"ratio_to_c_best\": ");
                                json_num(f, s.c_best >= 0 && m->ok_runs ? m->ops_s / s.c_ops : NAN);
                                fprintf(f, ", \"runs_ops_s\": [");
                                for (unsigned run = 0; run < res->runs; run++) {
                                        CellResult *c = cell(res, run, qi, w, b);
                                        fprintf(f, "%s", run ? ", " : "");
                                        json_num(f, c->ok ? c->ops_s : NAN);
                                }
                                fprintf(f, "]");
                                if (m->error) {
                                        fprintf(f, ", \"error\": ");
                                        json_str(f, m->error);
                                }
                                fprintf(f, "}");
                        }
                }
        fprintf(f, "\n  ],\n  \"summary\": [");
        first = true;
        for (unsigned qi = 0; qi < res->n_qds; qi++)
                for (unsigned w = 0; w < _WL_MAX; w++) {
                        Median meds[MAX_BACKENDS];
                        Summary s;
                        if (!o->workloads[w])
                                continue;
                        for (unsigned b = 0; b < o->n_backends; b++)
                                compute_median(res, qi, w, b, &meds[b]);
                        summarize(o, res, qi, w, meds, bare[w].ops_s, &s);
                        fprintf(f, "%s\n    {\"qd\": %u, \"workload\": \"%s\", \"c_best\": ", first ? "" : ",", o->qds[qi],
                                workload_name(w));
                        first = false;
                        json_str(f, s.c_best >= 0 ? o->backends[s.c_best].name : "");
                        fprintf(f, ", \"vufsd_best\": ");
                        json_str(f, s.v_best >= 0 ? o->backends[s.v_best].name : "");
                        fprintf(f, ", \"c_ops_s\": ");
                        json_num(f, s.c_best >= 0 ? s.c_ops : NAN);
                        fprintf(f, ", \"vufsd_ops_s\": ");
                        json_num(f, s.v_best >= 0 ? s.v_ops : NAN);
                        fprintf(f, ", \"ratio\": ");
                        json_num(f, s.ratio);
                        fprintf(f, ", \"target_ops_s\": ");
                        json_num(f, s.target);
                        fprintf(f, ", \"met\": %s, \"auto_over_best_fixed\": ", s.met ? "true" : "false");
                        json_num(f, s.auto_ratio);
                        fprintf(f, ", \"cpu_ratio\": ");
                        json_num(f, s.cpu_ratio);
                        fprintf(f, "}");
                }
        fprintf(f, "\n  ]");
        if (o->idle_time > 0) {
                fprintf(f, ",\n  \"idle\": [");
                for (unsigned b = 0; b < o->n_backends; b++) {
                        const IdleResult *i = &res->idle[b];
                        fprintf(f, "%s\n    {\"backend\": ", b ? "," : "");
                        json_str(f, o->backends[b].name);
                        fprintf(f, ", \"seconds\": ");
                        json_num(f, i->ok ? i->seconds : NAN);
                        fprintf(f, ", \"cpu_s\": ");
                        json_num(f, i->ok ? i->cpu_s : NAN);
                        fprintf(f, ", \"cpu_util\": ");
                        json_num(f, i->ok ? i->cpu_util : NAN);
                        fprintf(f, "}");
                }
                fprintf(f, "\n  ]");
        }
        fprintf(f, "\n}\n");
        return fclose(f) == 0 ? 0 : negative_errno();
}

/* Two rows of clustered bars per queue depth: ops/s and CPU/op relative to the C virtiofsd's best. */
static int write_png(const char *path, Options *o, Results *res, BareResult *bare, const char *topdir) {
        _cleanup_free_ char *data = NULL, *script = NULL, *cmd = NULL;
        FILE *f;
        int r;

        if (asprintf(&data, "%s/chart.dat", topdir) < 0 || asprintf(&script, "%s/chart.gp", topdir) < 0)
                return -ENOMEM;
        f = fopen(data, "we");
        if (!f)
                return negative_errno();
        /* Blocks: for each qd, ops ratio then cpu ratio; gnuplot index = 2*qi (+1). */
        for (unsigned qi = 0; qi < res->n_qds; qi++)
                for (unsigned kind = 0; kind < 2; kind++) {
                        fprintf(f, "workload");
                        for (unsigned b = 0; b < o->n_backends; b++)
                                fprintf(f, " \"%s\"", o->backends[b].name);
                        fprintf(f, "\n");
                        for (unsigned w = 0; w < _WL_MAX; w++) {
                                Median meds[MAX_BACKENDS];
                                Summary s;
                                if (!o->workloads[w])
                                        continue;
                                for (unsigned b = 0; b < o->n_backends; b++)
                                        compute_median(res, qi, w, b, &meds[b]);
                                summarize(o, res, qi, w, meds, bare[w].ops_s, &s);
                                fprintf(f, "\"%s\"", workload_name(w));
                                for (unsigned b = 0; b < o->n_backends; b++) {
                                        double v = NAN;
                                        if (meds[b].ok_runs && kind == 0)
                                                v = s.c_best >= 0 ? meds[b].ops_s / s.c_ops : meds[b].ops_s;
                                        else if (meds[b].ok_runs)
                                                v = !isnan(s.c_cpu) ? meds[b].cpu_us_per_op / s.c_cpu
                                                                    : meds[b].cpu_us_per_op;
                                        if (isnan(v))
                                                fprintf(f, " NaN");
                                        else
                                                fprintf(f, " %.4f", v);
                                }
                                fprintf(f, "\n");
                        }
                        fprintf(f, "\n\n");
                }
        fclose(f);

        f = fopen(script, "we");
        if (!f)
                return negative_errno();
        fprintf(f, "set terminal pngcairo size %u,%u font 'sans,9'\n", 560 * res->n_qds + 200, 760);
        fprintf(f, "set output '%s'\n", path);
        fprintf(f, "set multiplot layout 2,%u\n", res->n_qds);
        fprintf(f, "set style data histogram\nset style histogram clustered gap 1\n"
                   "set style fill solid 0.85 border -1\nset boxwidth 0.9\nset grid ytics\n"
                   "set xtics rotate by -40 scale 0\nset key top left font ',8'\nset datafile missing 'NaN'\n"
                   "set yrange [0:*]\nset offsets 0,0,graph 0.1,0\nset key outside right top vertical\n");
        for (unsigned kind = 0; kind < 2; kind++)
                for (unsigned qi = 0; qi < res->n_qds; qi++) {
                        fprintf(f, "set title \"%s, queue depth %u\"\n",
                                kind == 0 ? "ops/s relative to the C virtiofsd's best mode"
                                          : "backend CPU per op relative to the C virtiofsd's lowest",
                                o->qds[qi]);
                        fprintf(f, "plot for [i=2:%u] '%s' index %u using i:xtic(1) title columnheader(i), "
                                   "%s lc rgb 'black' dt 2 notitle\n",
                                o->n_backends + 1, data, 2 * qi + kind, kind == 0 ? "1.3" : "0.7");
                }
        fprintf(f, "unset multiplot\n");
        fclose(f);
        if (asprintf(&cmd, "gnuplot '%s' 2>&1", script) < 0)
                return -ENOMEM;
        r = system(cmd);
        if (r != 0) {
                fprintf(stderr, "vufs-bench: gnuplot failed (%d); data and script kept in %s\n", r, topdir);
                return -EIO;
        }
        return 0;
}

/* ---- main ---- */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig) {
        (void) sig;
        interrupted = 1;
}

int main(int argc, char *argv[]) {
        Options o = {};
        Results res = {};
        BenchBackend *backends[MAX_BACKENDS] = {};
        BareResult bare[_WL_MAX] = {};
        char machine_start[512], machine_end[512], tmpl[] = "/tmp/vufs-bench.XXXXXX";
        const char *topdir;
        unsigned failures = 0, cells_ok = 0;
        int r;

        r = parse_args(&o, argc, argv);
        if (r < 0) {
                fprintf(stderr, "vufs-bench: bad arguments (see --help): %s\n", strerror(-r));
                return 2;
        }
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        signal(SIGPIPE, SIG_IGN);
        machine_info(machine_start, sizeof machine_start);

        if (o.topdir) {
                topdir = o.topdir;
                if (mkdir(topdir, 0755) < 0 && errno != EEXIST) {
                        fprintf(stderr, "vufs-bench: mkdir %s: %m\n", topdir);
                        return 1;
                }
        } else {
                if (!mkdtemp(tmpl)) {
                        fprintf(stderr, "vufs-bench: mkdtemp: %m\n");
                        return 1;
                }
                topdir = tmpl;
        }
        (void) bench_pin_self(o.cfg.load_cpu);

        /* Bare system call rates on the backend CPU. */
        if (o.bare_time > 0) {
                _cleanup_free_ char *bdir = NULL;
                if (asprintf(&bdir, "%s/bare", topdir) < 0 || (mkdir(bdir, 0755) < 0 && errno != EEXIST))
                        return 1;
                (void) bench_pin_self(o.cfg.backend_cpu);
                for (unsigned w = 0; w < _WL_MAX && !interrupted; w++) {
                        if (!o.workloads[w])
                                continue;
                        r = bare_run(w, bdir, o.bare_time, o.cfg.file_size, &bare[w]);
                        if (r < 0)
                                fprintf(stderr, "vufs-bench: bare %s: %s\n", workload_name(w), strerror(-r));
                        else if (o.cfg.verbose)
                                fprintf(stderr, "bare %-18s %12.0f ops/s %8.0f ns/op\n", workload_name(w), bare[w].ops_s,
                                        bare[w].ns_per_op);
                }
                (void) bench_pin_self(o.cfg.load_cpu);
        }

        for (unsigned b = 0; b < o.n_backends && !interrupted; b++) {
                if (o.cfg.queues > o.backends[b].max_queues) {
                        fprintf(stderr, "vufs-bench: %s serves one request queue; skipped with --queues=%u\n",
                                o.backends[b].name, o.cfg.queues);
                        continue;
                }
                r = bench_backend_start(&backends[b], &o.backends[b], &o.cfg, topdir, o.socket_path, o.socket_pid);
                if (r < 0) {
                        fprintf(stderr, "vufs-bench: %s: %s\n", o.backends[b].name, backends[b]->error);
                        failures++;
                }
        }

        res.runs = o.cfg.runs;
        res.n_qds = o.n_qds;
        res.n_backends = o.n_backends;
        res.cells = calloc((size_t) res.runs * res.n_qds * _WL_MAX * res.n_backends, sizeof(CellResult));
        if (!res.cells)
                return 1;

        for (unsigned run = 0; run < o.cfg.runs && !interrupted; run++)
                for (unsigned qi = 0; qi < o.n_qds && !interrupted; qi++)
                        for (unsigned w = 0; w < _WL_MAX && !interrupted; w++) {
                                if (!o.workloads[w])
                                        continue;
                                /* A B C, then B C A, ...: no backend always runs first after a switch. */
                                for (unsigned k = 0; k < o.n_backends && !interrupted; k++) {
                                        unsigned b = (k + run) % o.n_backends;
                                        CellResult *c = cell(&res, run, qi, w, b);
                                        if (!backends[b]) {
                                                snprintf(c->error, sizeof c->error, "not started");
                                                continue;
                                        }
                                        r = bench_run_cell(backends[b], &o.cfg, w, o.qds[qi], c);
                                        if (r < 0) {
                                                failures++;
                                                fprintf(stderr, "vufs-bench: run %u QD %u %s %s: %s\n", run + 1,
                                                        o.qds[qi], workload_name(w), o.backends[b].name, c->error);
                                                continue;
                                        }
                                        cells_ok++;
                                        if (o.cfg.verbose || !o.smoke)
                                                fprintf(stderr,
                                                        "run %u/%u QD %-3u %-17s %-16s %10.0f ops/s %8.1f MB/s "
                                                        "p50 %7.1f p99 %8.1f µs  cpu %6.2f µs/op (%3.0f %%) client %3.0f %%\n",
                                                        run + 1, o.cfg.runs, o.qds[qi], workload_name(w),
                                                        o.backends[b].name, c->ops_s, c->mb_s, c->p50_us, c->p99_us,
                                                        c->cpu_us_per_op, 100 * c->backend_cpu_util,
                                                        100 * c->client_cpu_util);
                                }
                        }

        for (unsigned b = 0; o.idle_time > 0 && b < o.n_backends && !interrupted; b++) {
                if (!backends[b] || backends[b]->failed)
                        continue;
                r = bench_run_idle(backends[b], &o.cfg, o.idle_time, &res.idle[b]);
                if (r < 0) {
                        failures++;
                        fprintf(stderr, "vufs-bench: idle %s: %s\n", o.backends[b].name, strerror(-r));
                } else
                        fprintf(stderr, "idle %-16s %.3f s of CPU in %.1f s (%.2f %% of a CPU)\n", o.backends[b].name,
                                res.idle[b].cpu_s, res.idle[b].seconds, 100 * res.idle[b].cpu_util);
        }

        machine_info(machine_end, sizeof machine_end);
        print_markdown(stdout, &o, &res, bare, machine_start, machine_end);
        if (o.md_path) {
                FILE *f = fopen(o.md_path, "we");
                if (f) {
                        print_markdown(f, &o, &res, bare, machine_start, machine_end);
                        fclose(f);
                } else
                        fprintf(stderr, "vufs-bench: %s: %m\n", o.md_path);
        }
        if (o.json_path && write_json(o.json_path, &o, &res, bare, machine_start) < 0)
                fprintf(stderr, "vufs-bench: %s: %m\n", o.json_path);
        if (o.png_path && write_png(o.png_path, &o, &res, bare, topdir) < 0) {
                failures++;
                o.keep = true; /* the chart's data and script stay for a look */
        }

        for (unsigned b = 0; b < o.n_backends; b++)
                bench_backend_free(backends[b]);
        if (!o.keep && !o.topdir) {
                _cleanup_free_ char *cmd = NULL;
                /* Everything under the fresh mkdtemp directory is ours. */
                if (asprintf(&cmd, "rm -rf -- '%s'", topdir) >= 0)
                        (void) !system(cmd);
        }
        free(res.cells);
        if (interrupted)
                return 130;
        if (cells_ok == 0)
                return 1;
        return failures > 0 ? 1 : 0;
}
