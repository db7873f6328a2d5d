/* config.h: everything vufsd is started with: defaults, then the command line (vufsd's own options,
 * the Rust virtiofsd's and the C virtiofsd's -o forms), parsed once into typed values. Nothing
 * downstream parses strings again: main.c, the manager and the executor read these fields. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "executor.h"
#include "id-translate.h"
#include "fs-options.h"
#include "sandbox.h"
#include "seccomp-filter.h"
#include "xattr-map.h"

/* Exit status for a command line that cannot be used (clap's and getopt programs' convention). */
#define EXIT_USAGE 2

typedef enum MigrationMode {
        MIGRATION_FIND_PATHS,
        MIGRATION_FILE_HANDLES,
        _MIGRATION_MODE_MAX,
        _MIGRATION_MODE_INVALID = -EINVAL,
} MigrationMode;

typedef enum MigrationOnError {
        MIGRATION_ON_ERROR_ABORT,
        MIGRATION_ON_ERROR_GUEST_ERROR,
        _MIGRATION_ON_ERROR_MAX,
        _MIGRATION_ON_ERROR_INVALID = -EINVAL,
} MigrationOnError;

/* --uid-map/--gid-map entries: IdMapEntry and IdMapList in userns.h (via sandbox.h). */

const char *inode_file_handles_to_string(InodeFileHandles m);
InodeFileHandles inode_file_handles_from_string(const char *s);
const char *migration_mode_to_string(MigrationMode m);
MigrationMode migration_mode_from_string(const char *s);
#define MIGRATION_LOCK_TIMEOUT_DEFAULT_SEC 10u
#define MIGRATION_LOCK_TIMEOUT_MAX_SEC 3600u
const char *migration_on_error_to_string(MigrationOnError m);
MigrationOnError migration_on_error_from_string(const char *s);

#define CONFIG_MAX_ID_ENTRIES ID_MAP_MAX_ENTRIES
#define CONFIG_MAX_TAG_LEN 36 /* the virtio-fs config space's tag[36] */

/* --translate-uid/--translate-gid: the entries as given (n counts them) and the table they build
 * (fs.translate_uid/gid point at it when it translates anything). */
typedef struct IdTranslateList {
        unsigned n;
        IdTranslate table;
} IdTranslateList;

typedef struct Config {
        /* Listening */
        char *socket_path; /* --socket-path (or the deprecated --socket, -o vhost_user_socket=) */
        int listen_fd; /* --fd, -1 if not given */
        char *socket_group; /* --socket-group */
        bool keep_listening;
        pid_t main_pid; /* written to SOCK.pid: the process the launcher started (main.c sets it) */

        /* Filesystem */
        char *shared_dir; /* --shared-dir / -o source=; absolute after config_verify() */
        char *tag; /* --tag: the device's config space tag (GET_CONFIG), NULL = none */
        XattrMap *xattrmap; /* --xattrmap / -o xattrmap= (fs.xattrmap points here) */
        unsigned n_request_queues;
        FeatureMode posix_acl_mode; /* --posix-acl[=MODE] */
        FeatureMode security_label_mode; /* --security-label[=MODE] */

        /* Threads: --threads (or -1 when not given) and --thread-pool-size (-1 when not given),
         * resolved by config_verify() into thread_mode and pool_size. */
        int threads_given;
        int thread_pool_size_given;
        ThreadMode thread_mode;
        unsigned pool_size;
        unsigned crash_restarts; /* --crash-restarts: serving processes started again per minute, 0 = off */
        unsigned poll_us; /* --poll-us: busy-poll window of the request queues in µs, 0 = off,
                           * DEVICE_POLL_AUTO (the default) = adaptive */

        /* Process and confinement */
        uint64_t rlimit_nofile; /* 0 = leave the limit to passthrough_raise_fd_limit()'s default */
        SandboxMode sandbox;
        bool sandbox_given; /* --sandbox or [Security] Sandbox= was given: a map does not change it */
        SyscallFilter seccomp;
        uint64_t capabilities; /* kept capabilities: the default set with --modcaps applied */
        /* --modcaps as two masks, so that the default it applies to (which
         * --privileged-files=allow widens) may be settled after it: capabilities =
         * (default | modcaps_add) & modcaps_keep. */
        uint64_t modcaps_add, modcaps_keep;
        IdMapList uid_map, gid_map;
        /* --privileged-files-key: the key file of map mode (NULL: privileged_key_default_path()),
         * read before the sandbox into fs.privileged_key (privileged-key.h). */
        char *privileged_key_file;
        IdTranslateList translate_uid, translate_gid;

        /* Live migration (migration.c, docs/migration.md) */
        MigrationMode migration_mode;
        MigrationOnError migration_on_error;
        bool migration_verify_handles;
        bool migration_confirm_paths;
        /* --migration-lock-timeout: a lock the load finds held on this host is retried this long */
        unsigned migration_lock_timeout_sec;
        bool migration_given; /* any --migration-* option: main.c says what it means */

        /* Logging */
        int log_level;
        bool log_level_given; /* --log-level/-d/-o log_level: RUST_LOG applies only without one */
        bool syslog; /* --syslog */

        /* Control */
        char *instance;
        char *bus; /* --bus system|session|none|ADDRESS; NULL = system as root, else session */
        char *bus_user; /* --bus-user: identity of the bus connection; NULL = vufsd-bus for the system bus */
        char *config_file; /* --config: per-instance file (see config-file.h) */

        /* Deprecated forms seen (a warning each once logging is set up) */
        bool deprecated_socket, deprecated_o, deprecated_d, deprecated_f, deprecated_fallback;
        bool handles_dropped_by_modcaps; /* prefer turned into never by --modcaps=-dac_read_search */

        FsOptions fs;
} Config;

void config_init(Config *c);
void config_done(Config *c);

/* Parses argv into c. Returns 0 to run, 1 when the command already did its job (--help,
 * --version, --print-capabilities), negative errno after printing what is wrong with the option
 * named (the caller exits with EXIT_USAGE). Repeated options: the last one wins. */
int config_parse_argv(Config *c, int argc, char *argv[]);

/* Applies one "-o" argument (comma-separated list; ",," is a literal comma, as libvirt escapes
 * paths for the C virtiofsd). Prints what is wrong; negative errno on failure. */
int config_parse_o(Config *c, const char *arg);

/* Applies RUST_LOG's level (env_logger syntax: "debug", "virtiofsd=debug,info") unless a level was
 * given on the command line, as the Rust virtiofsd lets RUST_LOG win over its default. */
void config_apply_rust_log(Config *c, const char *value);

/* Checks the combination of options once everything is parsed, resolves relative paths and the
 * thread mode, and refuses (with a message naming the option) what is accepted on the command line
 * but not implemented with the requested value. Returns 0 or -EINVAL. */
int config_verify(Config *c);

/* The thread mode and pool size from --threads (-1 if not given) and --thread-pool-size (-1 if not
 * given), with virtiofsd's meaning of the size alone: 0 = inline, N = pool of N. -EINVAL/-ERANGE
 * (with a message in *ret_error) for combinations that make no sense. */
int config_resolve_threads(int threads, int pool_size, ThreadMode *ret_mode, unsigned *ret_size,
                           const char **ret_error);

/* Parsers of the single values, exported for the tests and the fuzz target. 0 or -EINVAL. */
int config_parse_id_map(const char *s, IdMapEntry *ret);

/* The same with the reason in *ret_why (static text naming the field or the rule): -EINVAL for
 * syntax and count 0, -ERANGE for numbers or ranges past 2^32 - 1. */
int id_map_parse(const char *s, IdMapEntry *ret, const char **ret_why);

/* Appends e to l unless its namespace or host range overlaps an entry's (-EEXIST) or l is full
 * (-E2BIG, ID_MAP_MAX_ENTRIES); *ret_why says which. */
int id_map_add(IdMapList *l, const IdMapEntry *e, const char **ret_why);
int config_parse_id_translate(const char *s, IdTranslateEntry *ret);
/* "auto" (DEVICE_POLL_AUTO) or 0..DEVICE_MAX_POLL_US: --poll-us and [Threads] PollUSec=. */
int config_parse_poll_us(const char *s, unsigned *ret);

/* The i-th long option the parser accepts (without "--"), NULL past the last: the tests check
 * --help, the man page and docs/launchers.md against this list. */
const char *config_option_name(size_t i);
