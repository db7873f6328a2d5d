/* xattr-map.h: --xattrmap, the virtiofsd rule language that renames extended attributes between
 * the guest's names and the host's.
 *
 * A map is a list of rules, each written SEP type SEP scope SEP key SEP prepend SEP, where SEP is
 * the rule's first character (any character; rules may be separated by whitespace):
 *   type    prefix       client names starting with key get prepend in front on the host; host
 *                        names starting with prepend lose it on the way to the guest
 *           ok           names that match pass unchanged
 *           bad          a client name that matches is refused (EPERM); a host name that matches
 *                        is hidden from listxattr
 *           unsupported  like bad, but the client gets ENOTSUP
 *   scope   client (key is matched against guest names), server (prepend is matched against host
 *           names, in listxattr), all (both)
 * and the shorthand SEP map SEP key SEP prepend SEP (at most one, the last rule), which expands to
 * the C and Rust virtiofsd's four rules: prefix all key/prepend; then, for an empty key, bad all
 * (hide and refuse everything else); for a key, bad server matching key (host names that look
 * unprefixed), bad client matching prepend (the guest may not reach prefixed names directly) and
 * ok all. The first rule that matches decides; a name no rule matches is refused (EPERM) or hidden.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

typedef struct XattrMap XattrMap;

/* Parses spec. On failure returns -EINVAL with a message (static storage) in *ret_error. */
int xattr_map_parse(const char *spec, XattrMap **ret, const char **ret_error);
XattrMap *xattr_map_free(XattrMap *m);

/* The host name for a guest name (malloc'd in *ret), or -EPERM / -ENOTSUP when a rule (or no
 * rule) refuses it, -ENOMEM. */
int xattr_map_to_host(const XattrMap *m, const char *name, char **ret);

/* The guest name for a host name: 1 with *ret pointing into name (the prefix stripped, or name
 * itself), 0 when it is hidden. */
int xattr_map_to_guest(const XattrMap *m, const char *name, const char **ret);

/* Rewrites a listxattr result (NUL-terminated names, in_len bytes) for the guest into out (size
 * bytes; out may be NULL with size 0 to ask for the length). Returns the length, -ERANGE when it
 * does not fit, -EINVAL for a list that does not end in NUL. */
ssize_t xattr_map_list(const XattrMap *m, const char *in, size_t in_len, char *out, size_t size);

/* The host name the guest's security.capability is stored under when the map renames it (Kata's
 * :map:security.capability:user.virtiofs.: for one), or NULL when it keeps its name or is refused.
 * The host kernel drops a real security.capability on write, truncate and chown; a renamed one is
 * an ordinary attribute to it, so the passthrough drops it itself at those points, as both
 * virtiofsd do. Valid as long as the map. */
const char *xattr_map_capability_name(const XattrMap *m);

/* Number of rules after expansion (tests). */
unsigned xattr_map_n_rules(const XattrMap *m);
