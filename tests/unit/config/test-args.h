/* test-args.h: a command line for the tests of the option parser (test-config.c, test-id-map.c). */
#pragma once

#include <check.h>

#include "config.h"

/* Parses a NULL-terminated argument list (after "vufsd") into c, initialised here first. Returns
 * what config_parse_argv() does. */
static inline int test_parse_argv(Config *c, const char *const *args) {
        char *argv[64];
        int argc = 0;

        argv[argc++] = (char *)"vufsd";
        for (; *args; args++) {
                ck_assert_int_lt(argc, (int)(sizeof argv / sizeof argv[0]) - 1);
                argv[argc++] = (char *)*args;
        }
        argv[argc] = NULL;
        config_init(c);
        return config_parse_argv(c, argc, argv);
}
