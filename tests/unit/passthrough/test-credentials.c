/* test-credentials.c: per-thread identity and umask switching, fd limit raising. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "credentials.h"
#include "test-main.h"

static pthread_barrier_t barrier;
static uid_t other_euid;

static void *observer(void *p) {
        pthread_barrier_wait(&barrier); /* main thread has switched */
        other_euid = geteuid();
        pthread_barrier_wait(&barrier);
        return NULL;
}

START_TEST(test_switch_is_per_thread) {
        Credentials c;
        pthread_t th;

        ck_assert(credentials_can_switch());
        pthread_barrier_init(&barrier, NULL, 2);
        ck_assert_int_eq(pthread_create(&th, NULL, observer, NULL), 0);
        ck_assert_int_eq(credentials_enter(&c, 65534, 65533, NULL, 0, false, 0), 0);
        ck_assert_uint_eq(geteuid(), 65534);
        ck_assert_uint_eq(getegid(), 65533);
        pthread_barrier_wait(&barrier);
        pthread_barrier_wait(&barrier);
        ck_assert_uint_eq(other_euid, 0); /* the other thread kept root */
        /* As the switched user, root-only things fail. */
        ck_assert_int_eq(faccessat(AT_FDCWD, "/root", W_OK, AT_EACCESS), -1);
        credentials_leave(&c);
        ck_assert_uint_eq(geteuid(), 0);
        ck_assert_uint_eq(getegid(), 0);
        pthread_join(th, NULL);
        /* Root stays root without a switch; leave twice is harmless. */
        ck_assert_int_eq(credentials_enter(&c, 0, 0, NULL, 0, false, 0), 0);
        ck_assert(!c.switched);
        credentials_leave(&c);
        credentials_leave(&c);
}
END_TEST

START_TEST(test_umask_per_thread) {
        Credentials c;
        mode_t before = umask(022);
        char path[] = "/tmp/test-credentials-XXXXXX";
        struct stat st;
        int fd;

        ck_assert_ptr_nonnull(mkdtemp(path));
        ck_assert_int_eq(credentials_enter(&c, 0, 0, NULL, 0, true, 077), 0);
        ck_assert_int_eq(chdir(path), 0);
        fd = open("f", O_CREAT | O_WRONLY, 0666);
        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(stat("f", &st), 0);
        ck_assert_uint_eq(st.st_mode & 0777, 0600);
        credentials_leave(&c);
        ck_assert_uint_eq(umask(before), 022);
        unlink("f");
        ck_assert_int_eq(chdir("/"), 0);
        rmdir(path);
}
END_TEST

/* Creates "f" in the current directory with mode 0666 and returns what the umask left of it. */
static mode_t created_mode(void) {
        struct stat st;
        int fd = open("f", O_CREAT | O_EXCL | O_WRONLY, 0666);

        ck_assert_int_ge(fd, 0);
        close(fd);
        ck_assert_int_eq(stat("f", &st), 0);
        ck_assert_int_eq(unlink("f"), 0);
        return st.st_mode & 0777;
}

/* The request's umask is set only where it differs from the thread's, and the thread's own is
 * known exactly after every change and restore. */
START_TEST(test_umask_switched_only_when_different) {
        static const struct {
                bool valid;
                mode_t umask;
                bool switched;
                mode_t mode;
        } steps[] = {
                { true, 022, false, 0644 }, /* the first: the thread's own fs_struct, same umask */
                { true, 022, false, 0644 },
                { true, 077, true, 0600 },
                { false, 0, false, 0644 },  /* restored: no umask in the request, the thread's */
                { true, 0, true, 0666 },
                { true, 022, false, 0644 }, /* known again after the restore */
                { true, 01022, false, 0644 }, /* only the permission bits count */
        };
        char path[] = "/tmp/test-credentials-XXXXXX";
        Credentials c;

        umask(022);
        ck_assert_ptr_nonnull(mkdtemp(path));
        ck_assert_int_eq(chdir(path), 0);
        for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
                ck_assert_int_eq(credentials_enter(&c, 0, 0, NULL, 0, steps[i].valid, steps[i].umask), 0);
                ck_assert_msg(c.umask_set == steps[i].switched, "step %zu: umask_set %d", i, c.umask_set);
                ck_assert_uint_eq(created_mode(), steps[i].mode);
                credentials_leave(&c);
        }
        ck_assert_uint_eq(umask(022), 022); /* left as it was found */
        ck_assert_int_eq(chdir("/"), 0);
        rmdir(path);
}
END_TEST

START_TEST(test_drop_groups) {
        pid_t pid = fork();
        int status;

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                gid_t g[1] = { 4242 };
                if (setgroups(1, g) < 0 || getgroups(0, NULL) != 1)
                        _exit(2);
                if (credentials_drop_supplementary_groups() < 0)
                        _exit(3);
                _exit(getgroups(0, NULL) == 0 ? 0 : 4);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

static int other_ngroups = -1;

static void *groups_observer(void *p) {
        pthread_barrier_wait(&barrier); /* main thread has switched */
        other_ngroups = getgroups(0, NULL);
        pthread_barrier_wait(&barrier);
        return NULL;
}

/* FUSE_CREATE_SUPP_GROUP: the caller's group reaches only this thread, and only while it acts as
 * the caller; it is what lets a member of a directory's group create in it. */
START_TEST(test_groups_are_per_thread) {
        char dir[] = "/tmp/test-credentials-XXXXXX";
        gid_t g[1] = { 4242 }, got[4];
        Credentials c;
        pthread_t th;
        int fd;

        ck_assert_int_eq(setgroups(0, NULL), 0); /* as the daemon starts (process-wide here) */
        ck_assert_ptr_nonnull(mkdtemp(dir));
        ck_assert_int_eq(chown(dir, 0, 4242), 0);
        ck_assert_int_eq(chmod(dir, 0770), 0);
        ck_assert_int_eq(chdir(dir), 0);

        /* Without the group: neither the user's own ids nor anything else lets it in. */
        ck_assert_int_eq(credentials_enter(&c, 65534, 65533, NULL, 0, false, 0), 0);
        ck_assert_int_eq(open("f", O_CREAT | O_WRONLY | O_EXCL, 0644), -1);
        ck_assert_int_eq(errno, EACCES);
        credentials_leave(&c);

        pthread_barrier_init(&barrier, NULL, 2);
        ck_assert_int_eq(pthread_create(&th, NULL, groups_observer, NULL), 0);
        ck_assert_int_eq(credentials_enter(&c, 65534, 65533, g, 1, false, 0), 0);
        ck_assert(c.groups_set);
        ck_assert_int_eq(getgroups(4, got), 1);
        ck_assert_uint_eq(got[0], 4242);
        fd = open("f", O_CREAT | O_WRONLY | O_EXCL, 0644);
        ck_assert_int_ge(fd, 0);
        close(fd);
        pthread_barrier_wait(&barrier);
        pthread_barrier_wait(&barrier);
        ck_assert_int_eq(other_ngroups, 0); /* the other thread has none */
        credentials_leave(&c);
        pthread_join(th, NULL);
        ck_assert_int_eq(getgroups(0, NULL), 0); /* and this one none again */
        ck_assert_uint_eq(geteuid(), 0);
        ck_assert_uint_eq(getegid(), 0);

        unlink("f");
        ck_assert_int_eq(chdir("/"), 0);
        rmdir(dir);
}
END_TEST

/* (uid_t)-1 is "leave unchanged" to setresuid(): a caller claiming it must not stay root. */
START_TEST(test_minus_one_is_refused) {
        gid_t bad[2] = { 5, (gid_t) -1 };
        Credentials c;

        ck_assert_int_eq(credentials_enter(&c, (uid_t) -1, 100, NULL, 0, false, 0), -EPERM);
        ck_assert_int_eq(credentials_enter(&c, 100, (gid_t) -1, NULL, 0, false, 0), -EPERM);
        ck_assert_int_eq(credentials_enter(&c, 100, 100, bad, 2, false, 0), -EPERM);
        ck_assert_uint_eq(geteuid(), 0);
        ck_assert_uint_eq(getegid(), 0);
        credentials_leave(&c);
        /* Only what differs is switched: root with a group keeps its uid. */
        ck_assert_int_eq(credentials_enter(&c, 0, 100, NULL, 0, false, 0), 0);
        ck_assert(c.gid_set && !c.uid_set && !c.groups_set);
        ck_assert_uint_eq(geteuid(), 0);
        ck_assert_uint_eq(getegid(), 100);
        credentials_leave(&c);
        ck_assert_uint_eq(getegid(), 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("credentials");
        TCase *tc = tcase_create("core");

        tcase_add_root_test(tc, test_switch_is_per_thread);
        tcase_add_test(tc, test_umask_per_thread);
        tcase_add_test(tc, test_umask_switched_only_when_different);
        tcase_add_root_test(tc, test_drop_groups);
        tcase_add_root_test(tc, test_groups_are_per_thread);
        tcase_add_root_test(tc, test_minus_one_is_refused);
        suite_add_tcase(s, tc);
        return test_main_run(s);
}
