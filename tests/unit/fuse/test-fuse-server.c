/* test-fuse-server.c: FUSE decoding, validation, dispatch and replies.
 *
 * Two fixtures: "wire" serves the in-memory fake FsOps (tests/unit/fuse/fake-fs.h) and runs unprivileged;
 * "passthrough" serves a temporary host directory and needs root (credential switching, chown,
 * mknod), so its cases are skipped, one by one and named, without it. */
#include <check.h>
#include <stdatomic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <linux/posix_acl.h>
#include <linux/posix_acl_xattr.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fake-fs.h"
#include "fuse-server.h"
#include "passthrough.h"
#include "xattr-map.h"
#include "util.h"
#include "test-main.h"

#define NO_REPLY 1000 /* call() result when the server wrote nothing */

static char tmpdir[] = "/tmp/test-fuse-server-XXXXXX";
static char share[128], outside[128], secret[128];
static Passthrough *pt;
static FakeFs fake;
static FuseServer *srv;

/* Waits until n blocking lock requests are registered with the server (each can then be
 * interrupted, and is at or inside its blocking call), instead of guessing with a sleep: on a
 * loaded machine the thread may not have started within any fixed time. */
static void await_lock_waiters(unsigned n) {
        for (unsigned i = 0; fuse_server_lock_waiters(srv) < n; i++) {
                ck_assert_msg(i < 10000, "%u lock waiters after 10 s, want %u", fuse_server_lock_waiters(srv), n);
                usleep(1000);
        }
        usleep(20000); /* past the registration, into the blocking call */
}
/* Atomic: the concurrency test calls call_full() from several threads. */
static _Atomic uint64_t next_unique = 2;

/* ---- request construction ---- */

typedef struct Args {
        uint8_t buf[1100000];
        size_t len;
} Args;

static Args *args_new(void) {
        Args *a = calloc(1, sizeof *a);
        ck_assert_ptr_nonnull(a);
        return a;
}

static void args_add(Args *a, const void *p, size_t n) {
        ck_assert_uint_le(a->len + n, sizeof a->buf);
        memcpy(a->buf + a->len, p, n);
        a->len += n;
}

static void args_str(Args *a, const char *s) {
        args_add(a, s, strlen(s) + 1);
}

/* Splits a byte stream into separately allocated iovecs of the given sizes (the last one takes the
 * rest), so the server has to cope with headers and names cut anywhere, and ASan sees any overrun. */
static unsigned make_iov(struct iovec *iov, const uint8_t *src, size_t len, const size_t *cuts, unsigned ncuts) {
        unsigned n = 0;
        size_t off = 0;

        for (unsigned i = 0; i <= ncuts && off < len; i++) {
                size_t k = i < ncuts ? MIN(cuts[i], len - off) : len - off;
                iov[n].iov_base = malloc(k ? k : 1);
                ck_assert_ptr_nonnull(iov[n].iov_base);
                if (src)
                        memcpy(iov[n].iov_base, src + off, k);
                else
                        memset(iov[n].iov_base, 0xAA, k);
                iov[n].iov_len = k;
                off += k;
                n++;
        }
        return n;
}

static void free_iov(struct iovec *iov, unsigned n) {
        for (unsigned i = 0; i < n; i++)
                free(iov[i].iov_base);
}

typedef struct Reply {
        struct fuse_out_header h;
        uint8_t *payload; /* malloc'd */
        size_t len;       /* payload bytes */
        uint32_t used;
        FuseReqInfo info;
} Reply;

/* Sends a raw request (header + body as given, len field as declared) with reply space cap
 * (payload bytes after the 16-byte header; SIZE_MAX-free). Returns the reply error or NO_REPLY. */
static int call_raw(const void *req, size_t reqlen, size_t out_cap, Reply *ret) {
        static const size_t in_cuts[] = { 7, 13, 25, 3, 1 };
        static const size_t out_cuts[] = { 5, 11, 9 };
        struct iovec in_iov[16], out_iov[16];
        unsigned nin, nout;
        ChainIter in, out;
        Reply rep = { 0 };
        uint8_t *flat;
        size_t cap = out_cap, off = 0;

        nin = make_iov(in_iov, req, reqlen, in_cuts, ELEMENTSOF(in_cuts));
        nout = cap > 0 ? make_iov(out_iov, NULL, cap, out_cuts, ELEMENTSOF(out_cuts)) : 0;
        chain_iter_init(&in, in_iov, nin);
        chain_iter_init(&out, out_iov, nout);
        rep.used = fuse_server_process(srv, &in, &out, &rep.info);
        flat = calloc(1, cap + 1);
        for (unsigned i = 0; i < nout; i++) {
                memcpy(flat + off, out_iov[i].iov_base, out_iov[i].iov_len);
                off += out_iov[i].iov_len;
        }
        free_iov(in_iov, nin);
        free_iov(out_iov, nout);
        if (rep.used == 0) {
                ck_assert(!rep.info.replied);
                free(flat);
                if (ret)
                        *ret = rep;
                return NO_REPLY;
        }
        ck_assert(rep.info.replied);
        ck_assert_uint_ge(rep.used, sizeof rep.h);
        ck_assert_uint_le(rep.used, cap);
        memcpy(&rep.h, flat, sizeof rep.h);
        /* The reply length is exact and names the request. */
        ck_assert_uint_eq(rep.h.len, rep.used);
        ck_assert_int_eq(rep.h.error, rep.info.error);
        if (rep.h.error != 0)
                ck_assert_uint_eq(rep.h.len, sizeof rep.h);
        rep.len = rep.used - sizeof rep.h;
        if (rep.h.error == 0) { /* a payload only comes with success */
                rep.payload = malloc(rep.len + 1);
                memcpy(rep.payload, flat + sizeof rep.h, rep.len);
        }
        free(flat);
        if (ret)
                *ret = rep;
        else
                free(rep.payload);
        return rep.h.error;
}

typedef struct Caller {
        uint32_t uid, gid;
} Caller;
static Caller caller;

static int call_full(uint32_t opcode, uint64_t nodeid, const Args *a, size_t out_cap, Reply *ret) {
        size_t alen = a ? a->len : 0;
        uint8_t *req = malloc(sizeof(struct fuse_in_header) + alen);
        struct fuse_in_header h = {
                .len = (uint32_t) (sizeof h + alen),
                .opcode = opcode,
                .unique = atomic_fetch_add(&next_unique, 2),
                .nodeid = nodeid,
                .uid = caller.uid,
                .gid = caller.gid,
                .pid = 1234,
        };
        int r;

        memcpy(req, &h, sizeof h);
        if (alen)
                memcpy(req + sizeof h, a->buf, alen);
        r = call_raw(req, sizeof h + alen, out_cap, ret);
        if (r != NO_REPLY && ret)
                ck_assert_uint_eq(ret->h.unique, h.unique);
        free(req);
        return r;
}

/* The common case: generous reply space, payload copied to out (if given). */
static int call(uint32_t opcode, uint64_t nodeid, const Args *a, void *out, size_t outsize) {
        Reply rep;
        int r = call_full(opcode, nodeid, a, 16 + MAX(outsize, (size_t) 4096), &rep);
        if (r == NO_REPLY)
                return r;
        if (r == 0 && out) {
                ck_assert_uint_eq(rep.len, outsize);
                memcpy(out, rep.payload, outsize);
        }
        free(rep.payload);
        return r;
}

/* ---- shorthands ---- */

static void do_init_flags(uint32_t flags, uint32_t flags2, struct fuse_init_out *o) {
        Args *a = args_new();
        struct fuse_init_in ii = { .major = 7, .minor = 38, .max_readahead = 131072, .flags = flags, .flags2 = flags2 };
        struct fuse_init_out tmp;
        args_add(a, &ii, sizeof ii);
        ck_assert_int_eq(call(FUSE_INIT, 0, a, o ? o : &tmp, sizeof tmp), 0);
        free(a);
}

static void do_init(void) {
        do_init_flags(0x7bfffffb, 0xb, NULL);
}

static int lookup(uint64_t parent, const char *name, struct fuse_entry_out *e) {
        Args *a = args_new();
        struct fuse_entry_out tmp;
        int r;
        args_str(a, name);
        r = call(FUSE_LOOKUP, parent, a, e ? e : &tmp, sizeof tmp);
        free(a);
        if (r == 0 && (e ? e : &tmp)->nodeid == 0)
                return -ENOENT; /* a cached negative entry */
        return r;
}

static void forget(uint64_t nodeid, uint64_t n) {
        Args *a = args_new();
        struct fuse_forget_in f = { .nlookup = n };
        args_add(a, &f, sizeof f);
        ck_assert_int_eq(call_full(FUSE_FORGET, nodeid, a, 0, NULL), NO_REPLY);
        free(a);
}

/* FUSE_CREATE with the guest's umask; e and fh may be NULL. */
static int create_masked(uint64_t parent, const char *name, uint32_t flags, uint32_t mode, uint32_t umask_v,
                         struct fuse_entry_out *e, uint64_t *fh) {
        Args *a = args_new();
        struct fuse_create_in c = { .flags = flags, .mode = mode, .umask = umask_v };
        struct {
                struct fuse_entry_out e;
                struct fuse_open_out o;
        } out;
        int r;
        args_add(a, &c, sizeof c);
        args_str(a, name);
        r = call(FUSE_CREATE, parent, a, &out, sizeof out);
        free(a);
        if (r == 0) {
                if (e)
                        *e = out.e;
                if (fh)
                        *fh = out.o.fh;
        }
        return r;
}

static int create(uint64_t parent, const char *name, uint32_t flags, uint32_t mode, struct fuse_entry_out *e,
                  uint64_t *fh) {
        return create_masked(parent, name, flags, mode, 022, e, fh);
}

static int mkdir_req(uint64_t parent, const char *name, uint32_t mode, uint32_t umask_v, struct fuse_entry_out *e) {
        Args *a = args_new();
        struct fuse_mkdir_in m = { .mode = mode, .umask = umask_v };
        struct fuse_entry_out tmp;
        int r;
        args_add(a, &m, sizeof m);
        args_str(a, name);
        r = call(FUSE_MKDIR, parent, a, e ? e : &tmp, sizeof tmp);
        free(a);
        return r;
}

static int open_req(uint32_t opcode, uint64_t nodeid, uint32_t flags, struct fuse_open_out *o) {
        Args *a = args_new();
        struct fuse_open_in in = { .flags = flags };
        struct fuse_open_out tmp;
        int r;
        args_add(a, &in, sizeof in);
        r = call(opcode, nodeid, a, o ? o : &tmp, sizeof tmp);
        free(a);
        return r;
}

static int write_req(uint64_t nodeid, uint64_t fh, uint64_t off, const void *data, size_t n) {
        Args *a = args_new();
        struct fuse_write_in w = { .fh = fh, .offset = off, .size = (uint32_t) n };
        struct fuse_write_out wo;
        int r;
        args_add(a, &w, sizeof w);
        args_add(a, data, n);
        r = call(FUSE_WRITE, nodeid, a, &wo, sizeof wo);
        free(a);
        if (r == 0)
                ck_assert_uint_eq(wo.size, n);
        return r;
}

/* Returns the error or the number of bytes read into buf. */
static int read_req(uint64_t nodeid, uint64_t fh, uint64_t off, uint32_t size, void *buf) {
        Args *a = args_new();
        struct fuse_read_in ri = { .fh = fh, .offset = off, .size = size };
        Reply rep;
        int r;
        args_add(a, &ri, sizeof ri);
        r = call_full(FUSE_READ, nodeid, a, 16 + size, &rep);
        free(a);
        if (r != 0)
                return r;
        ck_assert_uint_le(rep.len, size);
        memcpy(buf, rep.payload, rep.len);
        free(rep.payload);
        return (int) rep.len;
}

static int release_req(uint32_t opcode, uint64_t nodeid, uint64_t fh) {
        Args *a = args_new();
        struct fuse_release_in ri = { .fh = fh };
        int r;
        args_add(a, &ri, sizeof ri);
        r = call(opcode, nodeid, a, NULL, 0);
        free(a);
        return r;
}

static int getattr_req(uint64_t nodeid, struct fuse_attr_out *o) {
        Args *a = args_new();
        struct fuse_getattr_in g = { 0 };
        struct fuse_attr_out tmp;
        int r;
        args_add(a, &g, sizeof g);
        r = call(FUSE_GETATTR, nodeid, a, o ? o : &tmp, sizeof tmp);
        free(a);
        return r;
}

static int name_req(uint32_t opcode, uint64_t nodeid, const char *name) {
        Args *a = args_new();
        int r;
        args_str(a, name);
        r = call(opcode, nodeid, a, NULL, 0);
        free(a);
        return r;
}

static bool outside_untouched(void) {
        DIR *d = opendir(outside);
        struct dirent *de;
        unsigned n = 0;
        bool ok = true;
        char buf[64];
        int fd;

        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        n++;
        closedir(d);
        if (n != 1)
                ok = false;
        fd = open(secret, O_RDONLY);
        if (fd < 0)
                return false;
        memset(buf, 0, sizeof buf);
        if (read(fd, buf, sizeof buf - 1) != 6 || strcmp(buf, "secret") != 0)
                ok = false;
        close(fd);
        return ok;
}

static void server_start(FsOptions o) {
        o.shared_dir = share;
        ck_assert_int_eq(passthrough_new(&pt, &o), 0);
        ck_assert_int_eq(fuse_server_new(&srv, &o, &passthrough_ops, pt), 0);
}

static void server_stop(void) {
        srv = fuse_server_free(srv);
        pt = passthrough_free(pt);
}

static void setup_dirs(void) {
        int fd;

        ck_assert_ptr_nonnull(mkdtemp(tmpdir));
        snprintf(share, sizeof share, "%s/share", tmpdir);
        snprintf(outside, sizeof outside, "%s/outside", tmpdir);
        snprintf(secret, sizeof secret, "%s/outside/secret", tmpdir);
        ck_assert_int_eq(mkdir(share, 0755), 0);
        ck_assert_int_eq(mkdir(outside, 0755), 0);
        fd = open(secret, O_CREAT | O_WRONLY, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "secret", 6), 6);
        close(fd);
}

static void setup(void) {
        caller = (Caller) { 0, 0 };
        setup_dirs();
        FsOptions o = FS_OPTIONS_DEFAULT;
        o.xattr = true;
        /* The set-id and device-node cases here test the mechanics; the default refusal is
         * test-passthrough's and test-frontend-escape's. */
        o.privileged_files = PRIVILEGED_FILES_ALLOW;
        server_start(o);
}

static void teardown_mounts(void);

/* The wire fixture: the server over the fake filesystem, no host directory. */
static void setup_fake(void) {
        FsOptions o = FS_OPTIONS_DEFAULT;
        caller = (Caller){ 0, 0 };
        fake_fs_init(&fake);
        ck_assert_int_eq(fuse_server_new(&srv, &o, &fake_fs_ops, &fake), 0);
}

static void teardown_fake(void) {
        srv = fuse_server_free(srv);
}

static void teardown(void) {
        char cmd[PATH_MAX + 32];
        server_stop();
        teardown_mounts();
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        ck_assert_int_eq(system(cmd), 0);
        strcpy(tmpdir, "/tmp/test-fuse-server-XXXXXX");
}

static char *share_path(const char *rel) {
        static char buf[PATH_MAX];
        snprintf(buf, sizeof buf, "%s/%s", share, rel);
        return buf;
}

/* ---- tests: framing and session ---- */

START_TEST(test_before_init) {
        struct fuse_attr_out a;
        ck_assert_int_eq(getattr_req(1, &a), -EIO);
        /* FORGET before INIT: still no reply. */
        forget(1, 1);
        do_init();
        ck_assert_int_eq(getattr_req(1, &a), 0);
        ck_assert(S_ISDIR(a.attr.mode));
}
END_TEST

START_TEST(test_init_negotiation) {
        struct fuse_init_out o;
        Reply rep;
        Args *a = args_new();
        struct fuse_init_in ii = { .major = 7, .minor = 38, .max_readahead = 131072, .flags = 0x7bfffffb, .flags2 = 0xb };

        args_add(a, &ii, sizeof ii);
        ck_assert_int_eq(call_full(FUSE_INIT, 0, a, 16 + 64, &rep), 0);
        ck_assert_uint_eq(rep.h.len, 80);
        memcpy(&o, rep.payload, sizeof o);
        free(rep.payload);
        ck_assert_uint_eq(o.major, 7);
        ck_assert_uint_eq(o.minor, 38);
        ck_assert_uint_eq(o.max_write, 1024 * 1024);
        ck_assert_uint_eq(o.max_pages, 256);
        ck_assert_uint_eq(o.max_readahead, 131072);
        ck_assert(o.flags & FUSE_MAX_PAGES);
        ck_assert(o.flags & FUSE_BIG_WRITES);
        ck_assert(o.flags & FUSE_ASYNC_READ);
        ck_assert(o.flags & FUSE_PARALLEL_DIROPS);
        ck_assert(o.flags & FUSE_DO_READDIRPLUS);
        ck_assert(o.flags & FUSE_READDIRPLUS_AUTO);
        ck_assert(o.flags & FUSE_ATOMIC_O_TRUNC);
        ck_assert(!(o.flags & FUSE_WRITEBACK_CACHE));
        ck_assert_uint_eq(o.flags & ~ii.flags, 0);
        ck_assert_uint_eq(o.flags2 & ~ii.flags2, 0);

        /* Only what the guest offered comes back. */
        do_init_flags(FUSE_ASYNC_READ | FUSE_POSIX_LOCKS, 0, &o);
        ck_assert_uint_eq(o.flags, FUSE_ASYNC_READ | FUSE_POSIX_LOCKS);
        ck_assert_uint_eq(o.flags2, 0);

        /* An older minor gets its own minor back; below 7.31 is refused. */
        ii.minor = 31;
        a->len = 0;
        args_add(a, &ii, sizeof ii);
        ck_assert_int_eq(call(FUSE_INIT, 0, a, &o, sizeof o), 0);
        ck_assert_uint_eq(o.minor, 31);
        ii.minor = 30;
        a->len = 0;
        args_add(a, &ii, sizeof ii);
        ck_assert_int_eq(call(FUSE_INIT, 0, a, &o, sizeof o), -EPROTO);
        /* A newer major is told ours (8-byte compat reply). */
        ii.major = 8;
        a->len = 0;
        args_add(a, &ii, sizeof ii);
        ck_assert_int_eq(call_full(FUSE_INIT, 0, a, 16 + 64, &rep), 0);
        ck_assert_uint_eq(rep.len, 8);
        ck_assert_uint_eq(((uint32_t *) rep.payload)[0], 7);
        free(rep.payload);
        free(a);
}
END_TEST

START_TEST(test_framing) {
        uint8_t raw[200] = { 0 };
        struct fuse_in_header h = { .len = 40, .opcode = FUSE_GETATTR, .unique = 99, .nodeid = 1 };
        struct fuse_getattr_in g = { 0 };
        Reply rep;

        do_init();
        /* Shorter than a header: nothing is written. */
        memcpy(raw, &h, sizeof h);
        ck_assert_int_eq(call_raw(raw, 20, 200, &rep), NO_REPLY);
        ck_assert_int_eq(rep.info.error, -EBADMSG);
        /* Declared length differs from the bytes sent: EINVAL, both ways. */
        h.len = sizeof h + sizeof g + 8;
        memcpy(raw, &h, sizeof h);
        memcpy(raw + sizeof h, &g, sizeof g);
        ck_assert_int_eq(call_raw(raw, sizeof h + sizeof g, 200, &rep), -EINVAL);
        ck_assert_uint_eq(rep.h.unique, 99);
        h.len = sizeof h;
        memcpy(raw, &h, sizeof h);
        ck_assert_int_eq(call_raw(raw, sizeof h + sizeof g, 200, NULL), -EINVAL);
        /* Arguments shorter than the opcode's struct. */
        h.len = sizeof h + 4;
        memcpy(raw, &h, sizeof h);
        ck_assert_int_eq(call_raw(raw, sizeof h + 4, 200, NULL), -EINVAL);
        /* Extension length beyond the message. */
        h.len = sizeof h + sizeof g;
        h.total_extlen = 100;
        memcpy(raw, &h, sizeof h);
        ck_assert_int_eq(call_raw(raw, sizeof h + sizeof g, 200, NULL), -EINVAL);
        h.total_extlen = 0;
        /* Reply space: too small for the payload is E2BIG, too small for a header is silence. */
        memcpy(raw, &h, sizeof h);
        ck_assert_int_eq(call_raw(raw, sizeof h + sizeof g, 16 + 50, &rep), -E2BIG);
        ck_assert_int_eq(call_raw(raw, sizeof h + sizeof g, 10, &rep), NO_REPLY);
        ck_assert_int_eq(call_raw(raw, sizeof h + sizeof g, 0, &rep), NO_REPLY);
        /* The exact size works. */
        ck_assert_int_eq(call_raw(raw, sizeof h + sizeof g, 16 + sizeof(struct fuse_attr_out), &rep), 0);
        free(rep.payload);
}
END_TEST

START_TEST(test_unknown_opcodes) {
        uint32_t enosys[] = { 0, 7, 19, 99, 4096, 0xffffffff, FUSE_IOCTL, FUSE_POLL, FUSE_BMAP,
                              FUSE_SETUPMAPPING, FUSE_REMOVEMAPPING, FUSE_NOTIFY_REPLY };
        Args *a = args_new();
        uint8_t zeros[64] = { 0 };

        do_init();
        args_add(a, zeros, sizeof zeros);
        for (size_t i = 0; i < ELEMENTSOF(enosys); i++) {
                Reply rep;
                ck_assert_int_eq(call_full(enosys[i], 1, a, 200, &rep), -ENOSYS);
                ck_assert_uint_eq(rep.info.opcode, enosys[i]);
        }
        /* INTERRUPT of nothing: no reply. */
        a->len = 8;
        ck_assert_int_eq(call_full(FUSE_INTERRUPT, 0, a, 200, NULL), NO_REPLY);
        free(a);
}
END_TEST

START_TEST(test_second_init_resets) {
        struct fuse_entry_out e, e2;

        do_init();
        ck_assert_int_eq(mkdir_req(1, "d", 0755, 0, &e), 0);
        ck_assert_int_eq(getattr_req(e.nodeid, NULL), 0);
        do_init();
        ck_assert_int_eq(getattr_req(e.nodeid, NULL), -EBADF);
        ck_assert_int_eq(lookup(1, "d", &e2), 0);
        ck_assert_uint_ne(e2.nodeid, e.nodeid); /* never reused */
        ck_assert_uint_gt(e2.nodeid, 1);
        /* DESTROY ends the session: EIO until the next INIT. */
        ck_assert_int_eq(call(FUSE_DESTROY, 0, NULL, NULL, 0), 0);
        ck_assert_int_eq(getattr_req(1, NULL), -EIO);
        do_init();
        ck_assert_int_eq(getattr_req(1, NULL), 0);
        fuse_server_reset(srv);
        ck_assert_int_eq(getattr_req(1, NULL), -EIO);
}
END_TEST

/* ---- tests: operations ---- */

START_TEST(test_create_write_read) {
        struct fuse_entry_out e;
        uint64_t fh, fh2;
        char buf[200000], *big = malloc(300000);
        int n;

        do_init();
        ck_assert_int_eq(lookup(1, "f", &e), -ENOENT);
        ck_assert_int_eq(create(1, "f", O_WRONLY | O_CREAT | O_TRUNC, S_IFREG | 0644, &e, &fh), 0);
        ck_assert_uint_gt(e.nodeid, 1);
        ck_assert(S_ISREG(e.attr.mode));
        ck_assert_uint_eq(e.attr.mode & 07777, 0644);
        for (int i = 0; i < 300000; i++)
                big[i] = (char) (i * 7);
        ck_assert_int_eq(write_req(e.nodeid, fh, 0, "hello", 5), 0);
        ck_assert_int_eq(write_req(e.nodeid, fh, 5, big, 65536), 0);
        /* WRITE data size must match the message. */
        {
                Args *a = args_new();
                struct fuse_write_in w = { .fh = fh, .size = 10 };
                args_add(a, &w, sizeof w);
                args_add(a, "abc", 3);
                ck_assert_int_eq(call(FUSE_WRITE, e.nodeid, a, NULL, 0), -EINVAL);
                free(a);
        }
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fh), 0);
        /* The handle is gone. */
        ck_assert_int_eq(write_req(e.nodeid, fh, 0, "x", 1), -EBADF);

        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDONLY, NULL), 0);
        {
                struct fuse_open_out o;
                ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDONLY, &o), 0);
                fh2 = o.fh;
        }
        n = read_req(e.nodeid, fh2, 0, 5, buf);
        ck_assert_int_eq(n, 5);
        ck_assert(memcmp(buf, "hello", 5) == 0);
        n = read_req(e.nodeid, fh2, 5, 131072, buf);
        ck_assert_int_eq(n, 65536);
        ck_assert(memcmp(buf, big, 65536) == 0);
        /* At EOF: empty. */
        ck_assert_int_eq(read_req(e.nodeid, fh2, 1 << 20, 4096, buf), 0);
        /* Over max_write: refused. */
        ck_assert_int_eq(read_req(e.nodeid, fh2, 0, (1 << 20) + 1, buf), -EINVAL);
        /* Reply space smaller than the read: E2BIG, nothing written past it. */
        {
                Args *a = args_new();
                struct fuse_read_in ri = { .fh = fh2, .size = 4096 };
                args_add(a, &ri, sizeof ri);
                ck_assert_int_eq(call_full(FUSE_READ, e.nodeid, a, 16 + 100, NULL), -E2BIG);
                free(a);
        }
        /* Reading through a read-only handle works, writing does not. */
        ck_assert_int_eq(write_req(e.nodeid, fh2, 0, "x", 1), -EBADF);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fh2), 0);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fh2), -EBADF);

        /* What the guest wrote is on the host. */
        {
                int fd = open(share_path("f"), O_RDONLY);
                ck_assert_int_ge(fd, 0);
                ck_assert_int_eq(read(fd, buf, 5), 5);
                ck_assert(memcmp(buf, "hello", 5) == 0);
                close(fd);
        }
        /* OPEN with O_CREAT is not creation: EINVAL. */
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDWR | O_CREAT, NULL), -EINVAL);
        /* CREATE with O_EXCL of an existing name. */
        ck_assert_int_eq(create(1, "f", O_WRONLY | O_CREAT | O_EXCL, S_IFREG | 0644, NULL, NULL), -EEXIST);
        /* CREATE without O_EXCL opens what exists (same node). */
        {
                struct fuse_entry_out e3;
                ck_assert_int_eq(create(1, "f", O_RDWR | O_CREAT, S_IFREG | 0600, &e3, &fh), 0);
                ck_assert_uint_eq(e3.nodeid, e.nodeid);
                ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fh), 0);
        }
        free(big);
}
END_TEST

START_TEST(test_large_write_split) {
        struct fuse_entry_out e;
        uint64_t fh;
        size_t n = 1024 * 1024;
        char *data = malloc(n), *back = malloc(n);

        do_init();
        for (size_t i = 0; i < n; i++)
                data[i] = (char) (i ^ (i >> 9));
        ck_assert_int_eq(create(1, "big", O_RDWR | O_CREAT, S_IFREG | 0644, &e, &fh), 0);
        ck_assert_int_eq(write_req(e.nodeid, fh, 0, data, n), 0);
        ck_assert_int_eq(read_req(e.nodeid, fh, 0, (uint32_t) n, back), (int) n);
        ck_assert(memcmp(data, back, n) == 0);
        /* One byte over max_write. */
        {
                Args *a = args_new();
                struct fuse_write_in w = { .fh = fh, .size = (uint32_t) n + 1 };
                args_add(a, &w, sizeof w);
                ck_assert_int_eq(call(FUSE_WRITE, e.nodeid, a, NULL, 0), -EINVAL);
                free(a);
        }
        free(data);
        free(back);
}
END_TEST

START_TEST(test_names) {
        struct fuse_entry_out e;
        char longname[300];
        Args *a = args_new();

        do_init();
        memset(longname, 'x', sizeof longname);
        longname[256] = 0;
        ck_assert_int_eq(mkdir_req(1, "a/b", 0755, 0, NULL), -EINVAL);
        ck_assert_int_eq(mkdir_req(1, "..", 0755, 0, NULL), -EINVAL);
        ck_assert_int_eq(mkdir_req(1, ".", 0755, 0, NULL), -EINVAL);
        ck_assert_int_eq(mkdir_req(1, "", 0755, 0, NULL), -ENOENT);
        ck_assert_int_eq(mkdir_req(1, longname, 0755, 0, NULL), -ENAMETOOLONG);
        longname[255] = 0;
        ck_assert_int_eq(mkdir_req(1, longname, 0755, 0, NULL), 0);
        ck_assert_int_eq(create(1, "/etc/evil", O_WRONLY | O_CREAT, S_IFREG | 0644, NULL, NULL), -EINVAL);
        ck_assert_int_eq(name_req(FUSE_UNLINK, 1, "../outside/secret"), -EINVAL);
        ck_assert_int_eq(name_req(FUSE_RMDIR, 1, ".."), -EINVAL);
        /* A name without its NUL. */
        args_add(a, "abc", 3);
        ck_assert_int_eq(call(FUSE_LOOKUP, 1, a, NULL, 0), -EINVAL);
        ck_assert_int_eq(call(FUSE_UNLINK, 1, a, NULL, 0), -EINVAL);
        /* LOOKUP ".." at the root is the root; "." is the directory itself. */
        ck_assert_int_eq(lookup(1, "..", &e), 0);
        ck_assert_uint_eq(e.nodeid, 1);
        ck_assert_int_eq(lookup(1, ".", &e), 0);
        ck_assert_uint_eq(e.nodeid, 1);
        {
                struct fuse_entry_out d, up;
                ck_assert_int_eq(mkdir_req(1, "sub", 0755, 0, &d), 0);
                ck_assert_int_eq(lookup(d.nodeid, "..", &up), 0);
                ck_assert_uint_eq(up.nodeid, 1);
        }
        /* RENAME with a bad second name. */
        a->len = 0;
        {
                struct fuse_rename_in rn = { .newdir = 1 };
                args_add(a, &rn, sizeof rn);
                args_str(a, "sub");
                args_str(a, "../escaped");
                ck_assert_int_eq(call(FUSE_RENAME, 1, a, NULL, 0), -EINVAL);
                a->len = sizeof rn;
                args_str(a, "sub");
                args_add(a, "x", 1); /* second name unterminated */
                ck_assert_int_eq(call(FUSE_RENAME, 1, a, NULL, 0), -EINVAL);
        }
        free(a);
        ck_assert(outside_untouched());
}
END_TEST

START_TEST(test_nodeids_and_forget) {
        struct fuse_entry_out e, e2, e3;
        struct fuse_attr_out at;

        do_init();
        ck_assert_int_eq(getattr_req(0, NULL), -EBADF);
        ck_assert_int_eq(getattr_req(12345, NULL), -EBADF);
        ck_assert_int_eq(mkdir_req(1, "d", 0755, 0, &e), 0); /* 1 lookup */
        ck_assert_int_eq(lookup(1, "d", &e2), 0);            /* 2 */
        ck_assert_uint_eq(e.nodeid, e2.nodeid);
        forget(e.nodeid, 1);
        ck_assert_int_eq(getattr_req(e.nodeid, &at), 0);
        forget(e.nodeid, 1);
        ck_assert_int_eq(getattr_req(e.nodeid, &at), -EBADF);
        /* More forgets than lookups, and forgets of the root or of nothing: harmless. */
        forget(e.nodeid, 5);
        forget(1, UINT64_MAX);
        forget(999999, 1);
        ck_assert_int_eq(getattr_req(1, &at), 0);
        ck_assert_int_eq(lookup(1, "d", &e3), 0);
        ck_assert_uint_gt(e3.nodeid, e.nodeid);
        /* BATCH_FORGET */
        {
                Args *a = args_new();
                struct fuse_batch_forget_in b = { .count = 2 };
                struct fuse_forget_one one[2] = { { e3.nodeid, 1 }, { 777, 3 } };
                /* A count larger than the message: nothing forgotten. */
                b.count = 3;
                args_add(a, &b, sizeof b);
                args_add(a, one, sizeof one);
                ck_assert_int_eq(call_full(FUSE_BATCH_FORGET, 0, a, 0, NULL), NO_REPLY);
                ck_assert_int_eq(getattr_req(e3.nodeid, NULL), 0);
                b.count = 0x10000000;
                memcpy(a->buf, &b, sizeof b);
                ck_assert_int_eq(call_full(FUSE_BATCH_FORGET, 0, a, 0, NULL), NO_REPLY);
                ck_assert_int_eq(getattr_req(e3.nodeid, NULL), 0);
                b.count = 2;
                memcpy(a->buf, &b, sizeof b);
                ck_assert_int_eq(call_full(FUSE_BATCH_FORGET, 0, a, 0, NULL), NO_REPLY);
                ck_assert_int_eq(getattr_req(e3.nodeid, NULL), -EBADF);
                free(a);
        }
}
END_TEST

START_TEST(test_handles_checked) {
        struct fuse_entry_out a, b, d;
        uint64_t fa, fb;
        struct fuse_open_out od;
        char buf[16];

        do_init();
        ck_assert_int_eq(create(1, "a", O_RDWR | O_CREAT, S_IFREG | 0644, &a, &fa), 0);
        ck_assert_int_eq(create(1, "b", O_RDWR | O_CREAT, S_IFREG | 0644, &b, &fb), 0);
        /* fh of another inode */
        ck_assert_int_eq(write_req(a.nodeid, fb, 0, "x", 1), -EBADF);
        ck_assert_int_eq(read_req(b.nodeid, fa, 0, 4, buf), -EBADF);
        ck_assert_int_eq(release_req(FUSE_RELEASE, a.nodeid, fb), -EBADF);
        /* never issued */
        ck_assert_int_eq(read_req(a.nodeid, 0, 0, 4, buf), -EBADF);
        ck_assert_int_eq(read_req(a.nodeid, 0xdeadbeef, 0, 4, buf), -EBADF);
        /* a directory handle is not a file handle and vice versa */
        ck_assert_int_eq(mkdir_req(1, "d", 0755, 0, &d), 0);
        ck_assert_int_eq(open_req(FUSE_OPENDIR, d.nodeid, O_RDONLY, &od), 0);
        ck_assert_int_eq(read_req(d.nodeid, od.fh, 0, 4, buf), -EBADF);
        ck_assert_int_eq(release_req(FUSE_RELEASE, d.nodeid, od.fh), -EBADF);
        ck_assert_int_eq(release_req(FUSE_RELEASEDIR, a.nodeid, fa), -EBADF);
        ck_assert_int_eq(release_req(FUSE_RELEASEDIR, d.nodeid, od.fh), 0);
        /* GETATTR with a foreign fh */
        {
                Args *ar = args_new();
                struct fuse_getattr_in g = { .getattr_flags = FUSE_GETATTR_FH, .fh = fb };
                args_add(ar, &g, sizeof g);
                ck_assert_int_eq(call(FUSE_GETATTR, a.nodeid, ar, NULL, 0), -EBADF);
                g.fh = fa;
                ar->len = 0;
                args_add(ar, &g, sizeof g);
                struct fuse_attr_out at;
                ck_assert_int_eq(call(FUSE_GETATTR, a.nodeid, ar, &at, sizeof at), 0);
                free(ar);
        }
        /* OPEN on a directory, OPENDIR on a file */
        ck_assert_int_eq(open_req(FUSE_OPEN, d.nodeid, O_RDONLY, NULL), -EISDIR);
        ck_assert_int_eq(open_req(FUSE_OPENDIR, a.nodeid, O_RDONLY, NULL), -ENOTDIR);
}
END_TEST

/* The record at pos of a READDIR(PLUS) reply: its dirent, its size and (PLUS only) its entry. */
static struct fuse_dirent *reply_dirent(const Reply *rep, size_t pos, bool plus, size_t *ret_size,
                                        struct fuse_entry_out **ret_entry) {
        *ret_entry = NULL;
        if (plus) {
                struct fuse_direntplus *dp = (struct fuse_direntplus *) (rep->payload + pos);
                *ret_size = FUSE_DIRENTPLUS_SIZE(dp);
                *ret_entry = &dp->entry_out;
                return &dp->dirent;
        }
        *ret_size = FUSE_DIRENT_SIZE((struct fuse_dirent *) (rep->payload + pos));
        return (struct fuse_dirent *) (rep->payload + pos);
}

/* Reads a whole directory with READDIR or READDIRPLUS in small chunks; returns the entry count
 * and checks the records. */
static unsigned list_dir(uint64_t nodeid, bool plus, uint32_t chunk, unsigned *with_node) {
        struct fuse_open_out od;
        uint64_t off = 0;
        unsigned n = 0;

        *with_node = 0;
        ck_assert_int_eq(open_req(FUSE_OPENDIR, nodeid, O_RDONLY, &od), 0);
        for (;;) {
                Args *a = args_new();
                struct fuse_read_in ri = { .fh = od.fh, .offset = off, .size = chunk };
                Reply rep;
                size_t pos = 0;

                args_add(a, &ri, sizeof ri);
                ck_assert_int_eq(call_full(plus ? FUSE_READDIRPLUS : FUSE_READDIR, nodeid, a, 16 + chunk, &rep), 0);
                free(a);
                ck_assert_uint_le(rep.len, chunk);
                if (rep.len == 0) {
                        free(rep.payload);
                        break;
                }
                while (pos < rep.len) {
                        struct fuse_entry_out *eo;
                        size_t sz;
                        struct fuse_dirent *d = reply_dirent(&rep, pos, plus, &sz, &eo);
                        if (eo && eo->nodeid != 0) {
                                (*with_node)++;
                                ck_assert_uint_eq(eo->attr.ino, d->ino);
                                forget(eo->nodeid, 1);
                        } else if (eo)
                                ck_assert(strncmp(d->name, ".", 1) == 0);
                        ck_assert_uint_ge(d->namelen, 1);
                        ck_assert_uint_le(pos + sz, rep.len);
                        ck_assert(memchr(d->name, '/', d->namelen) == NULL);
                        off = d->off;
                        pos += sz;
                        n++;
                }
                free(rep.payload);
        }
        ck_assert_int_eq(release_req(FUSE_RELEASEDIR, nodeid, od.fh), 0);
        return n;
}

START_TEST(test_readdir) {
        struct fuse_entry_out d;
        unsigned with_node;
        char name[64];

        do_init();
        ck_assert_int_eq(mkdir_req(1, "dir", 0755, 0, &d), 0);
        for (int i = 0; i < 300; i++) {
                uint64_t fh;
                struct fuse_entry_out e;
                snprintf(name, sizeof name, "file-with-a-longish-name-%03d", i);
                ck_assert_int_eq(create(d.nodeid, name, O_WRONLY | O_CREAT, S_IFREG | 0644, &e, &fh), 0);
                ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fh), 0);
                forget(e.nodeid, 1);
        }
        ck_assert_uint_eq(list_dir(d.nodeid, false, 4096, &with_node), 302);
        ck_assert_uint_eq(list_dir(d.nodeid, false, 100, &with_node), 302);
        ck_assert_uint_eq(list_dir(d.nodeid, true, 4096, &with_node), 302);
        ck_assert_uint_eq(with_node, 300);
        ck_assert_uint_eq(list_dir(d.nodeid, true, 400, &with_node), 302);
        /* A buffer too small for even one entry: empty, not an overflow. */
        {
                struct fuse_open_out od;
                Args *a = args_new();
                struct fuse_read_in ri = { .size = 10 };
                Reply rep;
                ck_assert_int_eq(open_req(FUSE_OPENDIR, d.nodeid, O_RDONLY, &od), 0);
                ri.fh = od.fh;
                args_add(a, &ri, sizeof ri);
                ck_assert_int_eq(call_full(FUSE_READDIRPLUS, d.nodeid, a, 16 + 10, &rep), 0);
                ck_assert_uint_eq(rep.len, 0);
                free(rep.payload);
                /* The guest's size larger than the reply space: bounded by the space. */
                ri.size = 65536;
                a->len = 0;
                args_add(a, &ri, sizeof ri);
                ck_assert_int_eq(call_full(FUSE_READDIR, d.nodeid, a, 16 + 200, &rep), 0);
                ck_assert_uint_le(rep.len, 200);
                ck_assert_uint_gt(rep.len, 0);
                free(rep.payload);
                free(a);
                ck_assert_int_eq(release_req(FUSE_RELEASEDIR, d.nodeid, od.fh), 0);
        }
}
END_TEST

/* One READDIR(PLUS) request on an open directory handle: the names in the reply (and each record's
 * offset) in order. Entries with a node are forgotten again. */
typedef struct Listing {
        char names[64][64];
        uint64_t offs[64];
        unsigned n;
} Listing;

static void readdir_once(uint64_t nodeid, uint64_t fh, uint64_t off, bool plus, Listing *l) {
        Args *a = args_new();
        struct fuse_read_in ri = { .fh = fh, .offset = off, .size = 2048 };
        Reply rep;
        size_t pos = 0;

        l->n = 0;
        args_add(a, &ri, sizeof ri);
        ck_assert_int_eq(call_full(plus ? FUSE_READDIRPLUS : FUSE_READDIR, nodeid, a, 16 + ri.size, &rep), 0);
        free(a);
        while (pos < rep.len) {
                struct fuse_entry_out *eo;
                size_t sz;
                struct fuse_dirent *d = reply_dirent(&rep, pos, plus, &sz, &eo);
                if (eo && eo->nodeid != 0)
                        forget(eo->nodeid, 1);
                ck_assert_uint_le(pos + sz, rep.len);
                ck_assert_uint_lt(l->n, 64);
                ck_assert_uint_lt(d->namelen, 64);
                memcpy(l->names[l->n], d->name, d->namelen);
                l->names[l->n][d->namelen] = 0;
                l->offs[l->n++] = d->off;
                pos += sz;
        }
        free(rep.payload);
}

static bool listing_has(const Listing *l, const char *name) {
        for (unsigned i = 0; i < l->n; i++)
                if (streq(l->names[i], name))
                        return true;
        return false;
}

/* Entries read ahead for one request are sent by the next one that continues at its offset; any
 * other offset seeks: back to the start, back into the middle, or past what is buffered. */
START_TEST(test_readdir_continue_and_seek) {
        struct fuse_entry_out d;
        struct fuse_open_out od;
        char name[64], path[PATH_MAX];
        Listing l, again;
        uint64_t off = 0, mid_off = 0, end_off;
        char first_after_mid[64] = "";
        unsigned total = 0, seen[1000] = { 0 };

        do_init();
        ck_assert_int_eq(mkdir_req(1, "big", 0755, 0, &d), 0);
        /* 1,000 names of 40 bytes: about 56 KiB of getdents records, several read-ahead buffers. */
        for (int i = 0; i < 1000; i++) {
                snprintf(path, sizeof path, "%s/big/entry-%04d-padding-padding-padding-xx", share, i);
                ck_assert_int_ge(mknod(path, S_IFREG | 0644, 0), 0);
        }
        ck_assert_int_eq(open_req(FUSE_OPENDIR, d.nodeid, O_RDONLY, &od), 0);
        for (unsigned req = 0;; req++) {
                readdir_once(d.nodeid, od.fh, off, false, &l);
                if (l.n == 0)
                        break;
                for (unsigned i = 0; i < l.n; i++) {
                        int k;
                        if (sscanf(l.names[i], "entry-%d-", &k) == 1) {
                                ck_assert_int_ge(k, 0);
                                ck_assert_int_lt(k, 1000);
                                ck_assert_uint_eq(seen[k]++, 0); /* never twice */
                        }
                        total++;
                }
                if (req == 10) {
                        mid_off = off; /* where request 10 started */
                        snprintf(first_after_mid, sizeof first_after_mid, "%s", l.names[0]);
                }
                off = l.offs[l.n - 1];
        }
        ck_assert_uint_eq(total, 1002);
        end_off = off;
        ck_assert_str_ne(first_after_mid, "");

        /* Back into the middle: the same entries as the first time. */
        readdir_once(d.nodeid, od.fh, mid_off, false, &l);
        ck_assert_uint_gt(l.n, 0);
        ck_assert_str_eq(l.names[0], first_after_mid);
        /* Continuing from there, then seeking back to the start: the whole directory again. */
        readdir_once(d.nodeid, od.fh, l.offs[l.n - 1], false, &again);
        ck_assert_uint_gt(again.n, 0);
        ck_assert(!listing_has(&again, first_after_mid));
        total = 0;
        off = 0;
        for (;;) {
                readdir_once(d.nodeid, od.fh, off, false, &l);
                if (l.n == 0)
                        break;
                total += l.n;
                off = l.offs[l.n - 1];
        }
        ck_assert_uint_eq(total, 1002);
        ck_assert_uint_eq(off, end_off);
        /* At the end, asking again at the end: still empty. */
        readdir_once(d.nodeid, od.fh, end_off, false, &l);
        ck_assert_uint_eq(l.n, 0);

        /* READDIRPLUS: a name removed on the host after it was read ahead is skipped (its lookup
         * fails), the rest still arrive. */
        readdir_once(d.nodeid, od.fh, 0, true, &l);
        ck_assert_uint_gt(l.n, 2);
        off = l.offs[l.n - 1];
        readdir_once(d.nodeid, od.fh, off, false, &again); /* plain: peek at the next names */
        ck_assert_uint_ge(again.n, 2);
        snprintf(name, sizeof name, "%s", again.names[1]);
        readdir_once(d.nodeid, od.fh, 0, true, &l); /* start over: read ahead again */
        ck_assert(!listing_has(&l, name));
        snprintf(path, sizeof path, "%s/big/%s", share, name);
        ck_assert_int_eq(unlink(path), 0);
        readdir_once(d.nodeid, od.fh, off, true, &l);
        ck_assert_uint_gt(l.n, 0);
        ck_assert_str_eq(l.names[0], again.names[0]);
        ck_assert(!listing_has(&l, name));
        ck_assert_int_eq(release_req(FUSE_RELEASEDIR, d.nodeid, od.fh), 0);
}
END_TEST

START_TEST(test_dir_ops) {
        struct fuse_entry_out d, e, l, s;
        uint64_t fh;
        char target[64];
        Reply rep;

        do_init();
        ck_assert_int_eq(mkdir_req(1, "d", 0777, 022, &d), 0);
        ck_assert(S_ISDIR(d.attr.mode));
        ck_assert_uint_eq(d.attr.mode & 0777, 0755);
        ck_assert_int_eq(mkdir_req(1, "d", 0755, 0, NULL), -EEXIST);
        ck_assert_int_eq(create(d.nodeid, "f", O_WRONLY | O_CREAT, S_IFREG | 0644, &e, &fh), 0);
        ck_assert_int_eq(name_req(FUSE_RMDIR, 1, "d"), -ENOTEMPTY);
        /* LINK: same node, nlink 2 */
        {
                Args *a = args_new();
                struct fuse_link_in li = { .oldnodeid = e.nodeid };
                args_add(a, &li, sizeof li);
                args_str(a, "hard");
                ck_assert_int_eq(call(FUSE_LINK, 1, a, &l, sizeof l), 0);
                ck_assert_uint_eq(l.nodeid, e.nodeid);
                ck_assert_uint_eq(l.attr.nlink, 2);
                /* A link to a directory is refused; to an unknown node EBADF. */
                li.oldnodeid = d.nodeid;
                a->len = 0;
                args_add(a, &li, sizeof li);
                args_str(a, "dlink");
                ck_assert_int_eq(call(FUSE_LINK, 1, a, NULL, 0), -EPERM);
                li.oldnodeid = 4242;
                a->len = 0;
                args_add(a, &li, sizeof li);
                args_str(a, "x");
                ck_assert_int_eq(call(FUSE_LINK, 1, a, NULL, 0), -EBADF);
                free(a);
        }
        {
                struct fuse_entry_out h2;
                ck_assert_int_eq(lookup(1, "hard", &h2), 0);
                ck_assert_uint_eq(h2.nodeid, e.nodeid);
        }
        /* SYMLINK + READLINK */
        {
                Args *a = args_new();
                args_str(a, "sl");
                args_str(a, "d/f");
                ck_assert_int_eq(call(FUSE_SYMLINK, 1, a, &s, sizeof s), 0);
                ck_assert(S_ISLNK(s.attr.mode));
                a->len = 0;
                args_str(a, "sl2");
                args_str(a, "");
                ck_assert_int_eq(call(FUSE_SYMLINK, 1, a, NULL, 0), -ENOENT);
                free(a);
                ck_assert_int_eq(call_full(FUSE_READLINK, s.nodeid, NULL, 16 + 4095, &rep), 0);
                ck_assert_uint_eq(rep.len, 3);
                memcpy(target, rep.payload, 3);
                free(rep.payload);
                ck_assert(memcmp(target, "d/f", 3) == 0);
                ck_assert_int_eq(call(FUSE_READLINK, d.nodeid, NULL, NULL, 0), -EINVAL);
        }
        /* RENAME, RENAME2 NOREPLACE / EXCHANGE */
        {
                Args *a = args_new();
                struct fuse_rename_in rn = { .newdir = 1 };
                struct fuse_rename2_in r2 = { .newdir = 1, .flags = RENAME_NOREPLACE };
                args_add(a, &rn, sizeof rn);
                args_str(a, "hard");
                args_str(a, "hard2");
                ck_assert_int_eq(call(FUSE_RENAME, 1, a, NULL, 0), 0);
                ck_assert_int_eq(access(share_path("hard2"), F_OK), 0);
                a->len = 0;
                args_add(a, &r2, sizeof r2);
                args_str(a, "hard2");
                args_str(a, "sl");
                ck_assert_int_eq(call(FUSE_RENAME2, 1, a, NULL, 0), -EEXIST);
                r2.flags = RENAME_EXCHANGE;
                memcpy(a->buf, &r2, sizeof r2);
                ck_assert_int_eq(call(FUSE_RENAME2, 1, a, NULL, 0), 0);
                {
                        struct stat st;
                        ck_assert_int_eq(lstat(share_path("hard2"), &st), 0);
                        ck_assert(S_ISLNK(st.st_mode));
                }
                r2.flags = 0x100;
                memcpy(a->buf, &r2, sizeof r2);
                ck_assert_int_eq(call(FUSE_RENAME2, 1, a, NULL, 0), -EINVAL);
                /* rename into a non-directory node */
                rn.newdir = e.nodeid;
                a->len = 0;
                args_add(a, &rn, sizeof rn);
                args_str(a, "sl");
                args_str(a, "x");
                ck_assert_int_eq(call(FUSE_RENAME, 1, a, NULL, 0), -ENOTDIR);
                free(a);
        }
        ck_assert_int_eq(name_req(FUSE_UNLINK, 1, "sl"), 0);
        ck_assert_int_eq(name_req(FUSE_UNLINK, 1, "sl"), -ENOENT);
        ck_assert_int_eq(name_req(FUSE_UNLINK, 1, "d"), -EISDIR);
        ck_assert_int_eq(name_req(FUSE_RMDIR, 1, "hard2"), -ENOTDIR);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fh), 0);
        ck_assert_int_eq(name_req(FUSE_UNLINK, d.nodeid, "f"), 0);
        ck_assert_int_eq(name_req(FUSE_RMDIR, 1, "d"), 0);
        ck_assert_int_eq(access(share_path("d"), F_OK), -1);
}
END_TEST

START_TEST(test_setattr) {
        struct fuse_entry_out e;
        struct fuse_attr_out at;
        uint64_t fh;
        Args *a = args_new();
        struct fuse_setattr_in sa = { 0 };

        do_init();
        ck_assert_int_eq(create(1, "f", O_RDWR | O_CREAT, S_IFREG | 0644, &e, &fh), 0);
        ck_assert_int_eq(write_req(e.nodeid, fh, 0, "0123456789", 10), 0);
        /* chmod */
        sa.valid = FATTR_MODE;
        sa.mode = S_IFREG | 04711;
        args_add(a, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, &at, sizeof at), 0);
        ck_assert_uint_eq(at.attr.mode & 07777, 04711);
        /* chown clears setuid, as the kernel does */
        sa = (struct fuse_setattr_in) { .valid = FATTR_UID | FATTR_GID, .uid = 65534, .gid = 65534 };
        memcpy(a->buf, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, &at, sizeof at), 0);
        ck_assert_uint_eq(at.attr.uid, 65534);
        ck_assert_uint_eq(at.attr.gid, 65534);
        ck_assert_uint_eq(at.attr.mode & 04000, 0);
        /* truncate by path and through the fh */
        sa = (struct fuse_setattr_in) { .valid = FATTR_SIZE, .size = 4 };
        memcpy(a->buf, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, &at, sizeof at), 0);
        ck_assert_uint_eq(at.attr.size, 4);
        sa = (struct fuse_setattr_in) { .valid = FATTR_SIZE | FATTR_FH | FATTR_LOCKOWNER, .size = 2, .fh = fh };
        memcpy(a->buf, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, &at, sizeof at), 0);
        ck_assert_uint_eq(at.attr.size, 2);
        sa.fh = fh + 1000;
        memcpy(a->buf, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, NULL, 0), -EBADF);
        /* times, explicit and NOW */
        sa = (struct fuse_setattr_in) { .valid = FATTR_ATIME | FATTR_MTIME, .atime = 1000, .atimensec = 5,
                                        .mtime = 2000, .mtimensec = 7 };
        memcpy(a->buf, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, &at, sizeof at), 0);
        ck_assert_uint_eq(at.attr.atime, 1000);
        ck_assert_uint_eq(at.attr.atimensec, 5);
        ck_assert_uint_eq(at.attr.mtime, 2000);
        ck_assert_uint_eq(at.attr.mtimensec, 7);
        sa = (struct fuse_setattr_in) { .valid = FATTR_MTIME | FATTR_MTIME_NOW | FATTR_CTIME };
        memcpy(a->buf, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, &at, sizeof at), 0);
        ck_assert_uint_gt(at.attr.mtime, 2000);
        ck_assert_uint_eq(at.attr.atime, 1000);
        /* invalid nanoseconds and unknown bits */
        sa = (struct fuse_setattr_in) { .valid = FATTR_ATIME, .atimensec = 2000000000 };
        memcpy(a->buf, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, NULL, 0), -EINVAL);
        sa = (struct fuse_setattr_in) { .valid = 1u << 20 };
        memcpy(a->buf, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, NULL, 0), -EINVAL);
        /* truncate of a directory */
        sa = (struct fuse_setattr_in) { .valid = FATTR_SIZE };
        memcpy(a->buf, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, 1, a, NULL, 0), -EISDIR);
        free(a);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fh), 0);
}
END_TEST

START_TEST(test_misc_ops) {
        struct fuse_entry_out e, d;
        struct fuse_open_out od;
        uint64_t fh;
        Args *a = args_new();

        do_init();
        ck_assert_int_eq(create(1, "f", O_RDWR | O_CREAT, S_IFREG | 0644, &e, &fh), 0);
        {
                struct fuse_statfs_out so;
                ck_assert_int_eq(call(FUSE_STATFS, 1, NULL, &so, sizeof so), 0);
                ck_assert_uint_gt(so.st.bsize, 0);
                ck_assert_uint_eq(so.st.namelen, 255);
        }
        {
                struct fuse_access_in ac = { .mask = R_OK | W_OK };
                args_add(a, &ac, sizeof ac);
                ck_assert_int_eq(call(FUSE_ACCESS, e.nodeid, a, NULL, 0), 0);
                ac.mask = 0x100;
                memcpy(a->buf, &ac, sizeof ac);
                ck_assert_int_eq(call(FUSE_ACCESS, e.nodeid, a, NULL, 0), -EINVAL);
        }
        {
                struct fuse_fsync_in fs = { .fh = fh, .fsync_flags = FUSE_FSYNC_FDATASYNC };
                a->len = 0;
                args_add(a, &fs, sizeof fs);
                ck_assert_int_eq(call(FUSE_FSYNC, e.nodeid, a, NULL, 0), 0);
                fs.fsync_flags = 0;
                memcpy(a->buf, &fs, sizeof fs);
                ck_assert_int_eq(call(FUSE_FSYNC, e.nodeid, a, NULL, 0), 0);
                ck_assert_int_eq(mkdir_req(1, "d", 0755, 0, &d), 0);
                ck_assert_int_eq(open_req(FUSE_OPENDIR, d.nodeid, O_RDONLY, &od), 0);
                fs.fh = od.fh;
                memcpy(a->buf, &fs, sizeof fs);
                ck_assert_int_eq(call(FUSE_FSYNCDIR, d.nodeid, a, NULL, 0), 0);
                ck_assert_int_eq(call(FUSE_FSYNCDIR, e.nodeid, a, NULL, 0), -EBADF);
        }
        {
                struct fuse_flush_in fl = { .fh = fh, .lock_owner = 42 };
                a->len = 0;
                args_add(a, &fl, sizeof fl);
                ck_assert_int_eq(call(FUSE_FLUSH, e.nodeid, a, NULL, 0), 0);
        }
        {
                struct fuse_syncfs_in sf = { 0 };
                a->len = 0;
                args_add(a, &sf, sizeof sf);
                ck_assert_int_eq(call(FUSE_SYNCFS, 1, a, NULL, 0), 0);
        }
        /* FALLOCATE, LSEEK holes */
        {
                struct fuse_fallocate_in fa = { .fh = fh, .offset = 1 << 20, .length = 4096 };
                struct fuse_lseek_in ls = { .fh = fh, .offset = 0, .whence = SEEK_DATA };
                struct fuse_lseek_out lo;
                a->len = 0;
                args_add(a, &fa, sizeof fa);
                ck_assert_int_eq(call(FUSE_FALLOCATE, e.nodeid, a, NULL, 0), 0);
                ck_assert_int_eq(write_req(e.nodeid, fh, 0, "abc", 3), 0);
                a->len = 0;
                args_add(a, &ls, sizeof ls);
                ck_assert_int_eq(call(FUSE_LSEEK, e.nodeid, a, &lo, sizeof lo), 0);
                ck_assert_uint_eq(lo.offset, 0);
                ls.whence = SEEK_HOLE;
                memcpy(a->buf, &ls, sizeof ls);
                ck_assert_int_eq(call(FUSE_LSEEK, e.nodeid, a, &lo, sizeof lo), 0);
                ck_assert_uint_gt(lo.offset, 0);
                ck_assert_uint_le(lo.offset, 1 << 20);
                ls.whence = 77;
                memcpy(a->buf, &ls, sizeof ls);
                ck_assert_int_eq(call(FUSE_LSEEK, e.nodeid, a, NULL, 0), -EINVAL);
                /* A negative offset is the host's to judge, as lseek(2) on the guest would: ENXIO
                 * for SEEK_DATA/SEEK_HOLE, not a blanket EINVAL. */
                ls.offset = (uint64_t) -1;
                ls.whence = SEEK_DATA;
                memcpy(a->buf, &ls, sizeof ls);
                ck_assert_int_eq(call(FUSE_LSEEK, e.nodeid, a, NULL, 0), -ENXIO);
                ls.whence = SEEK_HOLE;
                memcpy(a->buf, &ls, sizeof ls);
                ck_assert_int_eq(call(FUSE_LSEEK, e.nodeid, a, NULL, 0), -ENXIO);
        }
        /* COPY_FILE_RANGE */
        {
                struct fuse_entry_out e2;
                uint64_t fh2;
                struct fuse_write_out wo;
                char buf[8];
                ck_assert_int_eq(create(1, "g", O_RDWR | O_CREAT, S_IFREG | 0644, &e2, &fh2), 0);
                struct fuse_copy_file_range_in c = { .fh_in = fh, .off_in = 0, .nodeid_out = e2.nodeid,
                                                      .fh_out = fh2, .off_out = 10, .len = 3 };
                a->len = 0;
                args_add(a, &c, sizeof c);
                ck_assert_int_eq(call(FUSE_COPY_FILE_RANGE, e.nodeid, a, &wo, sizeof wo), 0);
                ck_assert_uint_eq(wo.size, 3);
                ck_assert_int_eq(read_req(e2.nodeid, fh2, 10, 8, buf), 3);
                ck_assert(memcmp(buf, "abc", 3) == 0);
                c.fh_out = fh; /* fh of the other inode */
                memcpy(a->buf, &c, sizeof c);
                ck_assert_int_eq(call(FUSE_COPY_FILE_RANGE, e.nodeid, a, NULL, 0), -EBADF);
        }
        /* TMPFILE */
        {
                struct fuse_create_in c = { .flags = O_RDWR, .mode = S_IFREG | 0600 };
                struct {
                        struct fuse_entry_out e;
                        struct fuse_open_out o;
                } out;
                a->len = 0;
                args_add(a, &c, sizeof c);
                args_str(a, "/");
                ck_assert_int_eq(call(FUSE_TMPFILE, d.nodeid, a, &out, sizeof out), 0);
                ck_assert(S_ISREG(out.e.attr.mode));
                ck_assert_uint_eq(out.e.attr.nlink, 0);
                ck_assert_int_eq(write_req(out.e.nodeid, out.o.fh, 0, "t", 1), 0);
                ck_assert_int_eq(release_req(FUSE_RELEASE, out.e.nodeid, out.o.fh), 0);
        }
        /* MKNOD: fifo and socket */
        {
                struct fuse_mknod_in mk = { .mode = S_IFIFO | 0644 };
                struct fuse_entry_out fe;
                a->len = 0;
                args_add(a, &mk, sizeof mk);
                args_str(a, "fifo");
                ck_assert_int_eq(call(FUSE_MKNOD, 1, a, &fe, sizeof fe), 0);
                ck_assert(S_ISFIFO(fe.attr.mode));
                mk.mode = S_IFSOCK | 0644;
                a->len = 0;
                args_add(a, &mk, sizeof mk);
                args_str(a, "sock");
                ck_assert_int_eq(call(FUSE_MKNOD, 1, a, &fe, sizeof fe), 0);
                ck_assert(S_ISSOCK(fe.attr.mode));
                mk.mode = S_IFDIR | 0755;
                a->len = 0;
                args_add(a, &mk, sizeof mk);
                args_str(a, "notadir");
                ck_assert_int_eq(call(FUSE_MKNOD, 1, a, NULL, 0), -EPERM);
        }
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fh), 0);
        free(a);
}
END_TEST

/* A direct-I/O write by an unprivileged guest caller carries WRITE_KILL_SUIDGID and the guest
 * clears nothing itself: the server must, with or without HANDLE_KILLPRIV_V2. */
START_TEST(test_write_kill_suidgid) {
        struct fuse_entry_out e;
        uint64_t fh;
        struct stat st;
        Args *a = args_new();
        struct fuse_write_in w = { .size = 1 };

        do_init_flags(0x7bfffffb & ~(uint32_t) FUSE_HANDLE_KILLPRIV_V2, 0xb, NULL);
        ck_assert_int_eq(create(1, "suid", O_RDWR | O_CREAT, S_IFREG | 0755, &e, &fh), 0);
        ck_assert_int_eq(chmod(share_path("suid"), 06755), 0);
        /* without the flag (a privileged writer) the bits stay */
        ck_assert_int_eq(write_req(e.nodeid, fh, 0, "a", 1), 0);
        ck_assert_int_eq(stat(share_path("suid"), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 06755);
        w.fh = fh;
        w.write_flags = FUSE_WRITE_KILL_SUIDGID;
        args_add(a, &w, sizeof w);
        args_add(a, "b", 1);
        ck_assert_int_eq(call(FUSE_WRITE, e.nodeid, a, NULL, sizeof(struct fuse_write_out)), 0);
        ck_assert_int_eq(stat(share_path("suid"), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0755);
        free(a);
}
END_TEST

START_TEST(test_xattr) {
        struct fuse_entry_out e;
        uint64_t fh;
        Args *a = args_new();
        struct fuse_getxattr_in gi = { 0 };
        struct fuse_getxattr_out go;
        Reply rep;
        /* The guest offered SETXATTR_EXT and it was accepted: the 16-byte header. */
        struct fuse_setxattr_in si = { .size = 5 };
        int r;

        do_init();
        ck_assert_int_eq(create(1, "f", O_RDWR | O_CREAT, S_IFREG | 0644, &e, &fh), 0);
        if (setxattr(share_path("f"), "user.probe", "1", 1, 0) < 0 && errno == EOPNOTSUPP) {
                free(a);
                return; /* the temporary filesystem has no user xattrs */
        }
        args_add(a, &si, sizeof si);
        args_str(a, "user.test");
        args_add(a, "value", 5);
        r = call(FUSE_SETXATTR, e.nodeid, a, NULL, 0);
        ck_assert_int_eq(r, 0);
        /* value length must match */
        a->len -= 1;
        ck_assert_int_eq(call(FUSE_SETXATTR, e.nodeid, a, NULL, 0), -EINVAL);
        /* size probe */
        a->len = 0;
        args_add(a, &gi, sizeof gi);
        args_str(a, "user.test");
        ck_assert_int_eq(call(FUSE_GETXATTR, e.nodeid, a, &go, sizeof go), 0);
        ck_assert_uint_eq(go.size, 5);
        /* too small: ERANGE */
        gi.size = 3;
        memcpy(a->buf, &gi, sizeof gi);
        ck_assert_int_eq(call(FUSE_GETXATTR, e.nodeid, a, NULL, 0), -ERANGE);
        gi.size = 64;
        memcpy(a->buf, &gi, sizeof gi);
        ck_assert_int_eq(call_full(FUSE_GETXATTR, e.nodeid, a, 16 + 64, &rep), 0);
        ck_assert_uint_eq(rep.len, 5);
        ck_assert(memcmp(rep.payload, "value", 5) == 0);
        free(rep.payload);
        /* more than the reply can carry */
        ck_assert_int_eq(call_full(FUSE_GETXATTR, e.nodeid, a, 16 + 10, NULL), -E2BIG);
        /* bad names */
        a->len = 0;
        args_add(a, &gi, sizeof gi);
        args_str(a, "");
        ck_assert_int_eq(call(FUSE_GETXATTR, e.nodeid, a, NULL, 0), -ERANGE);
        /* LISTXATTR */
        gi.size = 0;
        a->len = 0;
        args_add(a, &gi, sizeof gi);
        ck_assert_int_eq(call(FUSE_LISTXATTR, e.nodeid, a, &go, sizeof go), 0);
        ck_assert_uint_ge(go.size, 10);
        gi.size = 4096;
        memcpy(a->buf, &gi, sizeof gi);
        ck_assert_int_eq(call_full(FUSE_LISTXATTR, e.nodeid, a, 16 + 4096, &rep), 0);
        ck_assert(memmem(rep.payload, rep.len, "user.test", 10) != NULL);
        free(rep.payload);
        /* REMOVEXATTR */
        a->len = 0;
        args_str(a, "user.test");
        ck_assert_int_eq(call(FUSE_REMOVEXATTR, e.nodeid, a, NULL, 0), 0);
        ck_assert_int_eq(call(FUSE_REMOVEXATTR, e.nodeid, a, NULL, 0), -ENODATA);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fh), 0);
        free(a);
}
END_TEST

START_TEST(test_xattr_disabled) {
        Args *a = args_new();
        struct fuse_getxattr_in gi = { 0 };

        server_stop();
        server_start(FS_OPTIONS_DEFAULT); /* xattr off */
        do_init();
        args_add(a, &gi, sizeof gi);
        args_str(a, "security.capability");
        ck_assert_int_eq(call(FUSE_GETXATTR, 1, a, NULL, 0), -ENOSYS);
        free(a);
}
END_TEST

/* ---- escapes ---- */

START_TEST(test_escape_symlinks) {
        struct fuse_entry_out s, e;
        Args *a = args_new();
        char target[PATH_MAX];

        do_init();
        /* A symlink the host or guest made, pointing outside. */
        ck_assert_int_eq(symlink(outside, share_path("evil")), 0);
        snprintf(target, sizeof target, "%s", secret);
        ck_assert_int_eq(symlink(target, share_path("evilfile")), 0);
        ck_assert_int_eq(lookup(1, "evil", &s), 0);
        ck_assert(S_ISLNK(s.attr.mode));
        /* Through it as a directory: nothing. */
        ck_assert_int_eq(lookup(s.nodeid, "secret", &e), -ENOTDIR);
        ck_assert_int_eq(create(s.nodeid, "new", O_WRONLY | O_CREAT, S_IFREG | 0644, NULL, NULL), -ENOTDIR);
        ck_assert_int_eq(mkdir_req(s.nodeid, "new", 0755, 0, NULL), -ENOTDIR);
        ck_assert_int_eq(open_req(FUSE_OPENDIR, s.nodeid, O_RDONLY, NULL), -ENOTDIR);
        /* Open the file symlink: never followed. */
        ck_assert_int_eq(lookup(1, "evilfile", &e), 0);
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDONLY, NULL), -ELOOP);
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_WRONLY | O_TRUNC, NULL), -ELOOP);
        /* CREATE over the symlink's name does not follow it either. */
        ck_assert_int_eq(create(1, "evilfile", O_WRONLY | O_CREAT | O_TRUNC, S_IFREG | 0644, NULL, NULL), -ELOOP);
        /* SETATTR on the symlink: truncation and chmod do not reach the target. */
        {
                struct fuse_setattr_in sa = { .valid = FATTR_SIZE, .size = 0 };
                args_add(a, &sa, sizeof sa);
                ck_assert_int_ne(call(FUSE_SETATTR, e.nodeid, a, NULL, 0), 0);
                sa = (struct fuse_setattr_in) { .valid = FATTR_MODE, .mode = 0777 };
                memcpy(a->buf, &sa, sizeof sa);
                ck_assert_int_ne(call(FUSE_SETATTR, e.nodeid, a, NULL, 0), 0);
                sa = (struct fuse_setattr_in) { .valid = FATTR_UID, .uid = 1 };
                memcpy(a->buf, &sa, sizeof sa);
                ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, NULL, 0), 0); /* lchown of the link */
        }
        /* Names that try to leave. */
        a->len = 0;
        {
                struct fuse_link_in li = { .oldnodeid = e.nodeid };
                args_add(a, &li, sizeof li);
                args_str(a, "../outside/x");
                ck_assert_int_eq(call(FUSE_LINK, 1, a, NULL, 0), -EINVAL);
        }
        a->len = 0;
        args_str(a, "/tmp/absolute");
        args_str(a, "target");
        ck_assert_int_eq(call(FUSE_SYMLINK, 1, a, NULL, 0), -EINVAL);
        /* A symlink whose *target* is absolute is just data. */
        a->len = 0;
        args_str(a, "abs");
        args_str(a, secret);
        ck_assert_int_eq(call(FUSE_SYMLINK, 1, a, &e, sizeof e), 0);
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDONLY, NULL), -ELOOP);
        /* xattrs of the link go to the link, not the target */
        {
                struct fuse_getxattr_in gi = { .size = 0 };
                a->len = 0;
                args_add(a, &gi, sizeof gi);
                args_str(a, "user.x");
                ck_assert_int_ne(call(FUSE_GETXATTR, e.nodeid, a, NULL, 0), 0);
        }
        free(a);
        {
                struct stat st;
                ck_assert_int_eq(stat(secret, &st), 0);
                ck_assert_uint_eq(st.st_mode & 07777, 0600);
                ck_assert_uint_eq(st.st_uid, 0);
        }
        ck_assert(outside_untouched());
}
END_TEST

START_TEST(test_escape_special_files) {
        struct fuse_entry_out e;
        Args *a = args_new();
        struct fuse_mknod_in mk = { .mode = S_IFCHR | 0666, .rdev = (1 << 8) | 3 }; /* /dev/null's numbers */

        do_init();
        args_add(a, &mk, sizeof mk);
        args_str(a, "null");
        ck_assert_int_eq(call(FUSE_MKNOD, 1, a, &e, sizeof e), 0);
        ck_assert(S_ISCHR(e.attr.mode));
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDWR, NULL), -ENXIO);
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDONLY, NULL), -ENXIO);
        /* A FIFO: opening would block the daemon; refused at once. */
        ck_assert_int_eq(mkfifo(share_path("fifo"), 0666), 0);
        ck_assert_int_eq(lookup(1, "fifo", &e), 0);
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDONLY, NULL), -ENXIO);
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_WRONLY, NULL), -ENXIO);
        /* CREATE on an existing FIFO name (no O_EXCL): not opened either. */
        ck_assert_int_eq(create(1, "fifo", O_WRONLY | O_CREAT, S_IFREG | 0644, NULL, NULL), -ENXIO);
        /* Truncating it by SETATTR: refused. */
        {
                struct fuse_setattr_in sa = { .valid = FATTR_SIZE };
                a->len = 0;
                args_add(a, &sa, sizeof sa);
                ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, NULL, 0), -EINVAL);
        }
        free(a);
        ck_assert(outside_untouched());
}
END_TEST

START_TEST(test_escape_rename_out) {
        struct fuse_entry_out d;
        Args *a = args_new();
        struct fuse_rename_in rn = { .newdir = 1 };

        do_init();
        ck_assert_int_eq(mkdir_req(1, "d", 0755, 0, &d), 0);
        /* newdir that does not exist, or is a nodeid never issued */
        rn.newdir = 0;
        args_add(a, &rn, sizeof rn);
        args_str(a, "d");
        args_str(a, "x");
        ck_assert_int_eq(call(FUSE_RENAME, 1, a, NULL, 0), -EBADF);
        rn.newdir = 99999;
        memcpy(a->buf, &rn, sizeof rn);
        ck_assert_int_eq(call(FUSE_RENAME, 1, a, NULL, 0), -EBADF);
        /* names with slashes on either side */
        rn.newdir = 1;
        a->len = 0;
        args_add(a, &rn, sizeof rn);
        args_str(a, "d");
        args_str(a, "../../x");
        ck_assert_int_eq(call(FUSE_RENAME, 1, a, NULL, 0), -EINVAL);
        a->len = 0;
        args_add(a, &rn, sizeof rn);
        args_str(a, "../outside/secret");
        args_str(a, "stolen");
        ck_assert_int_eq(call(FUSE_RENAME, 1, a, NULL, 0), -EINVAL);
        /* ".." of a subdirectory resolves inside the share only */
        {
                struct fuse_entry_out up, upup;
                ck_assert_int_eq(lookup(d.nodeid, "..", &up), 0);
                ck_assert_uint_eq(up.nodeid, 1);
                ck_assert_int_eq(lookup(up.nodeid, "..", &upup), 0);
                ck_assert_uint_eq(upup.nodeid, 1);
        }
        free(a);
        ck_assert(outside_untouched());
        ck_assert_int_eq(access(share_path("d"), F_OK), 0);
}
END_TEST

/* ---- options ---- */

START_TEST(test_readonly) {
        struct fuse_entry_out e;
        uint64_t fh;
        int fd;

        fd = open(share_path("f"), O_CREAT | O_WRONLY, 0644);
        ck_assert_int_ge(fd, 0);
        close(fd);
        server_stop();
        {
                FsOptions o = FS_OPTIONS_DEFAULT;
                o.readonly = true;
                server_start(o);
        }
        do_init();
        ck_assert_int_eq(mkdir_req(1, "d", 0755, 0, NULL), -EROFS);
        ck_assert_int_eq(create(1, "g", O_WRONLY | O_CREAT, S_IFREG | 0644, NULL, NULL), -EROFS);
        ck_assert_int_eq(name_req(FUSE_UNLINK, 1, "f"), -EROFS);
        ck_assert_int_eq(lookup(1, "f", &e), 0);
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_WRONLY, NULL), -EROFS);
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDONLY | O_TRUNC, NULL), -EROFS);
        {
                struct fuse_open_out o;
                ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDONLY, &o), 0);
                fh = o.fh;
        }
        ck_assert_int_eq(write_req(e.nodeid, fh, 0, "x", 1), -EROFS);
        {
                Args *a = args_new();
                struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = 0600 };
                args_add(a, &sa, sizeof sa);
                ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, NULL, 0), -EROFS);
                free(a);
        }
        ck_assert_int_eq(access(share_path("f"), F_OK), 0);
        ck_assert_int_eq(access(share_path("d"), F_OK), -1);
}
END_TEST

START_TEST(test_cache_policies) {
        struct fuse_entry_out e;
        struct fuse_open_out o;
        struct fuse_attr_out at;
        int fd;

        ck_assert_str_eq(cache_policy_to_string(CACHE_METADATA), "metadata");
        ck_assert_int_eq(cache_policy_from_string("none"), CACHE_NEVER);
        ck_assert_int_eq(cache_policy_from_string("always"), CACHE_ALWAYS);
        ck_assert_int_eq(cache_policy_from_string("sometimes"), -EINVAL);
        ck_assert_ptr_null(cache_policy_to_string(_CACHE_MAX));

        fd = open(share_path("f"), O_CREAT | O_WRONLY, 0644);
        ck_assert_int_ge(fd, 0);
        close(fd);
        do_init();
        ck_assert_int_eq(fuse_server_get_cache_policy(srv), CACHE_AUTO);
        ck_assert_int_eq(lookup(1, "f", &e), 0);
        ck_assert_uint_eq(e.entry_valid, 1);
        ck_assert_uint_eq(e.attr_valid, 1);
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDONLY, &o), 0);
        ck_assert_uint_eq(o.open_flags, 0);
        /* Negative entries are cached outside "never". */
        {
                struct fuse_entry_out neg;
                Args *a = args_new();
                args_str(a, "missing");
                ck_assert_int_eq(call(FUSE_LOOKUP, 1, a, &neg, sizeof neg), 0);
                ck_assert_uint_eq(neg.nodeid, 0);
                ck_assert_uint_eq(neg.entry_valid, 1);
                ck_assert_int_eq(fuse_server_set_cache_policy(srv, CACHE_NEVER), 0);
                ck_assert_int_eq(call(FUSE_LOOKUP, 1, a, NULL, 0), -ENOENT);
                free(a);
        }
        ck_assert_int_eq(lookup(1, "f", &e), 0);
        ck_assert_uint_eq(e.entry_valid, 0);
        ck_assert_int_eq(getattr_req(e.nodeid, &at), 0);
        ck_assert_uint_eq(at.attr_valid, 0);
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDONLY, &o), 0);
        ck_assert_uint_eq(o.open_flags, FOPEN_DIRECT_IO);
        ck_assert_int_eq(fuse_server_set_cache_policy(srv, CACHE_METADATA), 0);
        ck_assert_int_eq(lookup(1, "f", &e), 0);
        ck_assert_uint_eq(e.entry_valid, 1);
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDONLY, &o), 0);
        ck_assert_uint_eq(o.open_flags, FOPEN_DIRECT_IO);
        ck_assert_int_eq(fuse_server_set_cache_policy(srv, CACHE_ALWAYS), 0);
        ck_assert_int_eq(lookup(1, "f", &e), 0);
        ck_assert_uint_eq(e.entry_valid, 86400);
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDONLY, &o), 0);
        ck_assert_uint_eq(o.open_flags, FOPEN_KEEP_CACHE);
        ck_assert_int_eq(open_req(FUSE_OPENDIR, 1, O_RDONLY, &o), 0);
        ck_assert_uint_eq(o.open_flags, FOPEN_CACHE_DIR);
        ck_assert_int_eq(fuse_server_set_cache_policy(srv, _CACHE_MAX), -EINVAL);
        ck_assert_int_eq(fuse_server_get_cache_policy(srv), CACHE_ALWAYS);

        /* An explicit timeout overrides the policy's (but never "never"). */
        server_stop();
        {
                FsOptions op = FS_OPTIONS_DEFAULT;
                op.timeout = 2.5;
                server_start(op);
        }
        do_init();
        ck_assert_int_eq(lookup(1, "f", &e), 0);
        ck_assert_uint_eq(e.entry_valid, 2);
        ck_assert_uint_eq(e.entry_valid_nsec, 500000000);
}
END_TEST

START_TEST(test_credentials) {
        struct fuse_entry_out e;
        struct stat st;
        uint64_t fh;

        do_init();
        ck_assert_int_eq(mkdir_req(1, "open", 0777, 0, &e), 0);
        ck_assert_int_eq(chmod(share_path("open"), 0777), 0);
        ck_assert_int_eq(mkdir_req(1, "closed", 0755, 0, NULL), 0);
        caller = (Caller) { 65534, 65534 };
        /* Created as the caller: owned by it. */
        ck_assert_int_eq(mkdir_req(e.nodeid, "mine", 0777, 027, NULL), 0);
        ck_assert_int_eq(stat(share_path("open/mine"), &st), 0);
        ck_assert_uint_eq(st.st_uid, 65534);
        ck_assert_uint_eq(st.st_gid, 65534);
        ck_assert_uint_eq(st.st_mode & 0777, 0750);
        ck_assert_int_eq(create(e.nodeid, "file", O_WRONLY | O_CREAT, S_IFREG | 0666, NULL, &fh), 0);
        ck_assert_int_eq(stat(share_path("open/file"), &st), 0);
        ck_assert_uint_eq(st.st_uid, 65534);
        ck_assert_uint_eq(st.st_mode & 0777, 0644);
        /* ...and refused where the caller may not write. */
        {
                struct fuse_entry_out c;
                caller = (Caller) { 0, 0 };
                ck_assert_int_eq(lookup(1, "closed", &c), 0);
                caller = (Caller) { 65534, 65534 };
                ck_assert_int_eq(mkdir_req(c.nodeid, "x", 0755, 0, NULL), -EACCES);
                ck_assert_int_eq(create(c.nodeid, "x", O_WRONLY | O_CREAT, S_IFREG | 0644, NULL, NULL), -EACCES);
                struct fuse_access_in ac = { .mask = W_OK };
                Args *a = args_new();
                args_add(a, &ac, sizeof ac);
                ck_assert_int_eq(call(FUSE_ACCESS, c.nodeid, a, NULL, 0), -EACCES);
                free(a);
        }
        /* The thread is root again after each request. */
        ck_assert_uint_eq(geteuid(), 0);
        ck_assert_uint_eq(getegid(), 0);
        caller = (Caller) { 0, 0 };
        ck_assert_int_eq(mkdir_req(1, "rootdir", 0755, 0, NULL), 0);
        ck_assert_int_eq(stat(share_path("rootdir"), &st), 0);
        ck_assert_uint_eq(st.st_uid, 0);
        /* setgid directories pass their group on, as the host kernel does. */
        ck_assert_int_eq(chown(share_path("open"), 0, 4242), 0);
        ck_assert_int_eq(chmod(share_path("open"), 02777), 0);
        caller = (Caller) { 65534, 65534 };
        ck_assert_int_eq(mkdir_req(e.nodeid, "inherit", 0755, 0, NULL), 0);
        ck_assert_int_eq(stat(share_path("open/inherit"), &st), 0);
        ck_assert_uint_eq(st.st_gid, 4242);
        ck_assert(st.st_mode & S_ISGID);
        caller = (Caller) { 0, 0 };
}
END_TEST

START_TEST(test_fd_budget) {
        struct fuse_entry_out e[8];
        char name[16];
        int fd;

        server_stop();
        for (int i = 0; i < 8; i++) {
                snprintf(name, sizeof name, "f%d", i);
                fd = open(share_path(name), O_CREAT | O_WRONLY, 0644);
                ck_assert_int_ge(fd, 0);
                close(fd);
        }
        {
                FsOptions o = FS_OPTIONS_DEFAULT;
                o.max_fds = 4; /* the root and three more */
                /* More than the budget: the nodes keep their fds, and the budget is what says no. */
                o.max_inode_fds = 16;
                server_start(o);
        }
        do_init();
        for (int i = 0; i < 3; i++) {
                snprintf(name, sizeof name, "f%d", i);
                ck_assert_int_eq(lookup(1, name, &e[i]), 0);
        }
        ck_assert_int_eq(lookup(1, "f3", NULL), -ENFILE);
        /* Looking up a known inode again needs no fd... but the probe open does: still ENFILE-safe. */
        ck_assert_int_eq(open_req(FUSE_OPEN, e[0].nodeid, O_RDONLY, NULL), -ENFILE);
        forget(e[1].nodeid, 1);
        ck_assert_int_eq(lookup(1, "f3", &e[3]), 0);
        ck_assert_int_eq(getattr_req(1, NULL), 0);
}
END_TEST

/* ---- locks ---- */

static int lk_req(uint32_t opcode, uint64_t nodeid, uint64_t fh, uint64_t owner, uint32_t type, uint64_t start,
                  uint64_t end, bool flock_, struct fuse_lk_out *out) {
        Args *a = args_new();
        struct fuse_lk_in l = { .fh = fh, .owner = owner, .lk = { .start = start, .end = end, .type = type },
                                .lk_flags = flock_ ? FUSE_LK_FLOCK : 0 };
        struct fuse_lk_out tmp;
        int r;
        args_add(a, &l, sizeof l);
        r = call(opcode, nodeid, a, opcode == FUSE_GETLK ? (out ? out : &tmp) : NULL,
                 opcode == FUSE_GETLK ? sizeof tmp : 0);
        free(a);
        return r;
}

typedef struct LockThread {
        uint64_t nodeid, fh, owner, unique;
        bool flock_;
        bool range; /* lock [start, end] instead of the whole file */
        uint64_t start, end;
        _Atomic int result; /* 12345 until answered */
} LockThread;

static void *setlkw_thread(void *p) {
        LockThread *t = p;
        Args *a = args_new();
        struct fuse_lk_in l = {
                .fh = t->fh,
                .owner = t->owner,
                .lk = { .start = t->range ? t->start : 0, .end = t->range ? t->end : INT64_MAX, .type = F_WRLCK },
                .lk_flags = t->flock_ ? FUSE_LK_FLOCK : 0
        };
        uint8_t req[sizeof(struct fuse_in_header) + sizeof l];
        struct fuse_in_header h = { .len = sizeof req, .opcode = FUSE_SETLKW, .unique = t->unique, .nodeid = t->nodeid };

        memcpy(req, &h, sizeof h);
        memcpy(req + sizeof h, &l, sizeof l);
        {
                struct iovec v = { req, sizeof req };
                ChainIter it;
                chain_iter_init(&it, &v, 1);
                ck_assert(fuse_server_request_may_block(&it));
                ck_assert_uint_eq(chain_left(&it), sizeof req); /* not consumed */
        }
        t->result = call_raw(req, sizeof req, 16, NULL);
        free(a);
        return NULL;
}

START_TEST(test_locks) {
        struct fuse_entry_out e;
        uint64_t fa, fb;
        struct fuse_lk_out lo;
        pthread_t th;
        LockThread t;

        do_init();
        {
                struct fuse_in_header h = { .len = sizeof h, .opcode = FUSE_SETLK };
                struct iovec v = { &h, sizeof h };
                ChainIter it;
                chain_iter_init(&it, &v, 1);
                ck_assert(!fuse_server_request_may_block(&it));
                v.iov_len = 10;
                chain_iter_init(&it, &v, 1);
                ck_assert(!fuse_server_request_may_block(&it));
        }
        ck_assert_int_eq(create(1, "lk", O_RDWR | O_CREAT, S_IFREG | 0644, &e, &fa), 0);
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDWR, NULL), 0);
        {
                struct fuse_open_out o;
                ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDWR, &o), 0);
                fb = o.fh;
        }
        /* POSIX: owner 1 locks [0,99]; owner 2 sees it and cannot take it. */
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 1, F_WRLCK, 0, 99, false, NULL), 0);
        ck_assert_int_eq(lk_req(FUSE_GETLK, e.nodeid, fb, 2, F_WRLCK, 50, 60, false, &lo), 0);
        ck_assert_uint_eq(lo.lk.type, F_WRLCK);
        ck_assert_uint_eq(lo.lk.start, 0);
        ck_assert_uint_eq(lo.lk.end, 99);
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fb, 2, F_RDLCK, 50, 60, false, NULL), -EAGAIN);
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fb, 2, F_RDLCK, 100, 200, false, NULL), 0);
        /* The owner itself sees no conflict. */
        ck_assert_int_eq(lk_req(FUSE_GETLK, e.nodeid, fa, 1, F_WRLCK, 0, 10, false, &lo), 0);
        ck_assert_uint_eq(lo.lk.type, F_UNLCK);
        /* Bad ranges, foreign fh */
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 1, F_WRLCK, 10, 5, false, NULL), -EINVAL);
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 1, 77, 0, 5, false, NULL), -EINVAL);
        ck_assert_int_eq(lk_req(FUSE_SETLK, 1, fa, 1, F_WRLCK, 0, 5, false, NULL), -EBADF);

        /* SETLKW waits without stalling others, then gets the lock when owner 1 unlocks. */
        t = (LockThread) { .nodeid = e.nodeid, .fh = fb, .owner = 2, .unique = 1001, .result = 12345 };
        ck_assert_int_eq(pthread_create(&th, NULL, setlkw_thread, &t), 0);
        await_lock_waiters(1);
        ck_assert_int_eq(getattr_req(e.nodeid, NULL), 0); /* others are served meanwhile */
        ck_assert_int_eq(t.result, 12345);
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 1, F_UNLCK, 0, INT64_MAX, false, NULL), 0);
        pthread_join(th, NULL);
        ck_assert_int_eq(t.result, 0);

        /* ...and INTERRUPT cancels a wait with EINTR. */
        t = (LockThread) { .nodeid = e.nodeid, .fh = fa, .owner = 1, .unique = 1003, .result = 12345 };
        ck_assert_int_eq(pthread_create(&th, NULL, setlkw_thread, &t), 0);
        await_lock_waiters(1);
        ck_assert_int_eq(t.result, 12345);
        {
                Args *a = args_new();
                struct fuse_interrupt_in ii = { .unique = 1003 };
                args_add(a, &ii, sizeof ii);
                ck_assert_int_eq(call_full(FUSE_INTERRUPT, 0, a, 16, NULL), NO_REPLY);
                free(a);
        }
        pthread_join(th, NULL);
        ck_assert_int_eq(t.result, -EINTR);

        /* FLUSH of owner 2 drops its POSIX locks. */
        {
                Args *a = args_new();
                struct fuse_flush_in fl = { .fh = fb, .lock_owner = 2 };
                args_add(a, &fl, sizeof fl);
                ck_assert_int_eq(call(FUSE_FLUSH, e.nodeid, a, NULL, 0), 0);
                free(a);
        }
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 1, F_WRLCK, 0, INT64_MAX, false, NULL), 0);

        /* flock through the lock opcodes: per handle. */
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 0, F_WRLCK, 0, 0, true, NULL), 0);
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fb, 0, F_RDLCK, 0, 0, true, NULL), -EWOULDBLOCK);
        t = (LockThread) { .nodeid = e.nodeid, .fh = fb, .owner = 0, .unique = 1005, .flock_ = true, .result = 12345 };
        ck_assert_int_eq(pthread_create(&th, NULL, setlkw_thread, &t), 0);
        usleep(30000);
        ck_assert_int_eq(t.result, 12345);
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 0, F_UNLCK, 0, 0, true, NULL), 0);
        pthread_join(th, NULL);
        ck_assert_int_eq(t.result, 0);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fa), 0);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fb), 0);
}
END_TEST

static int flush_req(uint64_t nodeid, uint64_t fh, uint64_t owner) {
        Args *a = args_new();
        struct fuse_flush_in fl = { .fh = fh, .lock_owner = owner };
        int r;
        args_add(a, &fl, sizeof fl);
        r = call(FUSE_FLUSH, nodeid, a, NULL, 0);
        free(a);
        return r;
}

/* The lock type another owner sees on [start, end] through fh (F_UNLCK: free). */
static uint32_t lock_seen(uint64_t nodeid, uint64_t fh, uint64_t owner, uint64_t start, uint64_t end) {
        struct fuse_lk_out lo;
        ck_assert_int_eq(lk_req(FUSE_GETLK, nodeid, fh, owner, F_WRLCK, start, end, false, &lo), 0);
        return lo.lk.type;
}

/* Waits up to ms for a lock thread to be answered; true when it was. */
static bool lock_thread_answered(LockThread *t, unsigned ms) {
        for (unsigned i = 0; i < ms / 10; i++) {
                if (atomic_load(&t->result) != 12345)
                        return true;
                usleep(10000);
        }
        return atomic_load(&t->result) != 12345;
}

/* Issue 18: a lock is owned by the open file (OFD locks: the guest's owner is the file, and the
 * handle is the file). FLUSH carries the closing process's owner, so only RELEASE can end it. */
START_TEST(test_locks_release) {
        struct fuse_entry_out e;
        uint64_t fa, fb, fc, fd, fe;
        pthread_t th;
        LockThread t;

        do_init();
        ck_assert_int_eq(create(1, "ofd", O_RDWR | O_CREAT, S_IFREG | 0644, &e, &fa), 0);
        {
                struct fuse_open_out o;
                ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDWR, &o), 0);
                fb = o.fh;
                ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDWR, &o), 0);
                fc = o.fh;
                ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDWR, &o), 0);
                fd = o.fh;
                ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDWR, &o), 0);
                fe = o.fh;
        }

        /* An OFD-style lock through fa (the guest's owner is the open file: 0xa1). */
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 0xa1, F_WRLCK, 0, 9, false, NULL), 0);
        ck_assert_uint_eq(lock_seen(e.nodeid, fb, 0xb2, 0, 9), F_WRLCK);
        /* close() of one descriptor: FLUSH with the closing process's owner keeps it (a dup may
         * still be open). */
        ck_assert_int_eq(flush_req(e.nodeid, fa, 0xc3), 0);
        ck_assert_uint_eq(lock_seen(e.nodeid, fb, 0xb2, 0, 9), F_WRLCK);
        /* The last close: RELEASE of fa ends every lock still held through it. */
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fa), 0);
        ck_assert_uint_eq(lock_seen(e.nodeid, fb, 0xb2, 0, 9), F_UNLCK);
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fb, 0xb2, F_WRLCK, 0, 9, false, NULL), 0);

        /* Locks held through other handles survive a RELEASE: owner 0xb2's (fb) after fc goes. */
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fc, 0xd4, F_RDLCK, 100, 109, false, NULL), 0);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fc), 0);
        ck_assert_uint_eq(lock_seen(e.nodeid, fd, 0xe5, 0, 9), F_WRLCK);
        ck_assert_uint_eq(lock_seen(e.nodeid, fd, 0xe5, 100, 109), F_UNLCK);

        /* A SETLKW blocked on a handle that is released is answered (EBADF), not left waiting. */
        t = (LockThread) { .nodeid = e.nodeid, .fh = fd, .owner = 0xf6, .unique = 2001, .result = 12345 };
        ck_assert_int_eq(pthread_create(&th, NULL, setlkw_thread, &t), 0);
        await_lock_waiters(1);
        ck_assert_int_eq(atomic_load(&t.result), 12345);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fd), 0);
        if (!lock_thread_answered(&t, 2000)) {
                /* Let it go so the test ends, then fail. */
                ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fb, 0xb2, F_UNLCK, 0, INT64_MAX, false, NULL), 0);
                pthread_join(th, NULL);
                ck_abort_msg("SETLKW on a released handle still waiting 2 s after RELEASE");
        }
        pthread_join(th, NULL);
        ck_assert_int_eq(t.result, -EBADF);
        /* ...and it left nothing behind: the range is still owner 0xb2's alone. */
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fb, 0xb2, F_UNLCK, 0, INT64_MAX, false, NULL), 0);
        ck_assert_uint_eq(lock_seen(e.nodeid, fe, 0xe5, 0, INT64_MAX), F_UNLCK);

        /* The same for flock: a wait on a released handle is answered. */
        {
                struct fuse_open_out o;
                ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDWR, &o), 0);
                fd = o.fh;
        }
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fb, 0, F_WRLCK, 0, 0, true, NULL), 0);
        t = (LockThread) { .nodeid = e.nodeid, .fh = fd, .owner = 0, .unique = 2003, .flock_ = true, .result = 12345 };
        ck_assert_int_eq(pthread_create(&th, NULL, setlkw_thread, &t), 0);
        await_lock_waiters(1);
        ck_assert_int_eq(atomic_load(&t.result), 12345);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fd), 0);
        if (!lock_thread_answered(&t, 2000)) {
                ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fb, 0, F_UNLCK, 0, 0, true, NULL), 0);
                pthread_join(th, NULL);
                ck_abort_msg("flock wait on a released handle still waiting 2 s after RELEASE");
        }
        pthread_join(th, NULL);
        ck_assert_int_eq(t.result, -EBADF);

        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fb), 0);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fe), 0);
}
END_TEST

/* Issue 13 item 5: a lock wait keeps using its owner's lock fd while FLUSH of that owner on another
 * queue closes it. The fd number is then reused by another open file (filled here on purpose), and
 * a wait that still used the number would lock that file and report success while the lock it
 * waits for is still held. */
START_TEST(test_lock_fd_flush_race) {
        struct fuse_entry_out e;
        uint64_t fa, fb;
        pthread_t th;
        LockThread t;
        int fillers[64];
        const char *other = share_path("filler");

        do_init();
        ck_assert_int_eq(create(1, "plk", O_RDWR | O_CREAT, S_IFREG | 0644, &e, &fa), 0);
        {
                struct fuse_open_out o;
                ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDWR, &o), 0);
                fb = o.fh;
        }
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 0x1, F_WRLCK, 0, INT64_MAX, false, NULL), 0);
        t = (LockThread){ .nodeid = e.nodeid, .fh = fb, .owner = 0x2, .unique = 3001, .result = 12345 };
        ck_assert_int_eq(pthread_create(&th, NULL, setlkw_thread, &t), 0);
        await_lock_waiters(1);
        ck_assert_int_eq(atomic_load(&t.result), 12345);

        /* The waiting owner's process closes another descriptor of the file: its POSIX locks go
         * (it holds none), its wait goes on. Whatever fd numbers that freed get other files. */
        ck_assert_int_eq(flush_req(e.nodeid, fb, 0x2), 0);
        for (unsigned i = 0; i < ELEMENTSOF(fillers); i++)
                ck_assert_int_ge(fillers[i] = open(other, O_RDWR | O_CREAT | O_CLOEXEC, 0600), 0);
        usleep(100000);
        ck_assert_msg(atomic_load(&t.result) == 12345, "SETLKW answered %d while the lock is still held",
                      atomic_load(&t.result));

        /* The holder lets go: the waiter gets the lock it asked for, on the right file. */
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 0x1, F_UNLCK, 0, INT64_MAX, false, NULL), 0);
        pthread_join(th, NULL);
        ck_assert_int_eq(t.result, 0);
        ck_assert_uint_eq(lock_seen(e.nodeid, fa, 0x3, 0, INT64_MAX), F_WRLCK);
        for (unsigned i = 0; i < ELEMENTSOF(fillers); i++) {
                struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
                ck_assert_int_eq(fcntl(fillers[i], F_OFD_GETLK, &fl), 0);
                ck_assert_int_eq(fl.l_type, F_UNLCK);
                close(fillers[i]);
        }
        ck_assert_int_eq(flush_req(e.nodeid, fb, 0x2), 0);
        ck_assert_uint_eq(lock_seen(e.nodeid, fa, 0x3, 0, INT64_MAX), F_UNLCK);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fa), 0);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fb), 0);
}
END_TEST

static void interrupt_req(uint64_t unique) {
        Args *a = args_new();
        struct fuse_interrupt_in ii = { .unique = unique };
        args_add(a, &ii, sizeof ii);
        ck_assert_int_eq(call_full(FUSE_INTERRUPT, 0, a, 16, NULL), NO_REPLY);
        free(a);
}

/* Issue 13 item 1: a guest can send two blocking SETLKW with the same unique. The second must not
 * take over the first one's place among the waiters: an INTERRUPT would then orphan the first (a
 * queue stop waits for it forever), and once the first returns the table would hold a pointer into
 * its dead stack frame, which the INTERRUPT below reads (ASan: detect_stack_use_after_return=1). */
START_TEST(test_setlkw_same_unique) {
        struct fuse_entry_out e;
        uint64_t fa, fb, fc;
        pthread_t t1, t2;
        LockThread w1, w2;
        bool refused;

        do_init();
        ck_assert_int_eq(create(1, "uniq", O_RDWR | O_CREAT, S_IFREG | 0644, &e, &fa), 0);
        {
                struct fuse_open_out o;
                ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDWR, &o), 0);
                fb = o.fh;
                ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDWR, &o), 0);
                fc = o.fh;
        }
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 0x1, F_WRLCK, 0, 9, false, NULL), 0);
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 0x1, F_WRLCK, 100, 109, false, NULL), 0);

        w1 = (LockThread){ .nodeid = e.nodeid,
                           .fh = fb,
                           .owner = 0x2,
                           .unique = 4001,
                           .range = true,
                           .start = 0,
                           .end = 9,
                           .result = 12345 };
        ck_assert_int_eq(pthread_create(&t1, NULL, setlkw_thread, &w1), 0);
        await_lock_waiters(1);
        ck_assert_int_eq(atomic_load(&w1.result), 12345);
        w2 = (LockThread){ .nodeid = e.nodeid,
                           .fh = fc,
                           .owner = 0x3,
                           .unique = 4001,
                           .range = true,
                           .start = 100,
                           .end = 109,
                           .result = 12345 };
        ck_assert_int_eq(pthread_create(&t2, NULL, setlkw_thread, &w2), 0);
        refused = lock_thread_answered(&w2, 500);

        /* The first waiter's lock comes free: it returns. */
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 0x1, F_UNLCK, 0, 9, false, NULL), 0);
        ck_assert(lock_thread_answered(&w1, 2000));
        pthread_join(t1, NULL);
        ck_assert_int_eq(w1.result, 0);
        /* An INTERRUPT of that unique now finds nothing to cancel (and touches no dead frame). */
        interrupt_req(4001);

        /* Let everything go, then check. */
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 0x1, F_UNLCK, 0, INT64_MAX, false, NULL), 0);
        pthread_join(t2, NULL);
        ck_assert_msg(refused, "a second SETLKW with a unique already waiting was not refused");
        ck_assert_int_eq(w2.result, -EINVAL);

        /* The unique is free again once its request is answered: a new wait with it can be
         * interrupted, and the interrupt reaches that one. */
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fb, 0x2, F_UNLCK, 0, INT64_MAX, false, NULL), 0);
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 0x1, F_WRLCK, 0, INT64_MAX, false, NULL), 0);
        w1 = (LockThread){ .nodeid = e.nodeid, .fh = fb, .owner = 0x2, .unique = 4001, .result = 12345 };
        ck_assert_int_eq(pthread_create(&t1, NULL, setlkw_thread, &w1), 0);
        await_lock_waiters(1);
        ck_assert_int_eq(atomic_load(&w1.result), 12345);
        interrupt_req(4001);
        ck_assert(lock_thread_answered(&w1, 2000));
        pthread_join(t1, NULL);
        ck_assert_int_eq(w1.result, -EINTR);

        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fa), 0);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fb), 0);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fc), 0);
}
END_TEST

/* Issue 31: an INTERRUPT that arrives while its SETLKW is routed to a helper thread but not yet
 * started (queued, or the helper still starting) found no waiter and was lost: the wait then went
 * on until the lock came free. The composition announces such a request when it routes it
 * (fuse_server_lock_wait_queued(), as fuse-handler.c's classify does); the INTERRUPT is kept for it
 * and the wait answers EINTR as soon as it starts. */
START_TEST(test_setlkw_interrupted_while_queued) {
        struct fuse_entry_out e;
        struct fuse_open_out o;
        uint64_t fa, fb;
        pthread_t t1;
        LockThread w;

        do_init();
        ck_assert_int_eq(create(1, "queued", O_RDWR | O_CREAT, S_IFREG | 0644, &e, &fa), 0);
        ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDWR, &o), 0);
        fb = o.fh;
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 0x1, F_WRLCK, 0, INT64_MAX, false, NULL), 0);

        w = (LockThread){ .nodeid = e.nodeid, .fh = fb, .owner = 0x2, .unique = 5001, .result = 12345 };
        {
                struct fuse_in_header h = { .opcode = FUSE_SETLKW, .unique = w.unique, .nodeid = w.nodeid };
                fuse_server_lock_wait_queued(srv, &h);
        }
        interrupt_req(5001); /* before the wait starts */
        ck_assert_int_eq(pthread_create(&t1, NULL, setlkw_thread, &w), 0);
        ck_assert_msg(lock_thread_answered(&w, 2000), "the INTERRUPT of a SETLKW queued for a helper was lost");
        pthread_join(t1, NULL);
        ck_assert_int_eq(w.result, -EINTR);
        ck_assert_uint_eq(fuse_server_lock_waiters(srv), 0);

        /* Kept for that request only: the next wait (another unique) waits as usual. */
        w = (LockThread){ .nodeid = e.nodeid, .fh = fb, .owner = 0x2, .unique = 5003, .result = 12345 };
        {
                struct fuse_in_header h = { .opcode = FUSE_SETLKW, .unique = w.unique, .nodeid = w.nodeid };
                fuse_server_lock_wait_queued(srv, &h);
        }
        ck_assert_int_eq(pthread_create(&t1, NULL, setlkw_thread, &w), 0);
        await_lock_waiters(1);
        ck_assert_int_eq(atomic_load(&w.result), 12345);
        fuse_server_cancel_waits(srv); /* what a queue stop does */
        ck_assert(lock_thread_answered(&w, 2000));
        pthread_join(t1, NULL);
        ck_assert_int_eq(w.result, -EINTR);

        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fa), 0);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fb), 0);
}
END_TEST

/* A SETLKW on a thread that must not wait (the executor could not give it a helper): one
 * attempt, ENOLCK when the lock is taken, the lock when it is free. The header is the caller's
 * copy: the bytes in the chain after it are the arguments only. */
static int setlkw_no_wait(uint64_t nodeid, uint64_t fh, uint64_t owner) {
        struct fuse_lk_in l = { .fh = fh, .owner = owner, .lk = { .start = 0, .end = INT64_MAX, .type = F_WRLCK } };
        struct fuse_in_header h = { .len = sizeof h + sizeof l,
                                    .opcode = FUSE_SETLKW,
                                    .unique = atomic_fetch_add(&next_unique, 2),
                                    .nodeid = nodeid };
        uint8_t out[sizeof(struct fuse_out_header)];
        struct iovec vi = { &l, sizeof l }, vo = { out, sizeof out };
        struct fuse_out_header oh;
        ChainIter in, o;
        FuseReqInfo info;

        chain_iter_init(&in, &vi, 1);
        chain_iter_init(&o, &vo, 1);
        ck_assert_uint_eq(fuse_server_process_header(srv, &h, &in, &o, false, &info), sizeof oh);
        memcpy(&oh, out, sizeof oh);
        ck_assert_uint_eq(oh.unique, h.unique);
        ck_assert_uint_eq(info.opcode, FUSE_SETLKW);
        return oh.error;
}

START_TEST(test_setlkw_without_helper) {
        struct fuse_entry_out e;
        uint64_t fa, fb;
        struct timespec t0, t1;

        do_init();
        ck_assert_int_eq(create(1, "nowait", O_RDWR | O_CREAT, S_IFREG | 0644, &e, &fa), 0);
        {
                struct fuse_open_out o;
                ck_assert_int_eq(open_req(FUSE_OPEN, e.nodeid, O_RDWR, &o), 0);
                fb = o.fh;
        }
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 0x1, F_WRLCK, 0, 0, false, NULL), 0);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        ck_assert_int_eq(setlkw_no_wait(e.nodeid, fb, 0x2), -ENOLCK);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ck_assert_int_lt((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000, 500);
        ck_assert_int_eq(lk_req(FUSE_SETLK, e.nodeid, fa, 0x1, F_UNLCK, 0, 0, false, NULL), 0);
        ck_assert_int_eq(setlkw_no_wait(e.nodeid, fb, 0x2), 0);
        ck_assert_uint_eq(lock_seen(e.nodeid, fa, 0x3, 0, 0), F_WRLCK);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fa), 0);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fb), 0);
}
END_TEST

/* ---- concurrency ---- */

static void *hammer(void *p) {
        unsigned seed = (unsigned) (uintptr_t) p;
        for (int i = 0; i < 400; i++) {
                struct fuse_entry_out e;
                char name[16];
                snprintf(name, sizeof name, "h%u", rand_r(&seed) % 8);
                if (lookup(1, name, &e) == 0) {
                        (void) getattr_req(e.nodeid, NULL);
                        forget(e.nodeid, 1);
                }
        }
        return NULL;
}

START_TEST(test_concurrent) {
        pthread_t th[4];
        char name[16];

        do_init();
        for (int i = 0; i < 8; i++) {
                snprintf(name, sizeof name, "h%d", i);
                ck_assert_int_eq(mkdir_req(1, name, 0755, 0, NULL), 0);
        }
        /* mkdir's lookups: dropped so only the threads' counts remain. */
        for (int i = 0; i < 8; i++) {
                struct fuse_entry_out e;
                snprintf(name, sizeof name, "h%d", i);
                ck_assert_int_eq(lookup(1, name, &e), 0);
                forget(e.nodeid, 2);
        }
        for (unsigned i = 0; i < ELEMENTSOF(th); i++)
                ck_assert_int_eq(pthread_create(&th[i], NULL, hammer, (void *) (uintptr_t) (i + 1)), 0);
        for (unsigned i = 0; i < ELEMENTSOF(th); i++)
                pthread_join(th[i], NULL);
        ck_assert_int_eq(getattr_req(1, NULL), 0);
}
END_TEST

/* ---- tests: INIT features, submounts, security labels, POSIX ACLs ---- */

static void server_restart(bool submounts, bool label, bool acl, bool xattr) {
        FsOptions o = FS_OPTIONS_DEFAULT;

        server_stop();
        o.announce_submounts = submounts;
        o.security_label = label;
        o.posix_acl = acl;
        o.xattr = xattr;
        o.privileged_files = PRIVILEGED_FILES_ALLOW; /* as in setup() */
        server_start(o);
}

START_TEST(test_init_features) {
        struct fuse_init_out o;

        /* Options off: none of the four, though the guest offers them all. */
        server_restart(false, false, false, false);
        do_init_flags(0x7bfffffb, 0xb, &o);
        ck_assert_uint_eq(o.flags & (FUSE_SUBMOUNTS | FUSE_POSIX_ACL | FUSE_DONT_MASK), 0);
        ck_assert_uint_eq(o.flags2 & (FUSE_SECURITY_CTX >> 32), 0);

        server_restart(true, true, true, true);
        do_init_flags(0x7bfffffb, 0xb, &o);
        ck_assert_uint_eq(o.flags & (FUSE_SUBMOUNTS | FUSE_POSIX_ACL | FUSE_DONT_MASK | FUSE_INIT_EXT),
                          FUSE_SUBMOUNTS | FUSE_POSIX_ACL | FUSE_DONT_MASK | FUSE_INIT_EXT);
        ck_assert_uint_eq(o.flags2, FUSE_SECURITY_CTX >> 32);
        ck_assert_uint_eq(o.flags & ~0x7bfffffbu, 0);
        /* flags2 without INIT_EXT means nothing: no bit >= 32 comes back. */
        do_init_flags(0x3bfffffb, 0xb, &o);
        ck_assert_uint_eq(o.flags2, 0);
        ck_assert_uint_eq(o.flags & FUSE_INIT_EXT, 0);
        /* Only what was offered: DONT_MASK only together with POSIX_ACL. */
        do_init_flags(FUSE_DONT_MASK | FUSE_SUBMOUNTS | FUSE_INIT_EXT, 0, &o);
        ck_assert_uint_eq(o.flags, FUSE_SUBMOUNTS | FUSE_INIT_EXT);
        ck_assert_uint_eq(o.flags2, 0);
        do_init_flags(FUSE_INIT_EXT, FUSE_SECURITY_CTX >> 32, &o);
        ck_assert_uint_eq(o.flags, FUSE_INIT_EXT);
        ck_assert_uint_eq(o.flags2, FUSE_SECURITY_CTX >> 32);
        /* posix_acl needs xattr. */
        server_restart(false, false, true, false);
        do_init_flags(0x7bfffffb, 0xb, &o);
        ck_assert_uint_eq(o.flags & (FUSE_POSIX_ACL | FUSE_DONT_MASK), 0);
}
END_TEST

#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif

/* The command line's INIT options (--writeback, --killpriv-v2, --no-readdirplus, --allow-mmap,
 * announce-submounts by default): each flag is offered exactly when its option asks for it. */
START_TEST(test_init_options) {
        const uint32_t all2 = 0xb | (uint32_t) (FUSE_DIRECT_IO_ALLOW_MMAP >> 32);
        struct fuse_init_out o;
        FsOptions opts = FS_OPTIONS_DEFAULT;

        srv = fuse_server_free(srv);
        server_start(opts);
        do_init_flags(0x7bfffffb, all2, &o);
        ck_assert_uint_ne(o.flags & FUSE_SUBMOUNTS, 0); /* on by default */
        ck_assert_uint_ne(o.flags & FUSE_DO_READDIRPLUS, 0);
        ck_assert_uint_eq(o.flags & (FUSE_WRITEBACK_CACHE | FUSE_HANDLE_KILLPRIV_V2), 0);
        ck_assert_uint_eq(o.flags2 & (FUSE_DIRECT_IO_ALLOW_MMAP >> 32), 0);

        opts.writeback = opts.killpriv_v2 = opts.allow_mmap = true;
        opts.readdirplus = opts.announce_submounts = false;
        srv = fuse_server_free(srv);
        server_start(opts);
        do_init_flags(0x7bfffffb, all2, &o);
        ck_assert_uint_eq(o.flags & FUSE_SUBMOUNTS, 0);
        ck_assert_uint_eq(o.flags & (FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO), 0);
        ck_assert_uint_ne(o.flags & FUSE_WRITEBACK_CACHE, 0);
        ck_assert_uint_ne(o.flags & FUSE_HANDLE_KILLPRIV_V2, 0);
        ck_assert_uint_ne(o.flags2 & (FUSE_DIRECT_IO_ALLOW_MMAP >> 32), 0);
        /* never a flag the guest did not offer */
        do_init_flags(0x7bfffffb, 0xb, &o);
        ck_assert_uint_eq(o.flags2 & (FUSE_DIRECT_IO_ALLOW_MMAP >> 32), 0);
}
END_TEST

/* Mounts made by a test, undone by teardown_mounts() even when the test fails halfway. */
static char mounted[4][PATH_MAX];

static void track_mount(const char *path) {
        for (size_t i = 0; i < ELEMENTSOF(mounted); i++)
                if (!mounted[i][0]) {
                        snprintf(mounted[i], sizeof mounted[i], "%s", path);
                        return;
                }
        ck_abort_msg("too many mounts");
}

static void teardown_mounts(void) {
        for (size_t i = ELEMENTSOF(mounted); i-- > 0;)
                if (mounted[i][0]) {
                        (void) umount2(mounted[i], MNT_DETACH);
                        mounted[i][0] = 0;
                }
}

/* The attr.flags of name's entry in a READDIRPLUS listing of dir (the entry must be there). */
static uint32_t readdirplus_attr_flags(uint64_t dir, const char *name) {
        struct fuse_open_out oo;
        Args *a = args_new();
        struct fuse_read_in ri = { .size = 65536 };
        uint32_t flags = UINT32_MAX;
        Reply rep;

        ck_assert_int_eq(open_req(FUSE_OPENDIR, dir, O_RDONLY, &oo), 0);
        ri.fh = oo.fh;
        args_add(a, &ri, sizeof ri);
        ck_assert_int_eq(call_full(FUSE_READDIRPLUS, dir, a, 16 + 65536, &rep), 0);
        for (size_t off = 0; off < rep.len;) {
                struct fuse_direntplus *d = (struct fuse_direntplus *) (rep.payload + off);
                if (d->dirent.namelen == strlen(name) && memcmp(d->dirent.name, name, strlen(name)) == 0) {
                        flags = d->entry_out.attr.flags;
                        ck_assert_uint_ne(d->entry_out.nodeid, 0);
                }
                if (d->entry_out.nodeid != 0)
                        forget(d->entry_out.nodeid, 1);
                off += FUSE_DIRENTPLUS_SIZE(d);
        }
        free(rep.payload);
        free(a);
        ck_assert_int_eq(release_req(FUSE_RELEASEDIR, dir, oo.fh), 0);
        ck_assert_uint_ne(flags, UINT32_MAX);
        return flags;
}

START_TEST(test_submounts) {
        struct fuse_entry_out e, t, b, plain, inner;
        struct fuse_attr_out ta;

        /* A tmpfs (another filesystem) and a bind mount of a share directory (same st_dev, another
         * mount) inside the share, next to an ordinary directory. Made in a mount namespace of this
         * test's process (check forks one per test), so no mount outlives a failing test. */
        ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
        ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
        ck_assert_int_eq(mkdir(share_path("tmp"), 0755), 0);
        ck_assert_int_eq(mkdir(share_path("src"), 0755), 0);
        ck_assert_int_eq(mkdir(share_path("bind"), 0755), 0);
        ck_assert_int_eq(mkdir(share_path("plain"), 0755), 0);
        ck_assert_int_eq(mount("vufstest", share_path("tmp"), "tmpfs", 0, "size=1m"), 0);
        track_mount(share_path("tmp"));
        ck_assert_int_eq(mkdir(share_path("tmp/inner"), 0755), 0);
        {
                char src[PATH_MAX];
                snprintf(src, sizeof src, "%s", share_path("src")); /* share_path()'s buffer is static */
                ck_assert_int_eq(mount(src, share_path("bind"), NULL, MS_BIND, NULL), 0);
        }
        track_mount(share_path("bind"));

        /* Option on, but the guest did not offer SUBMOUNTS: no flag. */
        server_restart(true, false, false, true);
        do_init_flags(0x7bfffffb & ~FUSE_SUBMOUNTS, 0xb, NULL);
        ck_assert_int_eq(lookup(1, "tmp", &e), 0);
        ck_assert_uint_eq(e.attr.flags, 0);

        do_init();
        ck_assert_int_eq(lookup(1, "tmp", &t), 0);
        ck_assert_uint_eq(t.attr.flags, FUSE_ATTR_SUBMOUNT);
        ck_assert_int_eq(lookup(1, "bind", &b), 0);
        ck_assert_uint_eq(b.attr.flags, FUSE_ATTR_SUBMOUNT);
        ck_assert_int_eq(lookup(1, "plain", &plain), 0);
        ck_assert_uint_eq(plain.attr.flags, 0);
        /* Inside the submount, its own directories are ordinary again. */
        ck_assert_int_eq(lookup(t.nodeid, "inner", &inner), 0);
        ck_assert_uint_eq(inner.attr.flags, 0);
        /* GETATTR carries no entry flags; READDIRPLUS entries do. */
        ck_assert_int_eq(getattr_req(t.nodeid, &ta), 0);
        ck_assert_uint_eq(ta.attr.flags, 0);
        ck_assert_uint_eq(readdirplus_attr_flags(1, "tmp"), FUSE_ATTR_SUBMOUNT);
        ck_assert_uint_eq(readdirplus_attr_flags(1, "bind"), FUSE_ATTR_SUBMOUNT);
        ck_assert_uint_eq(readdirplus_attr_flags(1, "plain"), 0);
        ck_assert_uint_eq(readdirplus_attr_flags(t.nodeid, "inner"), 0);
        /* The bind mount is the same directory on another mount: a node of its own. */
        {
                struct fuse_entry_out s;
                ck_assert_int_eq(lookup(1, "src", &s), 0);
                ck_assert_uint_eq(s.attr.flags, 0);
                ck_assert_uint_eq(s.attr.ino, b.attr.ino);
                ck_assert_uint_ne(s.nodeid, b.nodeid);
        }
        /* ".." of the submount root is not announced. */
        ck_assert_int_eq(lookup(t.nodeid, "..", &e), 0);
        ck_assert_uint_eq(e.nodeid, 1);
        ck_assert_uint_eq(e.attr.flags, 0);

        /* Option off: never. */
        server_restart(false, false, false, true);
        do_init();
        ck_assert_int_eq(lookup(1, "tmp", &e), 0);
        ck_assert_uint_eq(e.attr.flags, 0);
        ck_assert_uint_eq(readdirplus_attr_flags(1, "bind"), 0);
        server_stop();
        teardown_mounts();
}
END_TEST

/* Appends one security context extension with one label. */
static void secctx_add(Args *x, const char *name, const void *value, uint32_t vsize) {
        static const uint8_t zeros[8];
        struct fuse_secctx_header h = { .nr_secctx = 1 };
        struct fuse_secctx sc = { .size = vsize };
        size_t start = x->len;

        args_add(x, &h, sizeof h);
        args_add(x, &sc, sizeof sc);
        args_str(x, name);
        args_add(x, value, vsize);
        args_add(x, zeros, ALIGN_TO(x->len - start, (size_t) 8) - (x->len - start));
        h.size = (uint32_t) (x->len - start);
        memcpy(x->buf + start, &h, sizeof h);
}

/* The caller call_ext() puts into the request header (root unless a test says otherwise). */
static uint32_t ext_uid, ext_gid;

/* Sends opcode with arguments a and the extension block x (NULL: none); returns the error and the
 * payload (out, outsize exactly) on success. */
static int call_ext(uint32_t opcode, uint64_t nodeid, const Args *a, const Args *x, void *out, size_t outsize) {
        size_t alen = a ? a->len : 0, xlen = x ? x->len : 0;
        uint8_t *req = malloc(sizeof(struct fuse_in_header) + alen + xlen);
        struct fuse_in_header h = {
                .len = (uint32_t) (sizeof h + alen + xlen),
                .opcode = opcode,
                .unique = atomic_fetch_add(&next_unique, 2),
                .nodeid = nodeid,
                .total_extlen = (uint16_t) (xlen / 8),
                .uid = ext_uid,
                .gid = ext_gid,
        };
        Reply rep;
        int r;

        ck_assert_uint_eq(xlen % 8, 0);
        memcpy(req, &h, sizeof h);
        if (alen)
                memcpy(req + sizeof h, a->buf, alen);
        if (xlen)
                memcpy(req + sizeof h + alen, x->buf, xlen);
        r = call_raw(req, sizeof h + alen + xlen, 16 + MAX(outsize, (size_t) 4096), &rep);
        free(req);
        if (r == 0 && out) {
                ck_assert_uint_eq(rep.len, outsize);
                memcpy(out, rep.payload, outsize);
        }
        free(rep.payload);
        return r;
}

/* Creates name in dir with one of the five creating opcodes, with extension x. */
static int create_op(uint32_t opcode, uint64_t dir, const char *name, const Args *x, struct fuse_entry_out *e) {
        Args *a = args_new();
        struct {
                struct fuse_entry_out e;
                struct fuse_open_out o;
        } out;
        int r;

        switch (opcode) {
        case FUSE_MKDIR: {
                struct fuse_mkdir_in m = { .mode = 0755 };
                args_add(a, &m, sizeof m);
                args_str(a, name);
                break;
        }
        case FUSE_MKNOD: {
                struct fuse_mknod_in m = { .mode = S_IFIFO | 0644 };
                args_add(a, &m, sizeof m);
                args_str(a, name);
                break;
        }
        case FUSE_SYMLINK:
                args_str(a, name);
                args_str(a, "target");
                break;
        case FUSE_CREATE:
        case FUSE_TMPFILE: {
                struct fuse_create_in c = { .flags = O_RDWR | (opcode == FUSE_CREATE ? O_CREAT : 0),
                                            .mode = S_IFREG | 0644 };
                args_add(a, &c, sizeof c);
                args_str(a, opcode == FUSE_CREATE ? name : "/");
                break;
        }
        default:
                ck_abort();
        }
        if (opcode == FUSE_CREATE || opcode == FUSE_TMPFILE) {
                r = call_ext(opcode, dir, a, x, &out, sizeof out);
                if (r == 0)
                        ck_assert_int_eq(release_req(FUSE_RELEASE, out.e.nodeid, out.o.fh), 0);
        } else
                r = call_ext(opcode, dir, a, x, &out.e, sizeof out.e);
        free(a);
        if (r == 0 && e)
                *e = out.e;
        return r;
}

/* The host's label of share-relative rel ("" when there is none). */
static const char *host_label(const char *rel) {
        static char buf[256];
        ssize_t n = lgetxattr(share_path(rel), "security.vufstest", buf, sizeof buf - 1);
        if (n < 0) {
                ck_assert_int_eq(errno, ENODATA);
                n = 0;
        }
        buf[n] = 0;
        return buf;
}

START_TEST(test_security_ctx) {
        static const uint32_t ops[] = { FUSE_MKDIR, FUSE_MKNOD, FUSE_SYMLINK, FUSE_CREATE };
        struct fuse_entry_out e;
        struct fuse_getxattr_in gi = { .size = 64 };
        Args *x = args_new(), *a = args_new();
        char name[32], val[32];
        struct stat st;
        Reply rep;

        server_restart(false, true, false, true);
        do_init();
        /* Each creating opcode labels its new inode on the host. */
        for (size_t i = 0; i < ELEMENTSOF(ops); i++) {
                snprintf(name, sizeof name, "n%zu", i);
                snprintf(val, sizeof val, "label-%zu", i);
                x->len = 0;
                secctx_add(x, "security.vufstest", val, (uint32_t) strlen(val));
                ck_assert_int_eq(create_op(ops[i], 1, name, x, &e), 0);
                ck_assert_str_eq(host_label(name), val);
        }
        /* TMPFILE: unnamed, so asked through the server. */
        x->len = 0;
        secctx_add(x, "security.vufstest", "tmp", 3);
        ck_assert_int_eq(create_op(FUSE_TMPFILE, 1, NULL, x, &e), 0);
        args_add(a, &gi, sizeof gi);
        args_str(a, "security.vufstest");
        ck_assert_int_eq(call_full(FUSE_GETXATTR, e.nodeid, a, 16 + 64, &rep), 0);
        ck_assert_uint_eq(rep.len, 3);
        ck_assert(memcmp(rep.payload, "tmp", 3) == 0);
        free(rep.payload);
        /* No LSM label (nr_secctx 0, the header alone): created, unlabelled. */
        {
                struct fuse_secctx_header h = { .size = 8, .nr_secctx = 0 };
                x->len = 0;
                args_add(x, &h, sizeof h);
                ck_assert_int_eq(create_op(FUSE_MKDIR, 1, "nolabel", x, NULL), 0);
                ck_assert_str_eq(host_label("nolabel"), "");
        }
        /* An extension of another type next to it is skipped. */
        {
                struct fuse_ext_header other = { .size = 16, .type = 32 };
                uint64_t payload = 0;
                x->len = 0;
                args_add(x, &other, sizeof other);
                args_add(x, &payload, sizeof payload);
                secctx_add(x, "security.vufstest", "after", 5);
                ck_assert_int_eq(create_op(FUSE_MKDIR, 1, "other", x, NULL), 0);
                ck_assert_str_eq(host_label("other"), "after");
        }
        /* A label the host refuses (too large for one ext4 xattr block here): the new inode is
         * removed again and the error returned. Whether the host refuses is probed first. */
        {
                static char big[XATTR_SIZE_MAX];
                bool host_refuses;
                memset(big, 'L', sizeof big);
                ck_assert_int_eq(mknod(share_path("probe"), S_IFREG | 0600, 0), 0);
                host_refuses = setxattr(share_path("probe"), "security.vufstest", big, sizeof big, 0) < 0;
                for (size_t i = 0; i < ELEMENTSOF(ops); i++) {
                        int r;
                        snprintf(name, sizeof name, "big%zu", i);
                        x->len = 0;
                        secctx_add(x, "security.vufstest", big, sizeof big);
                        r = create_op(ops[i], 1, name, x, &e);
                        if (host_refuses) {
                                ck_assert_int_lt(r, 0);
                                ck_assert_int_eq(lstat(share_path(name), &st), -1);
                                ck_assert_int_eq(errno, ENOENT);
                        } else
                                ck_assert_int_eq(r, 0);
                }
                x->len = 0;
                secctx_add(x, "security.vufstest", big, sizeof big);
                ck_assert_int_eq(create_op(FUSE_TMPFILE, 1, NULL, x, &e) < 0, host_refuses);
        }
        free(x);
        free(a);
}
END_TEST

/* Issue 31 finding 6: a creating request's security label goes through --xattrmap as SETXATTR of
 * the same name does. Before, the label was written under its raw security.* name while SETXATTR
 * of it was renamed (or refused). Renamed: stored under the map's host name. Refused by the map:
 * the request is refused the same way, and nothing is created. */
START_TEST(test_security_ctx_xattrmap) {
        static const char *const maps[] = { ":map:security.:user.virtiofs.:", ":bad:all:security.::\n:ok:all:::",
                                            ":unsupported:all:security.::\n:ok:all:::" };
        static const int want[] = { 0, -EPERM, -ENOTSUP };
        Args *x = args_new();
        struct fuse_entry_out e;
        char v[16];

        for (size_t k = 0; k < ELEMENTSOF(maps); k++) {
                FsOptions o = FS_OPTIONS_DEFAULT;
                XattrMap *map = NULL;
                char name[16];

                ck_assert_int_eq(xattr_map_parse(maps[k], &map, NULL), 0);
                o.xattr = true;
                o.xattrmap = map;
                o.security_label = true;
                o.privileged_files = PRIVILEGED_FILES_ALLOW; /* as in setup() */
                server_stop();
                server_start(o);
                do_init();
                snprintf(name, sizeof name, "mapped%zu", k);
                x->len = 0;
                secctx_add(x, "security.vufstest", "lbl", 3);
                if (k == 0 && setxattr(share_path(""), "user.probe", "1", 1, 0) < 0 && errno == EOPNOTSUPP) {
                        server_stop();
                        xattr_map_free(map);
                        continue; /* no user xattrs on this temporary filesystem: nothing to store to */
                }
                ck_assert_int_eq(create_op(FUSE_MKDIR, 1, name, x, &e), want[k]);
                if (want[k] == 0) {
                        ck_assert_int_eq(getxattr(share_path(name), "user.virtiofs.security.vufstest", v, sizeof v), 3);
                        ck_assert_str_eq(host_label(name), ""); /* not under its raw name */
                } else
                        ck_assert_int_eq(access(share_path(name), F_OK), -1); /* refused before creating */
                server_stop();
                xattr_map_free(map);
        }
        server_restart(false, false, false, true);
        free(x);
}
END_TEST

/* Malformed security contexts are EINVAL and create nothing, negotiated or not. */
/* FUSE_CREATE_SUPP_GROUP as Linux (>= 6.3) sends it: struct fuse_ext_header {size, type 32},
 * then struct fuse_supp_groups {nr_groups, groups[]}, padded to 8 bytes. */
#define TEST_FUSE_EXT_GROUPS 32
#define TEST_FUSE_CREATE_SUPP_GROUP (1u << 2) /* in flags2 */

static void groups_add(Args *x, uint32_t nr, const uint32_t *groups, uint32_t present) {
        static const uint8_t zeros[8];
        struct fuse_ext_header h = { .type = TEST_FUSE_EXT_GROUPS };
        size_t start = x->len;

        args_add(x, &h, sizeof h);
        args_add(x, &nr, sizeof nr);
        args_add(x, groups, present * sizeof(uint32_t));
        args_add(x, zeros, ALIGN_TO(x->len - start, (size_t) 8) - (x->len - start));
        h.size = (uint32_t) (x->len - start);
        memcpy(x->buf + start, &h, sizeof h);
}

/* A guest user (65534:65533) whose supplementary group 4242 owns a 0770 directory: the creating
 * opcodes get in only with the group the guest sends, and only once it was negotiated. */
START_TEST(test_supp_group) {
        static const uint32_t ops[] = { FUSE_MKDIR, FUSE_MKNOD, FUSE_SYMLINK, FUSE_CREATE, FUSE_TMPFILE };
        static const uint32_t group[1] = { 4242 };
        struct fuse_init_out o;
        struct fuse_entry_out e, dir;
        Args *x = args_new();
        char name[32];
        struct stat st;

        ck_assert_int_eq(mkdir(share_path("grp"), 0770), 0);
        ck_assert_int_eq(chown(share_path("grp"), 0, 4242), 0);
        ck_assert_int_eq(chmod(share_path("grp"), 0770), 0);
        server_restart(false, false, false, true);
        do_init_flags(0x7bfffffb, 0xb | TEST_FUSE_CREATE_SUPP_GROUP, &o);
        ck_assert_uint_eq(o.flags2 & TEST_FUSE_CREATE_SUPP_GROUP, TEST_FUSE_CREATE_SUPP_GROUP);
        ck_assert_int_eq(lookup(1, "grp", &dir), 0);

        ext_uid = 65534;
        ext_gid = 65533;
        groups_add(x, 1, group, 1);
        for (size_t i = 0; i < ELEMENTSOF(ops); i++) {
                snprintf(name, sizeof name, "n%zu", i);
                /* Without the group: what the daemon did before it took the extension. */
                ck_assert_int_eq(create_op(ops[i], dir.nodeid, ops[i] == FUSE_TMPFILE ? NULL : name, NULL, &e),
                                 -EACCES);
                ck_assert_int_eq(create_op(ops[i], dir.nodeid, ops[i] == FUSE_TMPFILE ? NULL : name, x, &e), 0);
                ck_assert_uint_eq(e.attr.uid, 65534);
                ck_assert_uint_eq(e.attr.gid, 65533);
                if (ops[i] != FUSE_TMPFILE) {
                        snprintf(name, sizeof name, "grp/n%zu", i);
                        ck_assert_int_eq(lstat(share_path(name), &st), 0);
                        ck_assert_uint_eq(st.st_uid, 65534);
                }
        }
        /* Set-group-id directory: the new entry takes the directory's group, as on the host. */
        ck_assert_int_eq(chmod(share_path("grp"), 02770), 0);
        ck_assert_int_eq(create_op(FUSE_MKDIR, dir.nodeid, "sgid", x, &e), 0);
        ck_assert_uint_eq(e.attr.gid, 4242);
        ck_assert_uint_eq(e.attr.mode & 02000, 02000);
        ck_assert_int_eq(chmod(share_path("grp"), 0770), 0);

        /* A group the caller does not really have on the guest cannot be checked here: the guest
         * kernel sends only groups of the caller. But the daemon gives it only to that request. */
        ck_assert_int_eq(create_op(FUSE_MKDIR, dir.nodeid, "after", NULL, &e), -EACCES);

        /* Not negotiated (a 6.1 guest): the extension is checked but not used. */
        do_init();
        ext_uid = ext_gid = 0;
        ck_assert_int_eq(lookup(1, "grp", &dir), 0);
        ext_uid = 65534;
        ext_gid = 65533;
        ck_assert_int_eq(create_op(FUSE_MKDIR, dir.nodeid, "old", x, &e), -EACCES);
        ext_uid = ext_gid = 0;
        free(x);
}
END_TEST

static void expect_bad_groups(const Args *x) {
        struct stat st;
        ck_assert_int_eq(create_op(FUSE_MKDIR, 1, "badg", x, NULL), -EINVAL);
        ck_assert_int_eq(lstat(share_path("badg"), &st), -1);
}

START_TEST(test_supp_group_malformed) {
        uint32_t many[40] = { 0 };
        uint32_t g[2] = { 4242, UINT32_MAX };
        Args *x = args_new();

        server_restart(false, false, false, true);
        do_init_flags(0x7bfffffb, 0xb | TEST_FUSE_CREATE_SUPP_GROUP, NULL);
        /* nr_groups beyond what is there, beyond the bound */
        x->len = 0;
        groups_add(x, 3, g, 1);
        expect_bad_groups(x);
        x->len = 0;
        groups_add(x, 33, many, 33);
        expect_bad_groups(x);
        /* (gid_t)-1 is no group */
        x->len = 0;
        groups_add(x, 2, g, 2);
        expect_bad_groups(x);
        /* no room for nr_groups at all: the header alone */
        {
                struct fuse_ext_header h = { .size = 8, .type = TEST_FUSE_EXT_GROUPS };
                x->len = 0;
                args_add(x, &h, sizeof h);
                expect_bad_groups(x);
        }
        /* two group extensions */
        x->len = 0;
        groups_add(x, 1, g, 1);
        groups_add(x, 1, g, 1);
        expect_bad_groups(x);
        /* bytes of padding beyond the 8-byte alignment */
        {
                uint64_t zero = 0;
                x->len = 0;
                groups_add(x, 1, g, 1);
                args_add(x, &zero, sizeof zero);
                memcpy(x->buf, &(uint32_t) { (uint32_t) x->len }, sizeof(uint32_t));
                expect_bad_groups(x);
        }
        /* One well-formed group: fine (root needs none, the directory is the share root). */
        x->len = 0;
        groups_add(x, 1, g, 1);
        ck_assert_int_eq(create_op(FUSE_MKDIR, 1, "goodg", x, NULL), 0);
        /* The maximum, 32 groups (Linux sends one), is taken. */
        x->len = 0;
        for (unsigned k = 0; k < 32; k++)
                many[k] = 5000 + k;
        groups_add(x, 32, many, 32);
        ck_assert_int_eq(create_op(FUSE_MKDIR, 1, "manyg", x, NULL), 0);
        free(x);
}
END_TEST

static void expect_bad_secctx(const Args *x, int err) {
        struct stat st;
        ck_assert_int_eq(create_op(FUSE_MKDIR, 1, "bad", x, NULL), err);
        ck_assert_int_eq(lstat(share_path("bad"), &st), -1);
}

static void secctx_poke(Args *x, size_t off, uint32_t v) {
        memcpy(x->buf + off, &v, sizeof v);
}

static void malformed_secctx_cases(void) {
        static const char *bad_names[] = { "user.vufstest", "security.", "security.capability", "trusted.x" };
        Args *x = args_new();
        char longname[XATTR_NAME_MAX + 16];

        /* header size 0, not a multiple of 8, beyond the block */
        x->len = 0;
        secctx_add(x, "security.vufstest", "v", 1);
        secctx_poke(x, 0, 0);
        expect_bad_secctx(x, -EINVAL);
        secctx_poke(x, 0, 12);
        expect_bad_secctx(x, -EINVAL);
        secctx_poke(x, 0, (uint32_t) x->len + 8);
        expect_bad_secctx(x, -EINVAL);
        /* value size beyond the record, and far beyond XATTR_SIZE_MAX */
        x->len = 0;
        secctx_add(x, "security.vufstest", "v", 1);
        secctx_poke(x, 8, 1000);
        expect_bad_secctx(x, -EINVAL);
        secctx_poke(x, 8, 0xffffffff);
        expect_bad_secctx(x, -EINVAL);
        /* value larger than XATTR_SIZE_MAX, with the bytes really there */
        {
                static char huge[XATTR_SIZE_MAX + 8];
                x->len = 0;
                secctx_add(x, "security.vufstest", huge, sizeof huge);
                expect_bad_secctx(x, -EINVAL);
        }
        /* two labels announced, one present */
        x->len = 0;
        secctx_add(x, "security.vufstest", "v", 1);
        secctx_poke(x, 4, 2);
        expect_bad_secctx(x, -EINVAL);
        /* bytes left over after the labels */
        {
                uint64_t zero = 0;
                x->len = 0;
                secctx_add(x, "security.vufstest", "v", 1);
                args_add(x, &zero, sizeof zero);
                secctx_poke(x, 0, (uint32_t) x->len);
                expect_bad_secctx(x, -EINVAL);
        }
        /* a name without its NUL: the record is filled with name bytes */
        {
                struct fuse_secctx_header h = { .size = 32, .nr_secctx = 1 };
                struct fuse_secctx sc = { .size = 0 };
                x->len = 0;
                args_add(x, &h, sizeof h);
                args_add(x, &sc, sizeof sc);
                args_add(x, "security.vufstes", 16);
                expect_bad_secctx(x, -EINVAL);
        }
        /* names: not security.*, empty suffix, capabilities, too long */
        for (size_t i = 0; i < ELEMENTSOF(bad_names); i++) {
                x->len = 0;
                secctx_add(x, bad_names[i], "v", 1);
                expect_bad_secctx(x, -EINVAL);
        }
        memset(longname, 'n', sizeof longname);
        memcpy(longname, "security.", 9);
        longname[XATTR_NAME_MAX + 1] = 0;
        x->len = 0;
        secctx_add(x, longname, "v", 1);
        expect_bad_secctx(x, -EINVAL);
        /* two security contexts */
        x->len = 0;
        secctx_add(x, "security.vufstest", "a", 1);
        secctx_add(x, "security.vufstest", "b", 1);
        expect_bad_secctx(x, -EINVAL);
        /* a record that runs past the block, and a block too short for a header */
        {
                struct fuse_ext_header other = { .size = 16, .type = 40 };
                x->len = 0;
                secctx_add(x, "security.vufstest", "v", 1);
                args_add(x, &other, sizeof other);
                expect_bad_secctx(x, -EINVAL);
        }
        /* A block larger than any valid one: refused before it is copied. */
        x->len = 0;
        secctx_add(x, "security.vufstest", "v", 1);
        x->len = 65535 * 8;
        expect_bad_secctx(x, -E2BIG);
        free(x);
}

START_TEST(test_security_ctx_malformed) {
        struct fuse_getattr_in g = { 0 };
        struct fuse_attr_out ao;
        Args *x = args_new(), *a = args_new();

        server_restart(false, true, false, true);
        do_init();
        malformed_secctx_cases();

        /* Not negotiated (the guest did not offer it): a valid context is parsed and skipped, a
         * malformed one is still refused. */
        do_init_flags(0x7bfffffb, 0xb & ~(uint32_t) (FUSE_SECURITY_CTX >> 32), NULL);
        x->len = 0;
        secctx_add(x, "security.vufstest", "unused", 6);
        ck_assert_int_eq(create_op(FUSE_MKDIR, 1, "skipped", x, NULL), 0);
        ck_assert_str_eq(host_label("skipped"), "");
        malformed_secctx_cases();
        /* Option off: the same. */
        server_restart(false, false, false, true);
        do_init();
        ck_assert_int_eq(create_op(FUSE_CREATE, 1, "skipped2", x, NULL), 0);
        ck_assert_str_eq(host_label("skipped2"), "");
        malformed_secctx_cases();
        /* Any opcode: extensions are framed and skipped; a bad frame is EINVAL. */
        args_add(a, &g, sizeof g);
        ck_assert_int_eq(call_ext(FUSE_GETATTR, 1, a, x, &ao, sizeof ao), 0);
        ck_assert(S_ISDIR(ao.attr.mode));
        secctx_poke(x, 0, 4);
        ck_assert_int_eq(call_ext(FUSE_GETATTR, 1, a, x, &ao, sizeof ao), -EINVAL);
        free(x);
        free(a);
}
END_TEST

/* An ACL xattr value as setfacl writes it: struct posix_acl_xattr_header, then the entries
 * (linux/posix_acl_xattr.h; little-endian fields, as on this host). */
typedef struct AclEnt {
        uint16_t tag, perm;
        uint32_t id;
} AclEnt;

static size_t acl_value(uint8_t *buf, const AclEnt *ents, size_t n) {
        struct posix_acl_xattr_header h = { .a_version = POSIX_ACL_XATTR_VERSION };
        size_t off = sizeof h;

        memcpy(buf, &h, sizeof h);
        for (size_t i = 0; i < n; i++) {
                struct posix_acl_xattr_entry e = { .e_tag = ents[i].tag, .e_perm = ents[i].perm,
                                                   .e_id = ents[i].id };
                memcpy(buf + off, &e, sizeof e);
                off += sizeof e;
        }
        return off;
}

static int setxattr_req(uint64_t nodeid, const char *name, const void *v, size_t n, uint32_t sflags) {
        Args *a = args_new();
        struct fuse_setxattr_in si = { .size = (uint32_t) n, .setxattr_flags = sflags };
        int r;

        args_add(a, &si, sizeof si);
        args_str(a, name);
        args_add(a, v, n);
        r = call(FUSE_SETXATTR, nodeid, a, NULL, 0);
        free(a);
        return r;
}

/* --xattrmap between the guest and the host: the guest's names are renamed on set, get and
 * remove; listxattr shows only what the map lets through, renamed back. */
START_TEST(test_xattrmap) {
        FsOptions o = FS_OPTIONS_DEFAULT;
        XattrMap *map = NULL;
        struct fuse_entry_out e;
        struct fuse_getxattr_in gi = { .size = 4096 };
        char v[16];
        uint64_t fh;
        Reply rep;
        Args *a;

        ck_assert_int_eq(xattr_map_parse(":map:trusted.:user.virtiofs.:", &map, NULL), 0);
        o.xattr = true;
        o.xattrmap = map;
        srv = fuse_server_free(srv);
        server_start(o);
        do_init();
        ck_assert_int_eq(create(1, "m", O_RDWR | O_CREAT, S_IFREG | 0644, &e, &fh), 0);
        if (setxattr(share_path("m"), "user.probe", "1", 1, 0) < 0 && errno == EOPNOTSUPP) {
                srv = fuse_server_free(srv);
                xattr_map_free(map);
                return; /* the temporary filesystem has no user xattrs */
        }
        /* trusted.* from the guest lands under user.virtiofs. on the host */
        ck_assert_int_eq(setxattr_req(e.nodeid, "trusted.overlay.opaque", "y", 1, 0), 0);
        ck_assert_int_eq(getxattr(share_path("m"), "user.virtiofs.trusted.overlay.opaque", v, sizeof v), 1);
        ck_assert_int_lt(getxattr(share_path("m"), "trusted.overlay.opaque", v, sizeof v), 0);
        /* the prefixed name itself is out of the guest's reach; other names pass */
        ck_assert_int_eq(setxattr_req(e.nodeid, "user.virtiofs.trusted.x", "n", 1, 0), -EPERM);
        ck_assert_int_eq(setxattr_req(e.nodeid, "user.plain", "p", 1, 0), 0);
        ck_assert_int_eq(getxattr(share_path("m"), "user.plain", v, sizeof v), 1);
        /* a host trusted.* name that looks unprefixed is hidden (set on the host directly) */
        (void) setxattr(share_path("m"), "trusted.host-own", "h", 1, 0); /* needs CAP_SYS_ADMIN */

        a = args_new();
        args_add(a, &gi, sizeof gi);
        args_str(a, "trusted.overlay.opaque");
        ck_assert_int_eq(call_full(FUSE_GETXATTR, e.nodeid, a, 16 + 4096, &rep), 0);
        ck_assert_uint_eq(rep.len, 1);
        ck_assert(memcmp(rep.payload, "y", 1) == 0);
        free(rep.payload);

        a->len = 0;
        args_add(a, &gi, sizeof gi);
        ck_assert_int_eq(call_full(FUSE_LISTXATTR, e.nodeid, a, 16 + 4096, &rep), 0);
        ck_assert(memmem(rep.payload, rep.len, "trusted.overlay.opaque", 23) != NULL);
        ck_assert(memmem(rep.payload, rep.len, "user.plain", 11) != NULL);
        ck_assert(memmem(rep.payload, rep.len, "user.virtiofs.", 14) == NULL);
        ck_assert(memmem(rep.payload, rep.len, "trusted.host-own", 17) == NULL);
        {
                /* the size probe agrees with the list */
                struct fuse_getxattr_in zero = { 0 };
                struct fuse_getxattr_out go;
                a->len = 0;
                args_add(a, &zero, sizeof zero);
                ck_assert_int_eq(call(FUSE_LISTXATTR, e.nodeid, a, &go, sizeof go), 0);
                ck_assert_uint_eq(go.size, rep.len);
        }
        free(rep.payload);

        a->len = 0;
        args_str(a, "trusted.overlay.opaque");
        ck_assert_int_eq(call(FUSE_REMOVEXATTR, e.nodeid, a, NULL, 0), 0);
        ck_assert_int_lt(getxattr(share_path("m"), "user.virtiofs.trusted.overlay.opaque", v, sizeof v), 0);
        free(a);
        ck_assert_int_eq(release_req(FUSE_RELEASE, e.nodeid, fh), 0);
        srv = fuse_server_free(srv);
        xattr_map_free(map);
}
END_TEST

/* Creates a regular file with the guest's umask and releases it again. */
static int create_umask(uint64_t parent, const char *name, uint32_t mode, uint32_t umask_v,
                        struct fuse_entry_out *e) {
        uint64_t fh;
        int r = create_masked(parent, name, O_RDWR | O_CREAT, S_IFREG | mode, umask_v, e, &fh);

        if (r == 0)
                ck_assert_int_eq(release_req(FUSE_RELEASE, e->nodeid, fh), 0);
        return r;
}

static uint32_t chmod_req(uint64_t nodeid, uint32_t mode) {
        Args *a = args_new();
        struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = mode };
        struct fuse_attr_out ao;

        args_add(a, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, nodeid, a, &ao, sizeof ao), 0);
        free(a);
        return ao.attr.mode & 07777;
}

static uint32_t mode_of(uint64_t nodeid) {
        struct fuse_attr_out ao;
        ck_assert_int_eq(getattr_req(nodeid, &ao), 0);
        return ao.attr.mode & 07777;
}

START_TEST(test_posix_acl) {
        static const AclEnt dflt[] = { { ACL_USER_OBJ, 7, ACL_UNDEFINED_ID }, { ACL_GROUP_OBJ, 7, ACL_UNDEFINED_ID },
                                       { ACL_OTHER, 7, ACL_UNDEFINED_ID } };
        static const AclEnt acc[] = { { ACL_USER_OBJ, 6, ACL_UNDEFINED_ID }, { ACL_USER, 6, 1000 },
                                      { ACL_GROUP_OBJ, 4, ACL_UNDEFINED_ID }, { ACL_MASK, 6, ACL_UNDEFINED_ID },
                                      { ACL_OTHER, 0, ACL_UNDEFINED_ID } };
        static const AclEnt rwx[] = { { ACL_USER_OBJ, 7, ACL_UNDEFINED_ID }, { ACL_GROUP_OBJ, 7, ACL_UNDEFINED_ID },
                                      { ACL_OTHER, 0, ACL_UNDEFINED_ID } };
        struct fuse_entry_out plain, acl, e;
        struct fuse_init_out io;
        uint8_t v[256], got[256];
        size_t n;
        ssize_t k;

        server_restart(false, false, true, true);
        do_init_flags(0x7bfffffb, 0xb, &io);
        ck_assert(io.flags & FUSE_POSIX_ACL);
        ck_assert(io.flags & FUSE_DONT_MASK);

        /* The guest sends the mode unmasked: without a default ACL the umask applies... */
        ck_assert_int_eq(mkdir_req(1, "plain", 0777, 022, &plain), 0);
        ck_assert_uint_eq(plain.attr.mode & 07777, 0755);
        ck_assert_int_eq(create_umask(plain.nodeid, "f", 0666, 027, &e), 0);
        ck_assert_uint_eq(e.attr.mode & 07777, 0640);
        /* ...and under a default ACL it does not: the ACL decides. */
        ck_assert_int_eq(mkdir_req(1, "acl", 0755, 0, &acl), 0);
        n = acl_value(v, dflt, ELEMENTSOF(dflt));
        ck_assert_int_eq(setxattr_req(acl.nodeid, "system.posix_acl_default", v, n, 0), 0);
        ck_assert_int_eq(mkdir_req(acl.nodeid, "d", 0777, 022, &e), 0);
        ck_assert_uint_eq(e.attr.mode & 07777, 0777);
        ck_assert_int_eq(create_umask(acl.nodeid, "f", 0666, 077, &e), 0);
        ck_assert_uint_eq(e.attr.mode & 07777, 0666);
        ck_assert_int_eq(mkdir_req(acl.nodeid, "d2", 0750, 0, &e), 0);
        ck_assert_uint_eq(e.attr.mode & 07777, 0750); /* the requested mode still limits */
        /* The new directory inherited the default ACL. */
        k = getxattr(share_path("acl/d"), "system.posix_acl_default", got, sizeof got);
        ck_assert_int_eq(k, (ssize_t) n);
        ck_assert(memcmp(got, v, n) == 0);

        /* An access ACL sets the mode (group bits = mask), and chmod then sets the mask. */
        ck_assert_int_eq(lookup(plain.nodeid, "f", &e), 0);
        n = acl_value(v, acc, ELEMENTSOF(acc));
        ck_assert_int_eq(setxattr_req(e.nodeid, "system.posix_acl_access", v, n, 0), 0);
        ck_assert_uint_eq(mode_of(e.nodeid), 0660);
        ck_assert_uint_eq(chmod_req(e.nodeid, 0640), 0640);
        k = getxattr(share_path("plain/f"), "system.posix_acl_access", got, sizeof got);
        ck_assert_int_eq(k, (ssize_t) n);
        {
                struct posix_acl_xattr_entry ents[5];
                memcpy(ents, got + sizeof(struct posix_acl_xattr_header), sizeof ents);
                ck_assert_uint_eq(ents[1].e_tag, ACL_USER);
                ck_assert_uint_eq(ents[1].e_perm, 6); /* named entries keep theirs */
                ck_assert_uint_eq(ents[3].e_tag, ACL_MASK);
                ck_assert_uint_eq(ents[3].e_perm, 4); /* the mask follows the group bits */
        }

        /* FUSE_SETXATTR_ACL_KILL_SGID clears setgid with the ACL; without it setgid stays. */
        n = acl_value(v, rwx, ELEMENTSOF(rwx));
        ck_assert_int_eq(create_umask(plain.nodeid, "g", 0666, 0, &e), 0);
        ck_assert_uint_eq(chmod_req(e.nodeid, 02770), 02770);
        ck_assert_int_eq(setxattr_req(e.nodeid, "system.posix_acl_access", v, n, FUSE_SETXATTR_ACL_KILL_SGID), 0);
        ck_assert_uint_eq(mode_of(e.nodeid), 0770);
        ck_assert_int_eq(create_umask(plain.nodeid, "h", 0666, 0, &e), 0);
        ck_assert_uint_eq(chmod_req(e.nodeid, 02770), 02770);
        ck_assert_int_eq(setxattr_req(e.nodeid, "system.posix_acl_access", v, n, 0), 0);
        ck_assert_uint_eq(mode_of(e.nodeid), 02770);

        /* ACL names are refused when the option is off. */
        server_restart(false, false, false, true);
        do_init();
        ck_assert_int_eq(lookup(1, "acl", &acl), 0);
        n = acl_value(v, dflt, ELEMENTSOF(dflt));
        ck_assert_int_eq(setxattr_req(acl.nodeid, "system.posix_acl_default", v, n, 0), -EOPNOTSUPP);
}
END_TEST

/* ---- tests: the server against the fake filesystem (no root, no host directory) ---- */

/* Bad names are answered by the server: the filesystem never sees them. */
START_TEST(test_wire_names_stop_at_server) {
        char longname[300];
        Args *a = args_new();
        unsigned calls;

        do_init();
        memset(longname, 'x', sizeof longname);
        longname[256] = 0;
        calls = fake.calls;
        ck_assert_int_eq(mkdir_req(1, "a/b", 0755, 0, NULL), -EINVAL);
        ck_assert_int_eq(mkdir_req(1, "..", 0755, 0, NULL), -EINVAL);
        ck_assert_int_eq(mkdir_req(1, ".", 0755, 0, NULL), -EINVAL);
        ck_assert_int_eq(mkdir_req(1, "", 0755, 0, NULL), -ENOENT);
        ck_assert_int_eq(mkdir_req(1, longname, 0755, 0, NULL), -ENAMETOOLONG);
        ck_assert_int_eq(create(1, "/etc/evil", O_WRONLY | O_CREAT, S_IFREG | 0644, NULL, NULL), -EINVAL);
        ck_assert_int_eq(name_req(FUSE_UNLINK, 1, "../outside/secret"), -EINVAL);
        ck_assert_int_eq(name_req(FUSE_RMDIR, 1, ".."), -EINVAL);
        args_add(a, "abc", 3); /* no NUL */
        ck_assert_int_eq(call(FUSE_LOOKUP, 1, a, NULL, 0), -EINVAL);
        ck_assert_int_eq(call(FUSE_UNLINK, 1, a, NULL, 0), -EINVAL);
        a->len = 0;
        {
                struct fuse_rename_in rn = { .newdir = 1 };
                args_add(a, &rn, sizeof rn);
                args_str(a, "sub");
                args_str(a, "../escaped");
                ck_assert_int_eq(call(FUSE_RENAME, 1, a, NULL, 0), -EINVAL);
        }
        ck_assert_uint_eq(fake.calls, calls);
        /* A good name goes through, exactly as sent. */
        longname[255] = 0;
        ck_assert_int_eq(mkdir_req(1, longname, 0755, 0, NULL), 0);
        ck_assert_uint_eq(fake.calls, calls + 1);
        ck_assert_str_eq(fake.last_op, "mkdir");
        ck_assert_str_eq(fake.last_name, longname);
        ck_assert_uint_eq(fake.last_nodeid, 1);
        free(a);
}
END_TEST

/* The filesystem's negative errno is the reply's error, for every kind of reply. */
START_TEST(test_wire_errors_propagate) {
        struct fuse_entry_out e;
        int errs[] = { -EXDEV, -EACCES, -ENFILE, -ENOTEMPTY, -EOVERFLOW };

        do_init();
        ck_assert_int_eq(mkdir_req(1, "d", 0755, 0, &e), 0);
        for (size_t i = 0; i < ELEMENTSOF(errs); i++) {
                fake.fail_next = errs[i];
                ck_assert_int_eq(getattr_req(e.nodeid, NULL), errs[i]);
                fake.fail_next = errs[i];
                ck_assert_int_eq(lookup(1, "d", NULL), errs[i]);
                fake.fail_next = errs[i];
                ck_assert_int_eq(name_req(FUSE_UNLINK, 1, "d"), errs[i]);
                fake.fail_next = errs[i];
                ck_assert_int_eq(open_req(FUSE_OPENDIR, e.nodeid, O_RDONLY, NULL), errs[i]);
        }
        /* An operation the filesystem does not have. */
        {
                struct fuse_statfs_out st;
                ck_assert_int_eq(call(FUSE_STATFS, 1, NULL, &st, sizeof st), -ENOSYS);
                ck_assert_str_eq(fake.last_op, "statfs");
        }
}
END_TEST

/* SETATTR's wire bits reach the filesystem as FS_SET_*: the ones without meaning there are
 * dropped, KILL_SUIDGID only when negotiated, out-of-range nanoseconds never reach it. */
START_TEST(test_wire_setattr_bits) {
        struct fuse_setattr_in sa = { 0 };
        struct fuse_attr_out ao;
        struct fuse_entry_out e;
        Args *a = args_new();
        unsigned calls;

        do_init(); /* the guest offers HANDLE_KILLPRIV_V2; the server (killpriv_v2 off) does not take it */
        ck_assert_int_eq(create(1, "f", O_RDWR | O_CREAT, S_IFREG | 0644, &e, NULL), 0);
        sa = (struct fuse_setattr_in){ .valid = FATTR_MODE | FATTR_ATIME_NOW | FATTR_ATIME | FATTR_LOCKOWNER |
                                                FATTR_CTIME | FATTR_KILL_SUIDGID,
                                       .mode = 0600,
                                       .lock_owner = 5 };
        args_add(a, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, &ao, sizeof ao), 0);
        ck_assert_str_eq(fake.last_op, "setattr");
        ck_assert_uint_eq(fake.last_setattr.valid, FS_SET_MODE | FS_SET_ATIME_NOW | FS_SET_ATIME);
        ck_assert_uint_eq(fake.last_setattr.mode, 0600);

        sa = (struct fuse_setattr_in){ .valid = FATTR_UID | FATTR_GID | FATTR_SIZE | FATTR_MTIME | FATTR_MTIME_NOW |
                                                FATTR_FH,
                                       .uid = 7,
                                       .gid = 8,
                                       .size = 99,
                                       .mtime = 1234,
                                       .mtimensec = 5,
                                       .fh = 42 };
        a->len = 0;
        args_add(a, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, &ao, sizeof ao), 0);
        ck_assert_uint_eq(fake.last_setattr.valid,
                          FS_SET_UID | FS_SET_GID | FS_SET_SIZE | FS_SET_MTIME | FS_SET_MTIME_NOW | FS_SET_FH);
        ck_assert_uint_eq(fake.last_setattr.uid, 7);
        ck_assert_uint_eq(fake.last_setattr.gid, 8);
        ck_assert_uint_eq(fake.last_setattr.size, 99);
        ck_assert_uint_eq(fake.last_setattr.fh, 42);
        ck_assert_int_eq(fake.last_setattr.mtime.tv_sec, 1234);
        ck_assert_int_eq(fake.last_setattr.mtime.tv_nsec, 5);

        /* Refused by the server alone: unknown bits, nanoseconds out of range. */
        calls = fake.calls;
        sa = (struct fuse_setattr_in){ .valid = 1u << 30 };
        a->len = 0;
        args_add(a, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, &ao, sizeof ao), -EINVAL);
        sa = (struct fuse_setattr_in){ .valid = FATTR_ATIME, .atimensec = 1000000000 };
        a->len = 0;
        args_add(a, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, &ao, sizeof ao), -EINVAL);
        ck_assert_uint_eq(fake.calls, calls);

        /* With KILLPRIV_V2 negotiated, KILL_SUIDGID goes through. */
        srv = fuse_server_free(srv);
        {
                FsOptions o = FS_OPTIONS_DEFAULT;
                o.killpriv_v2 = true;
                ck_assert_int_eq(fuse_server_new(&srv, &o, &fake_fs_ops, &fake), 0);
        }
        do_init();
        ck_assert_int_eq(lookup(1, "f", &e), 0);
        sa = (struct fuse_setattr_in){ .valid = FATTR_SIZE | FATTR_KILL_SUIDGID };
        a->len = 0;
        args_add(a, &sa, sizeof sa);
        ck_assert_int_eq(call(FUSE_SETATTR, e.nodeid, a, &ao, sizeof ao), 0);
        ck_assert_uint_eq(fake.last_setattr.valid, FS_SET_SIZE | FS_SET_KILL_SUIDGID);
        free(a);
}
END_TEST

/* Directory replies: records aligned, names and cookies as the filesystem added them, only
 * whole records, bounded by the guest's size and by the reply space. */
START_TEST(test_wire_readdir_records) {
        struct fuse_open_out od;

        do_init();
        fake.n_dirents = 100;
        ck_assert_int_eq(open_req(FUSE_OPENDIR, 1, O_RDONLY, &od), 0);
        ck_assert_uint_eq(od.fh, 1 + 1000);
        for (int plus = 0; plus <= 1; plus++) {
                uint64_t off = 0;
                unsigned n = 0, requests = 0;

                while (off < fake.n_dirents) {
                        Listing l;
                        readdir_once(1, od.fh, off, plus, &l);
                        ck_assert_uint_gt(l.n, 0);
                        for (unsigned i = 0; i < l.n; i++) {
                                char want[32];
                                snprintf(want, sizeof want, "entry-%u", n);
                                ck_assert_str_eq(l.names[i], want);
                                ck_assert_uint_eq(l.offs[i], n + 1);
                                n++;
                        }
                        off = l.offs[l.n - 1];
                        requests++;
                }
                ck_assert_uint_eq(n, 100);
                ck_assert_uint_gt(requests, 1); /* 2048 bytes do not hold 100 records */
        }
        /* Space for less than one record: an empty reply, and nothing added. */
        {
                Args *a = args_new();
                struct fuse_read_in ri = { .fh = od.fh, .size = 10 };
                Reply rep;
                args_add(a, &ri, sizeof ri);
                ck_assert_int_eq(call_full(FUSE_READDIR, 1, a, 16 + 4096, &rep), 0);
                ck_assert_uint_eq(rep.len, 0);
                free(rep.payload);
                /* The guest asks for more than the reply can hold: bounded by the space, whole records. */
                ri.size = 65536;
                a->len = 0;
                args_add(a, &ri, sizeof ri);
                ck_assert_int_eq(call_full(FUSE_READDIR, 1, a, 16 + 100, &rep), 0);
                ck_assert_uint_gt(rep.len, 0);
                ck_assert_uint_le(rep.len, 100);
                ck_assert_uint_eq(rep.len % 8, 0);
                free(rep.payload);
                free(a);
        }
        /* A handle of another node. */
        {
                Args *a = args_new();
                struct fuse_read_in ri = { .fh = 77, .size = 4096 };
                args_add(a, &ri, sizeof ri);
                ck_assert_int_eq(call(FUSE_READDIR, 1, a, NULL, 0), -EBADF);
                free(a);
        }
        ck_assert_int_eq(release_req(FUSE_RELEASEDIR, 1, od.fh), 0);
}
END_TEST

/* READ and WRITE: data moves between the chain and the filesystem's iovecs, sizes checked first. */
START_TEST(test_wire_read_write) {
        struct fuse_entry_out e;
        uint64_t fh;
        char buf[70000];
        unsigned calls;

        do_init();
        ck_assert_int_eq(create(1, "f", O_RDWR | O_CREAT, S_IFREG | 0644, &e, &fh), 0);
        ck_assert_int_eq(read_req(e.nodeid, fh, 3, 65536, buf), 65536);
        for (int i = 0; i < 65536; i++)
                ck_assert_uint_eq((uint8_t)buf[i], (uint8_t)(3 + i));
        ck_assert_int_eq(write_req(e.nodeid, fh, 0, buf, 65536), 0);
        ck_assert_str_eq(fake.last_op, "write");
        calls = fake.calls;
        ck_assert_int_eq(read_req(e.nodeid, fh, 0, (1 << 20) + 1, buf), -EINVAL);
        {
                Args *a = args_new();
                struct fuse_write_in w = { .fh = fh, .size = 10 };
                args_add(a, &w, sizeof w);
                args_add(a, "abc", 3);
                ck_assert_int_eq(call(FUSE_WRITE, e.nodeid, a, NULL, 0), -EINVAL);
                free(a);
        }
        ck_assert_uint_eq(fake.calls, calls);
        ck_assert_int_eq(read_req(e.nodeid, fh + 1, 0, 10, buf), -EBADF);
}
END_TEST

static Suite *suite(void) {
        Suite *s = suite_create("fuse-server");
        TCase *wire = tcase_create("wire"), *tc;

        tcase_add_checked_fixture(wire, setup_fake, teardown_fake);
        tcase_set_timeout(wire, 60);
        /* The session and framing cases against the fake as well: they are about the wire. */
        tcase_add_test(wire, test_before_init);
        tcase_add_test(wire, test_init_negotiation);
        tcase_add_test(wire, test_framing);
        tcase_add_test(wire, test_unknown_opcodes);
        tcase_add_test(wire, test_second_init_resets);
        tcase_add_test(wire, test_wire_names_stop_at_server);
        tcase_add_test(wire, test_wire_errors_propagate);
        tcase_add_test(wire, test_wire_setattr_bits);
        tcase_add_test(wire, test_wire_readdir_records);
        tcase_add_test(wire, test_wire_read_write);
        suite_add_tcase(s, wire);

        /* Over a host directory: credential switching, chown and mknod need root. */
        tc = tcase_create("passthrough");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_root_test(tc, test_before_init);
        tcase_add_root_test(tc, test_init_negotiation);
        tcase_add_root_test(tc, test_framing);
        tcase_add_root_test(tc, test_unknown_opcodes);
        tcase_add_root_test(tc, test_second_init_resets);
        tcase_add_root_test(tc, test_create_write_read);
        tcase_add_root_test(tc, test_large_write_split);
        tcase_add_root_test(tc, test_names);
        tcase_add_root_test(tc, test_nodeids_and_forget);
        tcase_add_root_test(tc, test_handles_checked);
        tcase_add_root_test(tc, test_readdir);
        tcase_add_root_test(tc, test_readdir_continue_and_seek);
        tcase_add_root_test(tc, test_dir_ops);
        tcase_add_root_test(tc, test_setattr);
        tcase_add_root_test(tc, test_misc_ops);
        tcase_add_root_test(tc, test_xattr);
        tcase_add_root_test(tc, test_write_kill_suidgid);
        tcase_add_root_test(tc, test_xattr_disabled);
        tcase_add_root_test(tc, test_escape_symlinks);
        tcase_add_root_test(tc, test_escape_special_files);
        tcase_add_root_test(tc, test_escape_rename_out);
        tcase_add_root_test(tc, test_readonly);
        tcase_add_root_test(tc, test_cache_policies);
        tcase_add_root_test(tc, test_credentials);
        tcase_add_root_test(tc, test_fd_budget);
        tcase_add_root_test(tc, test_locks);
        tcase_add_root_test(tc, test_locks_release);
        tcase_add_root_test(tc, test_lock_fd_flush_race);
        tcase_add_root_test(tc, test_setlkw_same_unique);
        tcase_add_root_test(tc, test_setlkw_interrupted_while_queued);
        tcase_add_root_test(tc, test_setlkw_without_helper);
        tcase_add_root_test(tc, test_concurrent);
        tcase_add_root_test(tc, test_init_features);
        tcase_add_root_test(tc, test_init_options);
        tcase_add_root_test(tc, test_xattrmap);
        tcase_add_root_test(tc, test_submounts);
        tcase_add_root_test(tc, test_security_ctx);
        tcase_add_root_test(tc, test_security_ctx_xattrmap);
        tcase_add_root_test(tc, test_security_ctx_malformed);
        tcase_add_root_test(tc, test_supp_group);
        tcase_add_root_test(tc, test_supp_group_malformed);
        tcase_add_root_test(tc, test_posix_acl);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(suite)
