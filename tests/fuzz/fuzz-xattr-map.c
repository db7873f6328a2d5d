/* fuzz-xattr-map.c: the input is split at the first NUL: a --xattrmap spec, then NUL-separated
 * names. The spec goes through xattr_map_parse(); when it parses, every name goes through both
 * translations and the whole rest through the listxattr rewrite, whose results are checked
 * against each other (a name shown by the list must map back to a host name). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-common.h"
#include "xattr-map.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        (void)argc;
        (void)argv;
        fuzz_quiet_logging();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *nul = memchr(data, '\0', size);
        char *spec, *list, *out;
        size_t spec_len = nul ? (size_t)(nul - (const char *)data) : size;
        size_t list_len = nul ? size - spec_len - 1 : 0;
        XattrMap *m = NULL;
        ssize_t n;

        spec = strndup((const char *)data, spec_len);
        if (!spec)
                return 0;
        if (xattr_map_parse(spec, &m, NULL) < 0) {
                free(spec);
                return 0;
        }
        /* the names, made NUL-terminated */
        list = malloc(list_len + 1);
        if (!list)
                abort();
        memcpy(list, nul ? nul + 1 : "", list_len);
        list[list_len] = '\0';
        for (size_t off = 0; off <= list_len;) {
                const char *name = list + off, *g;
                char *h = NULL;

                if (xattr_map_to_host(m, name, &h) == 0) {
                        if (strlen(h) < strlen(name))
                                abort(); /* a prefix is only ever added on the way to the host */
                        free(h);
                }
                if (xattr_map_to_guest(m, name, &g) == 1 && (g < name || g > name + strlen(name)))
                        abort();
                off += strlen(name) + 1;
        }
        n = xattr_map_list(m, list, list_len + 1, NULL, 0);
        if (n > 0) {
                out = malloc((size_t)n);
                if (!out || xattr_map_list(m, list, list_len + 1, out, (size_t)n) != n)
                        abort();
                if (out[n - 1] != '\0')
                        abort();
                free(out);
        }
        free(list);
        xattr_map_free(m);
        free(spec);
        return 0;
}
