/* config-idmap.c: the ID-map (--uid-map/--gid-map) and translation (--translate-uid/-gid) parsers:
 * strict decimal fields, overlaps refused. */
#include "config-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

int add_id_map(IdMapList *l, const char *what, const char *v) {
        const char *why = NULL;
        IdMapEntry e;

        if (id_map_parse(v, &e, &why) < 0)
                return usage_error("%s: \"%s\": %s (expected :NAMESPACE_ID:HOST_ID:COUNT:, as libvirt writes it)",
                                   what, v, why);
        if (id_map_add(l, &e, &why) < 0)
                return usage_error("%s: \"%s\": %s", what, v, why);
        return 0;
}

int add_id_translate(IdTranslateList *l, const char *what, const char *v) {
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

