/* bench.h: vufs-bench, a vhost-user-fs load generator built on the test frontend. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "frontend.h"
#include "fuse-client.h"

/* ---- workloads ---- */

typedef enum Workload {
        WL_GETATTR,
        WL_LOOKUP,
        WL_OPEN,      /* OPEN + RELEASE */
        WL_RANDREAD,  /* 4 KiB READ at random offsets of a cached file */
        WL_SEQREAD,   /* 128 KiB READ, sequential, wrapping */
        WL_RANDWRITE, /* 4 KiB WRITE at random offsets */
        WL_SEQWRITE,  /* 128 KiB WRITE, sequential, wrapping */
        WL_CREATE,    /* CREATE + RELEASE + UNLINK (FORGET batched on hiprio) */
        WL_READDIR,   /* OPENDIR + READDIRPLUS of 1,000 entries until empty + RELEASEDIR */
        WL_MIX,       /* 70 % 4 KiB random READ, 30 % 4 KiB random WRITE */
        _WL_MAX,
} Workload;

const char *workload_name(Workload w);
int workload_from_name(const char *s);
/* Bytes of file data one operation moves (for MB/s); 0 for metadata workloads. */
uint32_t workload_io_size(Workload w);

#define BENCH_DIR_ENTRIES 1000
#define BENCH_READDIR_BUF 4096
#define BENCH_BIG_IO (128u * 1024u)
#define BENCH_SMALL_IO 4096u

/* ---- latency histogram: log-linear, 64 sub-buckets per power of two (≤ 1.6 % error) ---- */

#define HIST_SUB 64
#define HIST_BUCKETS (HIST_SUB * 36)

typedef struct Hist {
        uint64_t count;
        uint64_t b[HIST_BUCKETS];
} Hist;

void hist_add(Hist *h, uint64_t ns);
void hist_merge(Hist *into, const Hist *from);
/* Value (ns) at quantile q in [0, 1]; 0 if empty. */
uint64_t hist_quantile(const Hist *h, double q);

/* ---- one backend under test ---- */

typedef struct BackendSpec {
        char *name;     /* column label, e.g. "vufsd-inline" */
        char *command;  /* with {socket} {dir} {queues} placeholders; NULL for --socket */
        bool is_anchor; /* the C virtiofsd: the reference the ratios use */
        bool vufsd;     /* a vufsd mode (for "vufsd best") */
        bool is_auto;   /* vufsd's auto mode (compared with the best fixed mode) */
        bool polls;     /* vufsd with a busy-poll window: a different knob than the threading mode,
                         * so auto is only compared with fixed modes that poll the same way */
        bool preset;    /* one of vufs-bench's presets: the same command line but for the threading
                         * mode and poll window, so auto is only compared with presets (a custom
                         * command may differ in more, e.g. the sandbox), and customs with customs */
        unsigned max_queues; /* request queues it can serve (virtiofsd: 1) */
} BackendSpec;

/* A connected backend with the files the workloads need. */
typedef struct BenchBackend {
        const BackendSpec *spec;
        char *dir;         /* private directory: dir/share, dir/sock */
        char *share;
        char *socket_path;
        FeBackend *proc;   /* NULL when connected to --socket */
        pid_t pid;         /* for CPU accounting; 0 = unknown */
        Frontend *fe;
        FeFuse *fuse;
        unsigned queues;   /* request queues in use */
        uint16_t raw_first; /* first raw descriptor head of the request rings */
        uint64_t small_node, data_node, wdata_node, dir_node;
        uint64_t data_fh, wdata_fh;
        uint64_t file_size;
        pthread_mutex_t hiprio_lock; /* FORGETs from several load threads share queue 0 and fuse */
        uint64_t create_seq;
        bool failed;
        char error[256];
} BenchBackend;

typedef struct BenchConfig {
        double seconds, warmup;
        unsigned runs;
        unsigned queues;
        uint64_t file_size;
        uint16_t queue_size;
        int backend_cpu, load_cpu; /* -1: no pinning */
        bool verbose;
} BenchConfig;

int bench_backend_start(BenchBackend **ret, const BackendSpec *spec, const BenchConfig *cfg, const char *topdir,
                        const char *socket_path, pid_t pid);
BenchBackend *bench_backend_free(BenchBackend *b);

/* ---- one measured cell: a backend, a workload, a queue depth ---- */

typedef struct CellResult {
        bool ok;
        char error[256];
        double seconds;         /* measured window */
        uint64_t ops, requests, bytes;
        double ops_s, mb_s;
        double p50_us, p99_us, p999_us;
        double cpu_us_per_op;   /* backend CPU (all threads and children) per op; < 0 unknown */
        double backend_cpu_util; /* backend CPU seconds per wall second */
        double client_cpu_util;  /* load generator CPU seconds per wall second */
} CellResult;

int bench_run_cell(BenchBackend *b, const BenchConfig *cfg, Workload w, unsigned qd, CellResult *ret);

/* A connected guest doing nothing: a burst of getattr at QD 1 (so an adaptive poller has learnt
 * the guest's pace and may be spinning when it stops), then seconds with nothing sent, over which
 * the backend's CPU is measured. */
typedef struct IdleResult {
        bool ok;
        double seconds;     /* measured window */
        double cpu_s;       /* backend CPU seconds (all threads and children) in it */
        double cpu_util;    /* cpu_s / seconds */
} IdleResult;

int bench_run_idle(BenchBackend *b, const BenchConfig *cfg, double seconds, IdleResult *ret);

/* ---- process CPU ---- */

/* CPU time in ns (utime + stime, plus that of reaped children) of pid and all its descendants,
 * threads included; -1 if pid is gone. */
int64_t proc_tree_cpu_ns(pid_t pid);

/* ---- the bare syscall loops behind each workload (bare.c) ---- */

typedef struct BareResult {
        double ops_s;
        double ns_per_op;
} BareResult;

/* Runs the syscalls a passthrough backend needs for one operation of w, in a loop on this thread
 * for seconds, in a scratch directory under dir. */
int bare_run(Workload w, const char *dir, double seconds, uint64_t file_size, BareResult *ret);
const char *bare_describe(Workload w);

/* ---- small helpers ---- */

uint64_t bench_now_ns(void);
int bench_pin_self(int cpu);
