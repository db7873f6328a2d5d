/* config-values.c: parsers of single option values (cache policy, log level, sandbox, capabilities,
 * tag, xattr map, feature modes), shared by the command line, the -o forms and the config file. */
#include "config-internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capabilities.h"
#include "log.h"

int usage_error(const char *fmt, ...) {
        va_list ap;

        fputs("vufsd: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputs(" (see --help)\n", stderr);
        return -EINVAL;
}

int set_string(char **dst, const char *v) {
        char *s = strdup(v);
        if (!s)
                return -ENOMEM;
        free(*dst);
        *dst = s;
        return 0;
}

int parse_uint(const char *s, uint64_t max, uint64_t *ret) {
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

int set_cache(Config *c, const char *what, const char *v) {
        CachePolicy p = cache_policy_from_string(v);
        if (p < 0)
                return usage_error("%s: unknown cache policy \"%s\" (auto, always, never, metadata)", what, v);
        c->fs.cache = p;
        return 0;
}

/* The Rust virtiofsd's level names (error, warn, info, debug, trace, off) and syslog's. */
int level_from_string(const char *v) {
        if (streq(v, "trace"))
                return LOG_DEBUG;
        if (streq(v, "off"))
                return -1; /* below every level: nothing is logged */
        return log_level_from_string(v);
}

int set_log_level(Config *c, const char *what, const char *v) {
        int l = level_from_string(v);
        if (l < -1)
                return usage_error("%s: unknown log level \"%s\" (error, warn, info, debug, trace, off)", what, v);
        c->log_level = l;
        c->log_level_given = true;
        return 0;
}

int set_inode_file_handles(Config *c, const char *what, const char *v) {
        InodeFileHandles m = inode_file_handles_from_string(v);
        if (m < 0)
                return usage_error("%s must be never, prefer or mandatory, got \"%s\"", what, v);
        c->fs.inode_file_handles = m;
        return 0;
}

int set_privileged_files(Config *c, const char *what, const char *v) {
        PrivilegedFiles m = privileged_files_from_string(v);
        if (m < 0)
                return usage_error("%s must be map, refuse or allow, got \"%s\"", what, v);
        c->fs.privileged_files = m; /* the capabilities follow in config_verify() */
        return 0;
}

int set_sandbox(Config *c, const char *what, const char *v) {
        SandboxMode m = sandbox_mode_from_string(v);
        if (m < 0)
                return usage_error("%s: sandbox must be namespace, chroot or none, got \"%s\"", what, v);
        c->sandbox = m;
        c->sandbox_given = true;
        return 0;
}

/* The kept set from the default and --modcaps; again at config_verify(), when
 * --privileged-files=allow may have come after --modcaps. */
void resolve_capabilities(Config *c) {
        c->capabilities = (capabilities_default(c->fs.privileged_files == PRIVILEGED_FILES_ALLOW) | c->modcaps_add) & c->modcaps_keep;
}

int set_modcaps(Config *c, const char *v) {
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

int set_tag(Config *c, const char *v) {
        size_t n = strlen(v);
        if (n == 0 || n > CONFIG_MAX_TAG_LEN)
                return usage_error("--tag: the tag must be 1..%d bytes, got %zu", CONFIG_MAX_TAG_LEN, n);
        return set_string(&c->tag, v);
}

int set_xattrmap(Config *c, const char *what, const char *v) {
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

int set_feature_mode(FeatureMode *dst, const char *what, const char *v) {
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

