/* test-id-translate.c: --translate-uid/--translate-gid: the parser, the tables, and the FsOps that
 * applies them (against a recording filesystem). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>

#include "id-translate-fs.h"
#include "id-translate.h"
#include "test-main.h"

static IdTranslateEntry parse_ok(const char *s) {
        IdTranslateEntry e;
        ck_assert_msg(id_translate_parse(s, &e) == 0, "refused: %s", s);
        return e;
}

START_TEST(test_parse_forms) {
        IdTranslateEntry e;

        e = parse_ok("guest:1:2:3");
        ck_assert_int_eq(e.type, ID_TRANSLATE_GUEST);
        ck_assert_uint_eq(e.source, 1);
        ck_assert_uint_eq(e.target, 2);
        ck_assert_uint_eq(e.count, 3);
        ck_assert_int_eq(parse_ok("host:1:2:3").type, ID_TRANSLATE_HOST);
        ck_assert_int_eq(parse_ok("squash-guest:0:1000:4294967295").type, ID_TRANSLATE_SQUASH_GUEST);
        ck_assert_int_eq(parse_ok("squash-host:0:0:65536").type, ID_TRANSLATE_SQUASH_HOST);
        ck_assert_int_eq(parse_ok("map:0:100000:65536").type, ID_TRANSLATE_MAP);
        e = parse_ok("forbid-guest:100:10");
        ck_assert_int_eq(e.type, ID_TRANSLATE_FORBID_GUEST);
        ck_assert_uint_eq(e.source, 100);
        ck_assert_uint_eq(e.count, 10);
        ck_assert_uint_eq(e.target, 0);

        /* As the Rust parser: the type in any case, any one separator, '+' before a number. */
        ck_assert_int_eq(parse_ok("MAP:0:0:1").type, ID_TRANSLATE_MAP);
        ck_assert_int_eq(parse_ok("Squash-Guest:0:0:1").type, ID_TRANSLATE_SQUASH_GUEST);
        e = parse_ok("map/5/6/7");
        ck_assert_uint_eq(e.source, 5);
        ck_assert_uint_eq(e.target, 6);
        ck_assert_uint_eq(e.count, 7);
        ck_assert_uint_eq(parse_ok("guest,1,2,3").count, 3);
        ck_assert_uint_eq(parse_ok("guest:+1:2:3").source, 1);
        ck_assert_uint_eq(parse_ok("guest:4294967295:0:1").source, 4294967295u); /* ranges: add() */
}
END_TEST

START_TEST(test_parse_refusals) {
        static const char *const bad[] = {
                "",
                "map",
                "map:",
                "map:0:0",
                "map:0:0:1:",
                "map:0:0:1:2",
                "map::0:1",
                "map:0::1",
                "mapp:0:0:1",
                "squash:0:0:1",
                "forbid-guest:0:0:1",
                "forbid-guest:0",
                "map:0:0:-1",
                "map:0:0:4294967296",
                "map:0:0:99999999999999999999",
                "map: 0:0:1",
                "map:0:0:1 ",
                "map:0x10:0:1",
                "map:0/0:1", /* mixed separators */
                "map:0:0:++1",
                "map:+:0:1",
                "averyveryverylongtypename:0:0:1",
        };
        IdTranslateEntry e;

        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
                ck_assert_msg(id_translate_parse(bad[i], &e) == -EINVAL, "accepted: \"%s\"", bad[i]);
        ck_assert_int_eq(id_translate_parse(NULL, &e), -EINVAL);
}
END_TEST

static int add(IdTranslate *t, const char *s) {
        IdTranslateEntry e = parse_ok(s);
        const char *why = NULL;
        int r = id_translate_add(t, &e, &why);
        if (r < 0)
                ck_assert_ptr_nonnull(why);
        return r;
}

START_TEST(test_add_checks) {
        IdTranslate t = ID_TRANSLATE_EMPTY;

        ck_assert(id_translate_is_empty(&t));
        ck_assert(id_translate_is_empty(NULL));
        ck_assert_int_eq(add(&t, "guest:0:0:0"), -EINVAL);
        /* Ranges stay below 4294967295, the "unchanged" id, on both sides. */
        ck_assert_int_eq(add(&t, "guest:4294967295:0:1"), -ERANGE);
        ck_assert_int_eq(add(&t, "guest:4294967294:0:2"), -ERANGE);
        ck_assert_int_eq(add(&t, "guest:0:4294967290:10"), -ERANGE);
        ck_assert_int_eq(add(&t, "map:0:4294967290:10"), -ERANGE);
        ck_assert_int_eq(add(&t, "host:4294967290:0:10"), -ERANGE);
        ck_assert_int_eq(add(&t, "squash-guest:0:4294967295:1"), -ERANGE);
        ck_assert_int_eq(add(&t, "squash-host:0:4294967295:1"), -ERANGE);
        ck_assert_int_eq(add(&t, "forbid-guest:4294967290:10"), -ERANGE);
        ck_assert(id_translate_is_empty(&t)); /* nothing of a refused entry stays */

        ck_assert_int_eq(add(&t, "squash-guest:0:1000:4294967295"), 0); /* every guest id */
        ck_assert_int_eq(add(&t, "forbid-guest:5:1"), -EEXIST); /* guest side taken */
        ck_assert_int_eq(add(&t, "map:7:7:1"), -EEXIST);
        ck_assert_int_eq(t.n_to_guest, 0); /* the refused map left no host-to-guest half */
        ck_assert_int_eq(add(&t, "host:1000:0:1"), 0); /* the other direction */
        ck_assert_int_eq(add(&t, "squash-host:999:5:1"), 0);
        ck_assert_int_eq(add(&t, "squash-host:1000:5:2"), -EEXIST);
        ck_assert_int_eq(add(&t, "squash-host:1001:5:2"), 0); /* adjacent is fine */
        ck_assert(!id_translate_is_empty(&t));

        t = ID_TRANSLATE_EMPTY;
        for (unsigned i = 0; i < ID_TRANSLATE_MAX_RANGES; i++) {
                char s[64];
                snprintf(s, sizeof s, "map:%u:%u:1", i * 2, i * 2);
                ck_assert_int_eq(add(&t, s), 0);
        }
        ck_assert_int_eq(add(&t, "guest:1000:1000:1"), -E2BIG);
        ck_assert_int_eq(add(&t, "host:1000:1000:1"), -E2BIG);
}
END_TEST

static uint32_t to_host(const IdTranslate *t, uint32_t g) {
        uint32_t h = 0xdeadbeef;
        ck_assert_int_eq(id_translate_to_host(t, g, &h), 0);
        return h;
}

START_TEST(test_lookups) {
        IdTranslate t = ID_TRANSLATE_EMPTY;
        uint32_t h = 7;

        /* The rootless layout: guest root is the host user, the host user shows as guest root,
         * guest users 1..65535 are the subordinate range, guest 65534+ is forbidden. */
        ck_assert_int_eq(add(&t, "guest:0:1000:1"), 0);
        ck_assert_int_eq(add(&t, "host:1000:0:1"), 0);
        ck_assert_int_eq(add(&t, "map:1:100000:65533"), 0);
        ck_assert_int_eq(add(&t, "forbid-guest:65534:2"), 0);
        ck_assert_int_eq(add(&t, "squash-host:200000:65534:1000"), 0);

        ck_assert_uint_eq(to_host(&t, 0), 1000);
        ck_assert_uint_eq(to_host(&t, 1), 100000);
        ck_assert_uint_eq(to_host(&t, 65533), 165532);
        ck_assert_int_eq(id_translate_to_host(&t, 65534, &h), -EPERM);
        ck_assert_int_eq(id_translate_to_host(&t, 65535, &h), -EPERM);
        ck_assert_uint_eq(h, 7); /* untouched on failure */
        ck_assert_uint_eq(to_host(&t, 65536), 65536); /* unmapped: unchanged */
        ck_assert_uint_eq(to_host(&t, 4294967295u), 4294967295u);

        ck_assert_uint_eq(id_translate_to_guest(&t, 1000), 0);
        ck_assert_uint_eq(id_translate_to_guest(&t, 100000), 1);
        ck_assert_uint_eq(id_translate_to_guest(&t, 165532), 65533);
        ck_assert_uint_eq(id_translate_to_guest(&t, 165533), 165533); /* one past the map */
        ck_assert_uint_eq(id_translate_to_guest(&t, 99999), 99999);
        ck_assert_uint_eq(id_translate_to_guest(&t, 0), 0); /* host root: no entry, unchanged */
        ck_assert_uint_eq(id_translate_to_guest(&t, 200000), 65534);
        ck_assert_uint_eq(id_translate_to_guest(&t, 200999), 65534);
        ck_assert_uint_eq(id_translate_to_guest(&t, 201000), 201000);

        /* No table: the identity. */
        ck_assert_uint_eq(to_host(NULL, 42), 42);
        ck_assert_uint_eq(id_translate_to_guest(NULL, 42), 42);
}
END_TEST

/* ---- the FsOps, around a filesystem that records what reaches it ---- */

typedef struct Rec {
        unsigned calls;
        FsCtx ctx; /* as the last operation got it */
        gid_t groups[FS_CTX_MAX_GROUPS];
        FsSetattr setattr;
        uid_t owner_uid; /* what the host says every inode is owned by */
        gid_t owner_gid;
        int answer; /* what the operations below that return attributes answer */
        const char *op; /* the last creating operation or link, and its arguments */
        uint64_t args[8];
        unsigned n_args;
} Rec;

static void rec_call(Rec *r, const FsCtx *c) {
        r->calls++;
        r->ctx = *c;
        for (unsigned k = 0; k < c->n_groups && k < FS_CTX_MAX_GROUPS; k++)
                r->groups[k] = c->groups[k];
}

static void rec_entry(Rec *r, uint64_t nodeid, FsEntry *e) {
        *e = (FsEntry){ .nodeid = nodeid };
        e->st.st_uid = r->owner_uid;
        e->st.st_gid = r->owner_gid;
        e->st.st_mode = S_IFREG | 0644;
}

static int rec_lookup(void *fs, const FsCtx *c, uint64_t parent, const char *name, FsEntry *ret) {
        Rec *r = fs;
        rec_call(r, c);
        rec_entry(r, 5, ret);
        return r->answer;
}

static int rec_getattr(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, struct stat *ret) {
        Rec *r = fs;
        rec_call(r, c);
        *ret = (struct stat){ .st_uid = r->owner_uid, .st_gid = r->owner_gid };
        return r->answer;
}

static int rec_setattr(void *fs, const FsCtx *c, uint64_t nodeid, const FsSetattr *a, struct stat *ret) {
        Rec *r = fs;
        rec_call(r, c);
        r->setattr = *a;
        if (a->valid & FS_SET_UID)
                r->owner_uid = a->uid;
        if (a->valid & FS_SET_GID)
                r->owner_gid = a->gid;
        *ret = (struct stat){ .st_uid = r->owner_uid, .st_gid = r->owner_gid };
        return r->answer;
}

/* A creating operation or link: which one, its arguments (pointers as numbers: they must arrive
 * as they were passed), and a new entry owned by owner_uid/owner_gid, handed back even with an
 * error (so that a failure can be seen to come back untranslated). */
static int rec_made(Rec *r, const char *op, const FsCtx *c, const uint64_t *args, unsigned n, FsEntry *ret) {
        rec_call(r, c);
        r->op = op;
        r->n_args = n;
        memcpy(r->args, args, n * sizeof *args);
        rec_entry(r, 6, ret);
        return r->answer;
}

#define P(p) ((uint64_t)(uintptr_t)(p))

static int rec_mknod(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, dev_t rdev,
                     FsEntry *ret) {
        return rec_made(fs, "mknod", c, (uint64_t[]){ parent, P(name), mode, rdev }, 4, ret);
}

static int rec_mkdir(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, FsEntry *ret) {
        Rec *r = fs;
        /* The host made it as the caller. */
        r->owner_uid = c->uid;
        r->owner_gid = c->gid;
        return rec_made(r, "mkdir", c, (uint64_t[]){ parent, P(name), mode }, 3, ret);
}

static int rec_symlink(void *fs, const FsCtx *c, uint64_t parent, const char *name, const char *target,
                       FsEntry *ret) {
        return rec_made(fs, "symlink", c, (uint64_t[]){ parent, P(name), P(target) }, 3, ret);
}

static int rec_link(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t newparent, const char *newname,
                    FsEntry *ret) {
        return rec_made(fs, "link", c, (uint64_t[]){ nodeid, newparent, P(newname) }, 3, ret);
}

static int rec_create(void *fs, const FsCtx *c, uint64_t parent, const char *name, mode_t mode, int flags,
                      bool kill_priv, FsEntry *ret, uint64_t *ret_fh) {
        *ret_fh = 77;
        return rec_made(fs, "create", c, (uint64_t[]){ parent, P(name), mode, flags, kill_priv, P(ret_fh) }, 6, ret);
}

static int rec_tmpfile(void *fs, const FsCtx *c, uint64_t parent, mode_t mode, int flags, FsEntry *ret,
                       uint64_t *ret_fh) {
        *ret_fh = 78;
        return rec_made(fs, "tmpfile", c, (uint64_t[]){ parent, mode, flags, P(ret_fh) }, 4, ret);
}

static int rec_unlink(void *fs, const FsCtx *c, uint64_t parent, const char *name) {
        rec_call(fs, c);
        return 0;
}

static int rec_access(void *fs, const FsCtx *c, uint64_t nodeid, int mask) {
        rec_call(fs, c);
        return 0;
}

/* Three entries: "." (no node), a node, and one the filler refuses to take. */
static int rec_readdir(void *fs, const FsCtx *c, uint64_t nodeid, uint64_t fh, uint64_t off, const FsDirFiller *fill) {
        Rec *r = fs;
        FsEntry e;
        int k;

        rec_call(r, c);
        e = (FsEntry){ .nodeid = 0 };
        e.st.st_uid = r->owner_uid;
        k = fs_dir_add(fill, ".", 1, 1, 4, 1, fill->plus ? &e : NULL);
        if (k < 0)
                return k;
        rec_entry(r, 9, &e);
        if (!fs_dir_fits(fill, 4))
                return 0;
        return fs_dir_add(fill, "file", 4, 9, 8, 2, fill->plus ? &e : NULL);
}

static const FsOps rec_ops = {
        .lookup = rec_lookup,
        .getattr = rec_getattr,
        .setattr = rec_setattr,
        .mknod = rec_mknod,
        .mkdir = rec_mkdir,
        .symlink = rec_symlink,
        .link = rec_link,
        .create = rec_create,
        .tmpfile = rec_tmpfile,
        .unlink = rec_unlink,
        .access = rec_access,
        .readdir = rec_readdir,
};

typedef struct Seen {
        unsigned n;
        uid_t uid[4];
        bool had_entry[4];
} Seen;

static bool seen_fits(void *data, size_t namelen) {
        return true;
}

static int seen_add(void *data, const char *name, size_t namelen, uint64_t ino, unsigned type, uint64_t off,
                    const FsEntry *entry) {
        Seen *s = data;
        if (s->n == 4)
                return -ENOSPC;
        s->had_entry[s->n] = entry != NULL;
        s->uid[s->n++] = entry ? entry->st.st_uid : 0;
        return 0;
}

static IdTranslate uids, gids;

static IdTranslateFs *make(Rec *r) {
        IdTranslateFs *t;

        uids = gids = ID_TRANSLATE_EMPTY;
        ck_assert_int_eq(add(&uids, "squash-guest:0:1000:65536"), 0);
        ck_assert_int_eq(add(&uids, "forbid-guest:70000:10"), 0);
        ck_assert_int_eq(add(&uids, "host:1000:0:1"), 0);
        ck_assert_int_eq(add(&gids, "map:0:2000:100"), 0);
        ck_assert_int_eq(add(&gids, "forbid-guest:500:1"), 0);
        *r = (Rec){ .owner_uid = 1000, .owner_gid = 2050 };
        ck_assert_int_eq(id_translate_fs_new(&t, &rec_ops, r, &uids, &gids), 0);
        return t;
}

START_TEST(test_fs_callers) {
        Rec r;
        _cleanup_(id_translate_fs_freep) IdTranslateFs *t = make(&r);
        gid_t groups[2] = { 7, 99 };
        FsCtx c = { .uid = 0, .gid = 0, .pid = 42, .groups = groups, .n_groups = 2, .has_umask = true, .umask = 022 };
        FsEntry e;

        /* mkdir as guest root: host uid 1000, gid 2000, groups 2007 and 2099; the new directory
         * shows as root's again. */
        ck_assert_int_eq(id_translate_fs_ops.mkdir(t, &c, 1, "d", 0755, &e), 0);
        ck_assert_uint_eq(r.ctx.uid, 1000);
        ck_assert_uint_eq(r.ctx.gid, 2000);
        ck_assert_uint_eq(r.ctx.pid, 42);
        ck_assert(r.ctx.has_umask);
        ck_assert_uint_eq(r.ctx.n_groups, 2);
        ck_assert_uint_eq(r.groups[0], 2007);
        ck_assert_uint_eq(r.groups[1], 2099);
        ck_assert_uint_eq(groups[0], 7); /* the caller's array is not written */
        ck_assert_uint_eq(e.st.st_uid, 0);
        ck_assert_uint_eq(e.st.st_gid, 0);

        /* A forbidden uid, gid or supplementary group: EPERM, the filesystem never called. */
        r.calls = 0;
        c.uid = 70005;
        ck_assert_int_eq(id_translate_fs_ops.mkdir(t, &c, 1, "d", 0755, &e), -EPERM);
        ck_assert_int_eq(id_translate_fs_ops.access(t, &c, 1, 4), -EPERM);
        c.uid = 5;
        c.gid = 500;
        ck_assert_int_eq(id_translate_fs_ops.mkdir(t, &c, 1, "d", 0755, &e), -EPERM);
        c.gid = 5;
        groups[1] = 500;
        ck_assert_int_eq(id_translate_fs_ops.mkdir(t, &c, 1, "d", 0755, &e), -EPERM);
        ck_assert_uint_eq(r.calls, 0);

        /* Unmapped ids pass unchanged. */
        groups[1] = 100000;
        c.uid = 65536;
        ck_assert_int_eq(id_translate_fs_ops.access(t, &c, 1, 4), 0);
        ck_assert_uint_eq(r.ctx.uid, 65536);
        ck_assert_uint_eq(r.ctx.gid, 2005);
        ck_assert_uint_eq(r.groups[1], 100000);

        /* Operations that act with the daemon's identity are still served for a forbidden id; the
         * caller they check on the host's attributes (host-permission.h) is then nobody: an id
         * that owns nothing and is not root. A mapped caller arrives in host ids (guest 5 is squashed
         * to host 1000), root as root. */
        c.uid = 70001;
        ck_assert_int_eq(id_translate_fs_ops.unlink(t, &c, 1, "d"), 0);
        ck_assert_uint_eq(r.ctx.uid, UINT32_MAX);
        c.uid = 5;
        ck_assert_int_eq(id_translate_fs_ops.unlink(t, &c, 1, "d"), 0);
        ck_assert_uint_eq(r.ctx.uid, 1000);
        c.uid = 0;
        ck_assert_int_eq(id_translate_fs_ops.unlink(t, &c, 1, "d"), 0);
        ck_assert_uint_eq(r.ctx.uid, 0);
}
END_TEST

START_TEST(test_fs_attributes) {
        Rec r;
        _cleanup_(id_translate_fs_freep) IdTranslateFs *t = make(&r);
        FsCtx c = { .uid = 0 };
        FsSetattr a = { .valid = FS_SET_UID | FS_SET_GID | FS_SET_MODE, .uid = 33, .gid = 10, .mode = 0600 };
        struct stat st;
        FsEntry e;
        FsDirFiller outer;
        Seen seen = { 0 };

        ck_assert_int_eq(id_translate_fs_ops.getattr(t, &c, 5, FS_NO_FH, &st), 0);
        ck_assert_uint_eq(st.st_uid, 0); /* host 1000 */
        ck_assert_uint_eq(st.st_gid, 50); /* host 2050 */
        ck_assert_int_eq(id_translate_fs_ops.lookup(t, &c, 1, "x", &e), 0);
        ck_assert_uint_eq(e.st.st_uid, 0);
        ck_assert_uint_eq(e.st.st_gid, 50);

        /* chown 33:10 is host 1000:2010 (guest 33 squashed); the reply shows 0:10. */
        ck_assert_int_eq(id_translate_fs_ops.setattr(t, &c, 5, &a, &st), 0);
        ck_assert_uint_eq(r.setattr.uid, 1000);
        ck_assert_uint_eq(r.setattr.gid, 2010);
        ck_assert_uint_eq(r.setattr.mode, 0600);
        ck_assert_uint_eq(st.st_uid, 0);
        ck_assert_uint_eq(st.st_gid, 10);
        /* chown to an unmapped id: unchanged on the host and back. */
        a = (FsSetattr){ .valid = FS_SET_UID, .uid = 66000 };
        ck_assert_int_eq(id_translate_fs_ops.setattr(t, &c, 5, &a, &st), 0);
        ck_assert_uint_eq(r.setattr.uid, 66000);
        ck_assert_uint_eq(st.st_uid, 66000);
        /* chown to a forbidden id: EPERM, nothing changed. */
        r.calls = 0;
        a = (FsSetattr){ .valid = FS_SET_GID, .gid = 500 };
        ck_assert_int_eq(id_translate_fs_ops.setattr(t, &c, 5, &a, &st), -EPERM);
        a = (FsSetattr){ .valid = FS_SET_UID, .uid = 70000 };
        ck_assert_int_eq(id_translate_fs_ops.setattr(t, &c, 5, &a, &st), -EPERM);
        ck_assert_uint_eq(r.calls, 0);

        /* READDIRPLUS: each node's owner translated, "." (no node) left alone; plain READDIR
         * reaches the filesystem with the server's own filler. */
        r.owner_uid = 1000;
        outer = (FsDirFiller){ .plus = true, .fits = seen_fits, .add = seen_add, .data = &seen };
        ck_assert_int_eq(id_translate_fs_ops.readdir(t, &c, 1, 1, 0, &outer), 0);
        ck_assert_uint_eq(seen.n, 2);
        ck_assert(seen.had_entry[0] && seen.had_entry[1]);
        ck_assert_uint_eq(seen.uid[0], 1000); /* nodeid 0: as it was */
        ck_assert_uint_eq(seen.uid[1], 0);
        seen = (Seen){ 0 };
        outer.plus = false;
        ck_assert_int_eq(id_translate_fs_ops.readdir(t, &c, 1, 1, 0, &outer), 0);
        ck_assert_uint_eq(seen.n, 2);
        ck_assert(!seen.had_entry[1]);
}
END_TEST

/* What test_fs_makers expects of the last creating operation: that op, with exactly these
 * arguments, reached the filesystem with the caller in host ids (as_host) or as it came. */
static void assert_made(const Rec *r, const char *op, const uint64_t *args, unsigned n, bool as_host) {
        ck_assert_str_eq(r->op, op);
        ck_assert_uint_eq(r->n_args, n);
        for (unsigned k = 0; k < n; k++)
                ck_assert_uint_eq(r->args[k], args[k]);
        ck_assert_uint_eq(r->ctx.uid, (as_host ? 1000 : 0));
        ck_assert_uint_eq(r->ctx.gid, (as_host ? 2000 : 0));
        ck_assert_uint_eq(r->ctx.n_groups, 1);
        ck_assert_uint_eq(r->groups[0], (as_host ? 2007 : 7));
        ck_assert_uint_eq(r->ctx.pid, 42);
        ck_assert(r->ctx.has_umask);
        ck_assert_uint_eq(r->ctx.umask, 022);
        ck_assert_uint_eq(r->ctx.unique, 9);
}

/* Each creating operation, link, and the attribute replies, alike: the arguments arrive as they
 * were passed, the caller in host ids (link acts as the daemon: as it came), the reply in guest
 * ids; a failure comes back as it is and its attributes untranslated; a forbidden caller never
 * reaches the filesystem, except for link. */
START_TEST(test_fs_makers) {
        Rec r;
        _cleanup_(id_translate_fs_freep) IdTranslateFs *t = make(&r);
        const FsOps *o = &id_translate_fs_ops;
        gid_t groups[1] = { 7 };
        FsCtx c = { .uid = 0, .gid = 0, .pid = 42, .unique = 9, .groups = groups, .n_groups = 1, .has_umask = true,
                    .umask = 022 };
        const char *name = "n", *target = "t";
        const int answers[] = { 0, 3, -EIO };
        FsSetattr a = { .valid = FS_SET_MODE, .mode = 0600 };
        struct stat st;
        FsEntry e;
        uint64_t fh;

        for (unsigned k = 0; k < ELEMENTSOF(answers); k++) {
                int answer = answers[k];
                /* host 1000:2050 is guest 0:50 */
                uid_t want_uid = answer < 0 ? 1000 : 0;
                gid_t want_gid = answer < 0 ? 2050 : 50;

                r.answer = answer;
                ck_assert_int_eq(o->mknod(t, &c, 1, name, S_IFCHR | 0600, 0x0103, &e), answer);
                assert_made(&r, "mknod", (uint64_t[]){ 1, P(name), S_IFCHR | 0600, 0x0103 }, 4, true);
                ck_assert_uint_eq(e.st.st_uid, want_uid);
                ck_assert_uint_eq(e.st.st_gid, want_gid);
                ck_assert_int_eq(o->symlink(t, &c, 2, name, target, &e), answer);
                assert_made(&r, "symlink", (uint64_t[]){ 2, P(name), P(target) }, 3, true);
                ck_assert_uint_eq(e.st.st_uid, want_uid);
                ck_assert_uint_eq(e.st.st_gid, want_gid);
                ck_assert_int_eq(o->create(t, &c, 3, name, 0640, O_RDWR | O_EXCL, true, &e, &fh), answer);
                assert_made(&r, "create", (uint64_t[]){ 3, P(name), 0640, O_RDWR | O_EXCL, true, P(&fh) }, 6, true);
                ck_assert_uint_eq(e.st.st_uid, want_uid);
                ck_assert_uint_eq(e.st.st_gid, want_gid);
                ck_assert_uint_eq(fh, 77);
                ck_assert_int_eq(o->tmpfile(t, &c, 4, 0600, O_WRONLY, &e, &fh), answer);
                assert_made(&r, "tmpfile", (uint64_t[]){ 4, 0600, O_WRONLY, P(&fh) }, 4, true);
                ck_assert_uint_eq(e.st.st_uid, want_uid);
                ck_assert_uint_eq(e.st.st_gid, want_gid);
                ck_assert_uint_eq(fh, 78);
                ck_assert_int_eq(o->link(t, &c, 5, 6, name, &e), answer);
                assert_made(&r, "link", (uint64_t[]){ 5, 6, P(name) }, 3, false);
                ck_assert_uint_eq(e.st.st_uid, want_uid);
                ck_assert_uint_eq(e.st.st_gid, want_gid);
                /* mkdir's inode is owned by its caller: host 1000:2000, guest 0:0 */
                ck_assert_int_eq(o->mkdir(t, &c, 7, name, 0750, &e), answer);
                assert_made(&r, "mkdir", (uint64_t[]){ 7, P(name), 0750 }, 3, true);
                ck_assert_uint_eq(e.st.st_uid, want_uid);
                ck_assert_uint_eq(e.st.st_gid, answer < 0 ? 2000 : 0);
                r.owner_gid = 2050;

                ck_assert_int_eq(o->lookup(t, &c, 1, name, &e), answer);
                ck_assert_uint_eq(e.st.st_uid, want_uid);
                ck_assert_uint_eq(e.st.st_gid, want_gid);
                ck_assert_int_eq(o->getattr(t, &c, 5, FS_NO_FH, &st), answer);
                ck_assert_uint_eq(st.st_uid, want_uid);
                ck_assert_uint_eq(st.st_gid, want_gid);
                ck_assert_int_eq(o->setattr(t, &c, 5, &a, &st), answer);
                ck_assert_uint_eq(st.st_uid, want_uid);
                ck_assert_uint_eq(st.st_gid, want_gid);
                ck_assert_uint_eq(r.ctx.uid, 0); /* setattr acts as the daemon */
        }

        /* A forbidden caller: EPERM from every operation that acts as it, before the filesystem. */
        r.answer = 0;
        r.calls = 0;
        c.uid = 70005;
        ck_assert_int_eq(o->mknod(t, &c, 1, name, S_IFIFO | 0600, 0, &e), -EPERM);
        ck_assert_int_eq(o->mkdir(t, &c, 1, name, 0700, &e), -EPERM);
        ck_assert_int_eq(o->symlink(t, &c, 1, name, target, &e), -EPERM);
        ck_assert_int_eq(o->create(t, &c, 1, name, 0600, O_RDWR, false, &e, &fh), -EPERM);
        ck_assert_int_eq(o->tmpfile(t, &c, 1, 0600, O_RDWR, &e, &fh), -EPERM);
        ck_assert_int_eq(o->access(t, &c, 1, 4), -EPERM);
        ck_assert_uint_eq(r.calls, 0);
        ck_assert_int_eq(o->link(t, &c, 5, 6, name, &e), 0);
        ck_assert_uint_eq(r.calls, 1);
        ck_assert_uint_eq(r.ctx.uid, UINT32_MAX); /* nobody for the host's check */
}
END_TEST

static Suite *id_translate_suite(void) {
        Suite *s = suite_create("id-translate");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_parse_forms);
        tcase_add_test(tc, test_parse_refusals);
        tcase_add_test(tc, test_add_checks);
        tcase_add_test(tc, test_lookups);
        tcase_add_test(tc, test_fs_callers);
        tcase_add_test(tc, test_fs_attributes);
        tcase_add_test(tc, test_fs_makers);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(id_translate_suite)
