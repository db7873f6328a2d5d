/* id-translate.c: --translate-uid/--translate-gid tables: parsing, building, looking up. */
#include "id-translate.h"

#include <ctype.h>
#include <string.h>

#include "util.h"

static const char *const id_translate_table[_ID_TRANSLATE_MAX] = {
        [ID_TRANSLATE_GUEST] = "guest",
        [ID_TRANSLATE_HOST] = "host",
        [ID_TRANSLATE_SQUASH_GUEST] = "squash-guest",
        [ID_TRANSLATE_SQUASH_HOST] = "squash-host",
        [ID_TRANSLATE_FORBID_GUEST] = "forbid-guest",
        [ID_TRANSLATE_MAP] = "map",
};
DEFINE_STRING_TABLE_LOOKUP(id_translate, IdTranslateType, _ID_TRANSLATE_MAX);

/* A decimal u32 as Rust's u32::from_str takes it: an optional '+', then at least one digit, and
 * nothing else (no spaces, no '-'). p..end is the field. */
static int parse_u32(const char *p, const char *end, uint32_t *ret) {
        uint64_t v = 0;

        if (p < end && *p == '+')
                p++;
        if (p == end)
                return -EINVAL;
        for (; p < end; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                v = v * 10 + (uint64_t)(*p - '0');
                if (v > UINT32_MAX)
                        return -EINVAL;
        }
        *ret = (uint32_t)v;
        return 0;
}

int id_translate_parse(const char *s, IdTranslateEntry *ret) {
        char prefix[16];
        uint32_t v[3];
        unsigned n = 0, want;
        size_t plen = 0;
        IdTranslateType type;
        const char *p, *field;
        char sep;

        if (!s)
                return -EINVAL;
        /* The type: [A-Za-z0-9_-]*, lower-cased; the first other character separates the fields. */
        for (p = s; *p && (isalnum((unsigned char)*p) || *p == '-' || *p == '_'); p++) {
                if (plen + 1 >= sizeof prefix)
                        return -EINVAL; /* longer than any type name */
                prefix[plen++] = (char)tolower((unsigned char)*p);
        }
        prefix[plen] = '\0';
        if (!*p)
                return -EINVAL; /* no separator, no numbers */
        type = id_translate_from_string(prefix);
        if (type < 0)
                return -EINVAL;
        sep = *p++;
        for (field = p;; p++) {
                if (*p != sep && *p != '\0')
                        continue;
                if (n == ELEMENTSOF(v) || parse_u32(field, p, &v[n]) < 0)
                        return -EINVAL;
                n++;
                if (*p == '\0')
                        break;
                field = p + 1;
        }
        want = type == ID_TRANSLATE_FORBID_GUEST ? 2 : 3;
        if (n != want)
                return -EINVAL;
        *ret = (IdTranslateEntry){
                .type = type,
                .source = v[0],
                .target = type == ID_TRANSLATE_FORBID_GUEST ? 0 : v[1],
                .count = type == ID_TRANSLATE_FORBID_GUEST ? v[1] : v[2],
        };
        return 0;
}

/* [start, start + count) fits below UINT32_MAX, which stays out of every range. */
static bool range_fits(uint32_t start, uint32_t count) {
        return (uint64_t)start + count <= UINT32_MAX;
}

static bool overlaps(const IdRange *r, unsigned n, uint32_t start, uint32_t count) {
        for (unsigned i = 0; i < n; i++)
                if (start < (uint64_t)r[i].start + r[i].count && r[i].start < (uint64_t)start + count)
                        return true;
        return false;
}

int id_translate_add(IdTranslate *t, const IdTranslateEntry *e, const char **why) {
        IdRange to_host = { .start = e->source, .count = e->count, .target = e->target };
        IdRange to_guest = { .count = e->count };
        bool host_side = false, guest_side = false;
        const char *dummy;

        if (!why)
                why = &dummy;
        *why = NULL;
        if (e->count == 0) {
                *why = "the count must be at least 1";
                return -EINVAL;
        }
        switch (e->type) {
        case ID_TRANSLATE_GUEST:
                to_host.kind = ID_RANGE_SHIFT;
                host_side = true;
                break;
        case ID_TRANSLATE_SQUASH_GUEST:
                to_host.kind = ID_RANGE_SQUASH;
                host_side = true;
                break;
        case ID_TRANSLATE_FORBID_GUEST:
                to_host.kind = ID_RANGE_FAIL;
                to_host.target = 0;
                host_side = true;
                break;
        case ID_TRANSLATE_HOST:
        case ID_TRANSLATE_SQUASH_HOST:
                to_guest = (IdRange){ .start = e->source,
                                      .count = e->count,
                                      .target = e->target,
                                      .kind = e->type == ID_TRANSLATE_HOST ? ID_RANGE_SHIFT : ID_RANGE_SQUASH };
                guest_side = true;
                break;
        case ID_TRANSLATE_MAP:
                to_host.kind = ID_RANGE_SHIFT;
                to_guest = (IdRange){
                        .start = e->target, .count = e->count, .target = e->source, .kind = ID_RANGE_SHIFT
                };
                host_side = guest_side = true;
                break;
        default:
                *why = "unknown type";
                return -EINVAL;
        }

        /* Sources and targets: a range target needs room for count ids, a squash target for one. */
        if ((host_side && (!range_fits(to_host.start, to_host.count) ||
                           (to_host.kind == ID_RANGE_SHIFT && !range_fits(to_host.target, to_host.count)) ||
                           (to_host.kind == ID_RANGE_SQUASH && to_host.target == UINT32_MAX))) ||
            (guest_side && (!range_fits(to_guest.start, to_guest.count) ||
                            (to_guest.kind == ID_RANGE_SHIFT && !range_fits(to_guest.target, to_guest.count)) ||
                            (to_guest.kind == ID_RANGE_SQUASH && to_guest.target == UINT32_MAX)))) {
                *why = "a range goes beyond 4294967294 (4294967295 is no id)";
                return -ERANGE;
        }
        if (host_side && overlaps(t->to_host, t->n_to_host, to_host.start, to_host.count)) {
                *why = "its guest ids overlap an earlier guest-to-host entry";
                return -EEXIST;
        }
        if (guest_side && overlaps(t->to_guest, t->n_to_guest, to_guest.start, to_guest.count)) {
                *why = "its host ids overlap an earlier host-to-guest entry";
                return -EEXIST;
        }
        if ((host_side && t->n_to_host == ID_TRANSLATE_MAX_RANGES) ||
            (guest_side && t->n_to_guest == ID_TRANSLATE_MAX_RANGES)) {
                *why = "too many entries";
                return -E2BIG;
        }
        if (host_side)
                t->to_host[t->n_to_host++] = to_host;
        if (guest_side)
                t->to_guest[t->n_to_guest++] = to_guest;
        return 0;
}

bool id_translate_is_empty(const IdTranslate *t) {
        return !t || (t->n_to_host == 0 && t->n_to_guest == 0);
}

static const IdRange *find(const IdRange *r, unsigned n, uint32_t id) {
        for (unsigned i = 0; i < n; i++)
                if (id >= r[i].start && id - r[i].start < r[i].count)
                        return &r[i];
        return NULL;
}

int id_translate_to_host(const IdTranslate *t, uint32_t guest, uint32_t *ret) {
        const IdRange *r = t ? find(t->to_host, t->n_to_host, guest) : NULL;

        if (!r) {
                *ret = guest;
                return 0;
        }
        switch (r->kind) {
        case ID_RANGE_SHIFT:
                *ret = r->target + (guest - r->start);
                return 0;
        case ID_RANGE_SQUASH:
                *ret = r->target;
                return 0;
        default:
                return -EPERM;
        }
}

uint32_t id_translate_to_guest(const IdTranslate *t, uint32_t host) {
        const IdRange *r = t ? find(t->to_guest, t->n_to_guest, host) : NULL;

        if (!r)
                return host;
        return r->kind == ID_RANGE_SHIFT ? r->target + (host - r->start) : r->target;
}
