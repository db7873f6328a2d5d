/* test-inode-map.c: nodeids, lookup counts and hard-link sharing. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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

int main(void) {
        Suite *s = suite_create("inode-map");
        TCase *tc = tcase_create("core");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_root);
        tcase_add_test(tc, test_lookup_counts);
        tcase_add_test(tc, test_hard_links);
        tcase_add_test(tc, test_find_lookup);
        tcase_add_test(tc, test_saturation);
        tcase_add_test(tc, test_shards);
        tcase_add_test(tc, test_concurrent);
        tcase_set_timeout(tc, 60); /* the race test under TSan */
        suite_add_tcase(s, tc);
        return test_main_run(s);
}
