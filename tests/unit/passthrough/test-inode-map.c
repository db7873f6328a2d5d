/* test-inode-map.c: nodeids, lookup counts and hard-link sharing. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inode-fd-cache.h"
#include "inode-map.h"
#include "race.h"
#include "test-main.h"

static char dir[] = "/tmp/test-inode-map-XXXXXX";
static FdBudget budget;
static InodeMap *map;

static void setup(void) {
        struct statx stx;
        int fd;

        ck_assert_ptr_nonnull(mkdtemp(dir));
        budget = (FdBudget) { .max = 100 };
        ck_assert_int_eq(inode_map_new(&map, &budget), 0);
        fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_MNT_ID, &stx), 0);
        ck_assert_int_eq(inode_map_set_root(map, fd, &stx), 0);
}

static void teardown(void) {
        char cmd[128];
        map = inode_map_free(map);
        ck_assert_uint_eq(budget.used, 0); /* every fd given back */
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        ck_assert_int_eq(system(cmd), 0);
        snprintf(dir, sizeof dir, "/tmp/test-inode-map-XXXXXX");
}

/* Looks a path up the way the passthrough does: budget, O_PATH open, statx, add. */
static Inode *look(const char *name) {
        char path[256];
        struct statx stx;
        Inode *i;
        int fd;

        snprintf(path, sizeof path, "%s/%s", dir, name);
        ck_assert(fd_budget_take(&budget));
        fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_MNT_ID, &stx), 0);
        ck_assert_int_eq(inode_map_add_lookup(map, fd, &stx, &i), 0);
        return i;
}

static void touch(const char *name) {
        char path[256];
        int fd;
        snprintf(path, sizeof path, "%s/%s", dir, name);
        fd = open(path, O_CREAT | O_WRONLY, 0644);
        ck_assert_int_ge(fd, 0);
        close(fd);
}

START_TEST(test_root) {
        Inode *r = inode_map_get(map, 1);
        ck_assert_ptr_nonnull(r);
        ck_assert(r->pinned);
        ck_assert_uint_eq(r->type, S_IFDIR);
        inode_unref(r);
        inode_map_forget(map, 1, UINT64_MAX);
        ck_assert_ptr_nonnull(r = inode_map_get(map, 1));
        inode_unref(r);
        ck_assert_ptr_null(inode_map_get(map, 0));
        ck_assert_ptr_null(inode_map_get(map, 2));
        ck_assert_uint_eq(budget.used, 1);
}
END_TEST

START_TEST(test_lookup_counts) {
        Inode *a, *b;
        uint64_t id;

        touch("f");
        a = look("f");
        id = a->nodeid;
        ck_assert_uint_ge(id, 2);
        b = look("f");
        ck_assert_ptr_eq(a, b); /* same inode, one node */
        ck_assert_uint_eq(a->nlookup, 2);
        ck_assert_uint_eq(budget.used, 2); /* the duplicate fd was closed */
        inode_unref(b);
        inode_map_forget(map, id, 1);
        ck_assert_ptr_nonnull(b = inode_map_get(map, id));
        inode_unref(b);
        /* Forgotten while still in use: unreachable at once, freed after the last user. */
        inode_map_forget(map, id, 5);
        ck_assert_ptr_null(inode_map_get(map, id));
        ck_assert_uint_eq(budget.used, 2);
        inode_unref(a);
        ck_assert_uint_eq(budget.used, 1);
        /* Never reused. */
        a = look("f");
        ck_assert_uint_gt(a->nodeid, id);
        inode_unref(a);
        ck_assert_uint_eq(inode_map_size(map), 2);
        inode_map_clear(map);
        ck_assert_uint_eq(inode_map_size(map), 1);
        ck_assert_uint_eq(budget.used, 1);
}
END_TEST

/* Looks name up as a node remembered by a (made-up) file handle: such a node holds no fd. */
static int look_handle(const char *name, Inode **ret) {
        struct {
                struct file_handle h;
                unsigned char bytes[8];
        } fh = { .h = { .handle_bytes = 8, .handle_type = 1 } };
        char path[256];
        struct statx stx;

        snprintf(path, sizeof path, "%s/%s", dir, name);
        ck_assert_int_eq(statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_MNT_ID, &stx), 0);
        memcpy(fh.h.f_handle, &stx.stx_ino, sizeof stx.stx_ino);
        return inode_map_add_lookup_handle(map, &fh.h, -1, &stx, ret);
}

/* Issue 31 finding 5: nodes count against a budget whether they hold an fd or only a handle; past
 * it a new inode answers ENFILE (its fd given back) while known ones still count lookups, and a
 * FORGET makes room again. */
START_TEST(test_node_budget) {
        Inode *a, *b, *c, *d;
        char path[256];
        int fd;

        inode_map_set_max_nodes(map, 3); /* the root and two more */
        touch("a");
        touch("b");
        touch("c");
        a = look("a");
        ck_assert_int_eq(look_handle("b", &b), 0);
        ck_assert_uint_eq(inode_map_nodes(map), 3);
        ck_assert_int_eq(look_handle("c", &c), -ENFILE);
        snprintf(path, sizeof path, "%s/c", dir);
        ck_assert(fd_budget_take(&budget));
        fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        {
                struct statx stx;
                ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_MNT_ID, &stx), 0);
                ck_assert_int_eq(inode_map_add_lookup(map, fd, &stx, &c), -ENFILE);
        }
        ck_assert_uint_eq(budget.used, 2); /* the root's and a's: c's fd was given back */
        d = look("a"); /* a known inode costs nothing */
        ck_assert_ptr_eq(d, a);
        inode_unref(d);
        /* Forgotten while a request still uses it: still charged, then freed and given back. */
        inode_map_forget(map, b->nodeid, 1);
        ck_assert_int_eq(look_handle("c", &c), -ENFILE);
        inode_unref(b);
        ck_assert_uint_eq(inode_map_nodes(map), 2);
        ck_assert_int_eq(look_handle("c", &c), 0);
        inode_unref(c);
        inode_unref(a);
        inode_map_clear(map);
        ck_assert_uint_eq(inode_map_nodes(map), 1);
}
END_TEST

/* The lookup fast path: a statx of the name finds an inode the map holds (hard links too), counts
 * it, and takes no fd; an unknown inode, or a known number with another type, is not found. */
START_TEST(test_find_lookup) {
        char p1[256], p2[256];
        struct statx stx;
        Inode *a, *b;

        touch("x");
        snprintf(p1, sizeof p1, "%s/x", dir);
        snprintf(p2, sizeof p2, "%s/x-link", dir);
        ck_assert_int_eq(link(p1, p2), 0);
        ck_assert_int_eq(statx(AT_FDCWD, p2, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_MNT_ID, &stx), 0);
        ck_assert_ptr_null(inode_map_find_lookup(map, &stx, NULL)); /* not held yet */
        a = look("x");
        ck_assert_uint_eq(budget.used, 2);
        b = inode_map_find_lookup(map, &stx, NULL);
        ck_assert_ptr_eq(a, b);
        ck_assert_uint_eq(a->nlookup, 2);
        ck_assert_uint_eq(budget.used, 2); /* no fd taken */
        inode_unref(b);
        stx.stx_mode = (stx.stx_mode & ~S_IFMT) | S_IFDIR;
        ck_assert_ptr_null(inode_map_find_lookup(map, &stx, NULL));
        ck_assert_uint_eq(a->nlookup, 2);
        /* Forgotten: no longer found. */
        inode_map_forget(map, a->nodeid, 2);
        stx.stx_mode = (stx.stx_mode & ~S_IFMT) | S_IFREG;
        ck_assert_ptr_null(inode_map_find_lookup(map, &stx, NULL));
        inode_unref(a);
}
END_TEST

START_TEST(test_hard_links) {
        char p1[256], p2[256];
        Inode *a, *b, *c;

        touch("one");
        snprintf(p1, sizeof p1, "%s/one", dir);
        snprintf(p2, sizeof p2, "%s/two", dir);
        ck_assert_int_eq(link(p1, p2), 0);
        a = look("one");
        b = look("two");
        ck_assert_uint_eq(a->nodeid, b->nodeid);
        ck_assert_uint_eq(a->nlookup, 2);
        touch("three");
        c = look("three");
        ck_assert_uint_ne(c->nodeid, a->nodeid);
        inode_map_lookup_again(c);
        ck_assert_uint_eq(c->nlookup, 2);
        inode_unref(a);
        inode_unref(b);
        inode_unref(c);
}
END_TEST

START_TEST(test_saturation) {
        Inode *a;

        touch("s");
        a = look("s");
        a->nlookup = UINT64_MAX - 1; /* as if looked up that often */
        inode_map_lookup_again(a);
        inode_map_lookup_again(a);
        ck_assert_uint_eq(a->nlookup, UINT64_MAX);
        inode_map_forget(map, a->nodeid, UINT64_MAX);
        ck_assert_ptr_null(inode_map_get(map, a->nodeid));
        inode_unref(a);
}
END_TEST

/* The nodeid names the shard of the inode's key: nodeids spread over the shards, and a number that
 * was never issued is unknown whichever shard it points at. */
START_TEST(test_shards) {
        bool used[INODE_MAP_SHARDS] = { false };
        unsigned n_used = 0;
        Inode *in[200];
        char name[32];

        budget.max = 1000;
        for (unsigned k = 0; k < 200; k++) {
                snprintf(name, sizeof name, "s%u", k);
                touch(name);
                in[k] = look(name);
                ck_assert_uint_ge(in[k]->nodeid, INODE_MAP_SHARDS); /* never 0 or the root's 1 */
                ck_assert_uint_eq(in[k]->nodeid & (INODE_MAP_SHARDS - 1), in[k]->shard);
                if (!used[in[k]->shard]) {
                        used[in[k]->shard] = true;
                        n_used++;
                }
        }
        /* 200 consecutive inode numbers over 64 shards leave only a few empty; a hash that put
         * them all in a handful of shards would serialise the queues again. */
        ck_assert_uint_ge(n_used, INODE_MAP_SHARDS / 2);
        for (unsigned k = 0; k < 200; k++) {
                uint64_t id = in[k]->nodeid;
                Inode *g = inode_map_get(map, id);
                ck_assert_ptr_eq(g, in[k]);
                inode_unref(g);
                /* the same sequence number in another shard, and a later one in the same shard */
                uint64_t other = (id & ~(uint64_t) (INODE_MAP_SHARDS - 1)) | ((id + 1) & (INODE_MAP_SHARDS - 1));
                Inode *o = inode_map_get(map, other);
                ck_assert(o == NULL || o->nodeid == other);
                if (o)
                        inode_unref(o);
                ck_assert_ptr_null(inode_map_get(map, id + ((uint64_t) 1000 << INODE_MAP_SHARD_BITS)));
        }
        ck_assert_uint_eq(inode_map_size(map), 201);
        for (unsigned k = 0; k < 200; k++) {
                inode_map_forget(map, in[k]->nodeid, 1);
                inode_unref(in[k]);
        }
        ck_assert_uint_eq(inode_map_size(map), 1);
        ck_assert_uint_eq(budget.used, 1);
}
END_TEST

/* Request queues race on the same inodes: lookups (by key, with and without an fd), gets by
 * nodeid, unrefs and forgets from several threads. Each thread forgets exactly what it looked
 * up; at the end the map must be back to the root alone with every fd returned. A reference
 * counted wrongly shows as a leak here, or as a use after free under ASan/TSan (both run this). */
#define RACE_HOT 4    /* files all threads keep finding each other's nodes on */
#define RACE_FILES 132 /* the rest: ~2 per shard, so nodes come and go next to ones in use */
#define RACE_ROUNDS 3000

static void *race_main(void *arg) {
        RaceThread *t = arg;

        for (unsigned r = 0; r < RACE_ROUNDS; r++) {
                char name[32], path[256];
                struct statx stx;
                Inode *i;
                unsigned k = rand_r(&t->seed) % 2 ? rand_r(&t->seed) % RACE_HOT : rand_r(&t->seed) % RACE_FILES;

                snprintf(name, sizeof name, "race%u", k);
                snprintf(path, sizeof path, "%s/%s", dir, name);
                ck_assert_int_eq(statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_MNT_ID, &stx),
                                 0);
                i = inode_map_find_lookup(map, &stx, NULL);
                if (i)
                        t->seen++; /* found a node another thread holds, without an fd */
                else
                        i = look(name);
                /* Gets by number while others forget it: our own count keeps it linked. */
                for (unsigned g = rand_r(&t->seed) % 3; g > 0; g--) {
                        Inode *again = inode_map_get(map, i->nodeid);
                        ck_assert_ptr_eq(again, i);
                        inode_unref(again);
                }
                if (rand_r(&t->seed) % 4 == 0) {
                        inode_map_lookup_again(i);
                        inode_map_forget(map, i->nodeid, 1);
                }
                uint64_t id = i->nodeid;
                inode_unref(i);
                inode_map_forget(map, id, 1); /* ours only: the node lives on if others hold it */
        }
        return NULL;
}

START_TEST(test_concurrent) {
        unsigned fast;

        budget.max = 1000;
        for (unsigned k = 0; k < RACE_FILES; k++) {
                char name[32];
                snprintf(name, sizeof name, "race%u", k);
                touch(name);
        }
        fast = race_run(race_main);
        ck_assert_uint_eq(inode_map_size(map), 1);
        ck_assert_uint_eq(budget.used, 1);
        /* Both paths ran: threads found nodes others held, and created nodes. */
        ck_assert_uint_gt(fast, 0);
        ck_assert_uint_lt(fast, RACE_THREADS * RACE_ROUNDS);
}
END_TEST

/* Looks name up in the root as LOOKUP does: the node remembers the root and the name, and its fd
 * enters the clock. */
static Inode *look_named(const char *name) {
        Inode *root = inode_map_get(map, 1), *i;
        char path[256];
        struct statx stx;
        int fd;

        snprintf(path, sizeof path, "%s/%s", dir, name);
        ck_assert(fd_budget_take(&budget));
        fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_MNT_IDS |
                                                                                  STATX_BTIME, &stx),
                         0);
        ck_assert_int_eq(inode_map_add_lookup_at(map, fd, &stx, root, name, &i), 0);
        inode_unref(root);
        return i;
}

static bool has_fd(Inode *i) {
        return atomic_load(&i->fdword) & FDW_FD_MASK;
}

/* --max-inode-fds: at most the clock's size of named nodes hold an fd; one in use is never taken;
 * a node without a name (found through "..") keeps its fd, and gets into the clock once named. */
START_TEST(test_inode_fd_clock) {
        Inode *root = inode_map_get(map, 1), *n[12], *nameless;
        char name[16];
        int fd;

        ck_assert_int_eq(inode_map_set_max_inode_fds(map, 3), 0);
        for (int k = 0; k < 12; k++) {
                snprintf(name, sizeof name, "c%d", k);
                touch(name);
        }
        for (int k = 0; k < 8; k++) {
                snprintf(name, sizeof name, "c%d", k);
                n[k] = look_named(name);
                ck_assert_str_eq(n[k]->name, name);
        }
        ck_assert_uint_eq(inode_map_inode_fds(map), 3);
        ck_assert_uint_eq(budget.used, 1 + 3); /* the root's and the clock's */
        ck_assert_uint_eq(inode_map_inode_fd_evictions(map), 5);
        ck_assert(has_fd(n[7]));

        /* An fd a request holds stays open however many nodes come. */
        fd = fdword_acquire(&n[7]->fdword);
        ck_assert_int_ge(fd, 0);
        for (int k = 8; k < 12; k++) {
                snprintf(name, sizeof name, "c%d", k);
                n[k] = look_named(name);
        }
        ck_assert(has_fd(n[7]));
        ck_assert_int_eq(fcntl(fd, F_GETFD), FD_CLOEXEC);
        fdword_release(&n[7]->fdword);
        ck_assert_uint_le(inode_map_inode_fds(map), 3);

        /* A node without a name keeps its fd outside the clock. */
        touch("nameless");
        nameless = look("nameless");
        ck_assert_ptr_null(nameless->name);
        ck_assert(nameless->keep_fd);
        ck_assert_uint_eq(budget.used, 1 + inode_map_inode_fds(map) + 1);
        for (int k = 0; k < 4; k++) { /* the clock turns: its fd is not in it */
                snprintf(name, sizeof name, "c%d", k);
                inode_unref(look_named(name));
        }
        ck_assert(has_fd(nameless));
        /* Named (a LOOKUP by its name): into the clock, which stays at 3. */
        inode_map_note_path(nameless, root, "nameless");
        ck_assert_str_eq(nameless->name, "nameless");
        ck_assert(!nameless->keep_fd);
        ck_assert_uint_le(inode_map_inode_fds(map), 3);
        ck_assert_uint_le(budget.used, 1 + 3);
        inode_map_forget(map, nameless->nodeid, 1);
        inode_unref(nameless);

        for (int k = 0; k < 12; k++) {
                uint64_t id = n[k]->nodeid;
                inode_unref(n[k]);
                inode_map_forget(map, id, UINT64_MAX);
        }
        inode_unref(root);
        ck_assert_uint_eq(inode_map_inode_fds(map), 0);
        ck_assert_uint_eq(budget.used, 1);
}
END_TEST

/* Birth time: a node that gave its fd back is not a recycled number with another birth time. */
START_TEST(test_inode_is_birth) {
        struct statx stx;
        Inode *i;
        char path[256];

        ck_assert_int_eq(inode_map_set_max_inode_fds(map, 1), 0);
        touch("b");
        i = look_named("b");
        snprintf(path, sizeof path, "%s/b", dir);
        ck_assert_int_eq(statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_MNT_IDS | STATX_BTIME,
                               &stx),
                         0);
        ck_assert(inode_is(i, &stx));
        if (stx.stx_mask & STATX_BTIME) {
                stx.stx_btime.tv_nsec ^= 1;
                ck_assert(!inode_is(i, &stx));
                ck_assert_ptr_null(inode_map_find(map, &stx));
                stx.stx_btime.tv_nsec ^= 1;
        } else
                fprintf(stderr, "no birth time on %s: only key and type are compared\n", dir);
        stx.stx_ino++;
        ck_assert(!inode_is(i, &stx));
        inode_map_forget(map, i->nodeid, 1);
        inode_unref(i);
}
END_TEST

/* Requests take and give back cached fds while other threads' new nodes make the clock take fds
 * back: an fd a request holds is never closed under it (it would name another file, or none). */
#define CLOCK_NODES 32
static Inode *clock_nodes[CLOCK_NODES];
static _Atomic bool clock_stop;

static void *clock_user(void *arg) {
        unsigned seed = (unsigned) (uintptr_t) arg, used = 0;

        while (!atomic_load(&clock_stop)) {
                Inode *i = clock_nodes[rand_r(&seed) % CLOCK_NODES];
                struct statx stx;
                int fd = fdword_acquire(&i->fdword);
                if (fd < 0)
                        continue;
                ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_INO, &stx), 0);
                ck_assert_uint_eq(stx.stx_ino, i->key.ino);
                fdword_release(&i->fdword);
                used++;
        }
        return (void *) (uintptr_t) used;
}

START_TEST(test_inode_fd_clock_race) {
        pthread_t t[3];
        char name[16], path[256];
        uintptr_t used = 0;

        budget.max = 1000;
        ck_assert_int_eq(inode_map_set_max_inode_fds(map, 4), 0);
        for (int k = 0; k < CLOCK_NODES; k++) {
                snprintf(name, sizeof name, "r%d", k);
                touch(name);
                clock_nodes[k] = look_named(name);
        }
        atomic_store(&clock_stop, false);
        for (int k = 0; k < 3; k++)
                ck_assert_int_eq(pthread_create(&t[k], NULL, clock_user, (void *) (uintptr_t) (k + 1)), 0);
        /* The re-open's part: an fd opened by name installed for a node that has none, making room. */
        for (int round = 0; round < 20000; round++) {
                Inode *i = clock_nodes[round % CLOCK_NODES];
                bool cached;
                int fd;

                if (has_fd(i))
                        continue;
                snprintf(path, sizeof path, "%s/%s", dir, i->name);
                ck_assert(fd_budget_take(&budget));
                fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                ck_assert_int_ge(fd, 0);
                fd = fd_cache_install(inode_map_fd_cache(map), i, fd, &cached);
                if (cached)
                        fdword_release(&i->fdword);
                else
                        fd_budget_close(&budget, fd);
        }
        atomic_store(&clock_stop, true);
        for (int k = 0; k < 3; k++) {
                void *u;
                pthread_join(t[k], &u);
                used += (uintptr_t) u;
        }
        ck_assert_uint_gt(used, 0);
        ck_assert_uint_le(inode_map_inode_fds(map), 4);
        ck_assert_uint_gt(inode_map_inode_fd_evictions(map), 100);
        for (int k = 0; k < CLOCK_NODES; k++) {
                uint64_t id = clock_nodes[k]->nodeid;
                inode_unref(clock_nodes[k]);
                inode_map_forget(map, id, 1);
        }
        ck_assert_uint_eq(budget.used, 1);
}
END_TEST

int main(void) {
        Suite *s = suite_create("inode-map");
        TCase *tc = tcase_create("core");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_root);
        tcase_add_test(tc, test_lookup_counts);
        tcase_add_test(tc, test_hard_links);
        tcase_add_test(tc, test_find_lookup);
        tcase_add_test(tc, test_saturation);
        tcase_add_test(tc, test_node_budget);
        tcase_add_test(tc, test_shards);
        tcase_add_test(tc, test_concurrent);
        tcase_add_test(tc, test_inode_fd_clock);
        tcase_add_test(tc, test_inode_is_birth);
        tcase_add_test(tc, test_inode_fd_clock_race);
        tcase_set_timeout(tc, 60); /* the race test under TSan */
        suite_add_tcase(s, tc);
        return test_main_run(s);
}
