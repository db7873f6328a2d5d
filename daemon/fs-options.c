/* fs-options.c: names of the cache policies. */
#include "fs-options.h"

#include <string.h>

#include "util.h"

static const char *const cache_policy_table[_CACHE_MAX] = {
        [CACHE_NEVER] = "never",
        [CACHE_METADATA] = "metadata",
        [CACHE_AUTO] = "auto",
        [CACHE_ALWAYS] = "always",
};

const char *cache_policy_to_string(CachePolicy p) {
        if (p < 0 || p >= _CACHE_MAX)
                return NULL;
        return cache_policy_table[p];
}

CachePolicy cache_policy_from_string(const char *s) {
        if (!s)
                return _CACHE_INVALID;
        if (strcmp(s, "none") == 0) /* the C virtiofsd's name for never */
                return CACHE_NEVER;
        for (size_t i = 0; i < ELEMENTSOF(cache_policy_table); i++)
                if (strcmp(s, cache_policy_table[i]) == 0)
                        return (CachePolicy) i;
        return _CACHE_INVALID;
}
