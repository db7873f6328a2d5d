/* test-bus-name.c: instance names <-> the last element of their bus name (shared/bus-name.c):
 * known spellings both ways, no two names colliding, and hostile input: NULL, empty, too long,
 * every byte value as a name and as an escape, elements the escape never produces. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "bus-name.h"
#include "test-main.h"
#include "util.h"

static bool is_alnum(unsigned c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_digit(unsigned c) {
        return c >= '0' && c <= '9';
}

/* escape(instance) is a valid bus name element and a valid name, and unescapes to instance. */
static void assert_roundtrip(const char *instance) {
        _cleanup_free_ char *e = NULL, *u = NULL, *name = NULL;

        ck_assert_int_eq(bus_instance_escape(instance, &e), 0);
        ck_assert(e[0] != '\0' && !is_digit((unsigned char) e[0]));
        for (const char *p = e; *p; p++)
                ck_assert_msg(is_alnum((unsigned char) *p) || *p == '_', "escape of a name gave byte 0x%02x",
                              (unsigned char) *p);
        ck_assert_int_eq(bus_instance_to_name(instance, &name), 0);
        ck_assert_msg(sd_bus_service_name_is_valid(name), "invalid bus name %s", name);
        ck_assert_int_eq(bus_instance_unescape(e, &u), 0);
        ck_assert_str_eq(u, instance);
}

START_TEST(test_known_spellings) {
        static const struct {
                const char *instance, *element;
        } cases[] = {
                { "vm1", "vm1" },      { "my-vm", "my_2dvm" }, { "a_b", "a_5fb" }, { "9p", "_39p" },
                { "a.b", "a_2eb" },    { "x9", "x9" },         { "\"q\\", "_22q_5c" }, { "é", "_c3_a9" },
        };
        char *s;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                ck_assert_int_eq(bus_instance_escape(cases[i].instance, &s), 0);
                ck_assert_str_eq(s, cases[i].element);
                free(s);
                ck_assert_int_eq(bus_instance_unescape(cases[i].element, &s), 0);
                ck_assert_str_eq(s, cases[i].instance);
                free(s);
                assert_roundtrip(cases[i].instance);
        }
        /* Distinct names never collide: the escape character is escaped too. */
        char *a, *b;
        ck_assert_int_eq(bus_instance_escape("a.b", &a), 0);
        ck_assert_int_eq(bus_instance_escape("a_2eb", &b), 0);
        ck_assert_str_ne(a, b);
        free(a);
        free(b);
}
END_TEST

START_TEST(test_empty_and_null) {
        char *s = NULL;

        ck_assert_int_eq(bus_instance_escape("", &s), -EINVAL);
        ck_assert_int_eq(bus_instance_escape(NULL, &s), -EINVAL);
        ck_assert_int_eq(bus_instance_to_name("", &s), -EINVAL);
        ck_assert_int_eq(bus_instance_unescape("", &s), -EINVAL);
        ck_assert_int_eq(bus_instance_unescape(NULL, &s), -EINVAL);
        ck_assert_ptr_null(s); /* nothing returned on failure */
}
END_TEST

/* BUS_INSTANCE_MAX bytes pass in either direction, one more does not, whatever the bytes escape to
 * (0xff triples in length and must still make a valid, not too long, bus name). */
START_TEST(test_length) {
        char name[BUS_INSTANCE_MAX + 2];
        static const unsigned char fills[] = { 'x', 0xff, '_', '9' };
        char *s = NULL;

        for (size_t f = 0; f < ELEMENTSOF(fills); f++) {
                _cleanup_free_ char *e = NULL;

                memset(name, fills[f], BUS_INSTANCE_MAX + 1);
                name[BUS_INSTANCE_MAX + 1] = '\0';
                ck_assert_int_eq(bus_instance_escape(name, &s), -EINVAL);
                ck_assert_int_eq(bus_instance_to_name(name, &s), -EINVAL);
                /* An element that decodes to one byte too many is refused too. */
                ck_assert_int_eq(bus_instance_escape(name + 1, &e), 0);
                {
                        _cleanup_free_ char *longer = NULL;
                        ck_assert_int_ge(asprintf(&longer, "%s%s", e, fills[f] == 'x' ? "x" : "_ff"), 0);
                        ck_assert_int_eq(bus_instance_unescape(longer, &s), -EINVAL);
                }
                ck_assert_ptr_null(s);
                name[BUS_INSTANCE_MAX] = '\0';
                assert_roundtrip(name);
        }
}
END_TEST

/* Every byte value, alone, first and after a letter: escaped to a valid element and back. */
START_TEST(test_every_byte_as_name) {
        for (unsigned c = 1; c < 256; c++) {
                char one[2] = { (char) c, '\0' }, first[3] = { (char) c, 'a', '\0' }, second[3] = { 'a', (char) c, '\0' };
                assert_roundtrip(one);
                assert_roundtrip(first);
                assert_roundtrip(second);
        }
}
END_TEST

/* Every byte value as a raw character of an element, and as the value of an escape: accepted
 * exactly when bus_instance_escape() would produce that spelling, so one name has one element. */
START_TEST(test_every_byte_in_element) {
        for (unsigned c = 0; c < 256; c++) {
                char *s = NULL;
                char raw_first[3] = { (char) c, 'a', '\0' }, raw_second[3] = { 'a', (char) c, '\0' };
                char esc_first[4], esc_second[5];

                /* c == 0 would end the string: "a" then, accepted as itself. */
                if (c != 0) {
                        int r = bus_instance_unescape(raw_first, &s);
                        ck_assert_msg((r == 0) == (is_alnum(c) && !is_digit(c)), "raw first 0x%02x: %d", c, r);
                        free(s);
                        s = NULL;
                        r = bus_instance_unescape(raw_second, &s);
                        ck_assert_msg((r == 0) == is_alnum(c), "raw second 0x%02x: %d", c, r);
                        free(s);
                        s = NULL;
                }
                snprintf(esc_first, sizeof esc_first, "_%02x", c);
                snprintf(esc_second, sizeof esc_second, "a_%02x", c);
                int r = bus_instance_unescape(esc_first, &s);
                ck_assert_msg((r == 0) == (c != 0 && (!is_alnum(c) || is_digit(c))), "escape first 0x%02x: %d", c,
                              r);
                if (r == 0)
                        ck_assert_uint_eq((unsigned char) s[0], c);
                free(s);
                s = NULL;
                r = bus_instance_unescape(esc_second, &s);
                ck_assert_msg((r == 0) == (c != 0 && !is_alnum(c)), "escape second 0x%02x: %d", c, r);
                free(s);
                s = NULL;
                /* Upper-case hex is another spelling of the same byte: refused. */
                if ((c >> 4) >= 10 || (c & 15) >= 10) {
                        snprintf(esc_first, sizeof esc_first, "_%02X", c);
                        ck_assert_msg(bus_instance_unescape(esc_first, &s) == -EINVAL, "%s accepted", esc_first);
                }
        }
}
END_TEST

/* Elements the escape never produces. */
START_TEST(test_malformed_elements) {
        static const char *const bad[] = { "_",   "_4",  "_zz", "_41",  "_00", "9x",   "a-b",  "_2E",
                                           "a_",  "a_4", "__",  "_g0",  "_0g", "a.b",  "a b",  "x_5F",
                                           "_-1", "_ 1", "é",   "_3",   "ab_f", "a\xff", "a_4x" };
        char *s = NULL;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ck_assert_msg(bus_instance_unescape(bad[i], &s) == -EINVAL, "\"%s\" accepted", bad[i]);
        ck_assert_ptr_null(s);
}
END_TEST

static Suite *bus_name_suite(void) {
        Suite *s = suite_create("bus-name");
        TCase *tc = tcase_create("bus-name");

        tcase_add_test(tc, test_known_spellings);
        tcase_add_test(tc, test_empty_and_null);
        tcase_add_test(tc, test_length);
        tcase_add_test(tc, test_every_byte_as_name);
        tcase_add_test(tc, test_every_byte_in_element);
        tcase_add_test(tc, test_malformed_elements);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(bus_name_suite)
