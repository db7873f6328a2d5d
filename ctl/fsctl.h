/* fsctl.h: what the parts of fsctl share: exit codes, the command line's settings, the properties
 * and statistics read from an instance, and each part's entry points. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <systemd/sd-bus.h>

#include "stats-histogram.h" /* the latency buckets GetStatistics sends */

/* Exit codes (fsctl(1) documents them). Everything below returns 0 or a negative errno, printing
 * its own message; exit_status() alone turns that into one of these. */
enum {
        EXIT_OK = 0,
        EXIT_FAILED = 1,       /* the call failed for another reason */
        EXIT_USAGE = 2,        /* bad command line or a value the daemon refused */
        EXIT_NO_INSTANCE = 3,  /* no such instance, or none / several when -i is omitted */
        EXIT_DENIED = 4,       /* the bus policy or the daemon refused the caller */
        EXIT_UNREACHABLE = 5,  /* no bus to talk to */
};

#define HIST_BUCKETS STATS_HIST_BUCKETS

/* The errno that stands for each exit code (what exit_status() maps back). */
#define ERR_USAGE (-EINVAL)           /* EXIT_USAGE */
#define ERR_NO_INSTANCE (-ENXIO)      /* EXIT_NO_INSTANCE */
#define ERR_DENIED (-EACCES)          /* EXIT_DENIED */
#define ERR_UNREACHABLE (-EHOSTUNREACH) /* EXIT_UNREACHABLE */
#define ERR_FAILED (-EIO)             /* EXIT_FAILED */

/* The command line's settings (fsctl.c parses them; the other parts only read them). */
typedef enum BusType { BUS_SYSTEM, BUS_USER, BUS_ADDRESS } BusType;
extern BusType arg_bus_type;
extern const char *arg_address;
extern const char *arg_instance;
extern bool arg_json;
extern bool arg_quiet;
extern bool arg_watch;
extern bool arg_openmetrics;   /* stats --format=openmetrics */
extern bool arg_all;           /* stats --all: every instance on the bus */
extern const char *arg_output; /* --output=PATH: written atomically instead of to stdout */
extern double arg_interval;
extern long arg_count; /* --count: refreshes before --watch stops; -1 = until interrupted */
extern long arg_size;  /* set-threads --size */

int parse_number(const char *s, long max, long *ret);

/* ---- instance.c: connecting, finding an instance, calling it ---- */

const char *bus_label(void);
int bus_error_errno(const sd_bus_error *e, int r, const char *what);
int open_bus(sd_bus **ret);
void strv_free(char **l);
void strv_freep(char ***l);
int list_instance_names(sd_bus *bus, char ***ret);
int resolve_target(sd_bus *bus, char **ret_name);
int check_owner(sd_bus *bus, const char *name);
int call_simple(sd_bus *bus, const char *name, const char *what, const char *method, const char *sig, ...);

/* ---- properties.c: the instance's properties ---- */

typedef struct Props {
        char *instance, *version, *shared_directory, *socket, *thread_mode, *cache_policy;
        char *poll_mode; /* PollMode ("auto", "fixed", "off"); NULL for a daemon without it */
        char **options;
        uint32_t request_queues, connections, running_queues, pool_size;
        uint32_t poll_usec; /* PollUSec; has_poll_usec false for a daemon without it */
        uint64_t features, protocol_features, uptime_usec, in_flight;
        /* FdsUsed, FdBudgetMax, NodesUsed, NodeBudgetMax; has_budgets false for a daemon without them */
        uint64_t fds_used, fd_budget_max, nodes_used, node_budget_max;
        /* InodeFdsCached, InodeFdsMax; has_inode_fds false for a daemon without them */
        uint64_t inode_fds_cached, inode_fds_max;
        int connected;
        bool has_poll_usec, has_budgets, has_inode_fds;
        /* Restarts, LastRestartPauseUSec; has_restarts false for a daemon without them */
        uint32_t restarts;
        uint64_t restart_pause_usec;
        bool has_restarts;
        /* Upgrades, UpgradeFailures, LastUpgradePauseUSec; has_upgrades false for a daemon without them */
        uint32_t upgrades, upgrade_failures;
        uint64_t upgrade_pause_usec;
        bool has_upgrades;
        /* LastTakeoverReplayed, LastTakeoverNodes, LastTakeoverHandles; has_takeover likewise */
        uint64_t takeover_replayed, takeover_nodes, takeover_handles;
        bool has_takeover;
        /* LocksPending, LocksLost; has_locks likewise */
        uint64_t locks_pending, locks_lost;
        bool has_locks;
} Props;

void props_done(Props *p);
int get_all_properties(sd_bus *bus, const char *name, Props *p, sd_bus_error *error);

/* ---- statistics.c: one GetStatistics snapshot ---- */

typedef struct Row {
        uint32_t index;
        char *name;
        uint64_t requests, bytes, errors;
        uint64_t hist[HIST_BUCKETS];
        uint64_t latency_sum_us; /* GetLatencySums (opcode rows); has_sum false for a daemon without it */
        bool has_sum;
} Row;

/* One entry of GetErrorCounts: failed requests by errno (0: beyond the daemon's table). */
typedef struct ErrnoCount {
        uint32_t code;
        uint64_t count;
} ErrnoCount;

typedef struct Snapshot {
        uint64_t timestamp, in_flight;
        char *thread_mode;
        uint32_t pool_size;
        uint32_t poll_usec; /* the PollUSec property next to the snapshot */
        bool has_poll_usec;
        bool poll_auto; /* PollMode is "auto" */
        size_t n_exec;
        char *exec_name[32];
        uint64_t exec_value[32];
        Row *ops, *queues;
        size_t n_ops, n_queues;
        ErrnoCount *errnos; /* GetErrorCounts, by errno; has_errnos false for a daemon without it */
        size_t n_errnos;
        bool has_errnos;
        uint32_t restarts; /* the Restarts property next to the snapshot; has_restarts: the daemon has it */
        uint64_t restart_pause_usec;
        bool has_restarts;
        uint32_t upgrades; /* Upgrades and LastUpgradePauseUSec likewise */
        uint64_t upgrade_pause_usec;
        bool has_upgrades;
        /* LastTakeoverReplayed, LastTakeoverNodes, LastTakeoverHandles; LocksPending, LocksLost */
        uint64_t takeover_replayed, takeover_nodes, takeover_handles;
        bool has_takeover;
        uint64_t locks_pending, locks_lost;
        bool has_locks;
} Snapshot;

void snapshot_done(Snapshot *s);
int get_statistics(sd_bus *bus, const char *name, Snapshot *s, sd_bus_error *error);
/* An errno's name for output: "ENOENT", "other" for 0, the number when it has no name. buf holds
 * the number; at least 12 bytes. */
const char *errno_label(uint32_t code, char *buf, size_t size);

/* ---- output.c: tables and JSON ---- */

void json_props(FILE *f, const char *bus_name, const Props *p);
void print_status(const char *bus_name, const Props *p);
void print_snapshot(const Snapshot *s);
void print_watch(const Snapshot *prev, const Snapshot *cur, bool tty);

/* ---- openmetrics.c: stats --format=openmetrics ---- */

/* Writes the statistics of the instance name, or of every instance when name is NULL, in the
 * Prometheus text format, to stdout or atomically to arg_output. */
int openmetrics_stats(sd_bus *bus, const char *name);

/* ---- verbs.c: one function per verb (the table is in fsctl.c) ---- */

int verb_list(sd_bus *bus, const char *name, char **args);
int verb_status(sd_bus *bus, const char *name, char **args);
int verb_set_threads(sd_bus *bus, const char *name, char **args);
int verb_set_cache(sd_bus *bus, const char *name, char **args);
int verb_set_poll_us(sd_bus *bus, const char *name, char **args);
int verb_reset_stats(sd_bus *bus, const char *name, char **args);
int verb_upgrade(sd_bus *bus, const char *name, char **args);
int verb_stats(sd_bus *bus, const char *name, char **args);
