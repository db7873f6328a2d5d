/* xattr-map.c: the --xattrmap rule language (see xattr-map.h): a strict parser, the two name
 * translations and the listxattr rewrite. The parser reads untrusted text from the command line
 * only, but is fuzzed anyway (tests/fuzz/fuzz-xattr-map.c); the translations see guest names. */
#include "xattr-map.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fs-options.h"
#include "util.h"

typedef enum RuleType {
        RULE_PREFIX,
        RULE_OK,
        RULE_BAD,
        RULE_UNSUPPORTED,
} RuleType;

enum {
        SCOPE_CLIENT = 1 << 0,
        SCOPE_SERVER = 1 << 1,
};

typedef struct Rule {
        RuleType type;
        unsigned scope;
        char *key; /* matched against guest names (client scope) */
        char *prepend; /* matched against host names (server scope) */
} Rule;

struct XattrMap {
        Rule *rules;
        unsigned n, allocated;
        /* The host name of the guest's security.capability, when the map renames it (see the
         * header); NULL when it keeps its name or is refused. */
        char *capability;
};

/* Bounds what a command line can make us allocate; real maps have a handful of rules. */
#define XATTR_MAP_MAX_RULES 256

XattrMap *xattr_map_free(XattrMap *m) {
        if (!m)
                return NULL;
        for (unsigned i = 0; i < m->n; i++) {
                free(m->rules[i].key);
                free(m->rules[i].prepend);
        }
        free(m->rules);
        free(m->capability);
        free(m);
        return NULL;
}

const char *xattr_map_capability_name(const XattrMap *m) {
        return m ? m->capability : NULL;
}

unsigned xattr_map_n_rules(const XattrMap *m) {
        return m ? m->n : 0;
}

static int add_rule(XattrMap *m, RuleType type, unsigned scope, const char *key, size_t key_len, const char *prepend,
                    size_t prepend_len) {
        Rule *r;

        if (m->n == XATTR_MAP_MAX_RULES)
                return -E2BIG;
        if (m->n == m->allocated) {
                unsigned n = m->allocated ? 2 * m->allocated : 8;
                Rule *nr = reallocarray(m->rules, n, sizeof *nr);
                if (!nr)
                        return -ENOMEM;
                m->rules = nr;
                m->allocated = n;
        }
        r = &m->rules[m->n];
        *r = (Rule){
                .type = type, .scope = scope, .key = strndup(key, key_len), .prepend = strndup(prepend, prepend_len)
        };
        if (!r->key || !r->prepend) {
                free(r->key);
                free(r->prepend);
                return -ENOMEM;
        }
        m->n++;
        return 0;
}

/* The next field of a rule: the text up to the separator, which must be there. */
static int take_field(const char **p, char sep, const char **ret, size_t *ret_len) {
        const char *end = strchr(*p, sep);

        if (!end)
                return -EINVAL;
        *ret = *p;
        *ret_len = (size_t)(end - *p);
        *p = end + 1;
        return 0;
}

static bool field_is(const char *f, size_t len, const char *word) {
        return strlen(word) == len && memcmp(f, word, len) == 0;
}

int xattr_map_parse(const char *spec, XattrMap **ret, const char **ret_error) {
        XattrMap *m;
        const char *p = spec, *dummy;
        bool seen_map = false;
        int r = 0;

        if (!ret_error)
                ret_error = &dummy;
        if (!spec) {
                *ret_error = "no map given";
                return -EINVAL;
        }
        m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        for (;;) {
                const char *type, *scope, *key, *prepend;
                size_t type_len, scope_len, key_len, prepend_len;
                unsigned sc = 0;
                char sep;

                while (*p && isspace((unsigned char)*p))
                        p++;
                if (!*p)
                        break;
                if (seen_map) {
                        *ret_error = "the map rule must be the last rule";
                        r = -EINVAL;
                        goto fail;
                }
                sep = *p++;
                if (isalnum((unsigned char)sep) || sep == '.' || sep == '_' || sep == '-') {
                        *ret_error = "a rule must start with its separator (e.g. ':prefix:all:KEY:PREPEND:')";
                        r = -EINVAL;
                        goto fail;
                }
                if (take_field(&p, sep, &type, &type_len) < 0) {
                        *ret_error = "a rule ends before its type";
                        r = -EINVAL;
                        goto fail;
                }
                if (field_is(type, type_len, "map")) {
                        if (take_field(&p, sep, &key, &key_len) < 0 ||
                            take_field(&p, sep, &prepend, &prepend_len) < 0) {
                                *ret_error = "a map rule needs SEP map SEP key SEP prepend SEP";
                                r = -EINVAL;
                                goto fail;
                        }
                        if (prepend_len == 0) {
                                *ret_error = "a map rule needs a non-empty prepend";
                                r = -EINVAL;
                                goto fail;
                        }
                        seen_map = true;
                        r = add_rule(m, RULE_PREFIX, SCOPE_CLIENT | SCOPE_SERVER, key, key_len, prepend, prepend_len);
                        if (r >= 0 && key_len == 0)
                                r = add_rule(m, RULE_BAD, SCOPE_CLIENT | SCOPE_SERVER, "", 0, "", 0);
                        else if (r >= 0) {
                                r = add_rule(m, RULE_BAD, SCOPE_SERVER, "", 0, key, key_len);
                                if (r >= 0)
                                        r = add_rule(m, RULE_BAD, SCOPE_CLIENT, prepend, prepend_len, "", 0);
                                if (r >= 0)
                                        r = add_rule(m, RULE_OK, SCOPE_CLIENT | SCOPE_SERVER, "", 0, "", 0);
                        }
                        if (r < 0) {
                                *ret_error = r == -E2BIG ? "too many rules" : "out of memory";
                                goto fail;
                        }
                        continue;
                }
                if (take_field(&p, sep, &scope, &scope_len) < 0 || take_field(&p, sep, &key, &key_len) < 0 ||
                    take_field(&p, sep, &prepend, &prepend_len) < 0) {
                        *ret_error = "a rule needs SEP type SEP scope SEP key SEP prepend SEP";
                        r = -EINVAL;
                        goto fail;
                }
                if (field_is(scope, scope_len, "client"))
                        sc = SCOPE_CLIENT;
                else if (field_is(scope, scope_len, "server"))
                        sc = SCOPE_SERVER;
                else if (field_is(scope, scope_len, "all"))
                        sc = SCOPE_CLIENT | SCOPE_SERVER;
                else {
                        *ret_error = "unknown scope (client, server, all)";
                        r = -EINVAL;
                        goto fail;
                }
                if (field_is(type, type_len, "prefix"))
                        r = add_rule(m, RULE_PREFIX, sc, key, key_len, prepend, prepend_len);
                else if (field_is(type, type_len, "ok"))
                        r = add_rule(m, RULE_OK, sc, key, key_len, prepend, prepend_len);
                else if (field_is(type, type_len, "bad"))
                        r = add_rule(m, RULE_BAD, sc, key, key_len, prepend, prepend_len);
                else if (field_is(type, type_len, "unsupported"))
                        r = add_rule(m, RULE_UNSUPPORTED, sc, key, key_len, prepend, prepend_len);
                else {
                        *ret_error = "unknown rule type (prefix, ok, bad, unsupported, map)";
                        r = -EINVAL;
                        goto fail;
                }
                if (r < 0) {
                        *ret_error = r == -E2BIG ? "too many rules" : "out of memory";
                        goto fail;
                }
        }
        if (m->n == 0) {
                *ret_error = "the map has no rules";
                r = -EINVAL;
                goto fail;
        }
        /* --privileged-files=map's own attribute is never a guest's: a rule that prepends part of
         * its name beyond "user." aims at it. (Wider prefixes, "user." or none, reach it too under
         * one exact guest name; the passthrough refuses and hides that name whatever it came as.) */
        for (unsigned i = 0; i < m->n; i++) {
                const char *pp = m->rules[i].prepend;
                size_t l = pp ? strlen(pp) : 0;
                if (m->rules[i].type == RULE_PREFIX && l > strlen("user.") &&
                    strncmp(pp, FS_PRIVILEGED_XATTR, l) == 0) {
                        *ret_error = "a rule maps names onto " FS_PRIVILEGED_XATTR ", vufsd's own attribute";
                        r = -EINVAL;
                        goto fail;
                }
        }
        /* Resolved once: the passthrough needs it on every write. A refused name stays NULL (the
         * guest cannot set it; a real one on the host is the host kernel's to clear). */
        r = xattr_map_to_host(m, "security.capability", &m->capability);
        if (r == -ENOMEM) {
                *ret_error = "out of memory";
                goto fail;
        }
        if (r < 0 || streq(m->capability, "security.capability")) {
                free(m->capability);
                m->capability = NULL;
        }
        *ret = m;
        return 0;
fail:
        xattr_map_free(m);
        return r;
}

static bool starts_with(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

int xattr_map_to_host(const XattrMap *m, const char *name, char **ret) {
        for (unsigned i = 0; i < m->n; i++) {
                const Rule *r = &m->rules[i];
                size_t pl, nl;
                char *s;

                if (!(r->scope & SCOPE_CLIENT) || !starts_with(name, r->key))
                        continue;
                switch (r->type) {
                case RULE_BAD:
                        return -EPERM;
                case RULE_UNSUPPORTED:
                        return -ENOTSUP;
                case RULE_OK:
                        s = strdup(name);
                        break;
                case RULE_PREFIX:
                        pl = strlen(r->prepend);
                        nl = strlen(name);
                        s = malloc(pl + nl + 1);
                        if (s) {
                                memcpy(s, r->prepend, pl);
                                memcpy(s + pl, name, nl + 1);
                        }
                        break;
                default:
                        return -EPERM;
                }
                if (!s)
                        return -ENOMEM;
                *ret = s;
                return 0;
        }
        return -EPERM; /* no rule: refused, as in both virtiofsd */
}

int xattr_map_to_guest(const XattrMap *m, const char *name, const char **ret) {
        for (unsigned i = 0; i < m->n; i++) {
                const Rule *r = &m->rules[i];

                if (!(r->scope & SCOPE_SERVER) || !starts_with(name, r->prepend))
                        continue;
                switch (r->type) {
                case RULE_OK:
                        *ret = name;
                        return 1;
                case RULE_PREFIX:
                        *ret = name + strlen(r->prepend);
                        return **ret ? 1 : 0; /* the bare prefix names nothing in the guest */
                default:
                        return 0;
                }
        }
        return 0;
}

ssize_t xattr_map_list(const XattrMap *m, const char *in, size_t in_len, char *out, size_t size) {
        size_t used = 0;

        if (in_len > 0 && in[in_len - 1] != '\0')
                return -EINVAL;
        for (size_t off = 0; off < in_len;) {
                const char *name = in + off, *g;
                size_t len = strlen(name), gl;

                off += len + 1;
                if (len == 0 || xattr_map_to_guest(m, name, &g) <= 0)
                        continue;
                gl = strlen(g) + 1;
                if (size > 0) {
                        if (used + gl > size)
                                return -ERANGE;
                        memcpy(out + used, g, gl);
                }
                used += gl;
        }
        return (ssize_t)used;
}
