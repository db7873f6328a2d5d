/* fuzz-id-translate.c: the input is split at the first NUL: newline-separated --translate-uid
 * entries, then ids (4 bytes each, little endian). Every entry goes through id_translate_parse()
 * and, when it parses, id_translate_add() onto one table (malformed and conflicting entries must be
 * refused cleanly, and leave the table as it was). Every id then goes through both directions,
 * and the answers are checked against a plain recomputation from the entries that were taken:
 * exactly the taken entries decide, an id no entry covers is unchanged, no answer is
 * 4294967295 for another id, forbid-guest answers EPERM. */
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"
#include "id-translate.h"
#include "util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        (void)argc;
        (void)argv;
        fuzz_quiet_logging();
        return 0;
}

static IdTranslateEntry taken[2 * ID_TRANSLATE_MAX_RANGES];
static unsigned n_taken;

/* The guest-to-host answer from the taken entries alone: 1 mapped (*ret), 0 not covered, -1
 * forbidden. */
static int expect_to_host(uint32_t g, uint32_t *ret) {
        for (unsigned i = 0; i < n_taken; i++) {
                const IdTranslateEntry *e = &taken[i];
                if (e->type == ID_TRANSLATE_HOST || e->type == ID_TRANSLATE_SQUASH_HOST)
                        continue;
                if (g < e->source || g - e->source >= e->count)
                        continue;
                if (e->type == ID_TRANSLATE_FORBID_GUEST)
                        return -1;
                *ret = e->type == ID_TRANSLATE_SQUASH_GUEST ? e->target : e->target + (g - e->source);
                return 1;
        }
        return 0;
}

static int expect_to_guest(uint32_t h, uint32_t *ret) {
        for (unsigned i = 0; i < n_taken; i++) {
                const IdTranslateEntry *e = &taken[i];
                uint32_t from, to;
                if (e->type == ID_TRANSLATE_MAP) {
                        from = e->target;
                        to = e->source;
                } else if (e->type == ID_TRANSLATE_HOST || e->type == ID_TRANSLATE_SQUASH_HOST) {
                        from = e->source;
                        to = e->target;
                } else
                        continue;
                if (h < from || h - from >= e->count)
                        continue;
                *ret = e->type == ID_TRANSLATE_SQUASH_HOST ? to : to + (h - from);
                return 1;
        }
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *nul = memchr(data, '\0', size);
        size_t spec_len = nul ? (size_t)(nul - (const char *)data) : size;
        const uint8_t *ids = nul ? (const uint8_t *)nul + 1 : data + size;
        size_t n_ids = nul ? (size - spec_len - 1) / 4 : 0;
        IdTranslate t = ID_TRANSLATE_EMPTY;
        char *spec, *line, *save = NULL;

        spec = strndup((const char *)data, spec_len);
        if (!spec)
                return 0;
        n_taken = 0;
        for (line = strtok_r(spec, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                IdTranslate before = t;
                IdTranslateEntry e;
                const char *why = NULL;
                int r;

                if (id_translate_parse(line, &e) < 0)
                        continue;
                if (e.type < 0 || e.type >= _ID_TRANSLATE_MAX)
                        abort();
                r = id_translate_add(&t, &e, &why);
                if (r < 0) {
                        if (!why || memcmp(&before, &t, sizeof t) != 0)
                                abort(); /* a refusal says why and changes nothing */
                        continue;
                }
                if (n_taken == ELEMENTSOF(taken))
                        abort(); /* add() takes at most the table's room */
                taken[n_taken++] = e;
        }
        free(spec);

        for (unsigned i = 0; i < t.n_to_host; i++)
                if ((uint64_t)t.to_host[i].start + t.to_host[i].count > UINT32_MAX)
                        abort();
        for (unsigned i = 0; i < t.n_to_guest; i++)
                if ((uint64_t)t.to_guest[i].start + t.to_guest[i].count > UINT32_MAX)
                        abort();

        for (size_t k = 0; k < n_ids; k++) {
                uint32_t id, got = 0, want = 0;
                int r, w;

                memcpy(&id, ids + 4 * k, 4);
                r = id_translate_to_host(&t, id, &got);
                w = expect_to_host(id, &want);
                if (w < 0 ? r != -EPERM : r != 0)
                        abort();
                if (w == 0 && got != id)
                        abort();
                if (w > 0 && (got != want || got == UINT32_MAX))
                        abort();
                got = id_translate_to_guest(&t, id);
                w = expect_to_guest(id, &want);
                if (w == 0 ? got != id : (got != want || got == UINT32_MAX))
                        abort();
        }
        return 0;
}
