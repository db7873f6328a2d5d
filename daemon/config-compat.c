/* config-compat.c: the compatibility forms of the command line: "-o key[=value],..." (the Rust
 * virtiofsd's keys and the C virtiofsd's) and RUST_LOG. */
#include "config-internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "log.h"

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
