/* test-id-map.c: --uid-map/--gid-map: the parser's answers and reasons, the list's overlap and size
 * checks, what config_verify() refuses, and the text written to /proc/PID/uid_map. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "userns.h"
#include "util.h"
#include "test-args.h"
#include "test-main.h"

/* Runs fn with stderr captured; returns what it printed (malloc'd). */
static char *captured(int (*fn)(Config *, const char *const *), Config *c, const char *const *args, int *ret) {
        char *buf = NULL;
        size_t len = 0;
        FILE *mem = NULL;
        FILE *tmp = tmpfile();
        int saved = dup(STDERR_FILENO);
        int ch;

        ck_assert_ptr_nonnull(tmp);
        fflush(stderr);
        ck_assert_int_ge(dup2(fileno(tmp), STDERR_FILENO), 0);
        *ret = fn(c, args);
        fflush(stderr);
        ck_assert_int_ge(dup2(saved, STDERR_FILENO), 0);
        close(saved);
        rewind(tmp);
        mem = open_memstream(&buf, &len);
        while ((ch = fgetc(tmp)) != EOF)
                fputc(ch, mem);
        fclose(mem);
        fclose(tmp);
        return buf;
}

static int parse_and_verify(Config *c, const char *const *args) {
        int r = test_parse_argv(c, args);
        return r < 0 ? r : config_verify(c);
}

/* args must be refused, with a message that names the option and contains want. */
static void assert_refused(const char *const *args, const char *option, const char *want) {
        Config c;
        int r;
        char *msg = captured(parse_and_verify, &c, args, &r);

        ck_assert_msg(r < 0, "accepted: %s %s", args[1], args[2] ?: "");
        ck_assert_msg(strstr(msg, option), "message does not name %s: %s", option, msg);
        ck_assert_msg(strstr(msg, want), "message lacks \"%s\": %s", want, msg);
        free(msg);
        config_done(&c);
}

#define REFUSED(option, want, ...)                                                                                    \
        assert_refused((const char *const[]){ "--shared-dir=/s", __VA_ARGS__, NULL }, option, want)

START_TEST(test_parse_good) {
        IdMapEntry e;

        ck_assert_int_eq(id_map_parse(":0:100000:65536:", &e, NULL), 0);
        ck_assert_uint_eq(e.inside, 0);
        ck_assert_uint_eq(e.outside, 100000);
        ck_assert_uint_eq(e.count, 65536);
        /* the last id of each space, and the whole space */
        ck_assert_int_eq(id_map_parse(":4294967295:4294967295:1:", &e, NULL), 0);
        ck_assert_int_eq(id_map_parse(":0:0:4294967296:", &e, NULL), -ERANGE);
        ck_assert_int_eq(id_map_parse(":0:0:4294967295:", &e, NULL), 0);
        ck_assert_uint_eq(e.count, 4294967295u);
        ck_assert_int_eq(id_map_parse(":0:1:4294967295:", &e, NULL), 0); /* ends exactly at 2^32 - 1 */
        ck_assert_int_eq(id_map_parse(":1:0:4294967295:", &e, NULL), 0);
        ck_assert_int_eq(id_map_parse(":007:08:9:", &e, NULL), 0); /* leading zeros are decimal */
        ck_assert_uint_eq(e.inside, 7);
        ck_assert_uint_eq(e.outside, 8);
}
END_TEST

START_TEST(test_parse_bad) {
        static const struct {
                const char *s;
                int r;
                const char *why;
        } bad[] = {
                { "", -EINVAL, "start with ':'" },
                { "0:0:1:", -EINVAL, "start with ':'" },
                { ":0:0:1", -EINVAL, "four ':'" },
                { ":0:0:", -EINVAL, "four ':'" },
                { ":0:0:1::", -EINVAL, "after the last" },
                { ":0:0:1:x", -EINVAL, "after the last" },
                { "::0:1:", -EINVAL, "namespace id is not" },
                { ":0::1:", -EINVAL, "host id is not" },
                { ":0:0::", -EINVAL, "count is not" },
                { ":+1:0:1:", -EINVAL, "namespace id is not" },
                { ":-1:0:1:", -EINVAL, "namespace id is not" },
                { ": 1:0:1:", -EINVAL, "namespace id is not" },
                { ":\t1:0:1:", -EINVAL, "namespace id is not" },
                { ":0x10:0:1:", -EINVAL, "namespace id is not" },
                { ":0:1e3:1:", -EINVAL, "host id is not" },
                { ":0;0;1;", -EINVAL, "four ':'" },
                { ":0:0:0:", -EINVAL, "count is 0" },
                { ":4294967296:0:1:", -ERANGE, "namespace id is above" },
                { ":0:4294967296:1:", -ERANGE, "host id is above" },
                { ":0:0:99999999999999999999999:", -ERANGE, "count is above" },
                { ":4294967295:0:2:", -ERANGE, "namespace range passes" },
                { ":0:4294967295:2:", -ERANGE, "host range passes" },
                { ":2:0:4294967295:", -ERANGE, "namespace range passes" },
        };
        IdMapEntry e = { 7, 7, 7 };

        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                const char *why = NULL;
                int r = id_map_parse(bad[i].s, &e, &why);
                ck_assert_msg(r == bad[i].r, "\"%s\": %d, expected %d", bad[i].s, r, bad[i].r);
                ck_assert_msg(why && strstr(why, bad[i].why), "\"%s\": reason \"%s\", expected \"%s\"", bad[i].s,
                              why ?: "(none)", bad[i].why);
                ck_assert_int_eq(config_parse_id_map(bad[i].s, &e), -EINVAL);
        }
        ck_assert_uint_eq(e.inside, 7); /* untouched on failure */
        ck_assert_int_eq(id_map_parse(NULL, &e, NULL), -EINVAL);
}
END_TEST

START_TEST(test_list_overlaps_and_size) {
        IdMapList l = {};
        IdMapEntry e;
        const char *why;

        ck_assert_int_eq(id_map_add(&l, &(IdMapEntry){ 0, 1000, 1 }, &why), 0);
        ck_assert_int_eq(id_map_add(&l, &(IdMapEntry){ 1, 100000, 65535 }, &why), 0);
        /* namespace range overlapping the second entry's last id */
        ck_assert_int_eq(id_map_add(&l, &(IdMapEntry){ 65535, 500000, 10 }, &why), -EEXIST);
        ck_assert_ptr_nonnull(strstr(why, "namespace range overlaps"));
        /* host range overlapping the first entry */
        ck_assert_int_eq(id_map_add(&l, &(IdMapEntry){ 70000, 999, 2 }, &why), -EEXIST);
        ck_assert_ptr_nonnull(strstr(why, "host range overlaps"));
        /* a range containing an earlier one entirely */
        ck_assert_int_eq(id_map_add(&l, &(IdMapEntry){ 70000, 0, 4000000 }, &why), -EEXIST);
        ck_assert_uint_eq(l.n, 2);
        /* adjacent is not overlapping */
        ck_assert_int_eq(id_map_add(&l, &(IdMapEntry){ 65536, 165535, 1 }, &why), 0);
        /* ranges reaching the top of the id space */
        ck_assert_int_eq(id_map_add(&l, &(IdMapEntry){ 4294967295u, 4294967295u, 1 }, &why), 0);
        ck_assert_int_eq(id_map_add(&l, &(IdMapEntry){ 4294967290u, 4294967290u, 6 }, &why), -EEXIST);
        ck_assert(id_map_contains(&l, 0));
        ck_assert(id_map_contains(&l, 65535));
        ck_assert(id_map_contains(&l, 65536));
        ck_assert(!id_map_contains(&l, 65537));
        ck_assert(id_map_contains(&l, 4294967295u));

        /* the maximum number of entries */
        l = (IdMapList){};
        for (unsigned i = 0; i < ID_MAP_MAX_ENTRIES; i++) {
                e = (IdMapEntry){ i * 10, 100000 + i * 10, 10 };
                ck_assert_int_eq(id_map_add(&l, &e, &why), 0);
        }
        e = (IdMapEntry){ 1000000, 1000000, 1 };
        ck_assert_int_eq(id_map_add(&l, &e, &why), -E2BIG);
        ck_assert_ptr_nonnull(strstr(why, "more than 32"));
        ck_assert_uint_eq(l.n, ID_MAP_MAX_ENTRIES);
}
END_TEST

START_TEST(test_option_errors_name_the_option) {
        REFUSED("--uid-map", "count is 0", "--uid-map=:0:0:0:");
        REFUSED("--gid-map", "host range passes", "--gid-map=:0:4294967295:2:");
        REFUSED("--uid-map", "start with", "--uid-map=0:0:1");
        REFUSED("--uid-map", "four ':'", "--uid-map=:0:0");
        REFUSED("--gid-map", "namespace range overlaps", "--gid-map=:0:100000:10:", "--gid-map=:9:200000:10:");
        REFUSED("--uid-map", "host range overlaps", "--uid-map=:0:100000:10:", "--uid-map=:10:100005:10:");
        REFUSED("--uid-map", "namespace uid 0", "--sandbox=namespace", "--uid-map=:1:100000:10:");
        REFUSED("--gid-map", "namespace gid 0", "--sandbox=chroot", "--gid-map=:1000:100000:10:");
        REFUSED("--uid-map/--gid-map", "--sandbox=namespace", "--sandbox=none", "--uid-map=:0:100000:10:");
}
END_TEST

START_TEST(test_too_many_entries_option) {
        const char *args[ID_MAP_MAX_ENTRIES + 4];
        char buf[ID_MAP_MAX_ENTRIES + 1][40];
        unsigned n = 0;

        args[n++] = "--shared-dir=/s";
        for (unsigned i = 0; i <= ID_MAP_MAX_ENTRIES; i++) {
                snprintf(buf[i], sizeof buf[i], "--uid-map=:%u:%u:1:", i, 100000 + i);
                args[n++] = buf[i];
        }
        args[n] = NULL;
        {
                Config c;
                int r;
                char *msg = captured(parse_and_verify, &c, args, &r);
                ck_assert_int_lt(r, 0);
                ck_assert_msg(strstr(msg, "--uid-map") && strstr(msg, "more than 32"), "%s", msg);
                free(msg);
                config_done(&c);
        }
}
END_TEST

START_TEST(test_verify_accepts_maps) {
        Config c;

        /* libvirt's usual <idmap>: guest 0..65535 on the user's subordinate range */
        ck_assert_int_eq(test_parse_argv(&c, (const char *const[]){ "--shared-dir=/s", "--sandbox=namespace",
                                                                    "--uid-map=:0:100000:65536:",
                                                                    "--gid-map=:0:100000:65536:", NULL }),
                         0);
        ck_assert_int_eq(config_verify(&c), 0);
        ck_assert_uint_eq(c.uid_map.n, 1);
        ck_assert_uint_eq(c.uid_map.e[0].outside, 100000);
        config_done(&c);
        /* several entries, the caller's own id first */
        ck_assert_int_eq(test_parse_argv(&c, (const char *const[]){ "--shared-dir=/s", "--sandbox=chroot",
                                                                    "--uid-map=:0:1000:1:",
                                                                    "--uid-map=:1:100000:65535:", NULL }),
                         0);
        ck_assert_int_eq(config_verify(&c), 0);
        ck_assert_uint_eq(c.uid_map.n, 2);
        ck_assert_uint_eq(c.gid_map.n, 0);
        config_done(&c);
}
END_TEST

START_TEST(test_format_map) {
        IdMapList l = {};
        char buf[256];

        ck_assert_int_eq(userns_format_map(&l, 1000, buf, sizeof buf), 0);
        ck_assert_str_eq(buf, "0 1000 1\n");
        ck_assert_int_eq(id_map_add(&l, &(IdMapEntry){ 0, 1000, 1 }, NULL), 0);
        ck_assert_int_eq(id_map_add(&l, &(IdMapEntry){ 1, 100000, 65535 }, NULL), 0);
        ck_assert_int_eq(userns_format_map(&l, 5, buf, sizeof buf), 0);
        ck_assert_str_eq(buf, "0 1000 1\n1 100000 65535\n");
        ck_assert_int_eq(userns_format_map(&l, 5, buf, 10), -ENOBUFS);
        ck_assert_int_eq(userns_format_map(&l, 5, buf, 0), -ENOBUFS);
}
END_TEST

/* The default sandbox takes maps as it is (sanitizer builds default to none, util.h). */
START_TEST(test_default_sandbox_takes_maps) {
#ifndef SANITIZER_BUILD
        Config c;

        ck_assert_int_eq(sandbox_mode_default(), SANDBOX_NAMESPACE); /* also unprivileged */
        ck_assert_int_eq(
                test_parse_argv(&c, (const char *const[]){ "--shared-dir=/s", "--uid-map=:0:100000:65536:", NULL }),
                0);
        ck_assert_int_eq(config_verify(&c), 0);
        config_done(&c);
#endif
}
END_TEST

static void add_tests(Suite *s) {
        TCase *tc = tcase_create("id-map");

        tcase_add_test(tc, test_parse_good);
        tcase_add_test(tc, test_parse_bad);
        tcase_add_test(tc, test_list_overlaps_and_size);
        tcase_add_test(tc, test_option_errors_name_the_option);
        tcase_add_test(tc, test_too_many_entries_option);
        tcase_add_test(tc, test_verify_accepts_maps);
        tcase_add_test(tc, test_format_map);
        tcase_add_test(tc, test_default_sandbox_takes_maps);
        suite_add_tcase(s, tc);
}

TEST_MAIN("id-map", add_tests)
