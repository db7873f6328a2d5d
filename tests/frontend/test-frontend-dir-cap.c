/* test-frontend-dir-cap.c: the cap on directory read-ahead (--dir-buffer-max) in the running daemon:
 * a guest holding many directory handles mid-listing keeps the daemon's memory bounded, and every
 * listing stays complete when the read-ahead is dropped and read again between its requests. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frontend.h"
#include "fuse-client.h"
#include "harness.h"
#include "util.h"
#include "test-main.h"

#define N_FILES 1500
#define N_HANDLES 1000
#define NAME_FMT "file-%04u-with-a-name-long-enough-to-need-several-buffers"

static FeHarness *h;

static void setup(void) {
        ck_assert_int_eq(fe_harness_new(&h), 0);
}

static void teardown(void) {
        h = fe_harness_free(h);
}

static long rss_anon_kb(pid_t pid) {
        long kb = fe_harness_status_kb(pid, "RssAnon");

        ck_assert_int_ge(kb, 0);
        return kb;
}

typedef struct Listing {
        uint64_t fh, off;
        unsigned char seen[N_FILES];
        unsigned dots;
        bool done;
} Listing;

/* One READDIR of 4 KiB (what Linux sends) at the handle's offset; records the names. */
static void readdir_once(FeFuse *c, Listing *l) {
        static uint8_t buf[4096];
        size_t pos = 0;
        unsigned i;
        int n;

        n = fe_fuse_readdir(c, false, FUSE_ROOT_ID, l->fh, l->off, buf, sizeof buf);
        ck_assert_msg(n >= 0, "READDIR: %d %s", n, c->last_problem);
        if (n == 0) {
                l->done = true;
                return;
        }
        while (pos + FUSE_NAME_OFFSET <= (size_t) n) {
                const struct fuse_dirent *d = (const struct fuse_dirent *) (buf + pos);
                char name[256];

                ck_assert(d->namelen > 0 && d->namelen < sizeof name && pos + FUSE_DIRENT_SIZE(d) <= (size_t) n);
                memcpy(name, d->name, d->namelen);
                name[d->namelen] = '\0';
                if (streq(name, ".") || streq(name, ".."))
                        l->dots++;
                else {
                        ck_assert_msg(sscanf(name, "file-%u-", &i) == 1 && i < N_FILES, "unexpected name %s", name);
                        l->seen[i]++;
                }
                l->off = d->off;
                pos += FUSE_DIRENT_SIZE(d);
        }
        ck_assert_uint_eq(pos, (size_t) n);
}

/* How much the daemon's anonymous memory may grow below: without the cap it grows by about 16 MiB.
 * Under ASan twice as much: its quarantine keeps freed blocks (every reply's and read-ahead's)
 * out of reuse for a while, and CI saw 4152 kB there against 0 in a plain build. */
#if defined(__SANITIZE_ADDRESS__)
#define DIR_CAP_GROWTH_KB 8192
#else
#define DIR_CAP_GROWTH_KB 4096
#endif

/* A thousand handles, each a few requests into a 1500-entry listing (each needs ~8 buffers), with
 * a cap of one buffer: the daemon's anonymous memory grows by far less than the 16 MiB the
 * buffers would take without the cap, and each handle still lists every entry exactly once. */
START_TEST(test_dir_cap_bounds_memory) {
        static Listing l[N_HANDLES];
        const char *const extra[] = { "--dir-buffer-max=16384", NULL };
        char path[512];
        long before, after;
        bool all_done;
        FeOptions o;
        Frontend *fe = NULL;
        FeFuse *c = NULL;
        int r;

        for (unsigned i = 0; i < N_FILES; i++) {
                int fd;
                snprintf(path, sizeof path, "%s/" NAME_FMT, h->share, i);
                fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
                ck_assert_int_ge(fd, 0);
                close(fd);
        }
        r = fe_harness_spawn_vufsd(h, extra);
        ck_assert_msg(r == 0, "starting vufsd ($VUFSD_BINARY=%s): %s", getenv("VUFSD_BINARY"), strerror(-r));
        fe_options_init(&o);
        ck_assert_int_eq(fe_connect_and_start(&fe, h->socket_path, &o), 0);
        ck_assert_int_eq(fe_fuse_new(&c, fe), 0);
        ck_assert_int_eq(fe_fuse_init(c), 0);

        memset(l, 0, sizeof l);
        for (unsigned k = 0; k < N_HANDLES; k++)
                ck_assert_int_eq(fe_fuse_opendir(c, FUSE_ROOT_ID, &l[k].fh), 0);
        /* A first request on one handle warms the allocator; then every handle starts listing. */
        readdir_once(c, &l[0]);
        before = rss_anon_kb(fe_harness_daemon_pid(h));
        for (unsigned k = 1; k < N_HANDLES; k++)
                readdir_once(c, &l[k]);
        for (unsigned k = 0; k < N_HANDLES; k++)
                readdir_once(c, &l[k]);
        after = rss_anon_kb(fe_harness_daemon_pid(h));
        ck_assert_msg(after - before < DIR_CAP_GROWTH_KB,
                      "anonymous memory grew by %ld kB with %d handles mid-listing (cap: 16 KiB of read-ahead)",
                      after - before, N_HANDLES);

        /* Finish the listings, interleaved, so buffers keep moving between handles. */
        do {
                all_done = true;
                for (unsigned k = 0; k < N_HANDLES; k += 7) {
                        if (!l[k].done)
                                readdir_once(c, &l[k]);
                        all_done &= l[k].done;
                }
        } while (!all_done);
        for (unsigned k = 0; k < N_HANDLES; k += 7) {
                ck_assert_uint_eq(l[k].dots, 2);
                for (unsigned i = 0; i < N_FILES; i++)
                        ck_assert_msg(l[k].seen[i] == 1, "handle %u: entry %u listed %u times", k, i, l[k].seen[i]);
        }
        for (unsigned k = 0; k < N_HANDLES; k++)
                ck_assert_int_eq(fe_fuse_release(c, FUSE_ROOT_ID, l[k].fh, true), 0);
        ck_assert_msg(c->proto_errors == 0, "%s", c->last_problem);
        fe_fuse_free(c);
        fe_free(fe);
        ck_assert_int_eq(fe_backend_wait(h->backend, 10000, NULL), 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("frontend-dir-cap");
        TCase *tc = tcase_create("cap");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 240);
        tcase_add_test(tc, test_dir_cap_bounds_memory);
        suite_add_tcase(s, tc);
        return test_main_run(s);
}
