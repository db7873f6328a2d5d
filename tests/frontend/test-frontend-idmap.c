/* test-frontend-idmap.c: guest identities through the real daemon: the supplementary group a Linux
 * guest sends with creating requests (FUSE_CREATE_SUPP_GROUP), and --translate-uid/--translate-gid
 * (docs/id-mapping.md). The host side is checked with lstat() on the share.
 *
 * Both need root: vufsd switches to the guest caller only when it runs as root. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "test-main.h"
#include "util.h"

/* Linux 6.3's FUSE 7.38 additions, which Debian 12's header lacks. */
#define T_CREATE_SUPP_GROUP_FLAGS2 (1u << 2) /* FUSE_CREATE_SUPP_GROUP >> 32 */
#define T_FUSE_EXT_GROUPS 32

static FeHarness *h;
static Frontend *fe;
static FeFuse *c;

static void start(const char *const *extra, uint32_t flags2) {
        struct fuse_init_in in = {
                .major = FUSE_KERNEL_VERSION,
                .minor = FUSE_KERNEL_MINOR_VERSION,
                .max_readahead = 131072,
                .flags = 0x7bfffffb,
                .flags2 = flags2,
        };
        FeFuseReq *req;
        FeOptions o;
        int r;

        ck_assert_int_eq(fe_harness_new(&h), 0);
        r = fe_harness_spawn_vufsd(h, extra);
        ck_assert_msg(r == 0, "starting vufsd ($VUFSD_BINARY=%s): %s", getenv("VUFSD_BINARY"), strerror(-r));
        fe_options_init(&o);
        o.timeout_ms = 10000;
        ck_assert_int_eq(fe_connect(&fe, h->socket_path, &o), 0);
        ck_assert_msg(fe_negotiate(fe) == 0, "negotiate: %s", fe->error);
        ck_assert_msg(fe_start(fe, true) == 0, "start: %s", fe->error);
        ck_assert_int_eq(fe_fuse_new(&c, fe), 0);
        /* INIT as a Linux >= 6.3 guest offers it (the client's default is 6.1's). */
        ck_assert_int_eq(fe_fuse_req_new(&req, c, FUSE_INIT, 0, sizeof(struct fuse_init_out)), 0);
        fe_fuse_req_add(req, &in, sizeof in);
        ck_assert_int_eq(fe_fuse_call(c, req), 0);
        memset(&c->init, 0, sizeof c->init);
        memcpy(&c->init, req->payload, MIN(req->payload_len, sizeof c->init));
        c->initialized = true;
        fe_fuse_req_free(c, req);
}

static void stop(void) {
        char buf[64];

        ck_assert_msg(fe_backend_alive(h->backend), "vufsd is gone: %s",
                      fe_backend_describe(h->backend->status, buf, sizeof buf));
        ck_assert_msg(c->proto_errors == 0, "protocol errors: %s", c->last_problem);
        c = fe_fuse_free(c);
        fe = fe_free(fe);
        h = fe_harness_free(h);
}

static void host_stat(const char *rel, struct stat *st) {
        char *p = fe_harness_path(h, rel);
        ck_assert_int_eq(lstat(p, st), 0);
        free(p);
}

static void host_mkdir(const char *rel, uid_t uid, gid_t gid, mode_t mode) {
        char *p = fe_harness_path(h, rel);
        ck_assert_int_eq(mkdir(p, mode), 0);
        ck_assert_int_eq(chown(p, uid, gid), 0);
        ck_assert_int_eq(chmod(p, mode), 0);
        free(p);
}

/* CREATE (or MKDIR with dir) of name in parent as the client's uid/gid, with the supplementary
 * groups extension when n_groups > 0. */
static int create_as(uint64_t parent, const char *name, bool dir, const uint32_t *groups, uint32_t n_groups,
                     struct fuse_entry_out *ret) {
        struct fuse_create_in ci = { .flags = O_WRONLY | O_CREAT | O_EXCL, .mode = S_IFREG | 0640, .umask = 022 };
        struct fuse_mkdir_in mi = { .mode = 0750, .umask = 022 };
        size_t out =
                dir ? sizeof(struct fuse_entry_out) : sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out);
        FeFuseReq *req;
        int r;

        ck_assert_int_eq(fe_fuse_req_new(&req, c, dir ? FUSE_MKDIR : FUSE_CREATE, parent, out), 0);
        if (dir)
                fe_fuse_req_add(req, &mi, sizeof mi);
        else
                fe_fuse_req_add(req, &ci, sizeof ci);
        fe_fuse_req_add_str(req, name);
        if (n_groups > 0) {
                /* struct fuse_ext_header, struct fuse_supp_groups, padded to 8 bytes */
                uint32_t ext[2 + 8] = { 0 };
                size_t size = ALIGN_TO(8 + 4 + 4 * (size_t)n_groups, (size_t)8);
                ck_assert_uint_le(n_groups, 7);
                ext[0] = (uint32_t)size;
                ext[1] = T_FUSE_EXT_GROUPS;
                ext[2] = n_groups;
                memcpy(&ext[3], groups, 4 * (size_t)n_groups);
                fe_fuse_req_add(req, ext, size);
                fe_fuse_req_hdr(req)->total_extlen = (uint16_t)(size / 8);
        }
        r = fe_fuse_call(c, req);
        if (r == 0) {
                ck_assert_uint_ge(req->payload_len, sizeof(struct fuse_entry_out));
                if (ret)
                        memcpy(ret, req->payload, sizeof *ret);
                if (!dir) {
                        struct fuse_open_out oo;
                        memcpy(&oo, req->payload + sizeof(struct fuse_entry_out), sizeof oo);
                        ck_assert_int_eq(
                                fe_fuse_release(c, ((struct fuse_entry_out *)req->payload)->nodeid, oo.fh, false), 0);
                }
        }
        fe_fuse_req_free(c, req);
        return r;
}

static int chown_as(uint64_t nodeid, int64_t uid, int64_t gid, struct fuse_attr_out *ret) {
        struct fuse_setattr_in in = { 0 };
        FeFuseReq *req;
        int r;

        if (uid >= 0) {
                in.valid |= FATTR_UID;
                in.uid = (uint32_t)uid;
        }
        if (gid >= 0) {
                in.valid |= FATTR_GID;
                in.gid = (uint32_t)gid;
        }
        ck_assert_int_eq(fe_fuse_req_new(&req, c, FUSE_SETATTR, nodeid, sizeof(struct fuse_attr_out)), 0);
        fe_fuse_req_add(req, &in, sizeof in);
        r = fe_fuse_call(c, req);
        if (r == 0 && ret)
                memcpy(ret, req->payload, sizeof *ret);
        fe_fuse_req_free(c, req);
        return r;
}

/* A guest user (1000:1000) in group 4242 only as a supplementary member creates in a 0770
 * directory of group 4242: refused without the group, allowed with it; another directory's group
 * the request does not name stays closed. */
START_TEST(test_supp_group_create) {
        const char *extra[] = { "--bus=none", NULL };
        const uint32_t g[1] = { 4242 };
        struct fuse_entry_out dir, e;
        struct stat st;

        start(extra, 0xb | T_CREATE_SUPP_GROUP_FLAGS2);
        ck_assert_uint_eq(c->init.flags2 & T_CREATE_SUPP_GROUP_FLAGS2, T_CREATE_SUPP_GROUP_FLAGS2);
        host_mkdir("team", 0, 4242, 0770);
        host_mkdir("other", 0, 4343, 0770);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "team", &dir), 0);
        c->uid = 1000;
        c->gid = 1000;

        ck_assert_int_eq(create_as(dir.nodeid, "nogroup", false, NULL, 0, NULL), -EACCES);
        ck_assert_int_eq(create_as(dir.nodeid, "file", false, g, 1, &e), 0);
        ck_assert_uint_eq(e.attr.uid, 1000);
        ck_assert_uint_eq(e.attr.gid, 1000);
        host_stat("team/file", &st);
        ck_assert_uint_eq(st.st_uid, 1000);
        ck_assert_uint_eq(st.st_gid, 1000);
        ck_assert_int_eq(create_as(dir.nodeid, "sub", true, g, 1, NULL), 0);
        host_stat("team/sub", &st);
        ck_assert(S_ISDIR(st.st_mode));
        ck_assert_uint_eq(st.st_uid, 1000);
        /* The group served that request only: the next one without it is refused again, and it
         * opens no directory of another group. */
        ck_assert_int_eq(create_as(dir.nodeid, "later", true, NULL, 0, NULL), -EACCES);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "other", &dir), 0);
        ck_assert_int_eq(create_as(dir.nodeid, "file", false, g, 1, NULL), -EACCES);
        stop();
}
END_TEST

/* MKDIR request of name in parent as uid:gid (with the group extension when group != 0), not yet
 * submitted. */
static FeFuseReq *mkdir_req(uint64_t parent, const char *name, uint32_t uid, uint32_t gid, uint32_t group) {
        struct fuse_mkdir_in mi = { .mode = 0750, .umask = 022 };
        uint32_t ext[4] = { 16, T_FUSE_EXT_GROUPS, 1, group };
        FeFuseReq *req;

        c->uid = uid;
        c->gid = gid;
        ck_assert_int_eq(fe_fuse_req_new(&req, c, FUSE_MKDIR, parent, sizeof(struct fuse_entry_out)), 0);
        fe_fuse_req_add(req, &mi, sizeof mi);
        fe_fuse_req_add_str(req, name);
        if (group != 0) {
                fe_fuse_req_add(req, ext, sizeof ext);
                fe_fuse_req_hdr(req)->total_extlen = 2;
        }
        return req;
}

/* Identities stay with their request when the pool runs many at once: members with the group
 * and strangers without it interleaved in flight; no stranger gets in, every member's directory
 * has that member's owner. */
START_TEST(test_supp_group_pool) {
        const char *extra[] = { "--bus=none", "--threads=pool", "--thread-pool-size=4", NULL };
        enum { N = 48 };
        FeFuseReq *reqs[N];
        struct fuse_entry_out dir;
        char name[32];
        struct stat st;

        start(extra, 0xb | T_CREATE_SUPP_GROUP_FLAGS2);
        host_mkdir("team", 0, 4242, 0770);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "team", &dir), 0);
        for (unsigned i = 0; i < N; i++) {
                snprintf(name, sizeof name, "d%u", i);
                if (i % 2 == 0)
                        reqs[i] = mkdir_req(dir.nodeid, name, 1000 + i, 1000 + i, 4242);
                else
                        reqs[i] = mkdir_req(dir.nodeid, name, 3000 + i, 3000 + i, 0);
                ck_assert_int_eq(fe_fuse_submit(c, reqs[i], -1), 0);
        }
        for (unsigned done = 0; done < N; done++) {
                FeFuseReq *r;
                ck_assert_int_eq(fe_fuse_wait(c, 1, 10000, &r), 0);
                ck_assert_msg(r->status == 0, "%s", r->problem);
        }
        for (unsigned i = 0; i < N; i++) {
                snprintf(name, sizeof name, "team/d%u", i);
                if (i % 2 == 0) {
                        ck_assert_msg(reqs[i]->oh.error == 0, "member %u: %d", i, reqs[i]->oh.error);
                        host_stat(name, &st);
                        ck_assert_uint_eq(st.st_uid, 1000 + i);
                        ck_assert_uint_eq(st.st_gid, 1000 + i);
                } else
                        ck_assert_msg(reqs[i]->oh.error == -EACCES, "stranger %u: %d", i, reqs[i]->oh.error);
                fe_fuse_req_free(c, reqs[i]);
        }
        c->uid = c->gid = 0;
        stop();
}
END_TEST

/* The rootless layout without a user namespace: guest root and its users squashed onto one host
 * user (1234), that user shown to the guest as root; gids 0..99 mapped to 5000..5099; guest uid
 * 70000 forbidden. */
START_TEST(test_translate) {
        const char *extra[] = { "--bus=none",
                                "--translate-uid=squash-guest:0:1234:65536",
                                "--translate-uid=host:1234:0:1",
                                "--translate-uid=forbid-guest:70000:1",
                                "--translate-gid=map:0:5000:100",
                                NULL };
        struct fuse_entry_out e, f;
        struct fuse_attr_out a;
        struct stat st;
        char *p;

        start(extra, 0xb);
        /* The share belongs to the host user the guest is squashed onto, as in a rootless setup. */
        ck_assert_int_eq(chown(h->share, 1234, 5000), 0);
        /* Guest root creates: the host shows the squashed owner, the guest sees root again. */
        ck_assert_int_eq(create_as(FUSE_ROOT_ID, "d", true, NULL, 0, &e), 0);
        host_stat("d", &st);
        ck_assert_uint_eq(st.st_uid, 1234);
        ck_assert_uint_eq(st.st_gid, 5000);
        ck_assert_uint_eq(e.attr.uid, 0);
        ck_assert_uint_eq(e.attr.gid, 0);

        /* A guest user (1000:10): the same host user, its group 5010; shown as 0:10. */
        c->uid = 1000;
        c->gid = 10;
        ck_assert_int_eq(create_as(e.nodeid, "f", false, NULL, 0, &f), 0);
        host_stat("d/f", &st);
        ck_assert_uint_eq(st.st_uid, 1234);
        ck_assert_uint_eq(st.st_gid, 5010);
        ck_assert_uint_eq(f.attr.uid, 0);
        ck_assert_uint_eq(f.attr.gid, 10);

        /* A forbidden guest uid cannot create, nor be given a file. */
        c->uid = 70000;
        ck_assert_int_eq(create_as(e.nodeid, "g", false, NULL, 0, NULL), -EPERM);
        c->uid = 0;
        c->gid = 0;
        ck_assert_int_eq(chown_as(f.nodeid, 70000, -1, NULL), -EPERM);
        host_stat("d/f", &st);
        ck_assert_uint_eq(st.st_uid, 1234);

        /* chown to an unmapped id: that id on the host and back (gid 200 is outside the map). */
        ck_assert_int_eq(chown_as(f.nodeid, 66000, 200, &a), 0);
        host_stat("d/f", &st);
        ck_assert_uint_eq(st.st_uid, 66000);
        ck_assert_uint_eq(st.st_gid, 200);
        ck_assert_uint_eq(a.attr.uid, 66000);
        ck_assert_uint_eq(a.attr.gid, 200);
        /* chown to mapped ids: guest 20:30 is host 1234:5030, shown as 0:30. */
        ck_assert_int_eq(chown_as(f.nodeid, 20, 30, &a), 0);
        host_stat("d/f", &st);
        ck_assert_uint_eq(st.st_uid, 1234);
        ck_assert_uint_eq(st.st_gid, 5030);
        ck_assert_uint_eq(a.attr.uid, 0);
        ck_assert_uint_eq(a.attr.gid, 30);

        /* A file the host gave another owner: host root has no entry and shows as guest 0 (it is
         * 0 either way), host 5050 as guest 50, an unmapped 7777 as itself. */
        p = fe_harness_path(h, "d/host");
        ck_assert_int_ge(creat(p, 0644), 0);
        ck_assert_int_eq(chown(p, 7777, 5050), 0);
        free(p);
        ck_assert_int_eq(fe_fuse_lookup(c, e.nodeid, "host", &f), 0);
        ck_assert_uint_eq(f.attr.uid, 7777);
        ck_assert_uint_eq(f.attr.gid, 50);
        ck_assert_int_eq(fe_fuse_getattr(c, f.nodeid, &a), 0);
        ck_assert_uint_eq(a.attr.uid, 7777);
        ck_assert_uint_eq(a.attr.gid, 50);
        stop();
}
END_TEST

/* docs/id-mapping.md: a guest id in a forbid-guest range is served by the requests that act as the
 * daemon, checked as nobody (the rights of "other") on the host's attributes. Guest root in such
 * a range was let through as root: unchecked, it read a host root 0600 file and removed a name in a
 * root 0755 directory that it could not create in (CREATE answered EPERM). */
START_TEST(test_translate_forbidden_root) {
        const char *extra[] = { "--bus=none", "--translate-uid=forbid-guest:0:1", NULL };
        struct fuse_entry_out e;
        uint64_t fh;
        struct stat st;
        char *p;
        int fd, r;

        start(extra, 0xb);
        p = fe_harness_path(h, "secret");
        fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "root only", 9), 9);
        close(fd);
        free(p);
        p = fe_harness_path(h, "locked");
        ck_assert_int_eq(mkdir(p, 0755), 0);
        free(p);
        p = fe_harness_path(h, "locked/keep");
        ck_assert_int_ge(fd = creat(p, 0644), 0);
        close(fd);
        free(p);

        c->uid = 0;
        c->gid = 0;
        ck_assert_int_eq(create_as(FUSE_ROOT_ID, "new", false, NULL, 0, NULL), -EPERM);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "secret", &e), 0);
        r = fe_fuse_open(c, e.nodeid, O_RDONLY, &fh);
        if (r == 0)
                (void) fe_fuse_release(c, e.nodeid, fh, false);
        ck_assert_msg(r == -EACCES, "OPEN of a root 0600 file by a forbidden guest root: %d, want EACCES", r);
        ck_assert_int_eq(fe_fuse_lookup(c, FUSE_ROOT_ID, "locked", &e), 0);
        r = fe_fuse_unlink(c, e.nodeid, "keep");
        ck_assert_msg(r == -EACCES, "UNLINK in a root 0755 directory by a forbidden guest root: %d, want EACCES", r);
        p = fe_harness_path(h, "locked/keep");
        ck_assert_int_eq(stat(p, &st), 0);
        free(p);
        stop();
}
END_TEST

/* READDIRPLUS entries carry the translated owners too. */
START_TEST(test_translate_readdirplus) {
        const char *extra[] = { "--bus=none", "--translate-uid=map:0:3000:10", "--translate-gid=map:0:3000:10", NULL };
        uint8_t buf[8192];
        struct fuse_entry_out d;
        uint64_t fh;
        size_t off = 0;
        int n, seen = 0;
        char *p;

        start(extra, 0xb);
        ck_assert_int_eq(chown(h->share, 3000, 3000), 0);
        ck_assert_int_eq(create_as(FUSE_ROOT_ID, "rd", true, NULL, 0, &d), 0);
        p = fe_harness_path(h, "rd/x");
        ck_assert_int_ge(creat(p, 0644), 0);
        ck_assert_int_eq(chown(p, 3007, 3008), 0);
        free(p);
        ck_assert_int_eq(fe_fuse_opendir(c, d.nodeid, &fh), 0);
        n = fe_fuse_readdir(c, true, d.nodeid, fh, 0, buf, sizeof buf);
        ck_assert_int_gt(n, 0);
        while (off + sizeof(struct fuse_direntplus) <= (size_t)n) {
                struct fuse_direntplus dp;
                memcpy(&dp, buf + off, sizeof dp);
                if (dp.dirent.namelen == 1 && buf[off + sizeof dp] == 'x') {
                        ck_assert_uint_eq(dp.entry_out.attr.uid, 7);
                        ck_assert_uint_eq(dp.entry_out.attr.gid, 8);
                        seen++;
                }
                off += FUSE_DIRENTPLUS_SIZE(&dp);
        }
        ck_assert_int_eq(seen, 1);
        ck_assert_int_eq(fe_fuse_release(c, d.nodeid, fh, true), 0);
        stop();
}
END_TEST

static void add_tests(Suite *s) {
        TCase *tc = tcase_create("idmap");

        tcase_set_timeout(tc, 120);
        tcase_add_root_test(tc, test_supp_group_create);
        tcase_add_root_test(tc, test_supp_group_pool);
        tcase_add_root_test(tc, test_translate);
        tcase_add_root_test(tc, test_translate_forbidden_root);
        tcase_add_root_test(tc, test_translate_readdirplus);
        suite_add_tcase(s, tc);
}

TEST_MAIN("frontend-idmap", add_tests)
