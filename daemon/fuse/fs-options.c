/* fs-options.c: names of the cache policies, feature modes and privileged-file modes. */
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
        return (int)p >= 0 && p < _CACHE_MAX ? cache_policy_table[p] : NULL;
}

CachePolicy cache_policy_from_string(const char *s) {
        if (s && streq(s, "none")) /* the C virtiofsd's name for never */
                return CACHE_NEVER;
        return (CachePolicy)string_table_lookup(cache_policy_table, _CACHE_MAX, s);
}

static const char *const feature_mode_table[_FEATURE_MODE_MAX] = {
        [FEATURE_NEVER] = "never",
        [FEATURE_AUTO] = "auto",
        [FEATURE_ALWAYS] = "always",
};

const char *feature_mode_to_string(FeatureMode m) {
        return (int)m >= 0 && m < _FEATURE_MODE_MAX ? feature_mode_table[m] : NULL;
}

FeatureMode feature_mode_from_string(const char *s) {
        return (FeatureMode)string_table_lookup(feature_mode_table, _FEATURE_MODE_MAX, s);
}

static const char *const privileged_files_table[_PRIVILEGED_FILES_MAX] = {
        [PRIVILEGED_FILES_MAP] = "map",
        [PRIVILEGED_FILES_REFUSE] = "refuse",
        [PRIVILEGED_FILES_ALLOW] = "allow",
};

const char *privileged_files_to_string(PrivilegedFiles m) {
        return (int)m >= 0 && m < _PRIVILEGED_FILES_MAX ? privileged_files_table[m] : NULL;
}

PrivilegedFiles privileged_files_from_string(const char *s) {
        return (PrivilegedFiles)string_table_lookup(privileged_files_table, _PRIVILEGED_FILES_MAX, s);
}
