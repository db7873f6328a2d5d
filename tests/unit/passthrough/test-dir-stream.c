/* test-dir-stream.c: directory read-ahead continued across requests, under a pool's cap. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dir-stream.h"
#include "util.h"
#include "test-main.h"

/* Long names, so one listing needs several buffers: about 70 bytes a record, 2000 entries, 9 or
 * so getdents64 buffers of 16 KiB. */
#define N_ENTRIES 2000
#define NAME_FMT "entry-%04d-with-a-name-long-enough-to-fill-buffers"

static char dir[64];

static void make_dir(void) {
        char path[256];

        snprintf(dir, sizeof dir, "/tmp/vufsd-dirstream.XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        for (int i = 0; i < N_ENTRIES; i++) {
                int fd;
                snprintf(path, sizeof path, "%s/" NAME_FMT, dir, i);
                fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
                ck_assert_int_ge(fd, 0);
                close(fd);
        }
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void remove_dir(void) {
        (void) nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* One guest's listing of the directory through its own handle. */
typedef struct Lister {
        DirStream s;
        int fd;
        uint64_t off;                 /* what the guest passes next: the d_off of the last entry it got */
        unsigned char seen[N_ENTRIES]; /* times each entry was returned */
        unsigned dots, other;
        bool done;
} Lister;

static void lister_init(Lister *l, DirStreamPool *pool) {
        memset(l, 0, sizeof *l);
        dir_stream_init(&l->s, pool);
        l->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ck_assert_int_ge(l->fd, 0);
}

static void lister_done(Lister *l) {
        dir_stream_done(&l->s);
        close(l->fd);
}

/* One READDIR request: at most max entries from where the guest stopped, like pt_readdir. */
static void lister_request(Lister *l, unsigned max) {
        const struct linux_dirent64 *d;
        unsigned n = 0;
        int r, i;

        r = dir_stream_seek(&l->s, l->fd, l->off);
        ck_assert_int_eq(r, 0);
        while (n < max && (r = dir_stream_peek(&l->s, l->fd, &d)) > 0) {
                if (streq(d->d_name, ".") || streq(d->d_name, ".."))
                        l->dots++;
                else if (sscanf(d->d_name, "entry-%d-", &i) == 1 && i >= 0 && i < N_ENTRIES)
                        l->seen[i]++;
                else
                        l->other++;
                l->off = (uint64_t) d->d_off;
                dir_stream_consume(&l->s);
                n++;
        }
        ck_assert_int_ge(r, 0);
        if (r == 0)
                l->done = true;
        dir_stream_end(&l->s);
}

static void lister_check(const Lister *l) {
        ck_assert(l->done);
        ck_assert_uint_eq(l->dots, 2);
        ck_assert_uint_eq(l->other, 0);
        for (int i = 0; i < N_ENTRIES; i++)
                ck_assert_msg(l->seen[i] == 1, "entry %d listed %u times", i, l->seen[i]);
}

/* Many handles listing at once, a cap of two buffers: the buffered bytes never go above the cap
 * between requests, buffers are taken from idle handles, and every listing is still complete and
 * without repeats (a handle whose buffer was taken continues at its offset). */
START_TEST(test_cap_many_handles) {
        enum { N = 64 };
        static Lister l[N];
        DirStreamPool pool;
        bool all_done = false;
        unsigned rounds = 0;

        make_dir();
        dir_stream_pool_init(&pool, 2 * DIR_STREAM_BUF_SIZE);
        for (int k = 0; k < N; k++)
                lister_init(&l[k], &pool);
        while (!all_done) {
                all_done = true;
                for (int k = 0; k < N; k++) {
                        if (l[k].done)
                                continue;
                        /* ~ a 4 KiB reply, different per handle so the buffers run out at
                         * different moments */
                        lister_request(&l[k], 40 + k % 7);
                        ck_assert_msg(dir_stream_pool_used(&pool) <= 2 * DIR_STREAM_BUF_SIZE,
                                      "%llu bytes buffered, the cap is %u",
                                      (unsigned long long) dir_stream_pool_used(&pool), 2 * DIR_STREAM_BUF_SIZE);
                        all_done &= l[k].done;
                }
                rounds++;
        }
        for (int k = 0; k < N; k++)
                lister_check(&l[k]);
        ck_assert_uint_gt(dir_stream_pool_drops(&pool), 0);
        /* Listed to the end: nothing stays buffered. */
        ck_assert_uint_eq(dir_stream_pool_used(&pool), 0);
        for (int k = 0; k < N; k++)
                lister_done(&l[k]);
        ck_assert_uint_eq(dir_stream_pool_used(&pool), 0);
        dir_stream_pool_done(&pool);
        remove_dir();
}
END_TEST

/* A handle released in the middle of its listing gives its buffer back, listed idle or not. */
START_TEST(test_release_midway) {
        Lister a, b;
        DirStreamPool pool;

        make_dir();
        dir_stream_pool_init(&pool, 0);
        ck_assert_uint_eq(pool.max, DIR_STREAM_DEFAULT_CAP);
        lister_init(&a, &pool);
        lister_init(&b, &pool);
        lister_request(&a, 10);
        lister_request(&b, 10);
        ck_assert_uint_eq(dir_stream_pool_used(&pool), 2 * DIR_STREAM_BUF_SIZE);
        lister_done(&a);
        ck_assert_uint_eq(dir_stream_pool_used(&pool), DIR_STREAM_BUF_SIZE);
        /* A seek elsewhere drops the read-ahead too. */
        ck_assert_int_eq(dir_stream_seek(&b.s, b.fd, 0), 0);
        dir_stream_end(&b.s);
        ck_assert_uint_eq(dir_stream_pool_used(&pool), 0);
        lister_done(&b);
        dir_stream_pool_done(&pool);

        /* A cap below one buffer is one buffer. */
        dir_stream_pool_init(&pool, 1);
        ck_assert_uint_eq(pool.max, DIR_STREAM_BUF_SIZE);
        dir_stream_pool_done(&pool);
        remove_dir();
}
END_TEST

/* Threads listing through one pool whose cap is one buffer: buffers move between threads' handles
 * all the time (run it under ASan and TSan); every listing stays exact, and the pool never holds
 * more than the cap plus one buffer per request running. */
enum { THREADS = 4, PER_THREAD = 6 };
static DirStreamPool shared_pool;

static void *lister_thread(void *arg) {
        Lister *l = arg;
        bool all_done = false;

        while (!all_done) {
                all_done = true;
                for (int k = 0; k < PER_THREAD; k++) {
                        if (l[k].done)
                                continue;
                        lister_request(&l[k], 25 + k);
                        ck_assert_uint_le(dir_stream_pool_used(&shared_pool), (1 + THREADS) * DIR_STREAM_BUF_SIZE);
                        all_done &= l[k].done;
                }
        }
        return NULL;
}

START_TEST(test_cap_threads) {
        static Lister l[THREADS][PER_THREAD];
        pthread_t t[THREADS];

        make_dir();
        dir_stream_pool_init(&shared_pool, DIR_STREAM_BUF_SIZE);
        for (int i = 0; i < THREADS; i++)
                for (int k = 0; k < PER_THREAD; k++)
                        lister_init(&l[i][k], &shared_pool);
        for (int i = 0; i < THREADS; i++)
                ck_assert_int_eq(pthread_create(&t[i], NULL, lister_thread, l[i]), 0);
        for (int i = 0; i < THREADS; i++)
                pthread_join(t[i], NULL);
        for (int i = 0; i < THREADS; i++)
                for (int k = 0; k < PER_THREAD; k++) {
                        lister_check(&l[i][k]);
                        lister_done(&l[i][k]);
                }
        ck_assert_uint_gt(dir_stream_pool_drops(&shared_pool), 0);
        ck_assert_uint_eq(dir_stream_pool_used(&shared_pool), 0);
        dir_stream_pool_done(&shared_pool);
        remove_dir();
}
END_TEST

int main(void) {
        Suite *s = suite_create("dir-stream");
        TCase *tc = tcase_create("cap");

        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_cap_many_handles);
        tcase_add_test(tc, test_release_midway);
        tcase_add_test(tc, test_cap_threads);
        suite_add_tcase(s, tc);
        return test_main_run(s);
}
