/* config-internal.h: what the parts of the configuration share: the value parsers and setters that
 * the command line (config.c), the -o forms (config-compat.c) and the file (config-file.c, through
 * config_parse_o()) all use, so each value has one parser. Only daemon/config*.c include this. */
#pragma once

#include "config.h"
#include "util.h" /* _printf_ */

/* config-values.c: one value each; a bad one prints "vufsd: WHAT: why (see --help)" and returns
 * -EINVAL. */
int usage_error(const char *fmt, ...) _printf_(1, 2);
int set_string(char **dst, const char *v);
int parse_uint(const char *s, uint64_t max, uint64_t *ret);
int set_cache(Config *c, const char *what, const char *v);
int level_from_string(const char *v);
int set_log_level(Config *c, const char *what, const char *v);
int set_inode_file_handles(Config *c, const char *what, const char *v);
int set_sandbox(Config *c, const char *what, const char *v);
int set_privileged_files(Config *c, const char *what, const char *v);
void resolve_capabilities(Config *c);
int set_modcaps(Config *c, const char *v);
int set_tag(Config *c, const char *v);
int set_xattrmap(Config *c, const char *what, const char *v);
int set_feature_mode(FeatureMode *dst, const char *what, const char *v);

/* config-idmap.c: --uid-map/--gid-map and --translate-uid/--translate-gid, added to their lists. */
int add_id_map(IdMapList *l, const char *what, const char *v);
int add_id_translate(IdTranslateList *l, const char *what, const char *v);
