/* config.c: defaults and command-line parsing: vufsd's own options and the Rust virtiofsd 1.14
 * long options (the -o forms are in config-compat.c, value parsers in config-values.c, the ID maps in
 * config-idmap.c, the checks of the result in config-verify.c). One table holds every option with
 * its help text: --help, the option list the tests compare with the man page and
 * docs/launchers.md, and getopt's table all come from it. */
#include "config-internal.h"
#include "bus.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <syslog.h>
#include <unistd.h>

#include "capabilities.h"
#include "config-file.h"
#include "device.h"
#include "dir-stream.h"
#include "log.h"

static const char *const inode_file_handles_table[_INODE_FILE_HANDLES_MAX] = {
        [INODE_FILE_HANDLES_NEVER] = "never",
        [INODE_FILE_HANDLES_PREFER] = "prefer",
        [INODE_FILE_HANDLES_MANDATORY] = "mandatory",
};
DEFINE_STRING_TABLE_LOOKUP(inode_file_handles, InodeFileHandles, _INODE_FILE_HANDLES_MAX);

static const char *const migration_mode_table[_MIGRATION_MODE_MAX] = {
        [MIGRATION_FIND_PATHS] = "find-paths",
        [MIGRATION_FILE_HANDLES] = "file-handles",
};
DEFINE_STRING_TABLE_LOOKUP(migration_mode, MigrationMode, _MIGRATION_MODE_MAX);

static const char *const migration_on_error_table[_MIGRATION_ON_ERROR_MAX] = {
        [MIGRATION_ON_ERROR_ABORT] = "abort",
        [MIGRATION_ON_ERROR_GUEST_ERROR] = "guest-error",
};
DEFINE_STRING_TABLE_LOOKUP(migration_on_error, MigrationOnError, _MIGRATION_ON_ERROR_MAX);

void config_init(Config *c) {
        *c = (Config){
                .listen_fd = -1,
                .n_request_queues = 1,
                .log_level = LOG_INFO,
                .threads_given = -1,
                .thread_pool_size_given = -1,
                .sandbox = sandbox_mode_default(),
                .seccomp = syscall_filter_default(),
                .capabilities = capabilities_default(false),
                .modcaps_keep = UINT64_MAX,
                .poll_us = DEVICE_POLL_AUTO,
                .posix_acl_mode = FEATURE_NEVER,
                .security_label_mode = FEATURE_NEVER,
                .migration_mode = MIGRATION_FIND_PATHS,
                .migration_on_error = MIGRATION_ON_ERROR_ABORT,
                .migration_lock_timeout_sec = MIGRATION_LOCK_TIMEOUT_DEFAULT_SEC,
                .fs = FS_OPTIONS_DEFAULT,
        };
}

void config_done(Config *c) {
        if (c->fs.has_shared_dir_fd)
                safe_close(c->fs.shared_dir_fd);
        free(c->socket_path);
        free(c->socket_group);
        free(c->shared_dir);
        free(c->tag);
        xattr_map_free(c->xattrmap);
        free(c->instance);
        free(c->bus);
        free(c->bus_user);
        free(c->config_file);
        free(c->privileged_key_file);
        *c = (Config){};
}



static void print_capabilities(void) {
        /* The vhost-user backend description libvirt reads, with the Rust virtiofsd's feature names
         * in its order; only what is really implemented. "posix-acl-negotiation-mode" and
         * "security-label-negotiation-mode": --posix-acl[=never|auto|always] and
         * --security-label[=MODE] are parsed and negotiated (set_feature_mode()).
         * "separate-options": libvirt may pass --shared-dir, --cache, --sandbox, --xattr,
         * --thread-pool-size, --rlimit-nofile, --log-level and the id maps as separate arguments
         * instead of "-o" (tests/compat serves a guest both ways). "migrate-precopy": the session
         * moves with the VM through vhost-user DEVICE_STATE (docs/migration.md), which libvirt
         * needs to see before it migrates a VM with this share. */
        printf("{\n"
               "  \"type\": \"fs\",\n"
               "  \"features\": [\n"
               "    \"migrate-precopy\",\n"
               "    \"posix-acl-negotiation-mode\",\n"
               "    \"security-label-negotiation-mode\",\n"
               "    \"separate-options\"\n"
               "  ]\n"
               "}\n");
}

/* Every option: getopt's table, --help and config_long_options come from here. */
enum {
        ARG_SOCKET_PATH = 0x100,
        ARG_SOCKET,
        ARG_FD,
        ARG_SOCKET_GROUP,
        ARG_KEEP_LISTENING,
        ARG_SHARED_DIR,
        ARG_TAG,
        ARG_CACHE,
        ARG_QUEUES,
        ARG_XATTR,
        ARG_POSIX_ACL,
        ARG_SECURITY_LABEL,
        ARG_XATTRMAP,
        ARG_READONLY,
        ARG_ANNOUNCE_SUBMOUNTS,
        ARG_NO_ANNOUNCE_SUBMOUNTS,
        ARG_ALLOW_DIRECT_IO,
        ARG_ALLOW_MMAP,
        ARG_NO_READDIRPLUS,
        ARG_WRITEBACK,
        ARG_KILLPRIV_V2,
        ARG_NO_KILLPRIV_V2,
        ARG_PRESERVE_NOATIME,
        ARG_INODE_FILE_HANDLES,
        ARG_ALLOW_HANDLES_BEYOND_SHARE,
        ARG_THREAD_POOL_SIZE,
        ARG_THREADS,
        ARG_POLL_US,
        ARG_CRASH_RESTARTS,
        ARG_SANDBOX,
        ARG_SECCOMP,
        ARG_MODCAPS,
        ARG_RLIMIT_NOFILE,
        ARG_UID_MAP,
        ARG_GID_MAP,
        ARG_TRANSLATE_UID,
        ARG_TRANSLATE_GID,
        ARG_MIGRATION_MODE,
        ARG_MIGRATION_ON_ERROR,
        ARG_MIGRATION_VERIFY_HANDLES,
        ARG_MIGRATION_CONFIRM_PATHS,
        ARG_MIGRATION_LOCK_TIMEOUT,
        ARG_INSTANCE,
        ARG_CONFIG,
        ARG_BUS,
        ARG_BUS_USER,
        ARG_DIR_BUFFER_MAX,
        ARG_MAX_NODES,
        ARG_MAX_INODE_FDS,
        ARG_ALLOW_PRIVILEGED_FILES,
        ARG_PRIVILEGED_FILES,
        ARG_PRIVILEGED_KEY,
        ARG_LOG_LEVEL,
        ARG_SYSLOG,
        ARG_PRINT_CAPS,
};

typedef struct OptionDef {
        const char *name; /* NULL: a section heading (help) */
        int has_arg;
        int id;
        const char *metavar;
        const char *help;
} OptionDef;

#define SECTION(title)                                                                                                \
        { NULL, 0, 0, NULL, title }

static const OptionDef option_defs[] = {
        SECTION("Listening (exactly one of --socket-path, --fd, systemd socket activation)"),
        { "socket-path", required_argument, ARG_SOCKET_PATH, "PATH",
          "create and listen on a unix socket; PATH.pid holds the pid, locked (a stale socket is replaced)" },
        { "socket", required_argument, ARG_SOCKET, "PATH", "deprecated name of --socket-path" },
        { "fd", required_argument, ARG_FD, "N", "serve on an already listening socket (libvirt, Kata, mkosi)" },
        { "socket-group", required_argument, ARG_SOCKET_GROUP, "GROUP", "group owning the --socket-path socket" },
        { "keep-listening", no_argument, ARG_KEEP_LISTENING, NULL,
          "accept a new frontend after a disconnect instead of exiting" },
        SECTION("Filesystem"),
        { "shared-dir", required_argument, ARG_SHARED_DIR, "DIR",
          "the directory to share (required; may be relative)" },
        { "tag", required_argument, ARG_TAG, "TAG",
          "tag in the device's config space (1..36 bytes), read by VMMs through VHOST_USER_GET_CONFIG" },
        { "cache", required_argument, ARG_CACHE, "POLICY", "never (or none), metadata, auto (default), always" },
        { "num-request-queues", required_argument, ARG_QUEUES, "N", "request queues served (default 1)" },
        { "xattr", no_argument, ARG_XATTR, NULL, "enable extended attributes" },
        { "posix-acl", optional_argument, ARG_POSIX_ACL, "[=MODE]",
          "POSIX ACLs: never (default), auto (if the share supports them), always (bare flag); implies --xattr" },
        { "security-label", optional_argument, ARG_SECURITY_LABEL, "[=MODE]",
          "security label on creation (FUSE_SECURITY_CTX): never (default), auto, always (bare flag); implies "
          "--xattr" },
        { "xattrmap", required_argument, ARG_XATTRMAP, "RULES",
          "rename extended attributes between guest and host (virtiofsd's rules, e.g. :map::user.virtiofs.:)" },
        { "readonly", no_argument, ARG_READONLY, NULL, "refuse every change (EROFS)" },
        { "announce-submounts", no_argument, ARG_ANNOUNCE_SUBMOUNTS, NULL,
          "tell the guest which directories are mount points (default)" },
        { "no-announce-submounts", no_argument, ARG_NO_ANNOUNCE_SUBMOUNTS, NULL, "do not announce submounts" },
        { "allow-direct-io", no_argument, ARG_ALLOW_DIRECT_IO, NULL, "honour the guest's O_DIRECT on the host" },
        { "allow-mmap", no_argument, ARG_ALLOW_MMAP, NULL,
          "with --cache=never or metadata: let the guest mmap files shared (FUSE_DIRECT_IO_ALLOW_MMAP)" },
        { "no-readdirplus", no_argument, ARG_NO_READDIRPLUS, NULL,
          "do not offer READDIRPLUS (it is off with --cache=never)" },
        { "writeback", no_argument, ARG_WRITEBACK, NULL, "offer the guest a writeback cache" },
        { "killpriv-v2", no_argument, ARG_KILLPRIV_V2, NULL, "offer FUSE_HANDLE_KILLPRIV_V2" },
        { "no-killpriv-v2", no_argument, ARG_NO_KILLPRIV_V2, NULL, "do not offer FUSE_HANDLE_KILLPRIV_V2 (default)" },
        { "preserve-noatime", no_argument, ARG_PRESERVE_NOATIME, NULL,
          "pass the guest's O_NOATIME on instead of dropping it" },
        { "inode-file-handles", required_argument, ARG_INODE_FILE_HANDLES, "=MODE",
          "never (an O_PATH fd per inode), prefer (default: inodes remembered by file handle where the share "
          "allows, else by fd), mandatory (refuse to start without handles); needs the '='" },
        { "allow-handles-beyond-share", no_argument, ARG_ALLOW_HANDLES_BEYOND_SHARE, NULL,
          "use file handles also when the shared directory is a subtree of its filesystem (they can reach all of "
          "it: docs/security.md)" },
        SECTION("Threads"),
        { "thread-pool-size", required_argument, ARG_THREAD_POOL_SIZE, "N",
          "workers for pool/auto, 1..1024; without --threads: 0 = inline, N = pool of N (virtiofsd)" },
        { "threads", required_argument, ARG_THREADS, "MODE",
          "inline (default): queue threads run requests in guest order; pool; auto" },
        { "poll-us", required_argument, ARG_POLL_US, "N|auto",
          "busy-poll the request queues N microseconds, 0 = off (default auto: adaptive)" },
        SECTION("Process and confinement"),
        { "sandbox", required_argument, ARG_SANDBOX, "MODE",
          "namespace (default; unprivileged in a user namespace), chroot, none" },
        { "seccomp", required_argument, ARG_SECCOMP, "ACTION", "kill (default), log, trap, none" },
        { "modcaps", required_argument, ARG_MODCAPS, "+CAP:-CAP", "add to or remove from the capabilities kept" },
        { "privileged-files", required_argument, ARG_PRIVILEGED_FILES, "MODE",
          "set-id files, device nodes and file capabilities the guest makes: map (default: kept as metadata the "
          "guest sees and the host does not act on), refuse (stripped/EPERM), allow (made for real; the share is "
          "mounted suid,dev in the sandbox); see docs/security.md" },
        { "allow-privileged-files", no_argument, ARG_ALLOW_PRIVILEGED_FILES, NULL, "the same as --privileged-files=allow" },
        { "privileged-files-key", required_argument, ARG_PRIVILEGED_KEY, "PATH",
          "the key map mode authenticates its metadata with, made (0600) if missing (default: "
          "$STATE_DIRECTORY/privileged-files.key, else /var/lib/vufsd/ as root, $XDG_STATE_HOME/vufsd/ or "
          "~/.local/state/vufsd/ as a user)" },
        { "crash-restarts", required_argument, ARG_CRASH_RESTARTS, "N",
          "when the serving process dies of a signal, start another that takes over the guest's connection, "
          "memory and rings, at most N times a minute (default 0: vufsd exits; docs/survival.md)" },
        { "dir-buffer-max", required_argument, ARG_DIR_BUFFER_MAX, "BYTES",
          "directory read-ahead kept for all open directories (default 64 MiB, at least 16384)" },
        { "max-nodes", required_argument, ARG_MAX_NODES, "N",
          "inodes the guest may make vufsd remember at once, with or without an fd (default 1000000, "
          "about 470 MB; at least 16); past it lookups answer ENFILE" },
        { "max-inode-fds", required_argument, ARG_MAX_INODE_FDS, "N",
          "O_PATH fds kept open for inodes at once; the others are re-opened by name from their parent "
          "(default a quarter of the fd budget, at most 16384; at least 1)" },
        { "rlimit-nofile", required_argument, ARG_RLIMIT_NOFILE, "N", "open-file limit to set (0 leaves it)" },
        { "uid-map", required_argument, ARG_UID_MAP,
          ":NS:HOST:COUNT:", "user namespace uid mapping, repeatable; must map namespace uid 0 (docs/id-mapping.md)" },
        { "gid-map", required_argument, ARG_GID_MAP, ":NS:HOST:COUNT:", "the same for gids" },
        { "translate-uid", required_argument, ARG_TRANSLATE_UID, "TYPE:SRC:DST:N",
          "uid translation without a user namespace, repeatable: TYPE guest, host, squash-guest, squash-host, "
          "map, or forbid-guest:SRC:N" },
        { "translate-gid", required_argument, ARG_TRANSLATE_GID, "TYPE:SRC:DST:N", "the same for gids" },
        SECTION("Live migration through vhost-user DEVICE_STATE (docs/migration.md)"),
        { "migration-mode", required_argument, ARG_MIGRATION_MODE, "MODE", "find-paths (default), file-handles" },
        { "migration-on-error", required_argument, ARG_MIGRATION_ON_ERROR, "ACTION", "abort (default), guest-error" },
        { "migration-verify-handles", no_argument, ARG_MIGRATION_VERIFY_HANDLES, NULL, "find-paths only" },
        { "migration-confirm-paths", no_argument, ARG_MIGRATION_CONFIRM_PATHS, NULL, "find-paths only" },
        { "migration-lock-timeout", required_argument, ARG_MIGRATION_LOCK_TIMEOUT, "SECONDS",
          "how long a lock held elsewhere on the destination's host is retried before it is lost (default 10)" },
        SECTION("Configuration and control"),
        { "instance", required_argument, ARG_INSTANCE, "NAME",
          "instance name (systemd: %i); reads " VUFSD_CONFIG_DIR "/NAME.conf when it exists" },
        { "config", required_argument, ARG_CONFIG, "FILE", "read this configuration file (the command line wins)" },
        { "bus", required_argument, ARG_BUS, "BUS",
          "system, session, none or a D-Bus address for the control interface" },
        { "bus-user", required_argument, ARG_BUS_USER, "USER",
          "identity of the bus connection when run as root (default vufsd-bus, for the system bus; never root)" },
        SECTION("Logging and information"),
        { "log-level", required_argument, ARG_LOG_LEVEL, "LEVEL",
          "error, warn, info (default), debug, trace, off; RUST_LOG applies when not given" },
        { "syslog", no_argument, ARG_SYSLOG, NULL, "log to syslog (the journal) instead of stderr" },
        { "debug", no_argument, 'd', NULL, "same as --log-level=debug (also -d)" },
        { "print-capabilities", no_argument, ARG_PRINT_CAPS, NULL,
          "print the vhost-user backend capabilities (JSON)" },
        { "help", no_argument, 'h', NULL, "show this help (also -h)" },
        { "version", no_argument, 'V', NULL, "show the version (also -V)" },
};

const char *config_option_name(size_t i) {
        for (size_t k = 0; k < ELEMENTSOF(option_defs); k++)
                if (option_defs[k].name && i-- == 0)
                        return option_defs[k].name;
        return NULL;
}

static void help(void) {
        printf("Usage: vufsd [OPTIONS] --shared-dir DIR (--socket-path PATH | --fd N | socket activation)\n"
               "\n"
               "A virtio-fs vhost-user backend: serves DIR to a virtual machine over the vhost-user\n"
               "socket its VMM connects to. Accepts the Rust virtiofsd's and QEMU's C virtiofsd's\n"
               "command lines.\n");
        for (size_t i = 0; i < ELEMENTSOF(option_defs); i++) {
                const OptionDef *d = &option_defs[i];
                char left[64];

                if (!d->name) {
                        printf("\n%s:\n", d->help);
                        continue;
                }
                snprintf(left, sizeof left, "--%s%s%s", d->name,
                         !d->metavar                                    ? ""
                         : d->metavar[0] == '=' || d->metavar[0] == '[' ? ""
                                                                        : "=",
                         d->metavar ?: "");
                if (strlen(left) > 26)
                        printf("  %s\n  %-26s %s\n", left, "", d->help);
                else
                        printf("  %-26s %s\n", left, d->help);
        }
        printf("\nShort and compatibility forms:\n"
               "  -o OPT[,OPT...]            the virtiofsd -o keys: source=DIR, vhost_user_socket=PATH,\n"
               "                             cache=, sandbox=, modcaps=, log_level= / loglevel=, timeout=,\n"
               "                             thread_pool_size=, [no_]xattr, [no_]flock, [no_]posix_lock,\n"
               "                             [no_]readdirplus, [no_]writeback, [no_]announce_submounts,\n"
               "                             [no_]allow_direct_io, [no_]killpriv_v2, [no_]posix_acl,\n"
               "                             [no_]security_label, [no_]readonly, debug, norace, allow_root\n"
               "                             (\",,\" is a literal comma)\n"
               "  -d                         --log-level=debug (deprecated)\n"
               "  -f                         foreground: no effect, vufsd never daemonizes (deprecated)\n"
               "  -h, -V                     --help, --version\n"
               "\nRepeated options: the last one wins (--uid-map, --gid-map, --translate-* add entries).\n"
               "Usage errors exit with status 2.\n");
}

static struct option getopt_options[ELEMENTSOF(option_defs) + 1];

static void build_getopt_options(void) {
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(option_defs); i++)
                if (option_defs[i].name)
                        getopt_options[n++] = (struct option){ option_defs[i].name, option_defs[i].has_arg, NULL,
                                                               option_defs[i].id };
        getopt_options[n] = (struct option){};
}

int config_parse_poll_us(const char *s, unsigned *ret) {
        uint64_t u;

        if (streq(s, "auto")) {
                *ret = DEVICE_POLL_AUTO;
                return 0;
        }
        if (parse_uint(s, DEVICE_MAX_POLL_US, &u) < 0)
                return -EINVAL;
        *ret = (unsigned) u;
        return 0;
}

static int set_uint_option(const char *name, const char *v, uint64_t min, uint64_t max, uint64_t *ret) {
        if (parse_uint(v, max, ret) < 0 || *ret < min)
                return usage_error("--%s must be a number %" PRIu64 "..%" PRIu64 ", got \"%s\"", name, min, max, v);
        return 0;
}

int config_parse_argv(Config *c, int argc, char *argv[]) {
        uint64_t u;
        int opt, idx, r = 0;

        build_getopt_options();
        optind = 0; /* reset getopt: config_parse_argv may run more than once (tests, config files) */
        opterr = 1;
        while ((opt = getopt_long(argc, argv, "hVdfo:", getopt_options, &idx)) >= 0) {
                switch (opt) {
                case 'h':
                        help();
                        return 1;
                case 'V':
                        printf("vufsd %s\n", vufsd_version());
                        return 1;
                case ARG_PRINT_CAPS:
                        print_capabilities();
                        return 1;
                case 'd':
                        c->log_level = LOG_DEBUG;
                        c->log_level_given = true;
                        /* -d is the deprecated short form; --debug is vufsd's own */
                        c->deprecated_d = c->deprecated_d || (optind > 0 && streq(argv[optind - 1], "-d"));
                        break;
                case 'f':
                        c->deprecated_f = true;
                        break;
                case 'o':
                        c->deprecated_o = true;
                        r = config_parse_o(c, optarg);
                        break;
                case ARG_SOCKET:
                        c->deprecated_socket = true;
                        __attribute__((fallthrough));
                case ARG_SOCKET_PATH:
                        r = set_string(&c->socket_path, optarg);
                        break;
                case ARG_FD:
                        r = set_uint_option("fd", optarg, 0, INT32_MAX, &u);
                        c->listen_fd = (int)u;
                        break;
                case ARG_SOCKET_GROUP:
                        r = set_string(&c->socket_group, optarg);
                        break;
                case ARG_KEEP_LISTENING:
                        c->keep_listening = true;
                        break;
                case ARG_SHARED_DIR:
                        r = set_string(&c->shared_dir, optarg);
                        break;
                case ARG_TAG:
                        r = set_tag(c, optarg);
                        break;
                case ARG_CACHE:
                        r = set_cache(c, "--cache", optarg);
                        break;
                case ARG_QUEUES:
                        r = set_uint_option("num-request-queues", optarg, 1, DEVICE_MAX_REQUEST_QUEUES, &u);
                        c->n_request_queues = (unsigned)u;
                        break;
                case ARG_XATTR:
                        c->fs.xattr = true;
                        break;
                case ARG_POSIX_ACL:
                        r = set_feature_mode(&c->posix_acl_mode, "--posix-acl", optarg);
                        break;
                case ARG_SECURITY_LABEL:
                        r = set_feature_mode(&c->security_label_mode, "--security-label", optarg);
                        break;
                case ARG_XATTRMAP:
                        r = set_xattrmap(c, "--xattrmap", optarg);
                        break;
                case ARG_READONLY:
                        c->fs.readonly = true;
                        break;
                case ARG_ANNOUNCE_SUBMOUNTS:
                case ARG_NO_ANNOUNCE_SUBMOUNTS:
                        c->fs.announce_submounts = opt == ARG_ANNOUNCE_SUBMOUNTS;
                        break;
                case ARG_ALLOW_DIRECT_IO:
                        c->fs.allow_direct_io = true;
                        break;
                case ARG_ALLOW_MMAP:
                        c->fs.allow_mmap = true;
                        break;
                case ARG_NO_READDIRPLUS:
                        c->fs.readdirplus = false;
                        break;
                case ARG_WRITEBACK:
                        c->fs.writeback = true;
                        break;
                case ARG_KILLPRIV_V2:
                case ARG_NO_KILLPRIV_V2:
                        c->fs.killpriv_v2 = opt == ARG_KILLPRIV_V2;
                        break;
                case ARG_PRESERVE_NOATIME:
                        c->fs.preserve_noatime = true;
                        break;
                case ARG_INODE_FILE_HANDLES:
                        /* clap's require_equals: "--inode-file-handles never" is an error. */
                        if (optarg == argv[optind - 1]) {
                                r = usage_error("--inode-file-handles needs its value after '=' "
                                                "(--inode-file-handles=never|prefer|mandatory)");
                                break;
                        }
                        if (streq(optarg, "fallback")) {
                                c->deprecated_fallback = true;
                                c->fs.inode_file_handles = INODE_FILE_HANDLES_PREFER;
                                break;
                        }
                        r = set_inode_file_handles(c, "--inode-file-handles", optarg);
                        break;
                case ARG_ALLOW_HANDLES_BEYOND_SHARE:
                        c->fs.handles_beyond_share = true;
                        break;
                case ARG_THREAD_POOL_SIZE:
                        r = set_uint_option("thread-pool-size", optarg, 0, EXECUTOR_MAX_POOL_SIZE, &u);
                        c->thread_pool_size_given = (int)u;
                        break;
                case ARG_THREADS:
                        c->threads_given = thread_mode_from_string(optarg);
                        if (c->threads_given < 0)
                                r = usage_error("--threads must be inline, pool or auto, got \"%s\"", optarg);
                        break;
                case ARG_POLL_US:
                        if (config_parse_poll_us(optarg, &c->poll_us) < 0)
                                r = usage_error("--poll-us must be auto or a number 0..%u, got \"%s\"",
                                                DEVICE_MAX_POLL_US, optarg);
                        break;
                case ARG_CRASH_RESTARTS:
                        if (parse_uint(optarg, RESPAWN_MAX_RESTARTS, &u) < 0)
                                r = usage_error("--crash-restarts must be a number 0..%u, got \"%s\"",
                                                RESPAWN_MAX_RESTARTS, optarg);
                        else
                                c->crash_restarts = (unsigned) u;
                        break;
                case ARG_SANDBOX:
                        r = set_sandbox(c, "--sandbox", optarg);
                        break;
                case ARG_SECCOMP: {
                        SyscallFilter f = syscall_filter_from_string(optarg);
                        if (f < 0)
                                r = usage_error("--seccomp must be kill, log, trap or none, got \"%s\"", optarg);
                        else
                                c->seccomp = f;
                        break;
                }
                case ARG_MODCAPS:
                        r = set_modcaps(c, optarg);
                        break;
                case ARG_RLIMIT_NOFILE:
                        r = set_uint_option("rlimit-nofile", optarg, 0, UINT32_MAX, &u);
                        c->rlimit_nofile = u;
                        break;
                case ARG_UID_MAP:
                        r = add_id_map(&c->uid_map, "--uid-map", optarg);
                        break;
                case ARG_GID_MAP:
                        r = add_id_map(&c->gid_map, "--gid-map", optarg);
                        break;
                case ARG_TRANSLATE_UID:
                        r = add_id_translate(&c->translate_uid, "--translate-uid", optarg);
                        break;
                case ARG_TRANSLATE_GID:
                        r = add_id_translate(&c->translate_gid, "--translate-gid", optarg);
                        break;
                case ARG_MIGRATION_MODE:
                        c->migration_given = true;
                        c->migration_mode = migration_mode_from_string(optarg);
                        if (c->migration_mode < 0)
                                r = usage_error("--migration-mode must be find-paths or file-handles, got \"%s\"",
                                                optarg);
                        break;
                case ARG_MIGRATION_ON_ERROR:
                        c->migration_given = true;
                        c->migration_on_error = migration_on_error_from_string(optarg);
                        if (c->migration_on_error < 0)
                                r = usage_error("--migration-on-error must be abort or guest-error, got \"%s\"",
                                                optarg);
                        break;
                case ARG_MIGRATION_VERIFY_HANDLES:
                        c->migration_given = c->migration_verify_handles = true;
                        break;
                case ARG_MIGRATION_CONFIRM_PATHS:
                        c->migration_given = c->migration_confirm_paths = true;
                        break;
                case ARG_MIGRATION_LOCK_TIMEOUT: {
                        uint64_t sec;
                        c->migration_given = true;
                        if (parse_uint(optarg, MIGRATION_LOCK_TIMEOUT_MAX_SEC, &sec) < 0)
                                r = usage_error("--migration-lock-timeout must be a number of seconds from 0 to %u, got "
                                                "\"%s\"",
                                                MIGRATION_LOCK_TIMEOUT_MAX_SEC, optarg);
                        else
                                c->migration_lock_timeout_sec = (unsigned) sec;
                        break;
                }
                case ARG_INSTANCE:
                        r = set_string(&c->instance, optarg);
                        break;
                case ARG_BUS:
                        r = set_string(&c->bus, optarg);
                        break;
                case ARG_BUS_USER:
                        r = set_string(&c->bus_user, optarg);
                        break;
                case ARG_DIR_BUFFER_MAX:
                        if (parse_uint(optarg, DIR_STREAM_MAX_CAP, &u) < 0 || u < DIR_STREAM_BUF_SIZE) {
                                return usage_error("--dir-buffer-max must be %u..%llu bytes", DIR_STREAM_BUF_SIZE,
                                                   (unsigned long long)DIR_STREAM_MAX_CAP);
                        }
                        c->fs.dir_buffer_max = u;
                        break;
                case ARG_MAX_NODES:
                        r = set_uint_option("max-nodes", optarg, FS_MAX_NODES_MIN, FS_MAX_NODES_MAX, &u);
                        c->fs.max_nodes = u;
                        break;
                case ARG_MAX_INODE_FDS:
                        r = set_uint_option("max-inode-fds", optarg, FS_MAX_INODE_FDS_MIN, FS_MAX_INODE_FDS_MAX, &u);
                        c->fs.max_inode_fds = u;
                        break;
                case ARG_ALLOW_PRIVILEGED_FILES:
                        c->fs.privileged_files = PRIVILEGED_FILES_ALLOW;
                        break;
                case ARG_PRIVILEGED_FILES:
                        r = set_privileged_files(c, "--privileged-files", optarg);
                        break;
                case ARG_PRIVILEGED_KEY:
                        r = set_string(&c->privileged_key_file, optarg);
                        break;
                case ARG_CONFIG:
                        r = set_string(&c->config_file, optarg);
                        break;
                case ARG_LOG_LEVEL:
                        r = set_log_level(c, "--log-level", optarg);
                        break;
                case ARG_SYSLOG:
                        c->syslog = true;
                        break;
                default: /* getopt named the option already */
                        return usage_error("invalid command line");
                }
                if (r < 0)
                        return r;
        }
        if (optind < argc)
                return usage_error("unexpected argument \"%s\"", argv[optind]);
        return 0;
}

int config_resolve_threads(int threads, int pool_size, ThreadMode *ret_mode, unsigned *ret_size,
                           const char **ret_error) {
        const char *dummy;

        if (!ret_error)
                ret_error = &dummy;
        if (pool_size > EXECUTOR_MAX_POOL_SIZE) {
                *ret_error = "--thread-pool-size must be 0..1024";
                return -ERANGE;
        }
        if (threads < 0) {
                /* virtiofsd's meaning: 0 (or nothing) = no pool, N = a pool of N. */
                *ret_mode = pool_size > 0 ? THREAD_MODE_POOL : THREAD_MODE_INLINE;
                *ret_size = pool_size > 0 ? (unsigned)pool_size : executor_default_pool_size();
                return 0;
        }
        if (threads >= _THREAD_MODE_MAX) {
                *ret_error = "--threads must be inline, pool or auto";
                return -EINVAL;
        }
        if (threads != THREAD_MODE_INLINE && pool_size == 0) {
                *ret_error = "--thread-pool-size=0 means inline; pool and auto need at least 1 worker";
                return -EINVAL;
        }
        *ret_mode = (ThreadMode)threads;
        *ret_size = pool_size > 0 ? (unsigned)pool_size : executor_default_pool_size();
        return 0;
}

