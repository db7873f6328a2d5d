/* test-xattr-map.c: the --xattrmap rule language: parsing (malformed input refused with a
 * reason), the map shorthand's expansion, both name translations and the listxattr rewrite. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattr-map.h"
#include "test-main.h"

static XattrMap *parse_ok(const char *spec) {
        XattrMap *m = NULL;
        const char *why = NULL;
        int r = xattr_map_parse(spec, &m, &why);
        ck_assert_msg(r == 0, "\"%s\": %s", spec, why ?: "?");
        return m;
}

/* The host name for name, or the error as a string ("EPERM", "ENOTSUP"). */
static const char *host(const XattrMap *m, const char *name) {
        static char buf[256];
        char *s = NULL;
        int r = xattr_map_to_host(m, name, &s);
        if (r == -EPERM)
                return "EPERM";
        if (r == -ENOTSUP)
                return "ENOTSUP";
        ck_assert_int_eq(r, 0);
        snprintf(buf, sizeof buf, "%s", s);
        free(s);
        return buf;
}

static const char *guest(const XattrMap *m, const char *name) {
        const char *g;
        return xattr_map_to_guest(m, name, &g) ? g : "(hidden)";
}

START_TEST(test_malformed) {
        static const char *const bad[] = {
                "",
                "   ",
                ":",
                ":prefix",
                ":prefix:all",
                ":prefix:all:user.",
                ":prefix:all:user.:x", /* the closing separator is missing */
                ":prefix:nowhere:a:b:", /* scope */
                ":frob:all:a:b:", /* type */
                ":map:user.", /* map needs key and prepend */
                ":map:::", /* empty prepend */
                ":map::user.virtiofs.::ok:all:::", /* map not last */
                "prefix:all:a:b:", /* must start with a separator */
                ".prefix.all.a.b.",
                ":ok:all:::junk",
                /* onto map mode's own attribute (--privileged-files=map): refused */
                ":prefix:all:trusted.:user.vufsd.:",
                ":prefix:client:x.:user.vufsd.privileged:",
                ":map:security.:user.vufsd.:",
                ":prefix:all:trusted.:user.v:",
                NULL,
        };
        for (const char *const *b = bad; *b; b++) {
                XattrMap *m = NULL;
                const char *why = NULL;
                ck_assert_msg(xattr_map_parse(*b, &m, &why) == -EINVAL, "accepted \"%s\"", *b);
                ck_assert_ptr_null(m);
                ck_assert_ptr_nonnull(why);
        }
        {
                XattrMap *m = NULL;
                ck_assert_int_eq(xattr_map_parse(NULL, &m, NULL), -EINVAL);
        }
        /* too many rules */
        {
                char *big = malloc(300 * 12 + 1), *p = big;
                XattrMap *m = NULL;
                for (int i = 0; i < 300; i++)
                        p += sprintf(p, ":ok:all::");
                ck_assert_int_eq(xattr_map_parse(big, &m, NULL), -EINVAL); /* last rule lacks its end */
                strcpy(big, "");
                p = big;
                for (int i = 0; i < 300; i++)
                        p += sprintf(p, ":ok:all:::");
                ck_assert_int_ne(xattr_map_parse(big, &m, NULL), 0);
                free(big);
        }
}
END_TEST

START_TEST(test_any_separator_and_spaces) {
        XattrMap *m = parse_ok("/prefix/client/trusted./user.virtiofs./  |ok|all|||\n");
        ck_assert_uint_eq(xattr_map_n_rules(m), 2);
        ck_assert_str_eq(host(m, "trusted.overlay.x"), "user.virtiofs.trusted.overlay.x");
        ck_assert_str_eq(host(m, "user.a"), "user.a");
        xattr_map_free(m);
        /* a separator that appears in names: ',' and ':' both fine */
        m = parse_ok(",prefix,all,security.,user.sec:,");
        ck_assert_str_eq(host(m, "security.selinux"), "user.sec:security.selinux");
        ck_assert_str_eq(host(m, "user.a"), "EPERM"); /* no rule matched */
        xattr_map_free(m);
}
END_TEST

START_TEST(test_rules) {
        /* The C virtiofsd documentation's example: guest trusted. and security. live under
         * user.virtiofs. on the host; the host's own trusted./security. are hidden; the rest passes. */
        XattrMap *m = parse_ok(":prefix:all:trusted.:user.virtiofs.:"
                               ":prefix:all:security.:user.virtiofs.:"
                               ":bad:all:::");
        ck_assert_str_eq(host(m, "trusted.a"), "user.virtiofs.trusted.a");
        ck_assert_str_eq(host(m, "security.selinux"), "user.virtiofs.security.selinux");
        ck_assert_str_eq(host(m, "user.x"), "EPERM");
        ck_assert_str_eq(guest(m, "user.virtiofs.trusted.a"), "trusted.a");
        ck_assert_str_eq(guest(m, "security.selinux"), "(hidden)");
        ck_assert_str_eq(guest(m, "user.virtiofs."), "(hidden)"); /* the bare prefix */
        xattr_map_free(m);

        m = parse_ok(":unsupported:client:system.posix_acl_::"
                     ":bad:server::user.hidden.:" /* server rules match the prepend field */
                     ":ok:all:::");
        ck_assert_str_eq(host(m, "system.posix_acl_access"), "ENOTSUP");
        ck_assert_str_eq(host(m, "user.hidden.x"), "user.hidden.x"); /* server scope only */
        ck_assert_str_eq(guest(m, "user.hidden.x"), "(hidden)");
        ck_assert_str_eq(guest(m, "system.posix_acl_access"), "system.posix_acl_access");
        xattr_map_free(m);
}
END_TEST

START_TEST(test_map_shorthand) {
        /* everything under one prefix: 2 rules */
        XattrMap *m = parse_ok(":map::user.virtiofs.:");
        ck_assert_uint_eq(xattr_map_n_rules(m), 2);
        ck_assert_str_eq(host(m, "security.selinux"), "user.virtiofs.security.selinux");
        ck_assert_str_eq(host(m, "user.a"), "user.virtiofs.user.a");
        ck_assert_str_eq(guest(m, "user.virtiofs.user.a"), "user.a");
        ck_assert_str_eq(guest(m, "user.a"), "(hidden)");
        ck_assert_str_eq(guest(m, "security.selinux"), "(hidden)");
        xattr_map_free(m);

        /* one namespace under a prefix: 4 rules */
        m = parse_ok(":prefix:client:a.:b.:  :map:trusted.:user.virtiofs.:");
        ck_assert_uint_eq(xattr_map_n_rules(m), 5);
        ck_assert_str_eq(host(m, "trusted.overlay"), "user.virtiofs.trusted.overlay");
        ck_assert_str_eq(host(m, "user.plain"), "user.plain"); /* ok all */
        ck_assert_str_eq(host(m, "user.virtiofs.trusted.x"), "EPERM"); /* prefixed names only via the map */
        ck_assert_str_eq(guest(m, "user.virtiofs.trusted.overlay"), "trusted.overlay");
        ck_assert_str_eq(guest(m, "trusted.host-own"), "(hidden)"); /* looks unprefixed */
        ck_assert_str_eq(guest(m, "user.plain"), "user.plain");
        xattr_map_free(m);
}
END_TEST

START_TEST(test_list) {
        XattrMap *m = parse_ok(":map:trusted.:user.virtiofs.:");
        static const char in[] = "user.a\0trusted.host\0user.virtiofs.trusted.t\0security.selinux\0";
        static const char want[] = "user.a\0trusted.t\0security.selinux\0";
        char out[128];
        ssize_t n;

        n = xattr_map_list(m, in, sizeof in - 1, NULL, 0);
        ck_assert_int_eq(n, (ssize_t)sizeof want - 1);
        n = xattr_map_list(m, in, sizeof in - 1, out, sizeof out);
        ck_assert_int_eq(n, (ssize_t)sizeof want - 1);
        ck_assert(memcmp(out, want, sizeof want - 1) == 0);
        ck_assert_int_eq(xattr_map_list(m, in, sizeof in - 1, out, 5), -ERANGE);
        ck_assert_int_eq(xattr_map_list(m, "user.a", 6, out, sizeof out), -EINVAL); /* no final NUL */
        ck_assert_int_eq(xattr_map_list(m, "", 0, out, sizeof out), 0);
        xattr_map_free(m);
}
END_TEST

/* The host name of security.capability, which the passthrough drops on write: only when the map
 * renames it; not when it passes unchanged or is refused. */
START_TEST(test_capability_name) {
        static const struct {
                const char *spec, *want;
        } cases[] = {
                { ":map:security.capability:user.virtiofs.:", "user.virtiofs.security.capability" },
                { ":map::user.virtiofs.:", "user.virtiofs.security.capability" }, /* everything prefixed */
                { ":prefix:all:security.:trusted.vm.: :ok:all:::", "trusted.vm.security.capability" },
                { ":ok:all:::", NULL }, /* unchanged */
                { ":map:user.:user.vm.:", NULL }, /* not matched: ok all */
                { ":bad:client:security.capability:: :ok:all:::", NULL }, /* refused */
                { ":unsupported:all:security.:: :ok:all:::", NULL },
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                XattrMap *m = parse_ok(cases[i].spec);
                const char *got = xattr_map_capability_name(m);
                if (cases[i].want)
                        ck_assert_msg(got && strcmp(got, cases[i].want) == 0, "%s: %s", cases[i].spec, got ?: "NULL");
                else
                        ck_assert_msg(!got, "%s: %s, expected none", cases[i].spec, got);
                xattr_map_free(m);
        }
        ck_assert_ptr_null(xattr_map_capability_name(NULL));
}
END_TEST

static void add_tests(Suite *s) {
        TCase *tc = tcase_create("xattr-map");

        tcase_add_test(tc, test_malformed);
        tcase_add_test(tc, test_any_separator_and_spaces);
        tcase_add_test(tc, test_rules);
        tcase_add_test(tc, test_map_shorthand);
        tcase_add_test(tc, test_list);
        tcase_add_test(tc, test_capability_name);
        suite_add_tcase(s, tc);
}

TEST_MAIN("xattr-map", add_tests)
