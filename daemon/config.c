/* config.c: defaults and command-line parsing (native options and virtiofsd's -o forms). */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "capabilities.h"
#include "config-file.h"
#include "device.h"
#include "dir-stream.h"
#include "executor.h"
#include "log.h"
#include "sandbox.h"
#include "seccomp-filter.h"

void config_init(Config *c) {
        *c = (Config) {
                .listen_fd = -1,
                .n_request_queues = 1,
                .log_level = LOG_INFO,
                .thread_pool_size = -1,
                .fs = FS_OPTIONS_DEFAULT,
        };
}

void config_done(Config *c) {
        free(c->socket_path);
        free(c->socket_group);
        free(c->shared_dir);
        free(c->threads);
        free(c->sandbox);
        free(c->seccomp);
        free(c->modcaps);
        free(c->instance);
        free(c->bus);
        free(c->bus_user);
        free(c->config_file);
        *c = (Config) {};
}

static void help(void) {
        printf("Usage: vufsd [OPTIONS] --shared-dir DIR (--socket-path PATH | --fd N | socket activation)\n"
               "\n"
               "A virtio-fs vhost-user backend: serves DIR to a virtual machine over the vhost-user\n"
               "socket QEMU connects to.\n"
               "\n"
               "Listening (exactly one):\n"
               "  --socket-path=PATH        create and listen on a unix socket (locked by PATH.lock;\n"
               "                            a stale socket is replaced)\n"
               "  --fd=N                    serve on an already listening socket (libvirt)\n"
               "  (none)                    systemd socket activation (LISTEN_FDS)\n"
               "  --socket-group=GROUP      group owning the socket created by --socket-path\n"
               "  --keep-listening          accept a new frontend after a disconnect instead of exiting\n"
               "\n"
               "Filesystem:\n"
               "  --shared-dir=DIR          the directory to share (required)\n"
               "  --cache=never|metadata|auto|always\n"
               "                            cache policy (default auto; \"none\" means never)\n"
               "  --num-request-queues=N    request queues served, 1..%d (default 1)\n"
               "  -o OPT[,OPT...]           virtiofsd-compatible options: source=DIR, cache=POLICY,\n"
               "                            timeout=SECONDS, xattr|no_xattr, flock|no_flock,\n"
               "                            posix_lock|no_posix_lock, readdirplus|no_readdirplus,\n"
               "                            writeback|no_writeback, sandbox=MODE, modcaps=LIST, log_level=LEVEL\n"
               "  --xattr                   enable extended attributes\n"
               "  --readonly                refuse every change (EROFS)\n"
               "\n"
               "Threads:\n"
               "  --threads=inline|pool|auto\n"
               "                            inline: each queue thread runs its requests in guest order\n"
               "                            (default); pool: a shared pool of workers runs them; auto:\n"
               "                            inline until requests back up or would block\n"
               "  --thread-pool-size=N      workers for pool/auto, 1..1024 (default 2 per CPU, 4..64);\n"
               "                            without --threads: 0 = inline, N = pool of N (virtiofsd)\n"
               "  --poll-us=N               request queue threads watch the ring N microseconds before\n"
               "                            sleeping: lower latency, one busy CPU per queue (default 0)\n"
               "\n"
               "Configuration:\n"
               "  --instance=NAME           instance name (systemd: %%i); reads " VUFSD_CONFIG_DIR "/NAME.conf\n"
               "                            when it exists\n"
               "  --config=FILE             read this configuration file (must exist) instead\n"
               "                            (the command line overrides what a file sets)\n"
               "\n"
               "Control:\n"
               "  --bus=system|session|none|ADDRESS\n"
               "                            D-Bus bus for the control interface (default: system as\n"
               "                            root, session otherwise); serving goes on without one\n"
               "  --bus-user=USER           identity of the bus connection when run as root (default\n"
               "                            vufsd-bus, for the system bus; never root)\n"
               "\n"
               "Other:\n"
               "  --sandbox=namespace|chroot|none\n"
               "                            confine to the shared directory (default namespace as\n"
               "                            root, none otherwise; see docs/security.md)\n"
               "  --seccomp=kill|log|trap|none\n"
               "                            system call allowlist; what a call outside it does\n"
               "                            (default kill)\n"
               "  --modcaps=+CAP:-CAP...    add to or remove from the capabilities kept\n"
               "  --allow-privileged-files  let the guest make device nodes and set-user/group-id\n"
               "                            files in the share, and mount it with suid,dev in the\n"
               "                            sandbox (default: refused/stripped, nosuid,nodev: a host\n"
               "                            user could use such files; see docs/security.md)\n"
               "  --rlimit-nofile=N         open-file limit to set\n"
               "  --dir-buffer-max=BYTES    directory read-ahead kept for all open directories\n"
               "                            (default 64 MiB, at least 16384)\n"
               "  --log-level=LEVEL         err, warning, notice, info (default), debug\n"
               "  -d, --debug               same as --log-level=debug\n"
               "  --print-capabilities      print the vhost-user backend capabilities (JSON) and exit\n"
               "  -h, --help                show this help\n"
               "  -V, --version             show the version\n",
               DEVICE_MAX_REQUEST_QUEUES);
}

static int set_string(char **dst, const char *v) {
        char *s = strdup(v);
        if (!s)
                return -ENOMEM;
        free(*dst);
        *dst = s;
        return 0;
}

static int parse_uint(const char *s, uint64_t max, uint64_t *ret) {
        char *end;
        unsigned long long v;

        if (!s || !*s || *s == '-')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || *end || v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

static int set_cache(Config *c, const char *v) {
        CachePolicy p = cache_policy_from_string(v);
        if (p < 0) {
                fprintf(stderr, "vufsd: unknown cache policy \"%s\" (never, metadata, auto, always)\n", v);
                return -EINVAL;
        }
        c->fs.cache = p;
        return 0;
}

static int set_log_level(Config *c, const char *v) {
        int l = log_level_from_string(v);
        if (l < 0) {
                fprintf(stderr, "vufsd: unknown log level \"%s\"\n", v);
                return -EINVAL;
        }
        c->log_level = l;
        return 0;
}

/* One "-o" option in the C virtiofsd's syntax. */
static int parse_o_option(Config *c, char *opt) {
        static const struct {
                const char *name;
                size_t offset;
        } bools[] = {
                { "xattr", offsetof(Config, fs.xattr) },
                { "flock", offsetof(Config, fs.flock) },
                { "posix_lock", offsetof(Config, fs.posix_lock) },
                { "readdirplus", offsetof(Config, fs.readdirplus) },
                { "writeback", offsetof(Config, fs.writeback) },
                { "announce_submounts", offsetof(Config, fs.announce_submounts) },
                { "allow_direct_io", offsetof(Config, fs.allow_direct_io) },
                { "killpriv_v2", offsetof(Config, fs.killpriv_v2) },
                { "posix_acl", offsetof(Config, fs.posix_acl) },
                { "security_label", offsetof(Config, fs.security_label) },
                { "readonly", offsetof(Config, fs.readonly) },
        };
        char *val = strchr(opt, '=');
        uint64_t u;

        if (val)
                *val++ = '\0';
        if (val) {
                if (streq(opt, "source"))
                        return set_string(&c->shared_dir, val);
                if (streq(opt, "cache"))
                        return set_cache(c, val);
                if (streq(opt, "sandbox"))
                        return set_string(&c->sandbox, val);
                if (streq(opt, "modcaps"))
                        return set_string(&c->modcaps, val);
                if (streq(opt, "log_level"))
                        return set_log_level(c, val);
                if (streq(opt, "timeout")) {
                        char *end;
                        double t = strtod(val, &end);
                        if (*end || t < 0 || t > 1e9)
                                goto bad;
                        c->fs.timeout = t;
                        return 0;
                }
                if (streq(opt, "thread_pool_size")) {
                        if (parse_uint(val, 1024, &u) < 0)
                                goto bad;
                        c->thread_pool_size = (int) u;
                        return 0;
                }
                goto bad;
        }
        for (size_t i = 0; i < ELEMENTSOF(bools); i++) {
                bool *b = (bool *) ((char *) c + bools[i].offset);
                if (streq(opt, bools[i].name)) {
                        *b = true;
                        return 0;
                }
                if (strncmp(opt, "no_", 3) == 0 && streq(opt + 3, bools[i].name)) {
                        *b = false;
                        return 0;
                }
        }
        /* Accepted for compatibility; they describe what vufsd does anyway. */
        if (streq(opt, "norace") || streq(opt, "no_posix_acl") || streq(opt, "allow_root"))
                return 0;
bad:
        fprintf(stderr, "vufsd: unknown or invalid option \"-o %s%s%s\"\n", opt, val ? "=" : "", val ?: "");
        return -EINVAL;
}

int config_parse_o(Config *c, const char *arg) {
        _cleanup_free_ char *copy = strdup(arg);
        char *t, *w;

        if (!copy)
                return -ENOMEM;
        /* Split at single commas; ",," stands for one literal comma inside a value (libvirt writes
         * source=/a,,b for the directory "/a,b"). Unescaping happens in place: w never overtakes r. */
        t = w = copy;
        for (const char *r = arg;; r++) {
                if (*r == ',' && r[1] == ',') {
                        *w++ = ',';
                        r++;
                        continue;
                }
                if (*r == ',' || *r == '\0') {
                        *w = '\0';
                        if (*t) {
                                int q = parse_o_option(c, t);
                                if (q < 0)
                                        return q;
                        }
                        if (*r == '\0')
                                break;
                        t = w = w + 1;
                        continue;
                }
                *w++ = *r;
        }
        return 0;
}

static void print_capabilities(void) {
        /* The vhost-user backend description libvirt reads; only what is really implemented.
         * "separate-options": libvirt may pass --shared-dir, --cache, --sandbox, --xattr,
         * --thread-pool-size, --rlimit-nofile and --log-level as separate arguments instead of
         * "-o" (tests/test-libvirt-args.sh serves a guest both ways). Not "migrate-precopy":
         * vufsd has no device-state migration. */
        printf("{\n  \"type\": \"fs\",\n  \"features\": [\n    \"separate-options\"\n  ]\n}\n");
}

int config_parse_argv(Config *c, int argc, char *argv[]) {
        enum {
                ARG_SOCKET_PATH = 0x100,
                ARG_FD,
                ARG_SOCKET_GROUP,
                ARG_SHARED_DIR,
                ARG_CACHE,
                ARG_QUEUES,
                ARG_KEEP_LISTENING,
                ARG_LOG_LEVEL,
                ARG_THREAD_POOL_SIZE,
                ARG_THREADS,
                ARG_POLL_US,
                ARG_SANDBOX,
                ARG_SECCOMP,
                ARG_MODCAPS,
                ARG_RLIMIT_NOFILE,
                ARG_XATTR,
                ARG_READONLY,
                ARG_PRINT_CAPS,
                ARG_INSTANCE,
                ARG_BUS,
                ARG_BUS_USER,
                ARG_DIR_BUFFER_MAX,
                ARG_CONFIG,
                ARG_ALLOW_PRIVILEGED_FILES,
        };
        static const struct option options[] = {
                { "socket-path", required_argument, NULL, ARG_SOCKET_PATH },
                { "fd", required_argument, NULL, ARG_FD },
                { "socket-group", required_argument, NULL, ARG_SOCKET_GROUP },
                { "shared-dir", required_argument, NULL, ARG_SHARED_DIR },
                { "cache", required_argument, NULL, ARG_CACHE },
                { "num-request-queues", required_argument, NULL, ARG_QUEUES },
                { "keep-listening", no_argument, NULL, ARG_KEEP_LISTENING },
                { "log-level", required_argument, NULL, ARG_LOG_LEVEL },
                { "thread-pool-size", required_argument, NULL, ARG_THREAD_POOL_SIZE },
                { "threads", required_argument, NULL, ARG_THREADS },
                { "poll-us", required_argument, NULL, ARG_POLL_US },
                { "sandbox", required_argument, NULL, ARG_SANDBOX },
                { "seccomp", required_argument, NULL, ARG_SECCOMP },
                { "modcaps", required_argument, NULL, ARG_MODCAPS },
                { "rlimit-nofile", required_argument, NULL, ARG_RLIMIT_NOFILE },
                { "xattr", no_argument, NULL, ARG_XATTR },
                { "readonly", no_argument, NULL, ARG_READONLY },
                { "print-capabilities", no_argument, NULL, ARG_PRINT_CAPS },
                { "instance", required_argument, NULL, ARG_INSTANCE },
                { "bus", required_argument, NULL, ARG_BUS },
                { "bus-user", required_argument, NULL, ARG_BUS_USER },
                { "dir-buffer-max", required_argument, NULL, ARG_DIR_BUFFER_MAX },
                { "config", required_argument, NULL, ARG_CONFIG },
                { "allow-privileged-files", no_argument, NULL, ARG_ALLOW_PRIVILEGED_FILES },
                { "debug", no_argument, NULL, 'd' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {}
        };
        uint64_t u;
        int opt, r = 0;

        optind = 0; /* reset getopt: config_parse_argv may run more than once (tests) */
        while ((opt = getopt_long(argc, argv, "hVdo:", options, NULL)) >= 0) {
                switch (opt) {
                case 'h':
                        help();
                        return 1;
                case 'V':
                        printf("vufsd %s\n", PACKAGE_VERSION);
                        return 1;
                case ARG_PRINT_CAPS:
                        print_capabilities();
                        return 1;
                case 'd':
                        c->log_level = LOG_DEBUG;
                        break;
                case 'o':
                        r = config_parse_o(c, optarg);
                        break;
                case ARG_SOCKET_PATH:
                        r = set_string(&c->socket_path, optarg);
                        break;
                case ARG_FD:
                        if (parse_uint(optarg, INT32_MAX, &u) < 0) {
                                fprintf(stderr, "vufsd: --fd needs a file descriptor number, got \"%s\"\n", optarg);
                                return -EINVAL;
                        }
                        c->listen_fd = (int) u;
                        break;
                case ARG_SOCKET_GROUP:
                        r = set_string(&c->socket_group, optarg);
                        break;
                case ARG_SHARED_DIR:
                        r = set_string(&c->shared_dir, optarg);
                        break;
                case ARG_CACHE:
                        r = set_cache(c, optarg);
                        break;
                case ARG_QUEUES:
                        if (parse_uint(optarg, DEVICE_MAX_REQUEST_QUEUES, &u) < 0 || u < 1) {
                                fprintf(stderr, "vufsd: --num-request-queues must be 1..%d\n", DEVICE_MAX_REQUEST_QUEUES);
                                return -EINVAL;
                        }
                        c->n_request_queues = (unsigned) u;
                        break;
                case ARG_KEEP_LISTENING:
                        c->keep_listening = true;
                        break;
                case ARG_LOG_LEVEL:
                        r = set_log_level(c, optarg);
                        break;
                case ARG_THREAD_POOL_SIZE:
                        if (parse_uint(optarg, 1024, &u) < 0) {
                                fprintf(stderr, "vufsd: --thread-pool-size must be 0..1024\n");
                                return -EINVAL;
                        }
                        c->thread_pool_size = (int) u;
                        break;
                case ARG_THREADS:
                        r = set_string(&c->threads, optarg);
                        break;
                case ARG_POLL_US:
                        if (parse_uint(optarg, DEVICE_MAX_POLL_US, &u) < 0) {
                                fprintf(stderr, "vufsd: --poll-us must be 0..%u\n", DEVICE_MAX_POLL_US);
                                return -EINVAL;
                        }
                        c->poll_us = (unsigned) u;
                        break;
                case ARG_SANDBOX:
                        r = set_string(&c->sandbox, optarg);
                        break;
                case ARG_SECCOMP:
                        r = set_string(&c->seccomp, optarg);
                        break;
                case ARG_MODCAPS:
                        r = set_string(&c->modcaps, optarg);
                        break;
                case ARG_RLIMIT_NOFILE:
                        if (parse_uint(optarg, UINT32_MAX, &u) < 0) {
                                fprintf(stderr, "vufsd: --rlimit-nofile needs a number\n");
                                return -EINVAL;
                        }
                        c->rlimit_nofile = u;
                        break;
                case ARG_XATTR:
                        c->fs.xattr = true;
                        break;
                case ARG_READONLY:
                        c->fs.readonly = true;
                        break;
                case ARG_ALLOW_PRIVILEGED_FILES:
                        c->fs.privileged_files = true;
                        break;
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
                                fprintf(stderr, "vufsd: --dir-buffer-max must be %u..%llu bytes\n",
                                        DIR_STREAM_BUF_SIZE, (unsigned long long) DIR_STREAM_MAX_CAP);
                                return -EINVAL;
                        }
                        c->fs.dir_buffer_max = u;
                        break;
                case ARG_CONFIG:
                        r = set_string(&c->config_file, optarg);
                        break;
                default:
                        fprintf(stderr, "vufsd: see --help for the options\n");
                        return -EINVAL;
                }
                if (r < 0)
                        return r;
        }
        if (optind < argc) {
                fprintf(stderr, "vufsd: unexpected argument \"%s\"\n", argv[optind]);
                return -EINVAL;
        }
        return 0;
}

int config_verify(const Config *c) {
        if (!c->shared_dir) {
                fprintf(stderr, "vufsd: --shared-dir (or -o source=) is required\n");
                return -EINVAL;
        }
        if (c->socket_path && c->listen_fd >= 0) {
                fprintf(stderr, "vufsd: --socket-path and --fd exclude each other\n");
                return -EINVAL;
        }
        if (c->sandbox && sandbox_mode_from_string(c->sandbox) < 0) {
                fprintf(stderr, "vufsd: --sandbox must be namespace, chroot or none, got \"%s\"\n", c->sandbox);
                return -EINVAL;
        }
        if (c->seccomp && syscall_filter_from_string(c->seccomp) < 0) {
                fprintf(stderr, "vufsd: --seccomp must be kill, log, trap or none, got \"%s\"\n", c->seccomp);
                return -EINVAL;
        }
        if (c->modcaps) {
                uint64_t caps = capabilities_default(c->fs.privileged_files);
                if (capabilities_modify(&caps, c->modcaps) < 0)
                        return -EINVAL;
        }
        /* A D-Bus address always has a transport prefix ("unix:path=..."). */
        if (c->bus && !streq(c->bus, "system") && !streq(c->bus, "session") && !streq(c->bus, "none") &&
            !strchr(c->bus, ':')) {
                fprintf(stderr, "vufsd: --bus must be system, session, none or a D-Bus address like "
                                "unix:path=/run/my-bus, got \"%s\"\n", c->bus);
                return -EINVAL;
        }
        {
                /* The same rules the manager applies when it creates the executor. */
                const char *why = NULL;
                ThreadMode mode;
                unsigned size;

                if (executor_mode_from_options(c->threads, c->thread_pool_size, &mode, &size, &why) < 0) {
                        fprintf(stderr, "vufsd: %s\n", why);
                        return -EINVAL;
                }
        }
        return 0;
}
