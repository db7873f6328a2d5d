/* fuzz-id-map.c: the input is a list of --uid-map values, one per line. Each goes through
 * id_map_parse(); what parses must hold the parser's promises (count >= 1, both ranges inside the
 * 32-bit id space) and read back the same when printed; what is added to the list must leave no two
 * entries overlapping on either side and the list within its size; the text for /proc/PID/uid_map
 * must list exactly the entries, and id_map_contains() must agree with them. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz-common.h"
#include "userns.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        (void)argc;
        (void)argv;
        fuzz_quiet_logging();
        return 0;
}

static bool overlap(uint32_t a, uint32_t na, uint32_t b, uint32_t nb) {
        return (uint64_t)a < (uint64_t)b + nb && (uint64_t)b < (uint64_t)a + na;
}

static void check_entry(const IdMapEntry *e) {
        char buf[64];
        IdMapEntry back;

        if (e->count == 0 || (uint64_t)e->inside + e->count > (uint64_t)UINT32_MAX + 1 ||
            (uint64_t)e->outside + e->count > (uint64_t)UINT32_MAX + 1)
                abort();
        snprintf(buf, sizeof buf, ":%" PRIu32 ":%" PRIu32 ":%" PRIu32 ":", e->inside, e->outside, e->count);
        if (id_map_parse(buf, &back, NULL) < 0 || back.inside != e->inside || back.outside != e->outside ||
            back.count != e->count)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = strndup((const char *)data, size), *line, *save = NULL;
        char out[ID_MAP_MAX_ENTRIES * 36 + 1];
        IdMapList l = {};

        if (!text)
                return 0;
        for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                const char *why = NULL;
                IdMapEntry e;
                unsigned before = l.n;
                int r = id_map_parse(line, &e, &why);

                if (r < 0) {
                        if (!why || (r != -EINVAL && r != -ERANGE))
                                abort(); /* every refusal says why */
                        continue;
                }
                check_entry(&e);
                r = id_map_add(&l, &e, &why);
                if (r < 0) {
                        if (!why || l.n != before)
                                abort();
                        continue;
                }
                if (l.n != before + 1 || l.n > ID_MAP_MAX_ENTRIES)
                        abort();
        }
        for (unsigned i = 0; i < l.n; i++)
                for (unsigned j = i + 1; j < l.n; j++)
                        if (overlap(l.e[i].inside, l.e[i].count, l.e[j].inside, l.e[j].count) ||
                            overlap(l.e[i].outside, l.e[i].count, l.e[j].outside, l.e[j].count))
                                abort();
        if (userns_format_map(&l, 1000, out, sizeof out) < 0)
                abort(); /* the buffer the sandbox uses fits the largest list */
        {
                /* the text lists the entries in order, and nothing else */
                const char *p = out;
                unsigned n = 0;
                for (; *p; n++) {
                        unsigned long long a, b, c;
                        int used = 0;
                        if (sscanf(p, "%llu %llu %llu\n%n", &a, &b, &c, &used) != 3 || used == 0)
                                abort();
                        if (l.n == 0 ? (a != 0 || b != 1000 || c != 1)
                                     : (a != l.e[n].inside || b != l.e[n].outside || c != l.e[n].count))
                                abort();
                        p += used;
                }
                if (n != (l.n == 0 ? 1 : l.n))
                        abort();
        }
        for (unsigned i = 0; i < l.n; i++) {
                if (!id_map_contains(&l, l.e[i].inside) ||
                    !id_map_contains(&l, (uint32_t)((uint64_t)l.e[i].inside + l.e[i].count - 1)))
                        abort();
        }
        free(text);
        return 0;
}
