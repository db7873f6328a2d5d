/* test-frontend-migration.c: live migration between two vufsd over the same directory, with QEMU
 * 8.2's sequence (docs/migration.md): the source's rings stop, its state is read through
 * SET_DEVICE_STATE_FD(save) and CHECK_DEVICE_STATE, the destination loads it before its rings start,
 * and the guest's requests continue there with the same node ids and handles. Then each
 * --migration-mode, files renamed, unlinked while open and made unreachable with each
 * --migration-on-error, hostile streams, a save refused while the rings run, and the dirty log. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "host-locks.h"
#include "test-main.h"
#include "util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(FeHarness *, fe_harness_free);

#define N_DIR_FILES 40
#define DATA_SIZE (256u << 10)

typedef struct Vm {
        Frontend *fe;
        FeFuse *c;
} Vm;

static void vm_done(Vm *v) {
        fe_fuse_free(v->c);
        fe_free(v->fe);
        *v = (Vm) {};
}

static void opts_for_migration(FeOptions *o) {
        fe_options_init(o);
        o->timeout_ms = 10000;
        o->protocol_mask |= (1ull << FE_VU_PROTOCOL_F_DEVICE_STATE) | (1ull << FE_VU_PROTOCOL_F_LOG_SHMFD);
}

/* The source: connected, started, mounted (FUSE_INIT). */
static void vm_boot(FeHarness *h, Vm *v) {
        FeOptions o;

        opts_for_migration(&o);
        ck_assert_int_eq(fe_connect(&v->fe, h->socket_path, &o), 0);
        ck_assert_msg(fe_negotiate(v->fe) == 0, "negotiate: %s", v->fe->error);
        ck_assert_msg(fe_has_protocol(v->fe, FE_VU_PROTOCOL_F_DEVICE_STATE), "DEVICE_STATE not offered");
        ck_assert_msg(fe_start(v->fe, true) == 0, "start: %s", v->fe->error);
        ck_assert_int_eq(fe_fuse_new(&v->c, v->fe), 0);
        ck_assert_msg(fe_fuse_init(v->c) == 0, "INIT: %s", v->c->last_problem);
}

/* The destination: connected and negotiated, the state loaded before the rings start (its
 * CHECK_DEVICE_STATE answer returned); then started without a FUSE_INIT, as a migrated guest. */
static uint64_t vm_incoming(FeHarness *h, Vm *v, const uint8_t *state, size_t len) {
        uint64_t check = 99;
        FeOptions o;

        opts_for_migration(&o);
        ck_assert_int_eq(fe_connect(&v->fe, h->socket_path, &o), 0);
        ck_assert_msg(fe_negotiate(v->fe) == 0, "negotiate: %s", v->fe->error);
        ck_assert_msg(fe_load_state(v->fe, state, len, &check) == 0, "load: %s", v->fe->error);
        ck_assert_msg(fe_start(v->fe, true) == 0, "start: %s", v->fe->error);
        ck_assert_int_eq(fe_fuse_new(&v->c, v->fe), 0);
        v->c->initialized = true; /* the session came with the state */
        return check;
}

static void write_file(const char *dir, const char *name, const void *data, size_t len) {
        _cleanup_free_ char *p = NULL;
        int fd;

        ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
        fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, data, len), (ssize_t) len);
        close(fd);
}

static char *in_share(FeHarness *h, const char *name) {
        char *p;
        ck_assert_int_ge(asprintf(&p, "%s/%s", h->share, name), 0);
        return p;
}

/* Starts vufsd on h with the share of share_of (the same directory, as shared storage shows it). */
static void spawn_on(FeHarness *h, FeHarness *share_of, const char *const *extra) {
        if (share_of) {
                free(h->share);
                h->share = strdup(share_of->share);
        }
        ck_assert_int_eq(fe_harness_spawn_vufsd(h, extra), 0);
}

/* Names in a READDIR reply, and the offset after the last one. */
static unsigned parse_dirents(const uint8_t *buf, size_t len, char names[][64], unsigned max, uint64_t *ret_off) {
        unsigned n = 0;

        for (size_t pos = 0; pos + sizeof(struct fuse_dirent) <= len;) {
                const struct fuse_dirent *d = (const void *) (buf + pos);
                if (n < max) {
                        snprintf(names[n], 64, "%.*s", (int) d->namelen, d->name);
                        n++;
                }
                *ret_off = d->off;
                pos += FUSE_DIRENT_SIZE(d);
        }
        return n;
}

typedef struct Workload {
        uint64_t dir, file_in_dir, data, ro;
        uint64_t fh_rw, fh_ro, fh_dir;
        uint64_t dir_off; /* where the half-read listing stopped */
        char seen[N_DIR_FILES + 2][64];
        unsigned n_seen;
        uint64_t ino_data;
} Workload;

static void make_tree(FeHarness *h) {
        _cleanup_free_ char *d = in_share(h, "d");
        _cleanup_free_ uint8_t *data = malloc(DATA_SIZE);
        char name[32];

        ck_assert_int_eq(mkdir(d, 0755), 0);
        for (int i = 0; i < N_DIR_FILES; i++) {
                snprintf(name, sizeof name, "f%02d", i);
                write_file(d, name, name, strlen(name));
        }
        fe_fuse_pattern(data, DATA_SIZE, 0, 1);
        write_file(h->share, "data.bin", data, DATA_SIZE);
        write_file(h->share, "ro.txt", "read only\n", 10);
}

/* A source and a destination vufsd over one share holding make_tree()'s files. */
static void two_daemons(FeHarness **src, FeHarness **dst, const char *const *src_args, const char *const *dst_args) {
        ck_assert_int_eq(fe_harness_new(src), 0);
        ck_assert_int_eq(fe_harness_new(dst), 0);
        make_tree(*src);
        spawn_on(*src, NULL, src_args);
        spawn_on(*dst, *src, dst_args);
}

/* On the source: nodes looked up, a file open for reading and writing (and written), one for
 * reading, a directory stream half read. */
static void run_workload(Vm *v, Workload *w) {
        struct fuse_entry_out e;
        uint8_t buf[4096], dirbuf[512];
        int n;

        ck_assert_int_eq(fe_fuse_lookup(v->c, FUSE_ROOT_ID, "d", &e), 0);
        w->dir = e.nodeid;
        ck_assert_int_eq(fe_fuse_lookup(v->c, w->dir, "f03", &e), 0);
        w->file_in_dir = e.nodeid;
        ck_assert_int_eq(fe_fuse_lookup(v->c, FUSE_ROOT_ID, "data.bin", &e), 0);
        w->data = e.nodeid;
        w->ino_data = e.attr.ino;
        ck_assert_int_eq(fe_fuse_lookup(v->c, FUSE_ROOT_ID, "ro.txt", &e), 0);
        w->ro = e.nodeid;
        ck_assert_int_eq(fe_fuse_open(v->c, w->data, O_RDWR, &w->fh_rw), 0);
        fe_fuse_pattern(buf, sizeof buf, 8192, 2);
        ck_assert_int_eq(fe_fuse_write(v->c, w->data, w->fh_rw, 8192, buf, sizeof buf), (int) sizeof buf);
        ck_assert_int_eq(fe_fuse_open(v->c, w->ro, O_RDONLY, &w->fh_ro), 0);
        ck_assert_int_eq(fe_fuse_opendir(v->c, w->dir, &w->fh_dir), 0);
        n = fe_fuse_readdir(v->c, false, w->dir, w->fh_dir, 0, dirbuf, sizeof dirbuf);
        ck_assert_int_gt(n, 0);
        w->n_seen = parse_dirents(dirbuf, (size_t) n, w->seen, N_DIR_FILES + 2, &w->dir_off);
        ck_assert_uint_lt(w->n_seen, N_DIR_FILES); /* really half read */
}

/* On the destination: the same ids and handles, the right data, the listing continues. */
static void check_continues(Vm *v, const Workload *w) {
        struct fuse_attr_out a;
        struct fuse_entry_out e;
        uint8_t buf[4096], want[4096], dirbuf[4096];
        char rest[N_DIR_FILES + 2][64];
        uint64_t off = w->dir_off;
        unsigned total = w->n_seen;
        int n;

        ck_assert_int_eq(fe_fuse_getattr(v->c, w->dir, &a), 0);
        ck_assert_int_eq(a.attr.mode & S_IFMT, S_IFDIR);
        ck_assert_int_eq(fe_fuse_getattr(v->c, w->file_in_dir, &a), 0);
        ck_assert_int_eq(a.attr.size, 3);
        ck_assert_int_eq(fe_fuse_getattr(v->c, w->data, &a), 0);
        ck_assert_uint_eq(a.attr.ino, w->ino_data);
        /* The written block and the file's own data through the migrated handle. */
        ck_assert_int_eq(fe_fuse_read(v->c, w->data, w->fh_rw, 8192, buf, sizeof buf), (int) sizeof buf);
        fe_fuse_pattern(want, sizeof want, 8192, 2);
        ck_assert_mem_eq(buf, want, sizeof buf);
        ck_assert_int_eq(fe_fuse_read(v->c, w->data, w->fh_rw, 65536, buf, sizeof buf), (int) sizeof buf);
        fe_fuse_pattern(want, sizeof want, 65536, 1);
        ck_assert_mem_eq(buf, want, sizeof buf);
        /* Still open for writing. */
        fe_fuse_pattern(want, sizeof want, 0, 3);
        ck_assert_int_eq(fe_fuse_write(v->c, w->data, w->fh_rw, 0, want, sizeof want), (int) sizeof want);
        ck_assert_int_eq(fe_fuse_read(v->c, w->data, w->fh_rw, 0, buf, sizeof buf), (int) sizeof buf);
        ck_assert_mem_eq(buf, want, sizeof buf);
        ck_assert_int_eq(fe_fuse_read(v->c, w->ro, w->fh_ro, 0, buf, sizeof buf), 10);
        ck_assert_mem_eq(buf, "read only\n", 10);
        /* The listing goes on where it stopped: every name exactly once over both halves. */
        for (;;) {
                unsigned k;
                n = fe_fuse_readdir(v->c, false, w->dir, w->fh_dir, off, dirbuf, sizeof dirbuf);
                ck_assert_int_ge(n, 0);
                if (n == 0)
                        break;
                k = parse_dirents(dirbuf, (size_t) n, rest + (total - w->n_seen), N_DIR_FILES + 2 - (total - w->n_seen),
                                  &off);
                total += k;
                ck_assert_uint_le(total, N_DIR_FILES + 2);
        }
        ck_assert_uint_eq(total, N_DIR_FILES + 2);
        for (unsigned i = 0; i < N_DIR_FILES + 2; i++) {
                const char *name = i < w->n_seen ? w->seen[i] : rest[i - w->n_seen];
                for (unsigned j = i + 1; j < N_DIR_FILES + 2; j++)
                        ck_assert_str_ne(name, j < w->n_seen ? w->seen[j] : rest[j - w->n_seen]);
        }
        /* A lookup of a known file finds its node; a new one gets an id of its own. */
        ck_assert_int_eq(fe_fuse_lookup(v->c, FUSE_ROOT_ID, "data.bin", &e), 0);
        ck_assert_uint_eq(e.nodeid, w->data);
        ck_assert_int_eq(fe_fuse_lookup(v->c, w->dir, "f07", &e), 0);
        ck_assert(e.nodeid != w->dir && e.nodeid != w->file_in_dir && e.nodeid != w->data && e.nodeid != w->ro);
        ck_assert_int_eq(fe_fuse_release(v->c, w->ro, w->fh_ro, false), 0);
        ck_assert_int_eq(fe_fuse_release(v->c, w->dir, w->fh_dir, true), 0);
        ck_assert_int_eq(fe_fuse_release(v->c, w->data, w->fh_rw, false), 0);
        ck_assert_int_eq(fe_fuse_forget(v->c, w->file_in_dir, 1), 0);
        ck_assert_uint_eq(v->c->proto_errors, 0);
}

/* The whole sequence in one mode: workload, stop, save, load, continue; then the source serves
 * on (a migration that fails after the save leaves the guest there). */
/* QEMU's save on the source: the rings stopped, the state read out of vufsd. */
static void stop_and_save(Vm *s, uint8_t **state, size_t *len) {
        ck_assert_msg(fe_stop(s->fe) == 0, "stop: %s", s->fe->error);
        ck_assert_msg(fe_save_state(s->fe, state, len) == 0, "save: %s", s->fe->error);
}

static void migrate_in_mode(const char *const *src_args, const char *const *dst_args) {
        _cleanup_(fe_harness_freep) FeHarness *src = NULL, *dst = NULL;
        _cleanup_free_ uint8_t *state = NULL;
        Vm s = {}, d = {};
        Workload w = {};
        uint8_t buf[16];
        size_t len;

        two_daemons(&src, &dst, src_args, dst_args);
        vm_boot(src, &s);
        run_workload(&s, &w);

        stop_and_save(&s, &state, &len);
        ck_assert_uint_gt(len, 64);
        ck_assert_uint_eq(vm_incoming(dst, &d, state, len), 0);
        check_continues(&d, &w);

        /* The source after the save: its rings start again and its handles still work. */
        ck_assert_msg(fe_start(s.fe, false) == 0, "restart: %s", s.fe->error);
        ck_assert_int_eq(fe_fuse_read(s.c, w.ro, w.fh_ro, 0, buf, 9), 9);
        ck_assert_mem_eq(buf, "read only", 9);
        vm_done(&d);
        vm_done(&s);
}

START_TEST(test_migrate_find_paths) {
        static const char *const args[] = { "--migration-mode=find-paths", NULL };
        migrate_in_mode(args, args);
}
END_TEST

START_TEST(test_migrate_confirm_and_verify) {
        static const char *const args[] = { "--migration-confirm-paths", "--migration-verify-handles", NULL };
        migrate_in_mode(args, args);
}
END_TEST

/* File handles: the destination must be allowed to open them on its share (the harness's share is
 * a subdirectory of /tmp's filesystem). */
START_TEST(test_migrate_file_handles) {
        static const char *const args[] = { "--migration-mode=file-handles", "--inode-file-handles=mandatory",
                                            "--allow-handles-beyond-share", NULL };
        migrate_in_mode(args, args);
}
END_TEST

/* A destination that may not use file handles refuses a file-handles stream: a handle opens any
 * file of its filesystem, the share's subtree or not. */
START_TEST(test_file_handles_need_handles_on_destination) {
        static const char *const src_args[] = { "--migration-mode=file-handles", NULL };
        static const char *const dst_args[] = { "--migration-mode=file-handles", "--inode-file-handles=never", NULL };
        _cleanup_(fe_harness_freep) FeHarness *src = NULL, *dst = NULL;
        _cleanup_free_ uint8_t *state = NULL;
        struct fuse_entry_out e;
        Vm s = {}, d = {};
        size_t len;

        two_daemons(&src, &dst, src_args, dst_args);
        vm_boot(src, &s);
        ck_assert_int_eq(fe_fuse_lookup(s.c, FUSE_ROOT_ID, "ro.txt", &e), 0);
        stop_and_save(&s, &state, &len);
        ck_assert_uint_ne(vm_incoming(dst, &d, state, len), 0);
        vm_done(&d);
        vm_done(&s);
}
END_TEST

/* A destination whose --max-nodes is below the nodes the source's guest holds refuses the stream
 * and serves on. Its decoder stops at the first node record past the budget (test-session-state
 * test_node_budget shows that part: a hostile frontend's stream of millions of minimal nodes
 * cannot make it hold more than the session could); the load would refuse the 17th node too. */
START_TEST(test_destination_node_budget) {
        static const char *const dst_args[] = { "--max-nodes=16", NULL }; /* the smallest budget */
        _cleanup_(fe_harness_freep) FeHarness *src = NULL, *dst = NULL;
        _cleanup_free_ uint8_t *state = NULL;
        struct fuse_entry_out e;
        Vm s = {}, d = {};
        Workload w = {};
        char name[8];
        size_t len;

        two_daemons(&src, &dst, NULL, dst_args);
        vm_boot(src, &s);
        run_workload(&s, &w); /* four nodes besides the root, then 20 more */
        for (int i = 10; i < 30; i++) {
                snprintf(name, sizeof name, "f%02d", i);
                ck_assert_int_eq(fe_fuse_lookup(s.c, w.dir, name, &e), 0);
        }
        stop_and_save(&s, &state, &len);
        ck_assert_uint_ne(vm_incoming(dst, &d, state, len), 0);
        vm_done(&d);
        vm_done(&s);
}
END_TEST

typedef enum Damage {
        RENAMED,      /* after the save */
        UNLINKED,     /* before the save, while open */
        UNREACHABLE,  /* its directory moved out of the share after the save */
} Damage;

/* One file damaged, one kept: with abort the load fails (and the destination serves a new session),
 * with guest-error the damaged node answers EIO and its handle EBADF while the rest works. With
 * file handles a rename does not matter. */
static void damaged(Damage how, const char *mode, bool guest_error) {
        _cleanup_(fe_harness_freep) FeHarness *src = NULL, *dst = NULL;
        _cleanup_free_ uint8_t *state = NULL;
        _cleanup_free_ char *sub = NULL, *gone = NULL, *moved = NULL, *outside = NULL;
        const char *src_args[] = { mode, "--inode-file-handles=mandatory", "--allow-handles-beyond-share", NULL };
        const char *dst_args[] = { mode, guest_error ? "--migration-on-error=guest-error" : "--migration-on-error=abort",
                                   "--inode-file-handles=mandatory", "--allow-handles-beyond-share", NULL };
        bool by_handle = strstr(mode, "file-handles") != NULL;
        struct fuse_entry_out e;
        struct fuse_attr_out a;
        uint64_t nsub = 0, ngone, nkeep, fh_gone, fh_keep, check;
        uint8_t buf[16];
        Vm s = {}, d = {};
        size_t len;

        if (!by_handle) /* the harness's share may not use handles: find-paths runs without */
                src_args[1] = dst_args[2] = NULL;
        two_daemons(&src, &dst, src_args, dst_args);
        sub = in_share(src, "sub");
        ck_assert_int_eq(mkdir(sub, 0755), 0);
        write_file(sub, "gone", "gone data", 9);
        write_file(src->share, "keep", "kept data", 9);
        vm_boot(src, &s);
        ck_assert_int_eq(fe_fuse_lookup(s.c, FUSE_ROOT_ID, "sub", &e), 0);
        nsub = e.nodeid;
        ck_assert_int_eq(fe_fuse_lookup(s.c, nsub, "gone", &e), 0);
        ngone = e.nodeid;
        ck_assert_int_eq(fe_fuse_open(s.c, ngone, O_RDWR, &fh_gone), 0);
        ck_assert_int_eq(fe_fuse_lookup(s.c, FUSE_ROOT_ID, "keep", &e), 0);
        nkeep = e.nodeid;
        ck_assert_int_eq(fe_fuse_open(s.c, nkeep, O_RDONLY, &fh_keep), 0);
        ck_assert_int_eq(fe_stop(s.fe), 0);

        gone = in_share(src, "sub/gone");
        if (how == UNLINKED)
                ck_assert_int_eq(unlink(gone), 0);
        ck_assert_msg(fe_save_state(s.fe, &state, &len) == 0, "save: %s", s.fe->error);
        if (how == RENAMED) {
                moved = in_share(src, "sub/moved");
                ck_assert_int_eq(rename(gone, moved), 0);
        }
        if (how == UNREACHABLE) {
                ck_assert_int_ge(asprintf(&outside, "%s/outside", dst->dir), 0);
                ck_assert_int_eq(rename(sub, outside), 0);
        }
        check = vm_incoming(dst, &d, state, len);
        if (by_handle && how == RENAMED) {
                /* The handle finds the file under its new name. */
                ck_assert_uint_eq(check, 0);
                ck_assert_int_eq(fe_fuse_read(d.c, ngone, fh_gone, 0, buf, 9), 9);
                ck_assert_mem_eq(buf, "gone data", 9);
        } else if (!guest_error) {
                ck_assert_uint_ne(check, 0);
                /* Nothing half-restored: a new session works. */
                ck_assert_int_eq(fe_fuse_init(d.c), 0);
                ck_assert_int_eq(fe_fuse_roundtrip(d.c, "after-failed-load", 8192, 4), 0);
        } else {
                ck_assert_uint_eq(check, 0);
                ck_assert_int_eq(fe_fuse_getattr(d.c, ngone, &a), -EIO);
                ck_assert_int_eq(fe_fuse_read(d.c, ngone, fh_gone, 0, buf, 9), -EBADF);
                ck_assert_int_eq(fe_fuse_release(d.c, ngone, fh_gone, false), 0);
                ck_assert_int_eq(fe_fuse_forget(d.c, ngone, 1), 0);
        }
        if (check == 0) {
                ck_assert_int_eq(fe_fuse_read(d.c, nkeep, fh_keep, 0, buf, 9), 9);
                ck_assert_mem_eq(buf, "kept data", 9);
                ck_assert_int_eq(fe_fuse_getattr(d.c, nkeep, &a), 0);
        }
        ck_assert_uint_eq(d.c->proto_errors, 0);
        ck_assert(fe_backend_alive(dst->backend));
        vm_done(&d);
        vm_done(&s);
}

typedef struct DamageCase {
        Damage how;
        const char *mode;
        bool guest_error;
} DamageCase;

/* Find-paths: each damage with each --migration-on-error. */
static const DamageCase by_path[] = {
        { RENAMED, "--migration-mode=find-paths", false },     { RENAMED, "--migration-mode=find-paths", true },
        { UNLINKED, "--migration-mode=find-paths", false },    { UNLINKED, "--migration-mode=find-paths", true },
        { UNREACHABLE, "--migration-mode=find-paths", false }, { UNREACHABLE, "--migration-mode=find-paths", true },
};
/* File handles (root: CAP_DAC_READ_SEARCH): a rename does not matter, a deleted file is lost. */
static const DamageCase by_handle[] = {
        { RENAMED, "--migration-mode=file-handles", false },
        { UNLINKED, "--migration-mode=file-handles", true },
};

START_TEST(test_damaged_by_path) {
        damaged(by_path[_i].how, by_path[_i].mode, by_path[_i].guest_error);
}
END_TEST

START_TEST(test_damaged_by_handle) {
        damaged(by_handle[_i].how, by_handle[_i].mode, by_handle[_i].guest_error);
}
END_TEST

/* ---- the guest's locks (docs/migration.md, "What is carried") ---- */

#define OWNER_POSIX 0xa1u /* a process's POSIX lock: the guest's lock owner */
#define OWNER_OFD 0xb2u   /* an OFD lock: the guest kernel's owner is its open file */
#define OWNER_FLOCK 0xc3u
#define OWNER_OTHER 0xd4u /* another guest process probing */
#define LK_EOF ((uint64_t) INT64_MAX)

typedef struct LockLoad {
        uint64_t data, ro;
        uint64_t fh_posix, fh_ofd, fh_flock;
} LockLoad;

/* The host's view of the share's file name (host-locks.h). */
static short host_probe(FeHarness *h, const char *name, off_t start, off_t len) {
        _cleanup_free_ char *p = in_share(h, name);
        return test_host_lock_type(p, start, len);
}

static bool host_flock_free(FeHarness *h, const char *name) {
        _cleanup_free_ char *p = in_share(h, name);
        return test_host_flock_free(p);
}

/* The source's session ends with its frontend (as the source QEMU quits after a migration), and
 * its open files with it: until then, on one host, its locks are the host's too. */
static void wait_source_gone(FeHarness *h) {
        for (int k = 0; k < 500 && (host_probe(h, "data.bin", 0, 0) != F_UNLCK || !host_flock_free(h, "ro.txt")); k++)
                usleep(10000);
        ck_assert_int_eq(host_probe(h, "data.bin", 0, 0), F_UNLCK);
        ck_assert(host_flock_free(h, "ro.txt"));
}

/* On the source: a POSIX lock (written over [0, 199], then [100, 199] unlocked: the kernel splits),
 * an OFD-style lock (read, [200, 299]) through another open file, and a flock on ro.txt. */
static void take_locks(Vm *v, FeHarness *h, LockLoad *l) {
        struct fuse_entry_out e;

        ck_assert_int_eq(fe_fuse_lookup(v->c, FUSE_ROOT_ID, "data.bin", &e), 0);
        l->data = e.nodeid;
        ck_assert_int_eq(fe_fuse_lookup(v->c, FUSE_ROOT_ID, "ro.txt", &e), 0);
        l->ro = e.nodeid;
        ck_assert_int_eq(fe_fuse_open(v->c, l->data, O_RDWR, &l->fh_posix), 0);
        ck_assert_int_eq(fe_fuse_open(v->c, l->data, O_RDWR, &l->fh_ofd), 0);
        ck_assert_int_eq(fe_fuse_open(v->c, l->ro, O_RDONLY, &l->fh_flock), 0);
        ck_assert_int_eq(fe_fuse_setlk(v->c, l->data, l->fh_posix, OWNER_POSIX, false, F_WRLCK, 0, 199), 0);
        ck_assert_int_eq(fe_fuse_setlk(v->c, l->data, l->fh_posix, OWNER_POSIX, false, F_UNLCK, 100, 199), 0);
        ck_assert_int_eq(fe_fuse_setlk(v->c, l->data, l->fh_ofd, OWNER_OFD, false, F_RDLCK, 200, 299), 0);
        ck_assert_int_eq(fe_fuse_setlk(v->c, l->ro, l->fh_flock, OWNER_FLOCK, true, F_WRLCK, 0, LK_EOF), 0);
        ck_assert_int_eq(host_probe(h, "data.bin", 0, 100), F_WRLCK);
        ck_assert(!host_flock_free(h, "ro.txt"));
}

/* The guest's and the host's view of what the guest holds on the destination. */
static void check_locks_held(Vm *v, FeHarness *h, const LockLoad *l, bool posix_held) {
        struct fuse_file_lock got;
        uint64_t fh;

        ck_assert_int_eq(fe_fuse_getlk(v->c, l->data, l->fh_ofd, OWNER_OTHER, F_WRLCK, 0, 99, &got), 0);
        ck_assert_uint_eq(got.type, F_WRLCK); /* the guest's, or the host's that kept it from being re-taken */
        ck_assert_uint_eq(got.start, posix_held ? 0 : 10);
        ck_assert_uint_eq(got.end, posix_held ? 99 : 14);
        ck_assert_int_eq(fe_fuse_getlk(v->c, l->data, l->fh_ofd, OWNER_OTHER, F_WRLCK, 100, 199, &got), 0);
        ck_assert_uint_eq(got.type, F_UNLCK); /* the unlocked part stayed unlocked */
        ck_assert_int_eq(fe_fuse_getlk(v->c, l->data, l->fh_ofd, OWNER_OTHER, F_WRLCK, 200, 299, &got), 0);
        ck_assert_uint_eq(got.type, F_RDLCK);
        ck_assert_uint_eq(got.start, 200);
        ck_assert_uint_eq(got.end, 299);
        ck_assert_int_eq(host_probe(h, "data.bin", 0, 100), F_WRLCK);
        ck_assert_int_eq(host_probe(h, "data.bin", 100, 100), F_UNLCK);
        ck_assert_int_eq(host_probe(h, "data.bin", 250, 1), F_RDLCK);
        /* flock: another open file of the guest, and a host process, find it taken. */
        ck_assert_int_eq(fe_fuse_open(v->c, l->ro, O_RDONLY, &fh), 0);
        ck_assert_int_eq(fe_fuse_setlk(v->c, l->ro, fh, OWNER_OTHER, true, F_WRLCK, 0, LK_EOF), -EAGAIN);
        ck_assert_int_eq(fe_fuse_release(v->c, l->ro, fh, false), 0);
        ck_assert(!host_flock_free(h, "ro.txt"));
        if (!posix_held)
                return;
        /* The owners are the guest's as before: one extends its own lock without a conflict with
         * itself, and a second lock owner through the same file conflicts. */
        ck_assert_int_eq(fe_fuse_setlk(v->c, l->data, l->fh_posix, OWNER_POSIX, false, F_WRLCK, 50, 149), 0);
        ck_assert_int_eq(fe_fuse_setlk(v->c, l->data, l->fh_posix, OWNER_OTHER, false, F_RDLCK, 140, 140), -EAGAIN);
}

/* Unlocking on the destination frees them for everyone. */
static void check_unlock(Vm *v, FeHarness *h, const LockLoad *l) {
        struct fuse_file_lock got;

        ck_assert_int_eq(fe_fuse_setlk(v->c, l->data, l->fh_posix, OWNER_POSIX, false, F_UNLCK, 0, LK_EOF), 0);
        ck_assert_int_eq(fe_fuse_setlk(v->c, l->data, l->fh_ofd, OWNER_OFD, false, F_UNLCK, 0, LK_EOF), 0);
        ck_assert_int_eq(fe_fuse_setlk(v->c, l->ro, l->fh_flock, OWNER_FLOCK, true, F_UNLCK, 0, LK_EOF), 0);
        ck_assert_int_eq(fe_fuse_getlk(v->c, l->data, l->fh_ofd, OWNER_OTHER, F_WRLCK, 0, LK_EOF, &got), 0);
        ck_assert_uint_eq(got.type, F_UNLCK);
        ck_assert_int_eq(host_probe(h, "data.bin", 0, 0), F_UNLCK);
        ck_assert(host_flock_free(h, "ro.txt"));
}

/* When the destination loads, relative to who holds what on the host. */
typedef enum LockCase {
        LOCKS_SOURCE_GONE,    /* the source's session ended before the load */
        LOCKS_SOURCE_HOLDS,   /* the source still connected (one host, as QEMU does it): its locks are held */
        LOCKS_HOST_RELEASES,  /* a host process holds [10, 14] of data.bin and lets go 300 ms after the load */
        LOCKS_HOST_KEEPS,     /* ... and never lets go */
        LOCKS_UNLOCK_PENDING, /* ... and the guest's owner unlocks while its lock is pending */
} LockCase;

/* Waits until the source vufsd has exited (its frontend left), then a little for the destination's
 * retries (every 10 ms). */
static void wait_source_exit(FeHarness *src) {
        for (int k = 0; k < 500 && fe_backend_alive(src->backend); k++)
                usleep(10000);
        ck_assert(!fe_backend_alive(src->backend));
        usleep(100000);
}

static uint64_t now_ms(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (uint64_t) t.tv_sec * 1000 + (uint64_t) t.tv_nsec / 1000000;
}

/* A host process letting go of its lock 300 ms after the load: closes *fd. */
static void *release_later(void *fd) {
        usleep(300000);
        close(*(int *) fd);
        return NULL;
}

/* The guest's POSIX lock on [0, 99] is pending: another guest owner is answered as if it were held
 * (the host holds only [10, 14] of it), and cannot take any of it. */
static void check_pending(Vm *v, const LockLoad *l) {
        struct fuse_file_lock got;

        ck_assert_int_eq(fe_fuse_getlk(v->c, l->data, l->fh_ofd, OWNER_OTHER, F_WRLCK, 0, 5, &got), 0);
        ck_assert_uint_eq(got.type, F_WRLCK);
        ck_assert_uint_eq(got.start, 0);
        ck_assert_uint_eq(got.end, 99);
        ck_assert_int_eq(fe_fuse_setlk(v->c, l->data, l->fh_ofd, OWNER_OTHER, false, F_WRLCK, 0, 5), -EAGAIN);
}

/* The locks the guest holds on the source are held on the destination: the guest's own lock
 * owners still own them, other owners and host processes see them, and they unlock. A lock that
 * conflicts at load time (the source's own, still held; a host process's) is pending: the load
 * succeeds whatever --migration-on-error says, the destination takes it as soon as it is free, and
 * past --migration-lock-timeout the lock is lost: the open file it was taken through answers EBADF,
 * the rest is held. */
static void migrate_locks(const char *on_error, LockCase lc) {
        bool host_conflict = lc >= LOCKS_HOST_RELEASES;
        const char *dst_args[] = { on_error, host_conflict ? "--migration-lock-timeout=1" : NULL, NULL };
        _cleanup_(fe_harness_freep) FeHarness *src = NULL, *dst = NULL;
        _cleanup_free_ uint8_t *state = NULL;
        _cleanup_free_ char *path = NULL;
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 10, .l_len = 5 };
        struct fuse_file_lock got;
        uint8_t buf[16];
        LockLoad l = {};
        Vm s = {}, d = {};
        size_t len;
        int host_fd = -1;

        two_daemons(&src, &dst, NULL, dst_args);
        vm_boot(src, &s);
        take_locks(&s, src, &l);
        stop_and_save(&s, &state, &len);
        if (lc != LOCKS_SOURCE_HOLDS) {
                vm_done(&s);
                wait_source_gone(src);
        }
        if (host_conflict) {
                path = in_share(src, "data.bin");
                host_fd = open(path, O_RDWR | O_CLOEXEC);
                ck_assert_int_ge(host_fd, 0);
                ck_assert_int_eq(fcntl(host_fd, F_OFD_SETLK, &fl), 0);
        }
        ck_assert_uint_eq(vm_incoming(dst, &d, state, len), 0);
        switch (lc) {
        case LOCKS_SOURCE_GONE:
                check_locks_held(&d, src, &l, true);
                ck_assert_int_eq(fe_fuse_read(d.c, l.data, l.fh_posix, 0, buf, 4), 4);
                check_unlock(&d, src, &l);
                break;
        case LOCKS_SOURCE_HOLDS:
                /* The destination serves while the source holds the guest's locks. */
                ck_assert_int_eq(fe_fuse_read(d.c, l.data, l.fh_ofd, 0, buf, 4), 4);
                ck_assert_int_eq(fe_fuse_getlk(d.c, l.data, l.fh_ofd, OWNER_OTHER, F_WRLCK, 0, 5, &got), 0);
                ck_assert_uint_eq(got.type, F_WRLCK);
                vm_done(&s); /* QEMU's source quits after the migration */
                wait_source_exit(src);
                check_locks_held(&d, src, &l, true); /* now the destination's own */
                ck_assert_int_eq(fe_fuse_read(d.c, l.data, l.fh_posix, 0, buf, 4), 4);
                check_unlock(&d, src, &l);
                break;
        case LOCKS_HOST_RELEASES: {
                pthread_t t;
                uint64_t t0 = now_ms();
                ck_assert_int_eq(pthread_create(&t, NULL, release_later, &host_fd), 0);
                check_pending(&d, &l);
                /* The owner's own GETLK waits until its lock is taken (the host process lets go
                 * 300 ms after the load), then finds nothing in its way: the lock is its own. */
                ck_assert_int_eq(fe_fuse_getlk(d.c, l.data, l.fh_posix, OWNER_POSIX, F_WRLCK, 0, 99, &got), 0);
                ck_assert_uint_eq(got.type, F_UNLCK);
                ck_assert_uint_ge(now_ms() - t0, 250);
                ck_assert_int_eq(pthread_join(t, NULL), 0);
                host_fd = -1;
                usleep(1000000); /* past the timeout */
                ck_assert_int_eq(host_probe(src, "data.bin", 0, 100), F_WRLCK); /* only the destination can hold it */
                check_locks_held(&d, src, &l, true);
                ck_assert_int_eq(fe_fuse_read(d.c, l.data, l.fh_posix, 0, buf, 4), 4);
                check_unlock(&d, src, &l);
                break;
        }
        case LOCKS_HOST_KEEPS:
                check_pending(&d, &l);
                usleep(1300000); /* past the timeout: lost */
                ck_assert_int_eq(fe_fuse_read(d.c, l.data, l.fh_posix, 0, buf, 4), -EBADF);
                check_locks_held(&d, src, &l, false);
                ck_assert_int_eq(host_probe(src, "data.bin", 0, 10), F_UNLCK);
                ck_assert_int_eq(fe_fuse_release(d.c, l.data, l.fh_posix, false), 0);
                ck_assert_int_eq(fe_fuse_read(d.c, l.data, l.fh_ofd, 0, buf, 4), 4);
                close(host_fd);
                host_fd = -1;
                ck_assert_int_eq(fe_fuse_setlk(d.c, l.data, l.fh_ofd, OWNER_OFD, false, F_UNLCK, 0, LK_EOF), 0);
                ck_assert_int_eq(fe_fuse_setlk(d.c, l.ro, l.fh_flock, OWNER_FLOCK, true, F_UNLCK, 0, LK_EOF), 0);
                ck_assert_int_eq(host_probe(src, "data.bin", 0, 0), F_UNLCK);
                ck_assert(host_flock_free(src, "ro.txt"));
                break;
        case LOCKS_UNLOCK_PENDING:
                check_pending(&d, &l);
                /* The owner unlocks what it believes it holds: the pending range is dropped, the
                 * host's lock is all another owner sees. */
                ck_assert_int_eq(fe_fuse_setlk(d.c, l.data, l.fh_posix, OWNER_POSIX, false, F_UNLCK, 0, LK_EOF), 0);
                ck_assert_int_eq(fe_fuse_getlk(d.c, l.data, l.fh_ofd, OWNER_OTHER, F_WRLCK, 0, 99, &got), 0);
                ck_assert_uint_eq(got.type, F_WRLCK);
                ck_assert_uint_eq(got.start, 10);
                ck_assert_uint_eq(got.end, 14);
                close(host_fd);
                host_fd = -1;
                usleep(1300000); /* past the timeout: nothing was left to lose */
                ck_assert_int_eq(fe_fuse_read(d.c, l.data, l.fh_posix, 0, buf, 4), 4);
                ck_assert_int_eq(host_probe(src, "data.bin", 0, 100), F_UNLCK);
                ck_assert_int_eq(fe_fuse_setlk(d.c, l.data, l.fh_posix, OWNER_POSIX, false, F_WRLCK, 0, 9), 0);
                check_unlock(&d, src, &l);
                break;
        }
        if (host_fd >= 0)
                close(host_fd);
        ck_assert_uint_eq(d.c->proto_errors, 0);
        ck_assert(fe_backend_alive(dst->backend));
        vm_done(&d);
        vm_done(&s);
}

START_TEST(test_locks_carried) {
        migrate_locks("--migration-on-error=abort", LOCKS_SOURCE_GONE);
}
END_TEST

START_TEST(test_locks_source_still_holds) {
        migrate_locks("--migration-on-error=abort", LOCKS_SOURCE_HOLDS);
}
END_TEST

START_TEST(test_lock_pending_released) {
        migrate_locks("--migration-on-error=abort", LOCKS_HOST_RELEASES);
}
END_TEST

START_TEST(test_lock_pending_lost_abort) {
        migrate_locks("--migration-on-error=abort", LOCKS_HOST_KEEPS);
}
END_TEST

START_TEST(test_lock_pending_lost_guest_error) {
        migrate_locks("--migration-on-error=guest-error", LOCKS_HOST_KEEPS);
}
END_TEST

START_TEST(test_lock_pending_unlocked) {
        migrate_locks("--migration-on-error=abort", LOCKS_UNLOCK_PENDING);
}
END_TEST

/* A guest that has not mounted the share (no FUSE_INIT) migrates too; it mounts on the
 * destination. */
START_TEST(test_unmounted_guest) {
        _cleanup_(fe_harness_freep) FeHarness *src = NULL, *dst = NULL;
        _cleanup_free_ uint8_t *state = NULL;
        FeOptions o;
        Vm s = {}, d = {};
        size_t len;

        two_daemons(&src, &dst, NULL, NULL);
        opts_for_migration(&o);
        ck_assert_int_eq(fe_connect(&s.fe, src->socket_path, &o), 0);
        ck_assert_int_eq(fe_negotiate(s.fe), 0);
        ck_assert_int_eq(fe_start(s.fe, true), 0);
        stop_and_save(&s, &state, &len);
        ck_assert_uint_eq(vm_incoming(dst, &d, state, len), 0);
        ck_assert_int_eq(fe_fuse_init(d.c), 0);
        ck_assert_int_eq(fe_fuse_roundtrip(d.c, "mounted-after-migration", 4096, 6), 0);
        vm_done(&d);
        vm_done(&s);
}
END_TEST

/* Malformed streams are refused by CHECK_DEVICE_STATE; vufsd stays and serves a new session. */
START_TEST(test_hostile_streams) {
        _cleanup_(fe_harness_freep) FeHarness *src = NULL, *dst = NULL;
        _cleanup_free_ uint8_t *state = NULL, *bad = NULL;
        struct fuse_entry_out e;
        Vm s = {}, d = {};
        size_t len;

        two_daemons(&src, &dst, NULL, (const char *const[]) { "--keep-listening", NULL });
        vm_boot(src, &s);
        ck_assert_int_eq(fe_fuse_lookup(s.c, FUSE_ROOT_ID, "d", &e), 0);
        stop_and_save(&s, &state, &len);
        bad = malloc(len + 4096);
        for (int k = 0; k < 5; k++) {
                size_t blen = len;
                memcpy(bad, state, len);
                switch (k) {
                case 0: blen = len / 2; break;                  /* truncated */
                case 1: bad[len - 5] ^= 1; break;               /* damaged */
                case 2: memset(bad + 16, 0xff, 8); break;       /* a length over any cap */
                case 3: bad[8] = 2; break;                      /* a newer version */
                case 4: memset(bad + len, 'x', 4096); blen = len + 4096; break; /* trailing bytes */
                }
                ck_assert_uint_ne(vm_incoming(dst, &d, bad, blen), 0);
                ck_assert(fe_backend_alive(dst->backend));
                vm_done(&d);
        }
        /* The real one still loads on the same daemon. */
        ck_assert_uint_eq(vm_incoming(dst, &d, state, len), 0);
        ck_assert_int_eq(fe_fuse_getattr(d.c, e.nodeid, &(struct fuse_attr_out) {}), 0);
        vm_done(&d);
        vm_done(&s);
}
END_TEST

/* SET_DEVICE_STATE_FD while the rings run is refused (the state would change under the save); the
 * guest goes on. CHECK_DEVICE_STATE before any transfer fails. A frontend that leaves in the
 * middle of a load (its pipe never closed) does not hold vufsd up. */
START_TEST(test_refused_and_abandoned) {
        _cleanup_(fe_harness_freep) FeHarness *h = NULL;
        struct fuse_entry_out e;
        struct {
                uint32_t direction, phase;
        } t = { FE_VU_TRANSFER_SAVE, 0 };
        uint64_t reply = 0;
        Vm v = {};
        int p[2], status;

        ck_assert_int_eq(fe_harness_new(&h), 0);
        make_tree(h);
        spawn_on(h, NULL, (const char *const[]) { "--keep-listening", NULL });
        vm_boot(h, &v);
        ck_assert_int_eq(fe_check_state(v.fe, &reply), 0);
        ck_assert_uint_ne(reply, 0);
        /* Malformed requests: an unknown direction, a phase other than stopped, no fd. */
        ck_assert_int_eq(fe_stop(v.fe), 0);
        for (int k = 0; k < 3; k++) {
                struct {
                        uint32_t direction, phase;
                } bad = { k == 0 ? 7 : FE_VU_TRANSFER_SAVE, k == 1 ? 1 : 0 };
                ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
                ck_assert_int_eq(fe_vu_request(v.fe, FE_VU_SET_DEVICE_STATE_FD, false, &bad, sizeof bad, &p[1], k == 2 ? 0 : 1,
                                               &reply, sizeof reply),
                                 0);
                ck_assert_msg((reply & 0xff) != 0, "malformed request %d accepted", k);
                close(p[0]);
                close(p[1]);
        }
        ck_assert_int_eq(fe_start(v.fe, false), 0);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        ck_assert_int_eq(fe_vu_request(v.fe, FE_VU_SET_DEVICE_STATE_FD, false, &t, sizeof t, &p[1], 1, &reply, sizeof reply),
                         0);
        ck_assert_uint_ne(reply & 0xff, 0);
        close(p[1]);
        ck_assert_int_eq(fe_fuse_lookup(v.c, FUSE_ROOT_ID, "ro.txt", &e), 0); /* serving on */
        close(p[0]);
        /* A load whose writer never finishes, then the frontend goes. */
        ck_assert_int_eq(fe_stop(v.fe), 0);
        ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
        t.direction = FE_VU_TRANSFER_LOAD;
        ck_assert_int_eq(fe_vu_request(v.fe, FE_VU_SET_DEVICE_STATE_FD, false, &t, sizeof t, &p[0], 1, &reply, sizeof reply),
                         0);
        ck_assert_uint_eq(reply & 0xff, 0);
        ck_assert_int_eq(write(p[1], "VUFSSTAT", 8), 8);
        vm_done(&v);
        /* It takes the next frontend, which works. */
        vm_boot(h, &v);
        ck_assert_int_eq(fe_fuse_roundtrip(v.c, "after-abandoned-load", 4096, 5), 0);
        vm_done(&v);
        close(p[1]);
        ck_assert(fe_backend_alive(h->backend));
        status = fe_backend_stop(h->backend, 5000);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "vufsd ended with status 0x%x", status);
}
END_TEST

/* While a migration copies guest memory (VHOST_F_LOG_ALL, SET_LOG_BASE, the used ring's log
 * address), every page a reply lands in and the used ring are marked in the log. */
START_TEST(test_dirty_log) {
        _cleanup_(fe_harness_freep) FeHarness *h = NULL;
        struct fuse_entry_out e;
        struct vhost_vring_addr a;
        uint64_t fh, reply, used_gpa, log_size;
        uint8_t *log, *data;
        FeFuseReq *req;
        Vm v = {};
        FeOptions o;
        int memfd;
        struct {
                uint64_t size, offset;
        } lb;

        ck_assert_int_eq(fe_harness_new(&h), 0);
        make_tree(h);
        spawn_on(h, NULL, NULL);
        opts_for_migration(&o); /* VHOST_F_LOG_ALL (bit 26) is acked only while migrating, as QEMU does */
        ck_assert_int_eq(fe_connect(&v.fe, h->socket_path, &o), 0);
        ck_assert_int_eq(fe_negotiate(v.fe), 0);
        ck_assert_msg(fe_has_protocol(v.fe, FE_VU_PROTOCOL_F_LOG_SHMFD), "LOG_SHMFD not offered");
        ck_assert_msg(v.fe->backend_features & (1ull << 26), "VHOST_F_LOG_ALL not offered");
        ck_assert_int_eq(fe_start(v.fe, true), 0);
        ck_assert_int_eq(fe_fuse_new(&v.c, v.fe), 0);
        ck_assert_int_eq(fe_fuse_init(v.c), 0);
        ck_assert_int_eq(fe_fuse_lookup(v.c, FUSE_ROOT_ID, "data.bin", &e), 0);
        ck_assert_int_eq(fe_fuse_open(v.c, e.nodeid, O_RDONLY, &fh), 0);

        /* The log, as QEMU sets it up when a migration starts, the rings running. */
        log_size = (v.fe->opts.mem_size + 0x100000000ull) / 4096 / 8;
        memfd = memfd_create("dirty-log", MFD_CLOEXEC);
        ck_assert_int_ge(memfd, 0);
        ck_assert_int_eq(ftruncate(memfd, (off_t) log_size), 0);
        log = mmap(NULL, log_size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
        ck_assert_ptr_ne(log, MAP_FAILED);
        /* Refused, the connection staying: no fd, a log larger than its file, a size of 0. */
        lb.size = log_size;
        lb.offset = 0;
        ck_assert_int_eq(fe_vu_request(v.fe, FE_VU_SET_LOG_BASE, false, &lb, sizeof lb, NULL, 0, &reply, sizeof reply), 0);
        ck_assert_uint_ne(reply, 0);
        lb.offset = 4096;
        ck_assert_int_eq(fe_vu_request(v.fe, FE_VU_SET_LOG_BASE, false, &lb, sizeof lb, &memfd, 1, &reply, sizeof reply), 0);
        ck_assert_uint_ne(reply, 0);
        lb.offset = 0;
        lb.size = 0;
        ck_assert_int_eq(fe_vu_request(v.fe, FE_VU_SET_LOG_BASE, false, &lb, sizeof lb, &memfd, 1, &reply, sizeof reply), 0);
        ck_assert_uint_ne(reply, 0);
        lb.size = log_size;
        ck_assert_int_eq(fe_vu_request(v.fe, FE_VU_SET_LOG_BASE, false, &lb, sizeof lb, &memfd, 1, &reply, sizeof reply), 0);
        ck_assert_uint_eq(reply, 0);
        close(memfd);
        ck_assert_int_eq(fe_vu_set_u64(v.fe, FE_VU_SET_FEATURES, v.fe->features | (1ull << 26), true), 0);
        fe_vring_addr(v.fe->vq[1], &a);
        a.flags = 1u << 0; /* VHOST_VRING_F_LOG */
        used_gpa = a.log_guest_addr;
        ck_assert_int_eq(fe_vu_vring_addr(v.fe, &a, true), 0);

        /* A READ whose reply pages must be marked, and nothing else yet. */
        ck_assert_int_eq(fe_fuse_req_new(&req, v.c, FUSE_READ, e.nodeid, 16384), 0);
        {
                struct fuse_read_in in = { .fh = fh, .offset = 0, .size = 16384 };
                ck_assert_int_eq(fe_fuse_req_add(req, &in, sizeof in), 0);
        }
        memset(log, 0, log_size);
        ck_assert_int_eq(fe_fuse_call(v.c, req), 0);
        ck_assert_uint_eq(req->payload_len, 16384);
        data = calloc(1, 16384);
        fe_fuse_pattern(data, 16384, 0, 1);
        ck_assert_mem_eq(req->payload, data, 16384);
        for (unsigned i = 0; i < req->n_pieces; i++) {
                const FeFusePiece *pc = &req->pieces[i];
                if (!pc->write)
                        continue;
                for (uint64_t g = pc->gpa; g < pc->gpa + pc->len; g += 4096)
                        ck_assert_msg(log[g / 4096 / 8] & (1u << (g / 4096 % 8)), "page of gpa 0x%" PRIx64 " not marked", g);
        }
        ck_assert_msg(log[used_gpa / 4096 / 8] & (1u << (used_gpa / 4096 % 8)), "used ring page not marked");
        fe_fuse_req_free(v.c, req);
        /* Logging off again (the migration ended): nothing is marked any more. */
        ck_assert_int_eq(fe_vu_set_u64(v.fe, FE_VU_SET_FEATURES, v.fe->features & ~(1ull << 26), true), 0);
        memset(log, 0, log_size);
        ck_assert_int_eq(fe_fuse_read(v.c, e.nodeid, fh, 0, data, 4096), 4096);
        for (uint64_t k = 0; k < log_size; k++)
                ck_assert_msg(log[k] == 0, "byte %" PRIu64 " of the log marked with logging off", k);
        free(data);
        munmap(log, log_size);
        vm_done(&v);
}
END_TEST

static Suite *migration_suite(void) {
        Suite *s = suite_create("frontend-migration");
        TCase *tc = tcase_create("migration");

        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_migrate_find_paths);
        tcase_add_test(tc, test_migrate_confirm_and_verify);
        tcase_add_root_test(tc, test_migrate_file_handles);
        tcase_add_root_test(tc, test_file_handles_need_handles_on_destination);
        tcase_add_test(tc, test_destination_node_budget);
        tcase_add_loop_test(tc, test_damaged_by_path, 0, (int) ELEMENTSOF(by_path));
        if (test_have_root())
                tcase_add_loop_test(tc, test_damaged_by_handle, 0, (int) ELEMENTSOF(by_handle));
        else
                fprintf(stderr, "SKIP test_damaged_by_handle: needs root\n");
        tcase_add_test(tc, test_locks_carried);
        tcase_add_test(tc, test_locks_source_still_holds);
        tcase_add_test(tc, test_lock_pending_released);
        tcase_add_test(tc, test_lock_pending_lost_abort);
        tcase_add_test(tc, test_lock_pending_lost_guest_error);
        tcase_add_test(tc, test_lock_pending_unlocked);
        tcase_add_test(tc, test_unmounted_guest);
        tcase_add_test(tc, test_hostile_streams);
        tcase_add_test(tc, test_refused_and_abandoned);
        tcase_add_test(tc, test_dirty_log);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        fe_harness_sanitizer_env();
        return test_main_run(migration_suite());
}
