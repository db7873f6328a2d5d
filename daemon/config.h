/* config.h: everything vufsd is started with: defaults, then the command line (native options and
 * the virtiofsd-compatible forms libvirt uses). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fs-options.h"

typedef struct Config {
        char *socket_path;  /* --socket-path */
        int listen_fd;      /* --fd, -1 if not given */
        char *socket_group; /* --socket-group */
        char *shared_dir;   /* --shared-dir / -o source= */
        unsigned n_request_queues;
        bool keep_listening;
        int log_level;
        bool print_capabilities;

        int thread_pool_size; /* --thread-pool-size, -1 = not given */
        char *threads;        /* --threads inline|pool|auto */
        unsigned poll_us;     /* --poll-us: busy-poll window of the request queues, 0 = off */
        uint64_t rlimit_nofile;
        char *sandbox;
        char *seccomp;      /* --seccomp kill|log|trap|none; NULL = kill (none in sanitizer builds) */
        char *modcaps;      /* --modcaps +cap:-cap (capabilities.h) */
        char *instance;
        char *bus;          /* --bus system|session|none|ADDRESS; NULL = system as root, else session */
        char *bus_user;     /* --bus-user: identity of the bus connection; NULL = vufsd-bus for the system bus */
        char *config_file; /* --config: per-instance file (see config-file.h) */

        FsOptions fs;
} Config;

void config_init(Config *c);
void config_done(Config *c);

/* Parses argv into c. Returns 0 to run, 1 when the command already did its job (--help,
 * --version, --print-capabilities), negative errno after printing what is wrong. */
int config_parse_argv(Config *c, int argc, char *argv[]);

/* Applies one "-o" argument (virtiofsd's comma-separated list; ",," is a literal comma, as libvirt
 * escapes paths). Prints what is wrong; negative errno on failure. */
int config_parse_o(Config *c, const char *arg);

/* Checks the combination of options once everything is parsed. */
int config_verify(const Config *c);
