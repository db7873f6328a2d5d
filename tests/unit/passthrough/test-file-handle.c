/* test-file-handle.c: file handles as inode identity (--inode-file-handles): a handle opens its
 * inode again and is checked against (dev, ino); a deleted file's handle answers ESTALE; the inode
 * map keeps nodes by handle without fds, merges sightings of one inode and tells a recycled inode
 * number from the inode it had; the mount fd table is bounded and counted; mountinfo tells a whole
 * filesystem from a subtree. Needs CAP_DAC_READ_SEARCH (root) for open_by_handle_at. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "file-handle.h"
#include "inode-map.h"
#include "passthrough.h"
#include "test-main.h"
#include "util.h"

/* This program is linked with --wrap=malloc,--wrap=calloc (tests/meson.build): the daemon code it
 * links counts its allocations here, so a test can say that a path allocates nothing. */
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
static _Atomic unsigned long allocs;

void *__wrap_malloc(size_t size) {
        atomic_fetch_add(&allocs, 1);
        return __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size) {
        atomic_fetch_add(&allocs, 1);
        return __real_calloc(n, size);
}

static char dir[] = "/tmp/test-file-handle-XXXXXX";
static int dirfd_ = -1;
static FdBudget budget;

static void setup(void) {
        ck_assert_ptr_nonnull(mkdtemp(dir));
        dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(dirfd_, 0);
        budget = (FdBudget){ .max = 1000 };
}

static void teardown(void) {
        char cmd[128];

        dirfd_ = safe_close(dirfd_);
        (void)umount2(dir, MNT_DETACH);
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        ck_assert_int_eq(system(cmd), 0);
        snprintf(dir, sizeof dir, "/tmp/test-file-handle-XXXXXX");
}

static void touch(const char *name) {
        int fd = openat(dirfd_, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        close(fd);
}

static int path_fd(const char *name, struct statx *stx) {
        int fd = openat(dirfd_, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_MNT_ID, stx), 0);
        return fd;
}

static uint64_t dev_of(const struct statx *stx) {
        return makedev(stx->stx_dev_major, stx->stx_dev_minor);
}

/* A handle opens the inode it was made of, from the fd or the name alike; the same inode (a hard
 * link) has the same handle; a wrong (dev, ino) is ESTALE, never the file. */
START_TEST(test_handle_identity) {
        FileHandleBuf ba, bb, bc;
        struct file_handle *a = &ba.fh, *b = &bb.fh, *c = &bc.fh;
        struct statx sa, sb, got;
        int fa, fb, mnt_a, mnt_b, mnt_c, err, fd;

        touch("a");
        ck_assert_int_eq(linkat(dirfd_, "a", dirfd_, "a-link", 0), 0);
        touch("b");
        fa = path_fd("a", &sa);
        fb = path_fd("b", &sb);
        err = file_handle_of_fd(fa, &ba, &mnt_a);
        ck_assert_msg(err == 0, "name_to_handle_at: %s", strerror(-err));
        ck_assert_int_eq(mnt_a, (int)sa.stx_mnt_id); /* the id the inode key carries */
        ck_assert_int_eq(file_handle_of_name(dirfd_, "a-link", &bb, &mnt_b), 0);
        ck_assert_int_eq(mnt_b, mnt_a);
        ck_assert_uint_eq(file_handle_size(a), file_handle_size(b));
        ck_assert_int_eq(memcmp(a, b, file_handle_size(a)), 0);
        ck_assert_int_eq(file_handle_of_fd(fb, &bc, &mnt_c), 0);
        ck_assert(a->handle_bytes != c->handle_bytes || memcmp(a->f_handle, c->f_handle, a->handle_bytes) != 0);

        fd = file_handle_open_checked(dirfd_, a, dev_of(&sa), sa.stx_ino, O_PATH, &got);
        ck_assert_int_ge(fd, 0);
        ck_assert_uint_eq(got.stx_ino, sa.stx_ino);
        close(fd);
        fd = file_handle_open_checked(dirfd_, a, dev_of(&sa), sa.stx_ino, O_RDONLY, NULL);
        ck_assert_int_ge(fd, 0); /* for I/O too */
        close(fd);
        /* The check: a handle that opens another inode than remembered is stale. */
        ck_assert_int_eq(file_handle_open_checked(dirfd_, c, dev_of(&sa), sa.stx_ino, O_PATH, NULL), -ESTALE);
        ck_assert_int_eq(file_handle_open_checked(dirfd_, a, dev_of(&sa) + 1, sa.stx_ino, O_PATH, NULL), -ESTALE);
        /* O_PATH mount fds are refused by the kernel: the table opens directories for reading. */
        ck_assert_int_eq(file_handle_open_checked(fa, a, dev_of(&sa), sa.stx_ino, O_PATH, NULL), -EBADF);
        close(fa);
        close(fb);
}
END_TEST

/* A deleted file's handle: ESTALE once the last user of the inode is gone (nothing pins it). */
START_TEST(test_deleted_is_stale) {
        FileHandleBuf hb;
        struct file_handle *h = &hb.fh;
        struct statx st;
        int fd, mnt;

        /* tmpfs frees an unlinked inode at once (ext4 and others may keep it cached a while, and
         * open_by_handle_at still finds it then: the generation differs once it is reused). */
        ck_assert_int_eq(mount("tmpfs", dir, "tmpfs", 0, NULL), 0);
        dirfd_ = safe_close(dirfd_);
        dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        touch("gone");
        fd = path_fd("gone", &st);
        ck_assert_int_eq(file_handle_of_fd(fd, &hb, &mnt), 0);
        close(fd);
        ck_assert_int_eq(unlinkat(dirfd_, "gone", 0), 0);
        ck_assert_int_eq(file_handle_open_checked(dirfd_, h, dev_of(&st), st.stx_ino, O_PATH, NULL), -ESTALE);
        touch("gone"); /* a new file of the same name is another inode */
        ck_assert_int_eq(file_handle_open_checked(dirfd_, h, dev_of(&st), st.stx_ino, O_PATH, NULL), -ESTALE);
}
END_TEST

/* The map with handle nodes: no fd held, one node per inode (by fd or by name), and a sighting
 * with another handle for the same key (a recycled number) is a new node. */
START_TEST(test_map_by_handle) {
        InodeMap *map;
        struct statx st, rst;
        FileHandleBuf hb, hb2, ob;
        struct file_handle *h = &hb.fh, *h2 = &hb2.fh, *other = &ob.fh;
        Inode *a, *b, *c;
        int fd, root, mnt;
        uint64_t used;

        ck_assert_int_eq(inode_map_new(&map, &budget), 0);
        root = path_fd(".", &rst);
        ck_assert(fd_budget_take(&budget));
        ck_assert_int_eq(inode_map_set_root(map, root, &rst), 0);
        touch("f");
        touch("g");
        used = budget.used;

        fd = path_fd("f", &st);
        ck_assert_int_eq(file_handle_of_fd(fd, &hb, &mnt), 0);
        close(fd);
        ck_assert_int_eq(file_handle_of_name(dirfd_, "f", &hb2, &mnt), 0);
        ck_assert_int_eq(inode_map_add_lookup_handle(map, h, dirfd_, &st, &a), 0);
        ck_assert_uint_eq(a->fdword, 0); /* no fd */
        /* The node keeps a copy of the handle: the caller's buffer may go. */
        ck_assert_ptr_nonnull(a->handle);
        ck_assert_ptr_ne(a->handle, h);
        ck_assert_int_eq(memcmp(a->handle, h, file_handle_size(h)), 0);
        memset(&hb, 0, sizeof hb);
        ck_assert_uint_eq(budget.used, used); /* no fd */
        /* The fast path finds it with the handle the name has now... */
        b = inode_map_find_lookup(map, &st, h2);
        ck_assert_ptr_eq(a, b);
        inode_unref(b);
        /* ... and a second sighting by handle merges. */
        ck_assert_int_eq(inode_map_add_lookup_handle(map, h2, dirfd_, &st, &b), 0);
        ck_assert_ptr_eq(a, b);
        ck_assert_uint_eq(a->nlookup, 3);
        inode_unref(b);

        /* Another handle under f's key: what a recycled inode number looks like. Not f's node; f
         * loses its key (stays reachable by nodeid) and the newcomer gets a node of its own. */
        ck_assert_int_eq(file_handle_of_name(dirfd_, "g", &ob, &mnt), 0);
        ck_assert_ptr_null(inode_map_find_lookup(map, &st, other));
        ck_assert_ptr_null(inode_map_find_lookup(map, &st, NULL)); /* gone from the key table */
        ck_assert_int_eq(inode_map_add_lookup_handle(map, other, dirfd_, &st, &c), 0);
        ck_assert_ptr_ne(c, a);
        ck_assert_uint_ne(c->nodeid, a->nodeid);
        b = inode_map_get(map, a->nodeid);
        ck_assert_ptr_eq(b, a);
        inode_unref(b);
        inode_unref(c);
        inode_unref(a);
        ck_assert_uint_eq(inode_map_size(map), 3);
        map = inode_map_free(map);
        ck_assert_uint_eq(budget.used, used - 1); /* the root's fd given back, no other */
}
END_TEST

/* One fd per mount, counted in the budget and bounded; a subtree mount is refused. */
START_TEST(test_mount_fds) {
        MountFds m;
        struct statx st;
        int fd, r1, r2, *ids;
        size_t n;

        fd = path_fd(".", &st);
        ck_assert_int_eq(mountinfo_whole_fs_mounts(&ids, &n), 0);
        /* dir is a subdirectory of /tmp's filesystem: no mount root, refused, without taking fds. */
        mount_fds_init(&m, &budget, MOUNT_CHECK_START_LIST, false, ids, n, false);
        ck_assert_int_eq(mount_fds_get(&m, (int)st.stx_mnt_id, fd), -EXDEV);
        ck_assert_int_eq(mount_fds_get(&m, (int)st.stx_mnt_id, fd), -EXDEV); /* remembered */
        ck_assert_uint_eq(budget.used, 0);
        mount_fds_done(&m);
        /* Allowed explicitly: one fd, shared by every inode of the mount. */
        mount_fds_init(&m, &budget, MOUNT_CHECK_START_LIST, false, NULL, 0, true);
        r1 = mount_fds_get(&m, (int)st.stx_mnt_id, fd);
        ck_assert_int_ge(r1, 0);
        r2 = mount_fds_get(&m, (int)st.stx_mnt_id, fd);
        ck_assert_int_eq(r1, r2);
        ck_assert_uint_eq(budget.used, 1);
        ck_assert_uint_eq(mount_fds_count(&m), 1);
        /* Bounded: MOUNT_FDS_MAX distinct ids at most, then E2BIG. */
        for (int k = 1; k < MOUNT_FDS_MAX; k++)
                ck_assert_int_ge(mount_fds_get(&m, 1000000 + k, fd), 0);
        ck_assert_int_eq(mount_fds_get(&m, 2000000, fd), -E2BIG);
        ck_assert_uint_eq(budget.used, MOUNT_FDS_MAX);
        mount_fds_done(&m);
        ck_assert_uint_eq(budget.used, 0);
        /* A spent budget answers ENFILE. */
        budget.max = 0;
        mount_fds_init(&m, &budget, MOUNT_CHECK_START_LIST, false, NULL, 0, true);
        ck_assert_int_eq(mount_fds_get(&m, (int)st.stx_mnt_id, fd), -ENFILE);
        mount_fds_done(&m);
        close(fd);
}
END_TEST

/* The whole-filesystem test on mountinfo: a tmpfs mounted on dir shows "/", a bind mount of a
 * subdirectory of it does not; the mount fd table refuses the latter and takes the former. */
static bool listed(int id) {
        int *ids;
        size_t n;
        bool found = false;

        ck_assert_int_eq(mountinfo_whole_fs_mounts(&ids, &n), 0);
        for (size_t k = 0; k < n; k++)
                found |= ids[k] == id;
        free(ids);
        return found;
}

/* The id mount_fds_get() is keyed by in each mode: unique with statmount, the reusable one with
 * the start list. */
static uint64_t key_of(int fd, MountCheck check) {
        uint64_t id;

        ck_assert_int_eq(mount_id_of_fd(fd, check == MOUNT_CHECK_STATMOUNT, &id), 0);
        return id;
}

/* A whole tmpfs and a bind mount of a subdirectory of it, both mounts made in this test: the
 * table takes the former and refuses the latter, in both modes (the statmount one is the kernel's
 * with STATX_MNT_ID_UNIQUE; the start list is what older kernels get, forced here). */
START_TEST(test_mountinfo_root) {
        char sub[300], bind[300];
        struct statx st, bst;
        MountFds m;
        int fd, bfd, *ids;
        size_t n;

        ck_assert_int_eq(mount("tmpfs", dir, "tmpfs", 0, NULL), 0);
        snprintf(sub, sizeof sub, "%s/sub", dir);
        snprintf(bind, sizeof bind, "%s/bind", dir);
        ck_assert_int_eq(mkdir(sub, 0755), 0);
        ck_assert_int_eq(mkdir(bind, 0755), 0);
        ck_assert_int_eq(mount(sub, bind, NULL, MS_BIND, NULL), 0);
        fd = open(dir, O_PATH | O_CLOEXEC);
        ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &st), 0);
        ck_assert(listed((int)st.stx_mnt_id));
        bfd = open(bind, O_PATH | O_CLOEXEC);
        ck_assert_int_eq(statx(bfd, "", AT_EMPTY_PATH, STATX_MNT_ID, &bst), 0);
        ck_assert_uint_ne(bst.stx_mnt_id, st.stx_mnt_id);
        ck_assert(!listed((int)bst.stx_mnt_id));
        ck_assert_int_eq(mountinfo_whole_fs_mounts(&ids, &n), 0);
        mount_fds_init(&m, &budget, MOUNT_CHECK_START_LIST, false, ids, n, false);
        ck_assert_int_ge(mount_fds_get(&m, key_of(fd, MOUNT_CHECK_START_LIST), fd), 0);
        ck_assert_int_eq(mount_fds_get(&m, key_of(bfd, MOUNT_CHECK_START_LIST), bfd), -EXDEV);
        mount_fds_done(&m);
        ck_assert_uint_eq(budget.used, 0);
        mount_fds_init(&m, &budget, MOUNT_CHECK_STATMOUNT, true, NULL, 0, false);
        ck_assert_int_ge(mount_fds_get(&m, key_of(fd, MOUNT_CHECK_STATMOUNT), fd), 0);
        ck_assert_int_eq(mount_fds_get(&m, key_of(bfd, MOUNT_CHECK_STATMOUNT), bfd), -EXDEV);
        ck_assert_uint_eq(budget.used, 1);
        mount_fds_done(&m);
        /* The start list with unique keys: a kernel that has them, in a process that may not call
         * statmount (a systemd 252 unit's filter kills it). The list's ids are mountinfo's. */
        ck_assert_int_eq(mountinfo_whole_fs_mounts(&ids, &n), 0);
        mount_fds_init(&m, &budget, MOUNT_CHECK_START_LIST, true, ids, n, false);
        ck_assert_int_ge(mount_fds_get(&m, key_of(fd, MOUNT_CHECK_STATMOUNT), fd), 0);
        ck_assert_int_eq(mount_fds_get(&m, key_of(bfd, MOUNT_CHECK_STATMOUNT), bfd), -EXDEV);
        ck_assert_uint_eq(budget.used, 1);
        mount_fds_done(&m);
        close(fd);
        close(bfd);
        ck_assert_int_eq(umount2(bind, MNT_DETACH), 0);
}
END_TEST

/* Issue 31 finding 4: an id in the start list says nothing about a mount seen later, which may
 * have been given that id again. Start list: once sealed, a mount not in the table is refused even
 * with a listed id (here the id of a bind mount of a subtree, listed as if it had been a whole
 * filesystem's at start), and even when it is a whole filesystem. Statmount: judged when seen, so
 * a whole tmpfs mounted after the table was made gets its fd, a subtree never does, and a wrong
 * key (not fd's mount: a reused-id mix-up) is refused without an entry. */
START_TEST(test_mount_seen_later) {
        char sub[300], bind[300], later[300];
        MountFds m;
        int fd, bfd, lfd, *ids;

        ck_assert_int_eq(mount("tmpfs", dir, "tmpfs", 0, NULL), 0);
        snprintf(sub, sizeof sub, "%s/sub", dir);
        snprintf(bind, sizeof bind, "%s/bind", dir);
        snprintf(later, sizeof later, "%s/later", dir);
        ck_assert_int_eq(mkdir(sub, 0755), 0);
        ck_assert_int_eq(mkdir(bind, 0755), 0);
        ck_assert_int_eq(mkdir(later, 0755), 0);
        fd = open(dir, O_PATH | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);

        /* The list as the start read it, then sealed; the mounts below are made after. */
        ids = calloc(2, sizeof *ids);
        ids[0] = (int)key_of(fd, MOUNT_CHECK_START_LIST);
        mount_fds_init(&m, &budget, MOUNT_CHECK_START_LIST, false, ids, 2, false);
        ck_assert_int_ge(mount_fds_get(&m, key_of(fd, MOUNT_CHECK_START_LIST), fd), 0);
        ck_assert_int_eq(mount(sub, bind, NULL, MS_BIND, NULL), 0);
        ck_assert_int_eq(mount("tmpfs", later, "tmpfs", 0, NULL), 0);
        bfd = open(bind, O_PATH | O_CLOEXEC);
        lfd = open(later, O_PATH | O_CLOEXEC);
        ck_assert_int_ge(bfd, 0);
        ck_assert_int_ge(lfd, 0);
        m.whole_ids[1] = (int)key_of(bfd, MOUNT_CHECK_START_LIST); /* a reused id, listed */
        mount_fds_seal(&m);
        ck_assert_int_eq(mount_fds_get(&m, key_of(bfd, MOUNT_CHECK_START_LIST), bfd), -EXDEV);
        ck_assert_int_eq(mount_fds_get(&m, key_of(lfd, MOUNT_CHECK_START_LIST), lfd), -EXDEV);
        ck_assert_uint_eq(budget.used, 1);
        mount_fds_done(&m);

        mount_fds_init(&m, &budget, MOUNT_CHECK_STATMOUNT, true, NULL, 0, false);
        ck_assert_int_eq(mount_fds_get(&m, key_of(fd, MOUNT_CHECK_STATMOUNT), bfd), -ESTALE);
        ck_assert_int_eq(mount_fds_get(&m, key_of(bfd, MOUNT_CHECK_STATMOUNT), bfd), -EXDEV);
        ck_assert_int_ge(mount_fds_get(&m, key_of(lfd, MOUNT_CHECK_STATMOUNT), lfd), 0);
        ck_assert_int_ge(mount_fds_get(&m, key_of(fd, MOUNT_CHECK_STATMOUNT), fd), 0);
        ck_assert_uint_eq(budget.used, 2);
        ck_assert_uint_eq(mount_fds_count(&m), 3);
        mount_fds_done(&m);
        close(fd);
        close(bfd);
        close(lfd);
        ck_assert_int_eq(umount2(later, MNT_DETACH), 0);
        ck_assert_int_eq(umount2(bind, MNT_DETACH), 0);
}
END_TEST

/* LOOKUP of inodes the map already holds, by handle: the handle is made on the stack and nothing
 * is allocated, neither for a child found by name nor for ".." (found by its fd's handle through
 * the mount fd table). */
START_TEST(test_lookup_known_allocates_nothing) {
        FsOptions o = FS_OPTIONS_DEFAULT;
        static const FsCtx ctx = { .uid = 0, .gid = 0 };
        _cleanup_(passthrough_freep) Passthrough *pt = NULL;
        FsEntry f, d, e;
        unsigned long before, made;
        uint64_t idf[10], idd[10];
        int rf[10], rd[10];

        ck_assert_int_eq(mount("tmpfs", dir, "tmpfs", 0, NULL), 0);
        dirfd_ = safe_close(dirfd_);
        dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        touch("f");
        ck_assert_int_eq(mkdirat(dirfd_, "d", 0755), 0);
        ck_assert_int_eq(mkdirat(dirfd_, "d/e", 0755), 0);
        o.shared_dir = dir;
        o.inode_file_handles = INODE_FILE_HANDLES_MANDATORY;
        ck_assert_int_eq(passthrough_new(&pt, &o), 0);
        ck_assert(passthrough_uses_handles(pt));
        ck_assert_int_eq(passthrough_ops.lookup(pt, &ctx, 1, "f", &f), 0);
        ck_assert_int_eq(passthrough_ops.lookup(pt, &ctx, 1, "d", &d), 0);
        ck_assert_int_eq(passthrough_ops.lookup(pt, &ctx, d.nodeid, "e", &e), 0);
        ck_assert_uint_eq(passthrough_inode_count(pt), 4);

        /* No ck_assert in the counted loop: a passing one allocates in Check's fork mode. */
        before = atomic_load(&allocs);
        for (int k = 0; k < 10; k++) {
                FsEntry again;
                rf[k] = passthrough_ops.lookup(pt, &ctx, 1, "f", &again);
                idf[k] = again.nodeid;
                rd[k] = passthrough_ops.lookup(pt, &ctx, e.nodeid, "..", &again);
                idd[k] = again.nodeid;
        }
        made = atomic_load(&allocs) - before;
        for (int k = 0; k < 10; k++) {
                ck_assert_int_eq(rf[k], 0);
                ck_assert_uint_eq(idf[k], f.nodeid);
                ck_assert_int_eq(rd[k], 0);
                ck_assert_uint_eq(idd[k], d.nodeid);
        }
        ck_assert_msg(made == 0, "20 lookups of known inodes made %lu allocations", made);
        ck_assert_uint_eq(passthrough_inode_count(pt), 4);
        ck_assert_uint_eq(passthrough_mount_fd_count(pt), 1);
        /* A new inode still gets a node of its own, with its handle. */
        touch("g");
        ck_assert_int_eq(passthrough_ops.lookup(pt, &ctx, 1, "g", &e), 0);
        ck_assert_uint_ne(e.nodeid, f.nodeid);
        ck_assert_uint_eq(passthrough_inode_count(pt), 5);
        pt = passthrough_free(pt);
}
END_TEST

/* A known mount is found without the table's lock: a reader does not wait for an inserter. */
typedef struct Get {
        MountFds *m;
        uint64_t mnt_id;
        int fd, r;
} Get;

static void *get_thread(void *arg) {
        Get *g = arg;
        g->r = mount_fds_get(g->m, g->mnt_id, g->fd);
        return NULL;
}

START_TEST(test_mount_fds_hit_takes_no_lock) {
        struct timespec deadline;
        MountFds m;
        struct statx st;
        pthread_t t;
        Get g;
        int fd, mfd, joined;

        fd = path_fd(".", &st);
        mount_fds_init(&m, &budget, MOUNT_CHECK_START_LIST, false, NULL, 0, true);
        mfd = mount_fds_get(&m, (int)st.stx_mnt_id, fd);
        ck_assert_int_ge(mfd, 0);
        g = (Get){ .m = &m, .mnt_id = st.stx_mnt_id, .fd = fd, .r = -1 };
        pthread_mutex_lock(&m.lock); /* an inserter busy with a new mount */
        ck_assert_int_eq(pthread_create(&t, NULL, get_thread, &g), 0);
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 5;
        joined = pthread_timedjoin_np(t, NULL, &deadline);
        pthread_mutex_unlock(&m.lock);
        if (joined != 0)
                pthread_join(t, NULL);
        ck_assert_msg(joined == 0, "mount_fds_get() of a known mount waited for the lock");
        ck_assert_int_eq(g.r, mfd);
        mount_fds_done(&m);
        close(fd);
}
END_TEST

/* Readers and inserters at once (run it under TSan too): every thread gets the same fd for one
 * mount id, each id gets one entry and one budget fd, whoever inserts it. */
#define RACE_THREADS 4
#define RACE_IDS 200
typedef struct Race {
        MountFds *m;
        int fd;
        int got[RACE_IDS];
} Race;

static void *race_thread(void *arg) {
        Race *r = arg;

        for (int round = 0; round < 20; round++)
                for (int k = 0; k < RACE_IDS; k++) {
                        int v = mount_fds_get(r->m, 5000 + k, r->fd);
                        if (round == 0)
                                r->got[k] = v;
                        else if (r->got[k] != v)
                                r->got[k] = -1000; /* changed under us */
                }
        return NULL;
}

START_TEST(test_mount_fds_concurrent) {
        Race race[RACE_THREADS];
        pthread_t t[RACE_THREADS];
        struct statx st;
        MountFds m;
        int fd;

        fd = path_fd(".", &st);
        mount_fds_init(&m, &budget, MOUNT_CHECK_START_LIST, false, NULL, 0, true);
        for (int k = 0; k < RACE_THREADS; k++) {
                race[k] = (Race){ .m = &m, .fd = fd };
                ck_assert_int_eq(pthread_create(&t[k], NULL, race_thread, &race[k]), 0);
        }
        for (int k = 0; k < RACE_THREADS; k++)
                ck_assert_int_eq(pthread_join(t[k], NULL), 0);
        ck_assert_uint_eq(mount_fds_count(&m), RACE_IDS);
        ck_assert_uint_eq(budget.used, RACE_IDS);
        for (int k = 0; k < RACE_IDS; k++) {
                ck_assert_int_ge(race[0].got[k], 0);
                for (int j = 1; j < RACE_THREADS; j++)
                        ck_assert_int_eq(race[j].got[k], race[0].got[k]);
        }
        mount_fds_done(&m);
        ck_assert_uint_eq(budget.used, 0);
        close(fd);
}
END_TEST

static void add_tests(Suite *s) {
        TCase *tc = tcase_create("file-handle");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_handle_identity);
        tcase_add_test(tc, test_deleted_is_stale);
        tcase_add_test(tc, test_map_by_handle);
        tcase_add_test(tc, test_mount_fds);
        tcase_add_test(tc, test_mountinfo_root);
        tcase_add_test(tc, test_mount_seen_later);
        tcase_add_test(tc, test_lookup_known_allocates_nothing);
        tcase_add_test(tc, test_mount_fds_hit_takes_no_lock);
        tcase_add_test(tc, test_mount_fds_concurrent);
        suite_add_tcase(s, tc);
}

TEST_MAIN("file-handle", add_tests)
