/* config-file.c: reads /etc/vufsd/NAME.conf (GKeyFile) into a Config, strictly. */
#include "config-file.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "device.h"
#include "dir-stream.h"
#include "log.h"

/* After util.h: GLib #undefs and redefines MIN/MAX, the other order warns. */
#include <glib.h>

/* Every key the file may hold. A key not listed here is an error: a typo must not silently fall
 * back to a default (the daemon would start with another directory or policy than intended). */
typedef enum KeyType {
        KEY_STRING,
        KEY_BOOL,
        KEY_UINT,
} KeyType;

typedef struct KeyDef {
        const char *group;
        const char *key;
        KeyType type;
        uint64_t min, max; /* KEY_UINT only */
        int (*apply)(Config *c, const char *path, const struct KeyDef *def, const char *s, uint64_t u, bool b);
} KeyDef;

static int file_error(const char *path, const KeyDef *def, const char *value, const char *fmt, ...) _printf_(4, 5);
static int file_error(const char *path, const KeyDef *def, const char *value, const char *fmt, ...) {
        char why[256];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(why, sizeof why, fmt, ap);
        va_end(ap);
        fprintf(stderr, "vufsd: %s: [%s] %s=%s: %s\n", path, def->group, def->key, value, why);
        return -EINVAL;
}

static int set_str(char **dst, const char *v) {
        char *s = strdup(v);
        if (!s)
                return -ENOMEM;
        free(*dst);
        *dst = s;
        return 0;
}

static bool one_of(const char *v, const char *const *list) {
        for (; *list; list++)
                if (streq(v, *list))
                        return true;
        return false;
}

static int apply_directory(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        if (s[0] != '/')
                return file_error(path, def, s, "must be an absolute path");
        return set_str(&c->shared_dir, s);
}

static int apply_cache(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        CachePolicy p = cache_policy_from_string(s);
        if (p < 0)
                return file_error(path, def, s, "unknown cache policy (never, metadata, auto, always)");
        c->fs.cache = p;
        return 0;
}

static int apply_options(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        /* The same parser as "-o" on the command line; it prints which option is wrong. */
        int r = config_parse_o(c, s);
        if (r < 0)
                return file_error(path, def, s, "invalid option list (see \"-o\" in vufsd --help)");
        return 0;
}

static int apply_xattr(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        c->fs.xattr = b;
        return 0;
}

static int apply_readonly(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        c->fs.readonly = b;
        return 0;
}

static int apply_allow_privileged_files(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u,
                                        bool b) {
        /* The older boolean: true is allow, false the default (map). */
        c->fs.privileged_files = b ? PRIVILEGED_FILES_ALLOW : PRIVILEGED_FILES_MAP;
        return 0;
}

static int apply_privileged_files(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        PrivilegedFiles m = privileged_files_from_string(s);
        if (m < 0)
                return file_error(path, def, s, "must be map, refuse or allow");
        c->fs.privileged_files = m; /* the capabilities follow in config_verify() */
        return 0;
}

static int apply_privileged_key(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        if (s[0] != '/')
                return file_error(path, def, s, "must be an absolute path");
        return set_str(&c->privileged_key_file, s);
}

static int apply_inode_file_handles(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u,
                                    bool b) {
        InodeFileHandles m = inode_file_handles_from_string(s);
        if (m < 0)
                return file_error(path, def, s, "must be never, prefer or mandatory");
        c->fs.inode_file_handles = m;
        return 0;
}

static int apply_handles_beyond_share(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u,
                                      bool b) {
        c->fs.handles_beyond_share = b;
        return 0;
}

static int apply_mode(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        ThreadMode m = thread_mode_from_string(s);
        if (m < 0)
                return file_error(path, def, s, "must be inline, pool or auto");
        c->threads_given = m;
        return 0;
}

static int apply_pool_size(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        c->thread_pool_size_given = (int)u;
        return 0;
}

static int apply_queues(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        c->n_request_queues = (unsigned)u;
        return 0;
}

static int apply_poll_us(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        if (config_parse_poll_us(s, &c->poll_us) < 0)
                return file_error(path, def, s, "must be auto or a number 0..%u", DEVICE_MAX_POLL_US);
        return 0;
}

static int apply_sandbox(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        SandboxMode m = sandbox_mode_from_string(s);
        if (m < 0)
                return file_error(path, def, s, "must be namespace, chroot or none");
        c->sandbox = m;
        c->sandbox_given = true;
        return 0;
}

static int apply_seccomp(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        SyscallFilter f = syscall_filter_from_string(s);
        if (f < 0)
                return file_error(path, def, s, "must be kill, log, trap or none");
        c->seccomp = f;
        return 0;
}

static int apply_rlimit(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        c->rlimit_nofile = u;
        return 0;
}

static int apply_bus_user(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        return set_str(&c->bus_user, s);
}

static int apply_dir_buffer_max(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        c->fs.dir_buffer_max = u;
        return 0;
}

static int apply_max_nodes(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        c->fs.max_nodes = u;
        return 0;
}

static int apply_max_inode_fds(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        c->fs.max_inode_fds = u;
        return 0;
}

static int apply_log_level(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        int l = log_level_from_string(s);
        if (l < 0)
                return file_error(path, def, s, "unknown log level (err, warning, notice, info, debug)");
        c->log_level = l;
        c->log_level_given = true;
        return 0;
}

static int apply_keep_listening(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        c->keep_listening = b;
        return 0;
}

static int apply_crash_restarts(Config *c, const char *path, const KeyDef *def, const char *s, uint64_t u, bool b) {
        c->crash_restarts = (unsigned) u;
        return 0;
}

/* Defaults are those of the command line (config_init()); units/example.conf documents them. */
static const KeyDef keys[] = {
        { "Share", "Directory", KEY_STRING, 0, 0, apply_directory },
        { "Share", "Cache", KEY_STRING, 0, 0, apply_cache },
        { "Share", "Options", KEY_STRING, 0, 0, apply_options },
        { "Share", "Xattr", KEY_BOOL, 0, 0, apply_xattr },
        { "Share", "ReadOnly", KEY_BOOL, 0, 0, apply_readonly },
        { "Share", "InodeFileHandles", KEY_STRING, 0, 0, apply_inode_file_handles },
        { "Threads", "Mode", KEY_STRING, 0, 0, apply_mode },
        { "Threads", "PoolSize", KEY_UINT, 0, 1024, apply_pool_size },
        { "Threads", "RequestQueues", KEY_UINT, 1, DEVICE_MAX_REQUEST_QUEUES, apply_queues },
        { "Threads", "PollUSec", KEY_STRING, 0, 0, apply_poll_us }, /* auto or a number */
        { "Security", "Sandbox", KEY_STRING, 0, 0, apply_sandbox },
        { "Security", "Seccomp", KEY_STRING, 0, 0, apply_seccomp },
        { "Security", "RlimitNofile", KEY_UINT, 1, UINT32_MAX, apply_rlimit },
        { "Security", "DirBufferMax", KEY_UINT, DIR_STREAM_BUF_SIZE, DIR_STREAM_MAX_CAP, apply_dir_buffer_max },
        { "Security", "MaxNodes", KEY_UINT, FS_MAX_NODES_MIN, FS_MAX_NODES_MAX, apply_max_nodes },
        { "Security", "MaxInodeFds", KEY_UINT, FS_MAX_INODE_FDS_MIN, FS_MAX_INODE_FDS_MAX, apply_max_inode_fds },
        { "Security", "BusUser", KEY_STRING, 0, 0, apply_bus_user },
        { "Security", "AllowPrivilegedFiles", KEY_BOOL, 0, 0, apply_allow_privileged_files },
        { "Security", "PrivilegedFiles", KEY_STRING, 0, 0, apply_privileged_files },
        { "Security", "PrivilegedFilesKey", KEY_STRING, 0, 0, apply_privileged_key },
        { "Security", "AllowHandlesBeyondShare", KEY_BOOL, 0, 0, apply_handles_beyond_share },
        { "Service", "LogLevel", KEY_STRING, 0, 0, apply_log_level },
        { "Service", "KeepListening", KEY_BOOL, 0, 0, apply_keep_listening },
        /* --crash-restarts: the same range (docs/survival.md) */
        { "Service", "CrashRestarts", KEY_UINT, 0, RESPAWN_MAX_RESTARTS, apply_crash_restarts },
};

static const KeyDef *find_key(const char *group, const char *key) {
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                if (streq(keys[i].group, group) && streq(keys[i].key, key))
                        return &keys[i];
        return NULL;
}

static bool known_group(const char *group) {
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                if (streq(keys[i].group, group))
                        return true;
        return false;
}

static int parse_bool(const char *s, bool *ret) {
        static const char *const yes[] = { "true", "yes", "on", "1", NULL };
        static const char *const no[] = { "false", "no", "off", "0", NULL };
        if (one_of(s, yes))
                *ret = true;
        else if (one_of(s, no))
                *ret = false;
        else
                return -EINVAL;
        return 0;
}

static int apply_one(Config *c, const char *path, const KeyDef *def, const char *value) {
        uint64_t u = 0;
        bool b = false;

        switch (def->type) {
        case KEY_STRING:
                if (!*value)
                        return file_error(path, def, value, "empty value (remove the line to get the default)");
                break;
        case KEY_BOOL:
                if (parse_bool(value, &b) < 0)
                        return file_error(path, def, value, "not a boolean (true or false)");
                break;
        case KEY_UINT: {
                char *end;
                if (!*value || *value == '-' || *value == '+')
                        return file_error(path, def, value, "not a number");
                errno = 0;
                u = strtoull(value, &end, 10);
                if (errno || *end)
                        return file_error(path, def, value, "not a number");
                if (u < def->min || u > def->max)
                        return file_error(path, def, value, "out of range %" PRIu64 "..%" PRIu64, def->min, def->max);
                break;
        }
        }
        return def->apply(c, path, def, value, u, b);
}

int config_file_instance_name_valid(const char *name) {
        size_t n = name ? strlen(name) : 0;

        if (n == 0 || n > 64 || name[0] == '.')
                return -EINVAL;
        if (strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:@-") != n)
                return -EINVAL;
        return 0;
}

int config_file_path_for_instance(const char *instance, char **ret) {
        char *p;

        if (config_file_instance_name_valid(instance) < 0) {
                fprintf(stderr,
                        "vufsd: invalid instance name \"%s\" (1-64 characters of A-Z a-z 0-9 _ . : @ -, "
                        "not starting with a dot)\n",
                        instance ?: "");
                return -EINVAL;
        }
        if (asprintf(&p, "%s/%s.conf", VUFSD_CONFIG_DIR, instance) < 0)
                return -ENOMEM;
        *ret = p;
        return 0;
}

int config_file_load(Config *c, const char *path, bool must_exist) {
        g_autoptr(GKeyFile) kf = g_key_file_new();
        g_autoptr(GError) error = NULL;
        g_auto(GStrv) groups = NULL;

        if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, &error)) {
                if (g_error_matches(error, G_FILE_ERROR, G_FILE_ERROR_NOENT) && !must_exist)
                        return 0;
                fprintf(stderr, "vufsd: cannot use configuration file %s: %s\n", path, error->message);
                return g_error_matches(error, G_FILE_ERROR, G_FILE_ERROR_NOENT) ? -ENOENT
                       : error->domain == G_FILE_ERROR                          ? -EIO
                                                                                : -EINVAL;
        }

        groups = g_key_file_get_groups(kf, NULL);
        for (char **g = groups; *g; g++) {
                g_auto(GStrv) names = NULL;

                if (!known_group(*g)) {
                        fprintf(stderr, "vufsd: %s: unknown section [%s] (known: Share, Threads, Security, Service)\n",
                                path, *g);
                        return -EINVAL;
                }
                names = g_key_file_get_keys(kf, *g, NULL, NULL);
                for (char **k = names; k && *k; k++) {
                        const KeyDef *def = find_key(*g, *k);
                        g_autofree char *value = NULL;
                        g_autoptr(GError) e = NULL;
                        int r;

                        if (!def) {
                                fprintf(stderr, "vufsd: %s: unknown key %s in section [%s]\n", path, *k, *g);
                                return -EINVAL;
                        }
                        /* get_string: GKeyFile unescapes \s \n \\ and keeps the rest as written. */
                        value = g_key_file_get_string(kf, *g, *k, &e);
                        if (!value) {
                                fprintf(stderr, "vufsd: %s: [%s] %s: %s\n", path, *g, *k, e->message);
                                return -EINVAL;
                        }
                        g_strstrip(value);
                        r = apply_one(c, path, def, value);
                        if (r < 0)
                                return r;
                }
        }
        return 1;
}
