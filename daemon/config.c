/* config.c: defaults and command-line parsing: vufsd's own options, the Rust virtiofsd 1.14 command
 * line (long options and -o keys), the C virtiofsd's -o forms. One table holds every option with
 * its help text: --help, the option list the tests compare with the man page and
 * docs/launchers.md, and getopt's table all come from it. */
#include "config.h"

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
                .fs = FS_OPTIONS_DEFAULT,
        };
}

void config_done(Config *c) {
        free(c->socket_path);
        free(c->socket_group);
        free(c->shared_dir);
        free(c->tag);
        xattr_map_free(c->xattrmap);
        free(c->instance);
        free(c->bus);
        free(c->bus_user);
        free(c->config_file);
        *c = (Config){};
}

static int usage_error(const char *fmt, ...) _printf_(1, 2);
static int usage_error(const char *fmt, ...) {
        va_list ap;

        fputs("vufsd: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputs(" (see --help)\n", stderr);
        return -EINVAL;
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

        if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || *end || v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

static int set_cache(Config *c, const char *what, const char *v) {
        CachePolicy p = cache_policy_from_string(v);
        if (p < 0)
                return usage_error("%s: unknown cache policy \"%s\" (auto, always, never, metadata)", what, v);
        c->fs.cache = p;
        return 0;
}

/* The Rust virtiofsd's level names (error, warn, info, debug, trace, off) and syslog's. */
static int level_from_string(const char *v) {
        if (streq(v, "trace"))
                return LOG_DEBUG;
        if (streq(v, "off"))
                return -1; /* below every level: nothing is logged */
        return log_level_from_string(v);
}

static int set_log_level(Config *c, const char *what, const char *v) {
        int l = level_from_string(v);
        if (l < -1)
                return usage_error("%s: unknown log level \"%s\" (error, warn, info, debug, trace, off)", what, v);
        c->log_level = l;
        c->log_level_given = true;
        return 0;
}

static int set_inode_file_handles(Config *c, const char *what, const char *v) {
        InodeFileHandles m = inode_file_handles_from_string(v);
        if (m < 0)
                return usage_error("%s must be never, prefer or mandatory, got \"%s\"", what, v);
        c->fs.inode_file_handles = m;
        return 0;
}

static int set_sandbox(Config *c, const char *what, const char *v) {
        SandboxMode m = sandbox_mode_from_string(v);
        if (m < 0)
                return usage_error("%s: sandbox must be namespace, chroot or none, got \"%s\"", what, v);
        c->sandbox = m;
        c->sandbox_given = true;
        return 0;
}

/* The kept set from the default and --modcaps; again at config_verify(), when
 * --allow-privileged-files may have come after --modcaps. */
static void resolve_capabilities(Config *c) {
        c->capabilities = (capabilities_default(c->fs.privileged_files) | c->modcaps_add) & c->modcaps_keep;
}

static int set_modcaps(Config *c, const char *v) {
        /* A repeated --modcaps replaces the earlier one. Applied to no capability and to all of
         * them, the list gives what it adds and what it leaves: the same as applying it to any
         * default set. */
        uint64_t add = 0, keep = UINT64_MAX;
        if (capabilities_modify(&add, v) < 0 || capabilities_modify(&keep, v) < 0)
                return usage_error("--modcaps: invalid capability list \"%s\"", v);
        c->modcaps_add = add;
        c->modcaps_keep = keep;
        resolve_capabilities(c);
        return 0;
}

static int set_tag(Config *c, const char *v) {
        size_t n = strlen(v);
        if (n == 0 || n > CONFIG_MAX_TAG_LEN)
                return usage_error("--tag: the tag must be 1..%d bytes, got %zu", CONFIG_MAX_TAG_LEN, n);
        return set_string(&c->tag, v);
}

static int set_xattrmap(Config *c, const char *what, const char *v) {
        const char *why = NULL;
        XattrMap *m = NULL;
        int r = xattr_map_parse(v, &m, &why);

        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return usage_error("%s: %s in \"%s\"", what, why, v);
        xattr_map_free(c->xattrmap);
        c->xattrmap = m;
        c->fs.xattr = true; /* a map implies xattrs, as in the Rust virtiofsd */
        return 0;
}

static int set_feature_mode(FeatureMode *dst, const char *what, const char *v) {
        FeatureMode m;

        if (!v) { /* the bare flag: on, as before the modes existed */
                *dst = FEATURE_ALWAYS;
                return 0;
        }
        m = feature_mode_from_string(v);
        if (m < 0)
                return usage_error("%s: mode must be never, auto or always, got \"%s\"", what, v);
        *dst = m;
        return 0;
}

/* One decimal field of an id map: digits only (no sign, no space, no hex), at most 2^32 - 1. */
static int parse_id_field(const char *p, size_t n, uint64_t *ret) {
        uint64_t v = 0;

        if (n == 0)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (p[i] < '0' || p[i] > '9')
                        return -EINVAL;
                v = v * 10 + (uint64_t)(p[i] - '0');
                if (v > UINT32_MAX)
                        return -ERANGE;
        }
        *ret = v;
        return 0;
}

/* ":NAMESPACE_ID:HOST_ID:COUNT:" (libvirt >= 10 writes one per <idmap> entry; the Rust virtiofsd's
 * form): four colons, three decimal fields, nothing around them. */
int id_map_parse(const char *s, IdMapEntry *ret, const char **ret_why) {
        uint64_t v[3];
        const char *p = s;
        const char *why_dummy;

        if (!ret_why)
                ret_why = &why_dummy;
        if (!s || *p != ':') {
                *ret_why = "it must start with ':'";
                return -EINVAL;
        }
        p++;
        for (unsigned i = 0; i < 3; i++) {
                const char *end = strchr(p, ':');
                int r;

                if (!end) {
                        *ret_why = "expected four ':' around three fields";
                        return -EINVAL;
                }
                r = parse_id_field(p, (size_t)(end - p), &v[i]);
                if (r == -ERANGE) {
                        *ret_why = i == 0   ? "the namespace id is above 4294967295"
                                   : i == 1 ? "the host id is above 4294967295"
                                            : "the count is above 4294967295";
                        return -ERANGE;
                }
                if (r < 0) {
                        *ret_why = i == 0   ? "the namespace id is not a decimal number"
                                   : i == 1 ? "the host id is not a decimal number"
                                            : "the count is not a decimal number";
                        return -EINVAL;
                }
                p = end + 1;
        }
        if (*p != '\0') {
                *ret_why = "text after the last ':'";
                return -EINVAL;
        }
        if (v[2] == 0) {
                *ret_why = "the count is 0";
                return -EINVAL;
        }
        if (v[0] + v[2] > (uint64_t)UINT32_MAX + 1) {
                *ret_why = "the namespace range passes 2^32 - 1";
                return -ERANGE;
        }
        if (v[1] + v[2] > (uint64_t)UINT32_MAX + 1) {
                *ret_why = "the host range passes 2^32 - 1";
                return -ERANGE;
        }
        *ret = (IdMapEntry){ .inside = (uint32_t)v[0], .outside = (uint32_t)v[1], .count = (uint32_t)v[2] };
        return 0;
}

static bool ranges_overlap(uint32_t a, uint32_t na, uint32_t b, uint32_t nb) {
        return (uint64_t)a < (uint64_t)b + nb && (uint64_t)b < (uint64_t)a + na;
}

/* The kernel refuses overlapping ranges in a map as a whole (EINVAL from the write); checking each
 * entry as it comes names the one at fault. */
int id_map_add(IdMapList *l, const IdMapEntry *e, const char **ret_why) {
        const char *why_dummy;

        if (!ret_why)
                ret_why = &why_dummy;
        for (unsigned i = 0; i < l->n; i++) {
                const IdMapEntry *o = &l->e[i];
                if (ranges_overlap(e->inside, e->count, o->inside, o->count)) {
                        *ret_why = "its namespace range overlaps an earlier entry's";
                        return -EEXIST;
                }
                if (ranges_overlap(e->outside, e->count, o->outside, o->count)) {
                        *ret_why = "its host range overlaps an earlier entry's";
                        return -EEXIST;
                }
        }
        if (l->n >= ID_MAP_MAX_ENTRIES) {
                _Static_assert(ID_MAP_MAX_ENTRIES == 32, "the message names the limit");
                *ret_why = "more than 32 entries";
                return -E2BIG;
        }
        l->e[l->n++] = *e;
        return 0;
}

int config_parse_id_map(const char *s, IdMapEntry *ret) {
        return id_map_parse(s, ret, NULL) < 0 ? -EINVAL : 0;
}

/* One entry in the Rust virtiofsd's syntax (id-translate.h), its ranges checked as well. */
int config_parse_id_translate(const char *s, IdTranslateEntry *ret) {
        IdTranslate scratch = ID_TRANSLATE_EMPTY;
        IdTranslateEntry e;
        int r;

        r = id_translate_parse(s, &e);
        if (r < 0)
                return r;
        r = id_translate_add(&scratch, &e, NULL);
        if (r < 0)
                return -EINVAL;
        *ret = e;
        return 0;
}

static int add_id_map(IdMapList *l, const char *what, const char *v) {
        const char *why = NULL;
        IdMapEntry e;

        if (id_map_parse(v, &e, &why) < 0)
                return usage_error("%s: \"%s\": %s (expected :NAMESPACE_ID:HOST_ID:COUNT:, as libvirt writes it)",
                                   what, v, why);
        if (id_map_add(l, &e, &why) < 0)
                return usage_error("%s: \"%s\": %s", what, v, why);
        return 0;
}

static int add_id_translate(IdTranslateList *l, const char *what, const char *v) {
        IdTranslateEntry e;
        const char *why;
        int r;

        if (id_translate_parse(v, &e) < 0)
                return usage_error("%s: expected TYPE:SOURCE:TARGET:COUNT (TYPE guest, host, squash-guest, "
                                   "squash-host or map) or forbid-guest:SOURCE:COUNT, with decimal ids, got \"%s\"",
                                   what, v);
        r = id_translate_add(&l->table, &e, &why);
        if (r < 0)
                return usage_error("%s: \"%s\": %s", what, v, why);
        l->n++;
        return 0;
}

/* One "-o" option: the Rust virtiofsd's keys and the C virtiofsd's. */
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
                { "readonly", offsetof(Config, fs.readonly) },
        };
        char *val = strchr(opt, '=');
        uint64_t u;

        if (val)
                *val++ = '\0';
        if (val) {
                if (streq(opt, "source"))
                        return set_string(&c->shared_dir, val);
                if (streq(opt, "vhost_user_socket")) /* the C virtiofsd's socket option */
                        return set_string(&c->socket_path, val);
                if (streq(opt, "cache"))
                        return set_cache(c, "-o cache", val);
                if (streq(opt, "sandbox"))
                        return set_sandbox(c, "-o sandbox", val);
                if (streq(opt, "modcaps"))
                        return set_modcaps(c, val);
                if (streq(opt, "log_level") || streq(opt, "loglevel"))
                        return set_log_level(c, "-o log_level", val);
                if (streq(opt, "xattrmap"))
                        return set_xattrmap(c, "-o xattrmap", val);
                if (streq(opt, "timeout")) {
                        char *end;
                        double t = strtod(val, &end);
                        if (*end || end == val || t < 0 || t > 1e9)
                                goto bad;
                        c->fs.timeout = t;
                        return 0;
                }
                if (streq(opt, "thread_pool_size")) {
                        if (parse_uint(val, 1024, &u) < 0)
                                goto bad;
                        c->thread_pool_size_given = (int)u;
                        return 0;
                }
                goto bad;
        }
        for (size_t i = 0; i < ELEMENTSOF(bools); i++) {
                bool *b = (bool *)((char *)c + bools[i].offset);
                if (streq(opt, bools[i].name)) {
                        *b = true;
                        return 0;
                }
                if (strncmp(opt, "no_", 3) == 0 && streq(opt + 3, bools[i].name)) {
                        *b = false;
                        return 0;
                }
        }
        if (streq(opt, "posix_acl") || streq(opt, "no_posix_acl")) {
                c->posix_acl_mode = opt[0] == 'n' ? FEATURE_NEVER : FEATURE_ALWAYS;
                return 0;
        }
        if (streq(opt, "security_label") || streq(opt, "no_security_label")) {
                c->security_label_mode = opt[0] == 'n' ? FEATURE_NEVER : FEATURE_ALWAYS;
                return 0;
        }
        if (streq(opt, "debug")) {
                c->log_level = LOG_DEBUG;
                c->log_level_given = true;
                return 0;
        }
        /* The C virtiofsd's: norace turned off a racy fallback vufsd never had; allow_root is a
         * FUSE mount option without meaning for a virtio-fs device. */
        if (streq(opt, "norace") || streq(opt, "allow_root"))
                return 0;
bad:
        return usage_error("unknown or invalid option \"-o %s%s%s\"", opt, val ? "=" : "", val ?: "");
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

void config_apply_rust_log(Config *c, const char *value) {
        _cleanup_free_ char *copy = NULL;
        int bare = -2, ours = -2;
        char *save = NULL;

        if (!value || !*value || c->log_level_given)
                return;
        copy = strdup(value);
        if (!copy)
                return;
        /* env_logger: comma-separated directives, each LEVEL, TARGET or TARGET=LEVEL (a bare
         * TARGET means everything for it); a directive for our name beats a bare level. */
        for (char *d = strtok_r(copy, ",", &save); d; d = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(d, '=');
                char lower[32];
                size_t i;

                if (eq) {
                        *eq = '\0';
                        if (!streq(d, "vufsd") && !streq(d, "virtiofsd"))
                                continue;
                        d = eq + 1;
                        for (i = 0; d[i] && i < sizeof lower - 1; i++)
                                lower[i] = (char)(d[i] >= 'A' && d[i] <= 'Z' ? d[i] + 32 : d[i]);
                        lower[i] = '\0';
                        if (level_from_string(lower) >= -1)
                                ours = level_from_string(lower);
                        continue;
                }
                if (streq(d, "vufsd") || streq(d, "virtiofsd")) {
                        ours = LOG_DEBUG;
                        continue;
                }
                for (i = 0; d[i] && i < sizeof lower - 1; i++)
                        lower[i] = (char)(d[i] >= 'A' && d[i] <= 'Z' ? d[i] + 32 : d[i]);
                lower[i] = '\0';
                if (level_from_string(lower) >= -1)
                        bare = level_from_string(lower);
        }
        if (ours >= -1)
                c->log_level = ours;
        else if (bare >= -1)
                c->log_level = bare;
}

static void print_capabilities(void) {
        /* The vhost-user backend description libvirt reads, with the Rust virtiofsd's feature names
         * in its order; only what is really implemented. "posix-acl-negotiation-mode" and
         * "security-label-negotiation-mode": --posix-acl[=never|auto|always] and
         * --security-label[=MODE] are parsed and negotiated (set_feature_mode()).
         * "separate-options": libvirt may pass --shared-dir, --cache, --sandbox, --xattr,
         * --thread-pool-size, --rlimit-nofile, --log-level and the id maps as separate arguments
         * instead of "-o" (tests/compat serves a guest both ways). Not "migrate-precopy": vufsd has
         * no device-state migration yet. */
        printf("{\n"
               "  \"type\": \"fs\",\n"
               "  \"features\": [\n"
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
        ARG_INSTANCE,
        ARG_CONFIG,
        ARG_BUS,
        ARG_BUS_USER,
        ARG_DIR_BUFFER_MAX,
        ARG_ALLOW_PRIVILEGED_FILES,
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
        { "allow-privileged-files", no_argument, ARG_ALLOW_PRIVILEGED_FILES, NULL,
          "let the guest make device nodes and set-user/group-id files; the share is mounted suid,dev in the sandbox "
          "(default: refused/stripped, nosuid,nodev; see docs/security.md)" },
        { "dir-buffer-max", required_argument, ARG_DIR_BUFFER_MAX, "BYTES",
          "directory read-ahead kept for all open directories (default 64 MiB, at least 16384)" },
        { "rlimit-nofile", required_argument, ARG_RLIMIT_NOFILE, "N", "open-file limit to set (0 leaves it)" },
        { "uid-map", required_argument, ARG_UID_MAP,
          ":NS:HOST:COUNT:", "user namespace uid mapping, repeatable; must map namespace uid 0 (docs/id-mapping.md)" },
        { "gid-map", required_argument, ARG_GID_MAP, ":NS:HOST:COUNT:", "the same for gids" },
        { "translate-uid", required_argument, ARG_TRANSLATE_UID, "TYPE:SRC:DST:N",
          "uid translation without a user namespace, repeatable: TYPE guest, host, squash-guest, squash-host, "
          "map, or forbid-guest:SRC:N" },
        { "translate-gid", required_argument, ARG_TRANSLATE_GID, "TYPE:SRC:DST:N", "the same for gids" },
        SECTION("Migration (validated; device-state migration is not built yet)"),
        { "migration-mode", required_argument, ARG_MIGRATION_MODE, "MODE", "find-paths (default), file-handles" },
        { "migration-on-error", required_argument, ARG_MIGRATION_ON_ERROR, "ACTION", "abort (default), guest-error" },
        { "migration-verify-handles", no_argument, ARG_MIGRATION_VERIFY_HANDLES, NULL, "find-paths only" },
        { "migration-confirm-paths", no_argument, ARG_MIGRATION_CONFIRM_PATHS, NULL, "find-paths only" },
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
                        printf("vufsd %s\n", PACKAGE_VERSION);
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
                case ARG_ALLOW_PRIVILEGED_FILES:
                        c->fs.privileged_files = true;
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

static int make_absolute(char **path) {
        char cwd[PATH_MAX];
        char *p;

        if (!*path || (*path)[0] == '/')
                return 0;
        if (!getcwd(cwd, sizeof cwd))
                return negative_errno();
        if (streq(*path, "."))
                p = strdup(cwd);
        else if (asprintf(&p, "%s/%s", streq(cwd, "/") ? "" : cwd, *path) < 0)
                p = NULL;
        if (!p)
                return -ENOMEM;
        free(*path);
        *path = p;
        return 0;
}

/* Whether the share's filesystem takes the given xattr namespace: getxattr answers ENODATA (none
 * set) or a value where it does, EOPNOTSUPP where it does not. */
static bool share_supports_xattr(const char *dir, const char *name) {
        char buf[1];
        return getxattr(dir, name, buf, 0) >= 0 || (errno != EOPNOTSUPP && errno != ENOTSUP);
}

int config_verify(Config *c) {
        const char *why = NULL;
        int r;

        resolve_capabilities(c);
        if (!c->shared_dir)
                return usage_error("--shared-dir (or -o source=) is required");
        if (c->listen_fd >= 0 && c->socket_path)
                return usage_error("--fd excludes --socket-path and --socket");
        if (c->listen_fd >= 0 && c->socket_group)
                return usage_error("--socket-group applies to --socket-path only, not to --fd");
        if (c->migration_mode == MIGRATION_FILE_HANDLES && c->migration_confirm_paths)
                return usage_error("--migration-confirm-paths cannot be used with --migration-mode=file-handles "
                                   "(it is unnecessary there)");
        if (c->migration_mode == MIGRATION_FILE_HANDLES && c->migration_verify_handles)
                return usage_error("--migration-verify-handles cannot be used with --migration-mode=file-handles "
                                   "(it is unnecessary there)");
        if ((c->translate_uid.n > 0 || c->translate_gid.n > 0) && c->posix_acl_mode != FEATURE_NEVER)
                return usage_error("--translate-uid/--translate-gid cannot be used with --posix-acl: translating ids "
                                   "would break ACLs");
        /* A D-Bus address always has a transport prefix ("unix:path=..."). */
        if (c->bus && !streq(c->bus, "system") && !streq(c->bus, "session") && !streq(c->bus, "none") &&
            !strchr(c->bus, ':'))
                return usage_error("--bus must be system, session, none or a D-Bus address like "
                                   "unix:path=/run/my-bus, got \"%s\"",
                                   c->bus);
        r = config_resolve_threads(c->threads_given, c->thread_pool_size_given, &c->thread_mode, &c->pool_size, &why);
        if (r < 0)
                return usage_error("%s", why);

        /* File handles need CAP_DAC_READ_SEARCH after the lockdown (open_by_handle_at): a --modcaps
         * that removes it means no handles, which mandatory cannot accept. */
        if (c->fs.inode_file_handles != INODE_FILE_HANDLES_NEVER && !(c->modcaps_keep & capabilities_file_handles())) {
                if (c->fs.inode_file_handles == INODE_FILE_HANDLES_MANDATORY)
                        return usage_error("--inode-file-handles=mandatory needs CAP_DAC_READ_SEARCH, which --modcaps "
                                           "removes");
                c->fs.inode_file_handles = INODE_FILE_HANDLES_NEVER;
                c->handles_dropped_by_modcaps = true;
        }

        /* Accepted as the Rust virtiofsd accepts them, refused where the value asks for something
         * vufsd does not do yet (issue 16), rather than ignored. */
        /* The maps are a user namespace's (userns.h): without a sandbox there is none. Inside,
         * the daemon is uid/gid 0 of the namespace, so 0 must be mapped (it is the guest's root
         * too; docs/id-mapping.md). */
        /* libvirt passes maps without --sandbox; the default is the namespace sandbox except in
         * sanitizer builds (sandbox_mode_default()), where a map still asks for it. */
        if ((c->uid_map.n > 0 || c->gid_map.n > 0) && !c->sandbox_given)
                c->sandbox = SANDBOX_NAMESPACE;
        if ((c->uid_map.n > 0 || c->gid_map.n > 0) && c->sandbox == SANDBOX_NONE)
                return usage_error("--uid-map/--gid-map need --sandbox=namespace or --sandbox=chroot: they map the "
                                   "user namespace the sandbox creates");
        if (c->uid_map.n > 0 && !id_map_contains(&c->uid_map, 0))
                return usage_error("--uid-map: no entry maps namespace uid 0 (the daemon's own uid in the namespace "
                                   "and the guest's root), e.g. :0:HOST_UID:COUNT:");
        if (c->gid_map.n > 0 && !id_map_contains(&c->gid_map, 0))
                return usage_error("--gid-map: no entry maps namespace gid 0 (the daemon's own gid in the namespace "
                                   "and the guest's root group), e.g. :0:HOST_GID:COUNT:");

        /* Relative --shared-dir and socket paths (Podman runs "--shared-dir ." in the directory):
         * the sandbox changes the root and the working directory, so resolve them now. */
        r = make_absolute(&c->shared_dir);
        if (r >= 0)
                r = make_absolute(&c->socket_path);
        if (r < 0)
                return usage_error("cannot resolve a relative path: %s", strerror(-r));

        /* What the Rust virtiofsd derives: ACLs and labels need xattrs; no READDIRPLUS without a
         * cache to put its entries in. */
        if (c->posix_acl_mode != FEATURE_NEVER || c->security_label_mode != FEATURE_NEVER)
                c->fs.xattr = true;
        if (c->fs.cache == CACHE_NEVER)
                c->fs.readdirplus = false;
        c->fs.posix_acl =
                c->posix_acl_mode == FEATURE_ALWAYS ||
                (c->posix_acl_mode == FEATURE_AUTO && share_supports_xattr(c->shared_dir, "system.posix_acl_access"));
        c->fs.security_label =
                c->security_label_mode == FEATURE_ALWAYS ||
                (c->security_label_mode == FEATURE_AUTO && share_supports_xattr(c->shared_dir, "security.selinux"));
        c->fs.shared_dir = c->shared_dir;
        c->fs.xattrmap = c->xattrmap;
        c->fs.capability_xattr = xattr_map_capability_name(c->xattrmap);
        /* Translation is applied only where it changes something (docs/id-mapping.md). */
        c->fs.translate_uid = id_translate_is_empty(&c->translate_uid.table) ? NULL : &c->translate_uid.table;
        c->fs.translate_gid = id_translate_is_empty(&c->translate_gid.table) ? NULL : &c->translate_gid.table;
        return 0;
}
