/* test-handle-map.c: fh issue, ownership checks and release. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handle-map.h"
#include "inode-map.h"
#include "race.h"
#include "test-main.h"

static FdBudget budget = { .max = 100 };
static InodeMap *im;
static HandleMap *hm;

static Inode *add_inode(const char *path) {
        struct statx stx;
        Inode *i;
        int fd;

        ck_assert(fd_budget_take(&budget));
        fd = open(path, O_PATH | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx), 0);
        ck_assert_int_eq(inode_map_add_lookup(im, fd, &stx, &i), 0);
        return i;
}

static int open_fd(const char *path, int flags) {
        ck_assert(fd_budget_take(&budget));
        int fd = open(path, flags | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        return fd;
}

START_TEST(test_handles) {
        Inode *root, *file;
        Handle *h;
        uint64_t f1, f2, d1;

        ck_assert_int_eq(inode_map_new(&im, &budget), 0);
        ck_assert_int_eq(handle_map_new(&hm, &budget), 0);
        root = add_inode("/");
        file = add_inode("/proc/self/exe");

        ck_assert_int_eq(handle_map_add(hm, file, open_fd("/proc/self/exe", O_RDONLY), O_RDONLY, false, &f1), 0);
        ck_assert_int_eq(handle_map_add(hm, file, open_fd("/proc/self/exe", O_RDONLY), O_RDONLY, false, &f2), 0);
        ck_assert_int_eq(handle_map_add(hm, root, open_fd("/", O_RDONLY | O_DIRECTORY), O_RDONLY, true, &d1), 0);
        ck_assert_uint_ne(f1, f2);
        ck_assert_uint_ne(f2, d1);
        /* an fh lives in the shard of its inode's nodeid, and is never 0 */
        ck_assert_uint_eq(f1 & (HANDLE_MAP_SHARDS - 1), file->nodeid & (HANDLE_MAP_SHARDS - 1));
        ck_assert_uint_eq(d1 & (HANDLE_MAP_SHARDS - 1), root->nodeid & (HANDLE_MAP_SHARDS - 1));
        ck_assert_uint_ge(f1, HANDLE_MAP_SHARDS);
        ck_assert_uint_eq(handle_map_size(hm), 3);

        ck_assert_int_eq(handle_map_get(hm, f1, file->nodeid, 0, &h), 0);
        ck_assert_ptr_eq(h->inode, file);
        /* released while in use: stays valid for the user, gone for everyone else */
        ck_assert_int_eq(handle_map_remove(hm, f1, file->nodeid, 0), 0);
        ck_assert_int_eq(handle_map_remove(hm, f1, file->nodeid, 0), -EBADF);
        ck_assert_int_ge(fcntl(h->fd, F_GETFD), 0);
        handle_unref(h);

        /* of another inode, of the wrong kind, never issued */
        ck_assert_int_eq(handle_map_get(hm, f2, root->nodeid, -1, &h), -EBADF);
        ck_assert_int_eq(handle_map_get(hm, d1, root->nodeid, 0, &h), -EBADF);
        ck_assert_int_eq(handle_map_get(hm, f2, file->nodeid, 1, &h), -EBADF);
        ck_assert_int_eq(handle_map_get(hm, 0, file->nodeid, -1, &h), -EBADF);
        ck_assert_int_eq(handle_map_get(hm, 999, file->nodeid, -1, &h), -EBADF);
        ck_assert_int_eq(handle_map_get(hm, d1, root->nodeid, 1, &h), 0);
        handle_unref(h);

        /* The inode outlives its forget while a handle holds it. */
        inode_map_forget(im, file->nodeid, 1);
        ck_assert_int_eq(handle_map_get(hm, f2, file->nodeid, 0, &h), 0);
        handle_unref(h);
        ck_assert_uint_eq(budget.used, 4); /* root and file inodes, handles f2 and d1 */
        handle_map_clear(hm);
        ck_assert_uint_eq(handle_map_size(hm), 0);
        inode_unref(file);
        inode_unref(root);
        hm = handle_map_free(hm);
        im = inode_map_free(im);
        ck_assert_uint_eq(budget.used, 0);
}
END_TEST

/* Queues open, use and release handles of the same files at once. A slot holds an fh; whoever
 * swaps it out releases it, everyone else may use it meanwhile and must get it or -EBADF, never
 * another handle. At the end every fd and inode reference is back. */
#define RACE_SLOTS 16
#define RACE_ROUNDS 4000

static _Atomic uint64_t slots[RACE_SLOTS];
static Inode *race_inodes[2];

static void *race_main(void *arg) {
        RaceThread *t = arg;

        for (unsigned r = 0; r < RACE_ROUNDS; r++) {
                unsigned k = rand_r(&t->seed) % RACE_SLOTS;
                Inode *in = race_inodes[k % 2]; /* a slot always holds handles of one inode */
                uint64_t fh = atomic_load(&slots[k]);
                Handle *h;

                if (fh == 0) {
                        uint64_t expected = 0;
                        ck_assert_int_eq(handle_map_add(hm, in, open_fd("/proc/self/exe", O_RDONLY), O_RDONLY, false, &fh), 0);
                        if (!atomic_compare_exchange_strong(&slots[k], &expected, fh))
                                ck_assert_int_eq(handle_map_remove(hm, fh, in->nodeid, 0), 0);
                } else if (rand_r(&t->seed) % 3 == 0) {
                        fh = atomic_exchange(&slots[k], 0);
                        if (fh != 0)
                                ck_assert_int_eq(handle_map_remove(hm, fh, in->nodeid, 0), 0);
                } else if (handle_map_get(hm, fh, in->nodeid, 0, &h) == 0) {
                        ck_assert_uint_eq(h->fh, fh);
                        ck_assert_ptr_eq(h->inode, in);
                        ck_assert_int_ge(fcntl(h->fd, F_GETFD), 0); /* not closed under us */
                        handle_unref(h);
                        t->seen++;
                } /* else released between our load and the get */
        }
        return NULL;
}

START_TEST(test_concurrent) {
        budget.max = 1000;
        ck_assert_int_eq(inode_map_new(&im, &budget), 0);
        ck_assert_int_eq(handle_map_new(&hm, &budget), 0);
        race_inodes[0] = add_inode("/proc/self/exe");
        race_inodes[1] = add_inode("/");
        ck_assert_uint_gt(race_run(race_main), 0); /* handles were used while others released */
        for (unsigned k = 0; k < RACE_SLOTS; k++) {
                uint64_t fh = atomic_exchange(&slots[k], 0);
                if (fh)
                        ck_assert_int_eq(handle_map_remove(hm, fh, race_inodes[k % 2]->nodeid, 0), 0);
        }
        ck_assert_uint_eq(handle_map_size(hm), 0);
        ck_assert_uint_eq(budget.used, 2); /* the two inodes */
        inode_unref(race_inodes[0]);
        inode_unref(race_inodes[1]);
        hm = handle_map_free(hm);
        im = inode_map_free(im);
        ck_assert_uint_eq(budget.used, 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("handle-map");
        TCase *tc = tcase_create("core");

        tcase_add_test(tc, test_handles);
        tcase_add_test(tc, test_concurrent);
        tcase_set_timeout(tc, 60); /* the race test under TSan */
        suite_add_tcase(s, tc);
        return test_main_run(s);
}
