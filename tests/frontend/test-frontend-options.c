/* test-frontend-options.c: what the virtiofsd-compatible options do, seen from outside: vufsd is
 * started with the option on its command line (as a launcher starts it), the test frontend speaks
 * FUSE to it, and the host side is checked: the flags of the fd the daemon opened (from
 * /proc/PID/fdinfo of whichever process holds it), the file's atime, mode and xattrs.
 *
 *   --preserve-noatime   the guest's O_NOATIME reaches the host open (dropped otherwise), so a
 *                        READ leaves the atime of a strictatime mount alone
 *   --allow-direct-io    the guest's O_DIRECT reaches the host open (dropped otherwise)
 *   --writeback          WRITEBACK_CACHE offered; write-only opens are readable on the host and
 *                        never appending (the guest keeps the size)
 *   --killpriv-v2        HANDLE_KILLPRIV_V2 offered; a WRITE with KILL_SUIDGID clears setuid
 *   --no-readdirplus     DO_READDIRPLUS and READDIRPLUS_AUTO not offered
 *   --posix-acl[=MODE]   never / always / auto (the share's support decides): FUSE_POSIX_ACL and
 *                        DONT_MASK offered or not, and what SETXATTR system.posix_acl_access answers
 *   --security-label[=MODE]  the same for FUSE_SECURITY_CTX
 *   --xattrmap           a remapped security.capability goes on WRITE, truncate, chown and
 *                        OPEN(O_TRUNC), as the host kernel drops the real one
 *
 * Needs root (mounts, setuid files, fdinfo of the daemon's processes). */
#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <linux/posix_acl_xattr.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "util.h"
#include "test-main.h"

static FeHarness *h;
static Frontend *fe;
static FeFuse *f;
static bool share_mounted;

static void setup(void) {
        ck_assert_int_eq(fe_harness_new(&h), 0);
}

/* Stops the daemon, then unmounts the share it held, then removes the directory. */
static void reset(void) {
        f = fe_fuse_free(f);
        fe = fe_free(fe);
        if (!h)
                return;
        h->backend = fe_backend_free(h->backend);
        if (share_mounted) {
                (void)umount2(h->share, MNT_DETACH);
                share_mounted = false;
        }
        h = fe_harness_free(h);
}

static void teardown(void) {
        reset();
}

/* A fresh daemon for the next step of a test, on a fresh (unmounted) share. */
static void restart_clean(void) {
        reset();
        ck_assert_int_eq(fe_harness_new(&h), 0);
}

/* Mounts fstype (with flags) over the harness's share, before the daemon starts. */
static void mount_share(const char *fstype, unsigned long flags) {
        ck_assert_msg(mount(fstype, h->share, fstype, flags, NULL) == 0, "mount %s: %m", fstype);
        share_mounted = true;
}

/* Starts vufsd with extra options and INITs as a Linux 6.1 guest (which offers every flag). */
static void start(const char *const *extra) {
        int r;

        r = fe_harness_spawn_vufsd(h, extra);
        ck_assert_msg(r == 0, "spawn vufsd: %s", strerror(-r));
        ck_assert_int_eq(fe_connect_and_start(&fe, h->socket_path, NULL), 0);
        ck_assert_int_eq(fe_fuse_new(&f, fe), 0);
        ck_assert_int_eq(fe_fuse_init(f), 0);
}

static uint64_t negotiated(void) {
        return f->init.flags | ((f->init.flags & FUSE_INIT_EXT) ? (uint64_t)f->init.flags2 << 32 : 0);
}

static char *host_file(const char *name, mode_t mode, const char *content) {
        char *path = fe_harness_path(h, name);
        int fd;

        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
        ck_assert_int_eq(fchmod(fd, mode), 0);
        close(fd);
        return path;
}

/* The f_flags of the one non-O_PATH fd another process holds on path's inode (the daemon's I/O
 * fd for an open handle), from /proc/PID/fdinfo. Fails unless there is exactly one. */
static int host_fd_flags(const char *path) {
        struct stat want, st;
        DIR *proc;
        struct dirent *p;
        int found = 0, flags = -1;

        ck_assert_int_eq(stat(path, &want), 0);
        proc = opendir("/proc");
        ck_assert_ptr_nonnull(proc);
        while ((p = readdir(proc))) {
                char dir[300];
                DIR *fds;
                struct dirent *d;

                if (!isdigit((unsigned char)p->d_name[0]) || atoi(p->d_name) == getpid())
                        continue;
                snprintf(dir, sizeof dir, "/proc/%s/fd", p->d_name);
                fds = opendir(dir);
                if (!fds)
                        continue;
                while ((d = readdir(fds))) {
                        char link[600], line[128];
                        FILE *fi;
                        unsigned v;
                        int fl = -1;

                        if (d->d_name[0] == '.')
                                continue;
                        snprintf(link, sizeof link, "/proc/%s/fd/%s", p->d_name, d->d_name);
                        if (stat(link, &st) < 0 || st.st_dev != want.st_dev || st.st_ino != want.st_ino)
                                continue;
                        snprintf(link, sizeof link, "/proc/%s/fdinfo/%s", p->d_name, d->d_name);
                        fi = fopen(link, "re");
                        if (!fi)
                                continue;
                        while (fgets(line, sizeof line, fi))
                                if (sscanf(line, "flags: %o", &v) == 1)
                                        fl = (int)v;
                        fclose(fi);
                        if (fl < 0 || (fl & O_PATH))
                                continue;
                        flags = fl;
                        found++;
                }
                closedir(fds);
        }
        closedir(proc);
        ck_assert_msg(found == 1, "%d I/O fds on %s, expected the daemon's one", found, path);
        return flags;
}

static uint64_t lookup(const char *name) {
        struct fuse_entry_out e;
        ck_assert_int_eq(fe_fuse_lookup(f, FUSE_ROOT_ID, name, &e), 0);
        return e.nodeid;
}

/* SETXATTR in the layout the negotiated flags ask for; returns the reply's error. */
static int setxattr_req(uint64_t nodeid, const char *name, const void *value, size_t size) {
        struct fuse_setxattr_in in = { .size = (uint32_t)size };
        bool ext = negotiated() & FUSE_SETXATTR_EXT;
        FeFuseReq *req;
        int r;

        ck_assert_int_eq(fe_fuse_req_new(&req, f, FUSE_SETXATTR, nodeid, 0), 0);
        fe_fuse_req_add(req, &in, ext ? sizeof in : FUSE_COMPAT_SETXATTR_IN_SIZE);
        fe_fuse_req_add_str(req, name);
        fe_fuse_req_add(req, value, size);
        r = fe_fuse_call(f, req);
        fe_fuse_req_free(f, req);
        return r;
}

/* GETXATTR into buf; returns the value's length or the reply's error. */
static int getxattr_req(uint64_t nodeid, const char *name, void *buf, uint32_t size) {
        struct fuse_getxattr_in in = { .size = size };
        FeFuseReq *req;
        int r;

        ck_assert_int_eq(fe_fuse_req_new(&req, f, FUSE_GETXATTR, nodeid, size), 0);
        fe_fuse_req_add(req, &in, sizeof in);
        fe_fuse_req_add_str(req, name);
        r = fe_fuse_call(f, req);
        if (r == 0) {
                memcpy(buf, req->payload, MIN(req->payload_len, (size_t)size));
                r = (int)req->payload_len;
        }
        fe_fuse_req_free(f, req);
        return r;
}

static int setattr_req(uint64_t nodeid, const struct fuse_setattr_in *in) {
        FeFuseReq *req;
        int r;

        ck_assert_int_eq(fe_fuse_req_new(&req, f, FUSE_SETATTR, nodeid, sizeof(struct fuse_attr_out)), 0);
        fe_fuse_req_add(req, in, sizeof *in);
        r = fe_fuse_call(f, req);
        fe_fuse_req_free(f, req);
        return r;
}

static int write_flags_req(uint64_t nodeid, uint64_t fh, const char *data, uint32_t write_flags) {
        struct fuse_write_in in = { .fh = fh, .size = (uint32_t)strlen(data), .write_flags = write_flags };
        FeFuseReq *req;
        int r;

        ck_assert_int_eq(fe_fuse_req_new(&req, f, FUSE_WRITE, nodeid, sizeof(struct fuse_write_out)), 0);
        fe_fuse_req_add(req, &in, sizeof in);
        fe_fuse_req_add_data(req, data, strlen(data));
        r = fe_fuse_call(f, req);
        fe_fuse_req_free(f, req);
        return r;
}

/* --- --preserve-noatime ----------------------------------------------------------------- */

/* atime after the guest OPENs name with open_flags and READs it, starting from an old atime. */
static struct timespec atime_after_read(const char *name, uint32_t open_flags) {
        char *path = fe_harness_path(h, name);
        struct timespec old[2] = { { 1000000000, 0 }, { 0, UTIME_OMIT } };
        struct stat st;
        uint64_t node, fh;
        char buf[16];

        ck_assert_int_eq(utimensat(AT_FDCWD, path, old, 0), 0);
        node = lookup(name);
        ck_assert_int_eq(fe_fuse_open(f, node, open_flags, &fh), 0);
        ck_assert_int_gt(fe_fuse_read(f, node, fh, 0, buf, sizeof buf), 0);
        ck_assert_int_eq(fe_fuse_release(f, node, fh, false), 0);
        ck_assert_int_eq(stat(path, &st), 0);
        free(path);
        return st.st_atim;
}

static void check_noatime(bool preserve) {
        const char *const on[] = { "--preserve-noatime", NULL };
        struct timespec t;

        mount_share("tmpfs", MS_STRICTATIME);
        free(host_file("f", 0644, "some content"));
        start(preserve ? on : NULL);

        /* A plain open updates the atime either way: the option adds no O_NOATIME of its own. */
        t = atime_after_read("f", O_RDONLY);
        ck_assert_int_ne(t.tv_sec, 1000000000);

        t = atime_after_read("f", O_RDONLY | O_NOATIME);
        if (preserve)
                ck_assert_msg(t.tv_sec == 1000000000, "--preserve-noatime: READ moved the atime to %ld",
                              (long)t.tv_sec);
        else
                ck_assert_msg(t.tv_sec != 1000000000, "without --preserve-noatime O_NOATIME reached the host");
}

START_TEST(test_preserve_noatime) {
        check_noatime(true);
}
END_TEST

START_TEST(test_noatime_dropped) {
        check_noatime(false);
}
END_TEST

/* --- --allow-direct-io ------------------------------------------------------------------ */

static void check_direct_io(bool allow) {
        const char *const on[] = { "--allow-direct-io", NULL };
        char *path = host_file("d", 0644, "direct");
        bool host_takes_direct;
        uint64_t node, fh;
        int fd, r;

        /* Whether the share's filesystem takes O_DIRECT at all (tmpfs before 6.6 refuses it). */
        fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
        host_takes_direct = fd >= 0;
        if (fd >= 0)
                close(fd);
        start(allow ? on : NULL);
        node = lookup("d");

        r = fe_fuse_open(f, node, O_RDWR | O_DIRECT, &fh);
        if (allow && !host_takes_direct) {
                ck_assert_int_eq(r, -EINVAL); /* passed on, and the host refused it */
                free(path);
                return;
        }
        ck_assert_int_eq(r, 0);
        if (allow)
                ck_assert_msg(host_fd_flags(path) & O_DIRECT, "--allow-direct-io: host fd without O_DIRECT");
        else
                ck_assert_msg(!(host_fd_flags(path) & O_DIRECT), "O_DIRECT reached the host without the option");
        ck_assert_int_eq(fe_fuse_release(f, node, fh, false), 0);

        /* The open without O_DIRECT never gets it. */
        ck_assert_int_eq(fe_fuse_open(f, node, O_RDWR, &fh), 0);
        ck_assert(!(host_fd_flags(path) & O_DIRECT));
        ck_assert_int_eq(fe_fuse_release(f, node, fh, false), 0);
        free(path);
}

START_TEST(test_allow_direct_io) {
        check_direct_io(true);
}
END_TEST

START_TEST(test_direct_io_dropped) {
        check_direct_io(false);
}
END_TEST

/* --- --writeback ------------------------------------------------------------------------ */

static void check_writeback(bool on) {
        const char *const opt[] = { "--writeback", NULL };
        char *path = host_file("w", 0644, "0123456789");
        uint64_t node, fh;
        int fl;

        start(on ? opt : NULL);
        ck_assert_msg(!!(negotiated() & FUSE_WRITEBACK_CACHE) == on, "WRITEBACK_CACHE negotiated: %d",
                      !!(negotiated() & FUSE_WRITEBACK_CACHE));
        node = lookup("w");
        ck_assert_int_eq(fe_fuse_open(f, node, O_WRONLY | O_APPEND, &fh), 0);
        fl = host_fd_flags(path);
        if (on) {
                ck_assert_int_eq(fl & O_ACCMODE, O_RDWR);
                ck_assert(!(fl & O_APPEND));
                /* the guest's page cache reads back through a write-only handle */
                char buf[4];
                ck_assert_int_eq(fe_fuse_read(f, node, fh, 0, buf, sizeof buf), 4);
        } else {
                ck_assert_int_eq(fl & O_ACCMODE, O_WRONLY);
                ck_assert(fl & O_APPEND);
        }
        ck_assert_int_eq(fe_fuse_release(f, node, fh, false), 0);
        free(path);
}

START_TEST(test_writeback) {
        check_writeback(true);
}
END_TEST

START_TEST(test_no_writeback) {
        check_writeback(false);
}
END_TEST

/* --- --killpriv-v2 ---------------------------------------------------------------------- */

static int open_kill_req(uint64_t nodeid, uint32_t flags, uint64_t *ret_fh) {
        struct fuse_open_in in = { .flags = flags, .open_flags = FUSE_OPEN_KILL_SUIDGID };
        struct fuse_open_out out;
        FeFuseReq *req;
        int r;

        ck_assert_int_eq(fe_fuse_req_new(&req, f, FUSE_OPEN, nodeid, sizeof out), 0);
        fe_fuse_req_add(req, &in, sizeof in);
        r = fe_fuse_call(f, req);
        if (r == 0) {
                memcpy(&out, req->payload, sizeof out);
                *ret_fh = out.fh;
        }
        fe_fuse_req_free(f, req);
        return r;
}

static void check_killpriv_v2(bool on) {
        const char *const opt[] = { "--killpriv-v2", NULL };
        char *path = host_file("s", 04755, "setuid");
        struct fuse_setattr_in sa = { .valid = FATTR_SIZE | FATTR_KILL_SUIDGID, .size = 2 };
        struct stat st;
        uint64_t node, fh;

        start(on ? opt : NULL);
        ck_assert_msg(!!(negotiated() & FUSE_HANDLE_KILLPRIV_V2) == on, "HANDLE_KILLPRIV_V2 negotiated: %d",
                      !!(negotiated() & FUSE_HANDLE_KILLPRIV_V2));
        node = lookup("s");

        /* SETATTR(size) with KILL_SUIDGID: honoured only when negotiated; otherwise the guest kernel
         * clears the bits itself with a SETATTR of the mode, and the daemon truncates with
         * CAP_FSETID, which keeps them. */
        ck_assert_int_eq(setattr_req(node, &sa), 0);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_size, 2);
        ck_assert_msg(!!(st.st_mode & S_ISUID) == !on, "mode %o after SETATTR KILL_SUIDGID", st.st_mode);

        /* OPEN(O_TRUNC) with OPEN_KILL_SUIDGID: the same. */
        ck_assert_int_eq(chmod(path, 04755), 0);
        ck_assert_int_eq(open_kill_req(node, O_WRONLY | O_TRUNC, &fh), 0);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_msg(!!(st.st_mode & S_ISUID) == !on, "mode %o after OPEN(O_TRUNC) KILL_SUIDGID", st.st_mode);

        /* WRITE_KILL_SUIDGID is honoured either way (Linux sends it on direct-I/O writes by a
         * caller without CAP_FSETID and then leaves the bits to the server, negotiated or not). */
        ck_assert_int_eq(chmod(path, 04755), 0);
        ck_assert_int_eq(write_flags_req(node, fh, "xx", FUSE_WRITE_KILL_SUIDGID), 0);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_msg(!(st.st_mode & S_ISUID), "mode %o after WRITE_KILL_SUIDGID", st.st_mode);
        ck_assert_int_eq(fe_fuse_release(f, node, fh, false), 0);
        free(path);
}

START_TEST(test_killpriv_v2) {
        check_killpriv_v2(true);
}
END_TEST

START_TEST(test_no_killpriv_v2) {
        check_killpriv_v2(false);
}
END_TEST

/* --- --no-readdirplus ------------------------------------------------------------------- */

START_TEST(test_no_readdirplus) {
        const char *const opt[] = { "--no-readdirplus", NULL };

        start(NULL);
        ck_assert_uint_eq(negotiated() & (FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO),
                          FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO);
        restart_clean();
        start(opt);
        ck_assert_uint_eq(negotiated() & (FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO), 0);
        /* the rest of the session is unchanged */
        ck_assert_msg(fe_fuse_roundtrip(f, "rt", 3000, 1) == 0, "%s", f->last_problem);
}
END_TEST

/* --- --posix-acl and --security-label modes --------------------------------------------- */

/* A minimal access ACL (user::rw- group::r-- other::r--) in the xattr format. */
static size_t acl_value(uint8_t *buf) {
        struct posix_acl_xattr_header hdr = { .a_version = htole32(POSIX_ACL_XATTR_VERSION) };
        struct posix_acl_xattr_entry e[3] = {
                { .e_tag = htole16(0x01), .e_perm = htole16(6), .e_id = htole32(UINT32_MAX) },
                { .e_tag = htole16(0x04), .e_perm = htole16(4), .e_id = htole32(UINT32_MAX) },
                { .e_tag = htole16(0x20), .e_perm = htole16(4), .e_id = htole32(UINT32_MAX) },
        };
        memcpy(buf, &hdr, sizeof hdr);
        memcpy(buf + sizeof hdr, e, sizeof e);
        return sizeof hdr + sizeof e;
}

typedef struct ModeCase {
        const char *fstype; /* mounted over the share; NULL: the test directory's filesystem */
        const char *option;
        bool offered; /* the INIT flag */
        int set_answer; /* SETXATTR of the feature's xattr */
} ModeCase;

static void check_acl_mode(const ModeCase *m) {
        const char *const extra[] = { m->option, "--xattr", NULL };
        uint8_t v[64];
        size_t n = acl_value(v);
        uint64_t node;

        if (m->fstype)
                mount_share(m->fstype, 0);
        free(host_file("a", 0644, "acl"));
        start(extra);
        ck_assert_msg(!!(negotiated() & FUSE_POSIX_ACL) == m->offered, "%s on %s: POSIX_ACL %s", m->option,
                      m->fstype ?: "the test fs", m->offered ? "not offered" : "offered");
        ck_assert(!!(negotiated() & FUSE_DONT_MASK) == m->offered);
        node = lookup("a");
        ck_assert_int_eq(setxattr_req(node, "system.posix_acl_access", v, n), m->set_answer);
        restart_clean();
}

START_TEST(test_posix_acl_modes) {
        /* ramfs has no xattrs at all; tmpfs has ACLs (CONFIG_TMPFS_POSIX_ACL, as every distribution) */
        static const ModeCase cases[] = {
                { "tmpfs", "--posix-acl=never", false, -EOPNOTSUPP },
                { "tmpfs", "--posix-acl=always", true, 0 },
                { "tmpfs", "--posix-acl", true, 0 }, /* the bare option means always */
                { "tmpfs", "--posix-acl=auto", true, 0 },
                { "ramfs", "--posix-acl=auto", false, -EOPNOTSUPP },
                { "ramfs", "--posix-acl=always", true, -EOPNOTSUPP }, /* the host's answer */
                { "tmpfs", "-ono_posix_acl", false, -EOPNOTSUPP }, /* the C virtiofsd's -o key */
                { "tmpfs", "-oposix_acl", true, 0 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                check_acl_mode(&cases[i]);
}
END_TEST

/* CREATE name in the root carrying one security context (the extension a guest LSM sends when
 * FUSE_SECURITY_CTX is negotiated); returns the reply's error. */
static int create_labelled(const char *name, const char *xname, const char *value) {
        static const uint8_t zeros[8];
        struct fuse_create_in in = { .flags = O_RDWR | O_CREAT, .mode = S_IFREG | 0644, .umask = 022 };
        struct fuse_secctx_header sh = { .nr_secctx = 1 };
        struct fuse_secctx sc = { .size = (uint32_t)strlen(value) };
        size_t ext = sizeof sh + sizeof sc + strlen(xname) + 1 + strlen(value);
        struct {
                struct fuse_entry_out e;
                struct fuse_open_out o;
        } out;
        FeFuseReq *req;
        int r;

        ext = ALIGN_TO(ext, (size_t)8);
        sh.size = (uint32_t)ext;
        ck_assert_int_eq(fe_fuse_req_new(&req, f, FUSE_CREATE, FUSE_ROOT_ID, sizeof out), 0);
        fe_fuse_req_add(req, &in, sizeof in);
        fe_fuse_req_add_str(req, name);
        fe_fuse_req_add(req, &sh, sizeof sh);
        fe_fuse_req_add(req, &sc, sizeof sc);
        fe_fuse_req_add_str(req, xname);
        fe_fuse_req_add(req, value, strlen(value));
        fe_fuse_req_add(req, zeros, ext - (sizeof sh + sizeof sc + strlen(xname) + 1 + strlen(value)));
        fe_fuse_req_hdr(req)->total_extlen = (uint16_t)(ext / 8);
        r = fe_fuse_call(f, req);
        if (r == 0) {
                memcpy(&out, req->payload, MIN(req->payload_len, sizeof out));
                ck_assert_int_eq(fe_fuse_release(f, out.e.nodeid, out.o.fh, false), 0);
        }
        fe_fuse_req_free(f, req);
        return r;
}

static void check_label_mode(const ModeCase *m) {
        /* security.* names need CAP_SYS_ADMIN on a host without an LSM that owns them (the Rust
         * virtiofsd does not keep it either): the test gives it, as a launcher on such a host must */
        const char *const extra[] = { m->option, "--modcaps=+sys_admin", NULL };
        char *path, buf[16];
        ssize_t n;

        if (m->fstype)
                mount_share(m->fstype, 0);
        start(extra);
        ck_assert_msg(!!(negotiated() & FUSE_SECURITY_CTX) == m->offered, "%s on %s: SECURITY_CTX %s", m->option,
                      m->fstype ?: "the test fs", m->offered ? "not offered" : "offered");
        /* the guest's label on the new file: set when offered, never when not */
        ck_assert_int_eq(create_labelled("l", "security.vufs-test", "lbl"), m->set_answer);
        path = fe_harness_path(h, "l");
        n = getxattr(path, "security.vufs-test", buf, sizeof buf);
        if (m->offered && m->set_answer == 0)
                ck_assert_msg(n == 3 && memcmp(buf, "lbl", 3) == 0, "%s: no label on the new file", m->option);
        else
                ck_assert_int_lt(n, 0);
        free(path);
        restart_clean();
}

START_TEST(test_security_label_modes) {
        static const ModeCase cases[] = {
                { "tmpfs", "--security-label=never", false, 0 },
                { "tmpfs", "--security-label=always", true, 0 },
                { "tmpfs", "--security-label", true, 0 },
                { "tmpfs", "--security-label=auto", true, 0 },
                { "ramfs", "--security-label=auto", false, 0 },
                { "ramfs", "--security-label=always", true, -EOPNOTSUPP }, /* the host refuses the label */
                { "tmpfs", "-ono_security_label", false, 0 },
                { "tmpfs", "-osecurity_label", true, 0 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                check_label_mode(&cases[i]);
}
END_TEST

/* --- --xattrmap and security.capability ------------------------------------------------- */

#define MAPPED_CAP "user.virtiofs.security.capability"

static void set_mapped_cap(const char *path) {
        ck_assert_int_eq(setxattr(path, MAPPED_CAP, "capdata", 7, 0), 0);
}

static bool has_mapped_cap(const char *path) {
        char buf[16];
        return getxattr(path, MAPPED_CAP, buf, sizeof buf) >= 0;
}

START_TEST(test_xattrmap_capability_cleared) {
        const char *const extra[] = { "--xattr", "--xattrmap=:map:security.capability:user.virtiofs.:", NULL };
        char *path = host_file("c", 0755, "capable");
        struct fuse_setattr_in sa;
        char buf[16];
        uint64_t node, fh;

        set_mapped_cap(path);
        start(extra);
        node = lookup("c");
        /* the guest sees the host's renamed attribute as its security.capability */
        ck_assert_int_eq(getxattr_req(node, "security.capability", buf, sizeof buf), 7);
        ck_assert(memcmp(buf, "capdata", 7) == 0);

        /* WRITE */
        ck_assert_int_eq(fe_fuse_open(f, node, O_WRONLY, &fh), 0);
        ck_assert(has_mapped_cap(path)); /* an open alone keeps it */
        ck_assert_int_eq(fe_fuse_write(f, node, fh, 0, "w", 1), 1);
        ck_assert_msg(!has_mapped_cap(path), "WRITE left " MAPPED_CAP);
        ck_assert_int_eq(getxattr_req(node, "security.capability", buf, sizeof buf), -ENODATA);

        /* truncate through the handle and without one */
        set_mapped_cap(path);
        sa = (struct fuse_setattr_in){ .valid = FATTR_SIZE | FATTR_FH, .fh = fh, .size = 3 };
        ck_assert_int_eq(setattr_req(node, &sa), 0);
        ck_assert_msg(!has_mapped_cap(path), "SETATTR size (fh) left " MAPPED_CAP);
        ck_assert_int_eq(fe_fuse_release(f, node, fh, false), 0);
        set_mapped_cap(path);
        ck_assert_int_eq(fe_fuse_setattr_size(f, node, 1, NULL), 0);
        ck_assert_msg(!has_mapped_cap(path), "SETATTR size left " MAPPED_CAP);

        /* chown, even to the same owner (the kernel drops it on any chown) */
        set_mapped_cap(path);
        sa = (struct fuse_setattr_in){ .valid = FATTR_UID | FATTR_GID, .uid = 0, .gid = 0 };
        ck_assert_int_eq(setattr_req(node, &sa), 0);
        ck_assert_msg(!has_mapped_cap(path), "SETATTR uid/gid left " MAPPED_CAP);

        /* OPEN with O_TRUNC */
        set_mapped_cap(path);
        ck_assert_int_eq(fe_fuse_open(f, node, O_WRONLY | O_TRUNC, &fh), 0);
        ck_assert_msg(!has_mapped_cap(path), "OPEN(O_TRUNC) left " MAPPED_CAP);
        ck_assert_int_eq(fe_fuse_release(f, node, fh, false), 0);

        /* FALLOCATE (the kernel's vfs_fallocate() drops it too) */
        set_mapped_cap(path);
        ck_assert_int_eq(fe_fuse_open(f, node, O_RDWR, &fh), 0);
        {
                struct fuse_fallocate_in fi = { .fh = fh, .offset = 0, .length = 4096 };
                FeFuseReq *req;
                ck_assert_int_eq(fe_fuse_req_new(&req, f, FUSE_FALLOCATE, node, 0), 0);
                fe_fuse_req_add(req, &fi, sizeof fi);
                ck_assert_int_eq(fe_fuse_call(f, req), 0);
                fe_fuse_req_free(f, req);
        }
        ck_assert_msg(!has_mapped_cap(path), "FALLOCATE left " MAPPED_CAP);
        ck_assert_int_eq(fe_fuse_release(f, node, fh, false), 0);

        /* a mode change or a read is no reason */
        set_mapped_cap(path);
        sa = (struct fuse_setattr_in){ .valid = FATTR_MODE, .mode = S_IFREG | 0700 };
        ck_assert_int_eq(setattr_req(node, &sa), 0);
        ck_assert_int_eq(fe_fuse_open(f, node, O_RDONLY, &fh), 0);
        ck_assert_int_ge(fe_fuse_read(f, node, fh, 0, buf, sizeof buf), 0);
        ck_assert_int_eq(fe_fuse_release(f, node, fh, false), 0);
        ck_assert(has_mapped_cap(path));
        ck_assert_uint_eq(f->proto_errors, 0);
        free(path);
}
END_TEST

/* Without a map that renames security.capability, a user.* attribute of that name is just data. */
START_TEST(test_unmapped_capability_name_kept) {
        const char *const extra[] = { "--xattr", NULL };
        char *path = host_file("u", 0755, "plain");
        uint64_t node, fh;

        set_mapped_cap(path);
        start(extra);
        node = lookup("u");
        ck_assert_int_eq(fe_fuse_open(f, node, O_WRONLY, &fh), 0);
        ck_assert_int_eq(fe_fuse_write(f, node, fh, 0, "w", 1), 1);
        ck_assert_int_eq(fe_fuse_release(f, node, fh, false), 0);
        ck_assert(has_mapped_cap(path));
        free(path);
}
END_TEST

static void add_tests(Suite *s) {
        TCase *tc = tcase_create("options");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_root_test(tc, test_preserve_noatime);
        tcase_add_root_test(tc, test_noatime_dropped);
        tcase_add_root_test(tc, test_allow_direct_io);
        tcase_add_root_test(tc, test_direct_io_dropped);
        tcase_add_root_test(tc, test_writeback);
        tcase_add_root_test(tc, test_no_writeback);
        tcase_add_root_test(tc, test_killpriv_v2);
        tcase_add_root_test(tc, test_no_killpriv_v2);
        tcase_add_root_test(tc, test_no_readdirplus);
        tcase_add_root_test(tc, test_posix_acl_modes);
        tcase_add_root_test(tc, test_security_label_modes);
        tcase_add_root_test(tc, test_xattrmap_capability_cleared);
        tcase_add_root_test(tc, test_unmapped_capability_name_kept);
        suite_add_tcase(s, tc);
}

TEST_MAIN("frontend-options", add_tests)
