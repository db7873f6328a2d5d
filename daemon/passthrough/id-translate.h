/* id-translate.h: --translate-uid/--translate-gid, id translation without a user namespace.
 *
 * The Rust virtiofsd's syntax and meaning. One IdTranslate holds one family (uids or gids) and
 * two independent directions: guest to host (request credentials, SETATTR owners, supplementary
 * groups) and host to guest (every attribute the guest is shown). An id no entry covers passes
 * unchanged, in either direction. Entries of one direction never overlap (an overlap is refused
 * when the entry is added), so at most one applies to any id and their order does not matter.
 *
 *   guest:G:H:N         guest G..G+N-1 -> host H..H+N-1 (guest to host only)
 *   host:H:G:N          host H..H+N-1 -> guest G..G+N-1 (host to guest only)
 *   squash-guest:G:H:N  guest G..G+N-1 -> host H (guest to host only)
 *   squash-host:H:G:N   host H..H+N-1 -> guest G (host to guest only)
 *   map:G:H:N           guest and host ranges both ways (guest:G:H:N and host:H:G:N)
 *   forbid-guest:G:N    guest G..G+N-1 may not be used: -EPERM (guest to host only)
 *
 * Pure data: no allocation, no system calls; safe to read from any number of threads once built. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum IdTranslateType {
        ID_TRANSLATE_GUEST,
        ID_TRANSLATE_HOST,
        ID_TRANSLATE_SQUASH_GUEST,
        ID_TRANSLATE_SQUASH_HOST,
        ID_TRANSLATE_FORBID_GUEST,
        ID_TRANSLATE_MAP,
        _ID_TRANSLATE_MAX,
        _ID_TRANSLATE_INVALID = -EINVAL,
} IdTranslateType;

/* One entry as written: source and target as the type names them (forbid-guest: target 0). */
typedef struct IdTranslateEntry {
        IdTranslateType type;
        uint32_t source, target, count;
} IdTranslateEntry;

const char *id_translate_to_string(IdTranslateType t);
IdTranslateType id_translate_from_string(const char *s);

/* Parses one entry in the Rust virtiofsd's syntax: a type (letters, digits, '-', '_', any case),
 * then a separator (the first other character, ':' by convention), then 3 numbers (2 for
 * forbid-guest), all separated by that same character. Numbers are decimal u32 ('+' allowed, as
 * Rust's parser does). Only the syntax: ranges are checked by id_translate_add(). -EINVAL. */
int id_translate_parse(const char *s, IdTranslateEntry *ret);

/* Entries one table holds per direction (map takes one of each). */
#define ID_TRANSLATE_MAX_RANGES 64

typedef enum IdRangeKind {
        ID_RANGE_SHIFT, /* target + (id - start) */
        ID_RANGE_SQUASH, /* target */
        ID_RANGE_FAIL, /* -EPERM */
} IdRangeKind;

typedef struct IdRange {
        uint32_t start, count; /* [start, start + count), start + count <= UINT32_MAX */
        uint32_t target;
        IdRangeKind kind;
} IdRange;

typedef struct IdTranslate {
        unsigned n_to_host, n_to_guest;
        IdRange to_host[ID_TRANSLATE_MAX_RANGES];
        IdRange to_guest[ID_TRANSLATE_MAX_RANGES];
} IdTranslate;

#define ID_TRANSLATE_EMPTY ((IdTranslate){ 0 })

/* Adds e to t. Nothing is added on failure. -EINVAL: count 0; -ERANGE: a source or target range
 * that does not fit below 2^32 - 1 (the id (uint32_t)-1 means "unchanged" to chown and setresuid,
 * so it is never a source nor a target); -EEXIST: overlaps an entry of the same direction (*why
 * then says which direction); -E2BIG: the table is full. */
int id_translate_add(IdTranslate *t, const IdTranslateEntry *e, const char **why);

/* No entry at all: every id passes unchanged both ways (callers skip the translation). */
bool id_translate_is_empty(const IdTranslate *t);

/* Guest id to host id: 0 and *ret, or -EPERM for a forbid-guest id (*ret untouched). A NULL table
 * is the identity. */
int id_translate_to_host(const IdTranslate *t, uint32_t guest, uint32_t *ret);

/* Host id to the guest's view of it (never fails: unmapped ids pass unchanged). */
uint32_t id_translate_to_guest(const IdTranslate *t, uint32_t host);
