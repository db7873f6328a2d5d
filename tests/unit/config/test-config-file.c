/* test-config-file.c: the per-instance configuration file, "-o" lists and the command line on top. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "config-file.h"
#include "config.h"
#include "device.h"
#include "capabilities.h"
#include <linux/capability.h>
#include "test-main.h"

static char dir[] = "/tmp/vufsd-test-config.XXXXXX";

static void setup(void) {
        ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
        strcpy(dir, "/tmp/vufsd-test-config.XXXXXX");
}

/* Writes text to DIR/name and returns the path (static buffer). */
static const char *write_file(const char *name, const char *text) {
        static char path[256];
        FILE *f;

        snprintf(path, sizeof path, "%s/%s", dir, name);
        f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
        return path;
}

static int load(const char *text, Config *c) {
        config_init(c);
        return config_file_load(c, write_file("t.conf", text), true);
}

START_TEST(test_full_file) {
        Config c;

        ck_assert_int_eq(load("# comment\n"
                              "[Share]\n"
                              "Directory=/srv/vufsd/vm1\n"
                              "Cache=never\n"
                              "Xattr=true\n"
                              "ReadOnly=yes\n"
                              "InodeFileHandles=mandatory\n"
                              "Options=no_flock,timeout=2.5,writeback\n"
                              "[Threads]\n"
                              "Mode=auto\n"
                              "PoolSize=8\n"
                              "RequestQueues=4\n"
                              "PollUSec=50\n"
                              "[Security]\n"
                              "Sandbox=chroot\n"
                              "Seccomp=log\n"
                              "RlimitNofile=4096\n"
                              "AllowHandlesBeyondShare=yes\n"
                              "[Service]\n"
                              "LogLevel=debug\n"
                              "KeepListening=true\n"
                              "CrashRestarts=5\n",
                              &c),
                         1);
        ck_assert_str_eq(c.shared_dir, "/srv/vufsd/vm1");
        ck_assert_int_eq(c.fs.cache, CACHE_NEVER);
        ck_assert(c.fs.xattr);
        ck_assert(c.fs.readonly);
        ck_assert_int_eq(c.fs.inode_file_handles, INODE_FILE_HANDLES_MANDATORY);
        ck_assert(c.fs.handles_beyond_share);
        ck_assert(!c.fs.flock);
        ck_assert(c.fs.writeback);
        ck_assert(c.fs.timeout > 2.49 && c.fs.timeout < 2.51);
        ck_assert_int_eq(c.threads_given, THREAD_MODE_AUTO);
        ck_assert_int_eq(c.thread_pool_size_given, 8);
        ck_assert_uint_eq(c.n_request_queues, 4);
        ck_assert_uint_eq(c.poll_us, 50);
        ck_assert_int_eq(c.sandbox, SANDBOX_CHROOT);
        ck_assert_int_eq(c.seccomp, SYSCALL_FILTER_LOG);
        ck_assert_uint_eq(c.rlimit_nofile, 4096);
        ck_assert_int_eq(c.log_level, LOG_DEBUG);
        ck_assert(c.keep_listening);
        ck_assert_uint_eq(c.crash_restarts, 5);
        config_done(&c);
}
END_TEST

START_TEST(test_defaults_kept) {
        Config c, d;

        ck_assert_int_eq(load("[Share]\nDirectory=/x\n", &c), 1);
        config_init(&d);
        ck_assert_str_eq(c.shared_dir, "/x");
        ck_assert_int_eq(c.fs.cache, d.fs.cache);
        ck_assert_int_eq(c.thread_pool_size_given, d.thread_pool_size_given);
        ck_assert_uint_eq(c.n_request_queues, d.n_request_queues);
        ck_assert_uint_eq(c.poll_us, DEVICE_POLL_AUTO); /* documented default: auto */
        ck_assert_uint_eq(d.poll_us, DEVICE_POLL_AUTO);
        ck_assert_int_eq(c.threads_given, -1);
        ck_assert_int_eq(c.sandbox, d.sandbox);
        ck_assert(c.fs.flock == d.fs.flock);
        ck_assert_uint_eq(c.crash_restarts, 0); /* off unless asked for */
        ck_assert_uint_eq(d.crash_restarts, 0);
        config_done(&c);
        config_done(&d);
}
END_TEST

/* Every one of these must be refused, not half-applied. */
START_TEST(test_bad_files) {
        static const char *const bad[] = {
                "[Share]\nDirectory=relative/path\n",
                "[Share]\nDirectory=\n",
                "[Share]\nCache=sometimes\n",
                "[Share]\nDirectry=/x\n",
                "[Shares]\nDirectory=/x\n",
                "[Share]\nXattr=maybe\n",
                "[Share]\nInodeFileHandles=always\n",
                "[Security]\nAllowHandlesBeyondShare=perhaps\n",
                "[Share]\nOptions=xattr,bogus\n",
                "[Share]\nOptions=timeout=-1\n",
                "[Threads]\nMode=fast\n",
                "[Threads]\nPoolSize=1025\n",
                "[Threads]\nPoolSize=-1\n",
                "[Threads]\nPoolSize=4x\n",
                "[Threads]\nRequestQueues=0\n",
                "[Threads]\nRequestQueues=17\n",
                "[Threads]\nPollUSec=1000001\n",
                "[Threads]\nPollUSec=-1\n",
                "[Threads]\nPollUSec=50us\n",
                "[Threads]\nPollUSec=automatic\n",
                "[Threads]\nPollUSec=4294967295\n",
                "[Threads]\nPollUSec=\n",
                "[Threads]\nPollUs=50\n", /* the key's spelling is PollUSec */
                "[Share]\nPollUSec=50\n", /* wrong section */
                "[Security]\nSandbox=jail\n",
                "[Security]\nSeccomp=allow\n",
                "[Security]\nRlimitNofile=0\n",
                "[Service]\nLogLevel=loud\n",
                "[Service]\nCrashRestarts=65\n", /* --crash-restarts' range: 0..64 */
                "[Service]\nCrashRestarts=-1\n",
                "[Service]\nCrashRestarts=five\n",
                "[Service]\nCrashRestarts=\n",
                "[Security]\nCrashRestarts=5\n", /* wrong section */
                "not a key file\n",
                "Directory=/x\n", /* key outside any section */
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                Config c;
                int r = load(bad[i], &c);
                ck_assert_msg(r == -EINVAL, "case %zu (%s) gave %d", i, bad[i], r);
                config_done(&c);
        }
}
END_TEST

START_TEST(test_missing_file) {
        Config c;
        char path[256];

        snprintf(path, sizeof path, "%s/none.conf", dir);
        config_init(&c);
        ck_assert_int_eq(config_file_load(&c, path, false), 0);
        ck_assert_ptr_null(c.shared_dir);
        ck_assert_int_eq(config_file_load(&c, path, true), -ENOENT);
        config_done(&c);
}
END_TEST

START_TEST(test_command_line_overrides) {
        char *argv[] = { "vufsd", "--cache=always", "-o", "flock", "--thread-pool-size=2", "--poll-us=0", NULL };
        Config c;

        ck_assert_int_eq(load("[Share]\nDirectory=/from/file\nCache=never\nOptions=no_flock\n"
                              "[Threads]\nPoolSize=8\nRequestQueues=3\nPollUSec=1000000\n",
                              &c),
                         1);
        ck_assert_uint_eq(c.poll_us, 1000000); /* the upper bound is accepted */
        config_done(&c);
        ck_assert_int_eq(load("[Share]\nDirectory=/x\n[Threads]\nPollUSec=auto\n", &c), 1);
        ck_assert_uint_eq(c.poll_us, DEVICE_POLL_AUTO);
        config_done(&c);
        ck_assert_int_eq(load("[Share]\nDirectory=/from/file\nCache=never\nOptions=no_flock\n"
                              "[Threads]\nPoolSize=8\nRequestQueues=3\nPollUSec=1000000\n",
                              &c),
                         1);
        ck_assert_int_eq(config_parse_argv(&c, 6, argv), 0);
        ck_assert_str_eq(c.shared_dir, "/from/file"); /* not on the command line: the file's */
        ck_assert_uint_eq(c.n_request_queues, 3);
        ck_assert_int_eq(c.fs.cache, CACHE_ALWAYS);
        ck_assert(c.fs.flock);
        ck_assert_int_eq(c.thread_pool_size_given, 2);
        ck_assert_uint_eq(c.poll_us, 0); /* --poll-us=0 beats the file's PollUSec */
        config_done(&c);
}
END_TEST

/* [Service] CrashRestarts= is --crash-restarts: 0..64, the bounds accepted, the command line on top
 * (an instance whose file turns it on can be started once without it). */
START_TEST(test_crash_restarts) {
        char *off[] = { "vufsd", "--crash-restarts=0", NULL };
        char *more[] = { "vufsd", "--crash-restarts=12", NULL };
        char *none[] = { "vufsd", NULL };
        Config c;

        ck_assert_int_eq(load("[Share]\nDirectory=/x\n[Service]\nCrashRestarts=64\n", &c), 1);
        ck_assert_uint_eq(c.crash_restarts, 64);
        config_done(&c);
        ck_assert_int_eq(load("[Service]\nCrashRestarts=0\n", &c), 1);
        ck_assert_uint_eq(c.crash_restarts, 0);
        config_done(&c);
        ck_assert_int_eq(load("[Service]\nCrashRestarts=5\n", &c), 1);
        ck_assert_int_eq(config_parse_argv(&c, 1, none), 0);
        ck_assert_uint_eq(c.crash_restarts, 5); /* not on the command line: the file's */
        config_done(&c);
        ck_assert_int_eq(load("[Service]\nCrashRestarts=5\n", &c), 1);
        ck_assert_int_eq(config_parse_argv(&c, 2, off), 0);
        ck_assert_uint_eq(c.crash_restarts, 0);
        config_done(&c);
        ck_assert_int_eq(load("[Service]\nCrashRestarts=5\n", &c), 1);
        ck_assert_int_eq(config_parse_argv(&c, 2, more), 0);
        ck_assert_uint_eq(c.crash_restarts, 12);
        config_done(&c);
}
END_TEST

START_TEST(test_o_commas) {
        Config c;

        config_init(&c);
        /* libvirt doubles commas inside values */
        ck_assert_int_eq(config_parse_o(&c, "source=/srv/a,,b,,,cache=always,xattr"), 0);
        ck_assert_str_eq(c.shared_dir, "/srv/a,b,");
        ck_assert_int_eq(c.fs.cache, CACHE_ALWAYS);
        ck_assert(c.fs.xattr);
        ck_assert_int_eq(config_parse_o(&c, "source=/plain,no_xattr"), 0);
        ck_assert_str_eq(c.shared_dir, "/plain");
        ck_assert(!c.fs.xattr);
        ck_assert_int_eq(config_parse_o(&c, ""), 0);
        ck_assert_int_eq(config_parse_o(&c, "source=/x,,y,unknown"), -EINVAL);
        config_done(&c);
}
END_TEST

START_TEST(test_instance_names) {
        char *p = NULL;

        ck_assert_int_eq(config_file_path_for_instance("vm1", &p), 0);
        ck_assert_str_eq(p, VUFSD_CONFIG_DIR "/vm1.conf");
        free(p);
        ck_assert_int_eq(config_file_instance_name_valid("web-01.example:a@b_c"), 0);
        ck_assert_int_eq(config_file_instance_name_valid(""), -EINVAL);
        ck_assert_int_eq(config_file_instance_name_valid(".hidden"), -EINVAL);
        ck_assert_int_eq(config_file_instance_name_valid("../etc/passwd"), -EINVAL);
        ck_assert_int_eq(config_file_instance_name_valid("a/b"), -EINVAL);
        ck_assert_int_eq(config_file_instance_name_valid("a b"), -EINVAL);
        ck_assert_int_eq(
                config_file_instance_name_valid("0123456789012345678901234567890123456789012345678901234567890123"),
                0);
        ck_assert_int_eq(
                config_file_instance_name_valid("01234567890123456789012345678901234567890123456789012345678901234"),
                -EINVAL);
        ck_assert_int_eq(config_file_path_for_instance("a/b", &p), -EINVAL);
}
END_TEST

/* The bus identity: in the file and on the command line. */
START_TEST(test_bus_user) {
        char a0[] = "vufsd", a1[] = "--bus-user=someone";
        char *argv[] = { a0, a1, NULL };
        Config c;

        ck_assert_int_eq(load("[Security]\nBusUser=vufsd-bus\n", &c), 1);
        ck_assert_str_eq(c.bus_user, "vufsd-bus");
        ck_assert_int_eq(config_parse_argv(&c, 2, argv), 0);
        ck_assert_str_eq(c.bus_user, "someone");
        config_done(&c);
        ck_assert_int_eq(load("[Security]\nBusUser=\n", &c), -EINVAL);
        config_done(&c);
        config_init(&c);
        ck_assert_ptr_null(c.bus_user); /* the default: vufsd-bus for the system bus (bus-name.h) */
        config_done(&c);
}
END_TEST

/* The cap on directory read-ahead: in the file and on the command line, at least one buffer. */
START_TEST(test_dir_buffer_max) {
        char a0[] = "vufsd", a1[] = "--dir-buffer-max=65536", b1[] = "--dir-buffer-max=100";
        char *argv[] = { a0, a1, NULL }, *bad[] = { a0, b1, NULL };
        Config c;

        ck_assert_int_eq(load("[Security]\nDirBufferMax=16384\n", &c), 1);
        ck_assert_uint_eq(c.fs.dir_buffer_max, 16384);
        ck_assert_int_eq(config_parse_argv(&c, 2, argv), 0);
        ck_assert_uint_eq(c.fs.dir_buffer_max, 65536);
        ck_assert_int_lt(config_parse_argv(&c, 2, bad), 0); /* below one buffer */
        config_done(&c);
        ck_assert_int_eq(load("[Security]\nDirBufferMax=100\n", &c), -EINVAL);
        config_done(&c);
        config_init(&c);
        ck_assert_uint_eq(c.fs.dir_buffer_max, 0); /* the default: 64 MiB (dir-stream.h) */
        config_done(&c);
}
END_TEST

/* The node budget (issue 31 finding 5): in the file and on the command line, within its range. */
START_TEST(test_max_nodes) {
        char a0[] = "vufsd", a1[] = "--max-nodes=5000", b1[] = "--max-nodes=15";
        char *argv[] = { a0, a1, NULL }, *bad[] = { a0, b1, NULL };
        Config c;

        ck_assert_int_eq(load("[Security]\nMaxNodes=20000\n", &c), 1);
        ck_assert_uint_eq(c.fs.max_nodes, 20000);
        ck_assert_int_eq(config_parse_argv(&c, 2, argv), 0);
        ck_assert_uint_eq(c.fs.max_nodes, 5000);
        ck_assert_int_lt(config_parse_argv(&c, 2, bad), 0); /* below FS_MAX_NODES_MIN */
        config_done(&c);
        ck_assert_int_eq(load("[Security]\nMaxNodes=100000001\n", &c), -EINVAL);
        config_done(&c);
}
END_TEST

/* The inode fds kept open (issue 34): in the file and on the command line, within its range. */
START_TEST(test_max_inode_fds) {
        char a0[] = "vufsd", a1[] = "--max-inode-fds=64", b1[] = "--max-inode-fds=0";
        char *argv[] = { a0, a1, NULL }, *bad[] = { a0, b1, NULL };
        Config c;

        ck_assert_int_eq(load("[Security]\nMaxInodeFds=5000\n", &c), 1);
        ck_assert_uint_eq(c.fs.max_inode_fds, 5000);
        ck_assert_int_eq(config_parse_argv(&c, 2, argv), 0);
        ck_assert_uint_eq(c.fs.max_inode_fds, 64);
        ck_assert_int_lt(config_parse_argv(&c, 2, bad), 0); /* below FS_MAX_INODE_FDS_MIN */
        config_done(&c);
        ck_assert_int_eq(load("[Security]\nMaxInodeFds=1000001\n", &c), -EINVAL);
        config_done(&c);
}
END_TEST

/* AllowPrivilegedFiles= widens the kept capabilities by MKNOD and SETFCAP, also when --modcaps came
 * before it, and a --modcaps that removes one of them still wins. */
START_TEST(test_privileged_files) {
        char a0[] = "vufsd", a1[] = "--shared-dir=/tmp", a2[] = "--modcaps=-mknod";
        char *argv[] = { a0, a1, NULL }, *drop[] = { a0, a1, a2, NULL };
        Config c;

        ck_assert_int_eq(load("[Security]\nAllowPrivilegedFiles=yes\n", &c), 1);
        ck_assert_int_eq(c.fs.privileged_files, PRIVILEGED_FILES_ALLOW);
        ck_assert_int_eq(config_parse_argv(&c, 2, argv), 0);
        ck_assert_int_eq(config_verify(&c), 0);
        ck_assert(c.capabilities & (UINT64_C(1) << CAP_MKNOD));
        ck_assert(c.capabilities & (UINT64_C(1) << CAP_SETFCAP));
        ck_assert_uint_eq(c.capabilities, capabilities_default(true));
        config_done(&c);

        ck_assert_int_eq(load("[Security]\nAllowPrivilegedFiles=yes\n", &c), 1);
        ck_assert_int_eq(config_parse_argv(&c, 3, drop), 0);
        ck_assert_int_eq(config_verify(&c), 0);
        ck_assert(!(c.capabilities & (UINT64_C(1) << CAP_MKNOD)));
        ck_assert(c.capabilities & (UINT64_C(1) << CAP_SETFCAP));
        config_done(&c);

        ck_assert_int_eq(load("[Security]\nAllowPrivilegedFiles=no\n", &c), 1);
        ck_assert_int_eq(config_parse_argv(&c, 2, argv), 0);
        ck_assert_int_eq(config_verify(&c), 0);
        ck_assert_uint_eq(c.capabilities, capabilities_default(false));
        ck_assert_int_eq(c.fs.privileged_files, PRIVILEGED_FILES_MAP); /* the default */
        config_done(&c);

        /* PrivilegedFiles= names the mode; only allow widens the capabilities */
        ck_assert_int_eq(load("[Security]\nPrivilegedFiles=refuse\nPrivilegedFilesKey=/etc/vufsd/k\n", &c), 1);
        ck_assert_int_eq(c.fs.privileged_files, PRIVILEGED_FILES_REFUSE);
        ck_assert_str_eq(c.privileged_key_file, "/etc/vufsd/k");
        config_done(&c);
        ck_assert_int_eq(load("[Security]\nPrivilegedFiles=allow\n", &c), 1);
        ck_assert_int_eq(config_parse_argv(&c, 2, argv), 0);
        ck_assert_int_eq(config_verify(&c), 0);
        ck_assert_uint_eq(c.capabilities, capabilities_default(true));
        config_done(&c);
        ck_assert_int_lt(load("[Security]\nPrivilegedFiles=sometimes\n", &c), 0);
        config_done(&c);
        ck_assert_int_lt(load("[Security]\nPrivilegedFilesKey=relative/k\n", &c), 0);
        config_done(&c);
}
END_TEST

static Suite *config_file_suite(void) {
        Suite *s = suite_create("config-file");
        TCase *tc = tcase_create("core");
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_full_file);
        tcase_add_test(tc, test_defaults_kept);
        tcase_add_test(tc, test_bad_files);
        tcase_add_test(tc, test_missing_file);
        tcase_add_test(tc, test_command_line_overrides);
        tcase_add_test(tc, test_crash_restarts);
        tcase_add_test(tc, test_o_commas);
        tcase_add_test(tc, test_instance_names);
        tcase_add_test(tc, test_bus_user);
        tcase_add_test(tc, test_dir_buffer_max);
        tcase_add_test(tc, test_max_nodes);
        tcase_add_test(tc, test_max_inode_fds);
        tcase_add_test(tc, test_privileged_files);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(config_file_suite)
