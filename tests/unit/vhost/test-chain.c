/* test-chain.c: the descriptor-chain byte stream reader/writer. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "chain.h"
#include "test-main.h"

START_TEST(test_read_across_iovecs) {
        char a[3] = "abc", b[1] = "d", c[4] = "efgh";
        struct iovec v[] = { { a, 3 }, { NULL, 0 }, { b, 1 }, { c, 4 } };
        ChainIter it;
        char out[8];

        chain_iter_init(&it, v, 4);
        ck_assert_uint_eq(chain_left(&it), 8);
        ck_assert_int_eq(chain_read(&it, out, 5), 0);
        ck_assert_mem_eq(out, "abcde", 5);
        ck_assert_uint_eq(chain_consumed(&it), 5);
        /* Too much: nothing consumed. */
        ck_assert_int_eq(chain_read(&it, out, 4), -EBADMSG);
        ck_assert_uint_eq(chain_left(&it), 3);
        ck_assert_int_eq(chain_skip(&it, 1), 0);
        ck_assert_int_eq(chain_read(&it, out, 2), 0);
        ck_assert_mem_eq(out, "gh", 2);
        ck_assert_uint_eq(chain_left(&it), 0);
        ck_assert_int_eq(chain_read(&it, out, 0), 0);
        ck_assert_int_eq(chain_skip(&it, 1), -EBADMSG);
}
END_TEST

START_TEST(test_write_and_zero) {
        char a[2], b[5];
        struct iovec v[] = { { a, 2 }, { b, 5 } };
        ChainIter it;

        memset(a, 'x', 2);
        memset(b, 'x', 5);
        chain_iter_init(&it, v, 2);
        ck_assert_int_eq(chain_write(&it, "123", 3), 0);
        ck_assert_int_eq(chain_zero(&it, 2), 0);
        ck_assert_int_eq(chain_write(&it, "456", 3), -ENOSPC);
        ck_assert_int_eq(chain_write(&it, "45", 2), 0);
        ck_assert_mem_eq(a, "12", 2);
        ck_assert_mem_eq(b, "3\0\0" "45", 5);
        ck_assert_int_eq(chain_zero(&it, 1), -ENOSPC);
}
END_TEST

START_TEST(test_peek_and_split) {
        char a[4], b[4], c[4];
        struct iovec v[] = { { a, 4 }, { b, 4 }, { c, 4 } }, out[3];
        ChainIter it, sub;

        chain_iter_init(&it, v, 3);
        ck_assert_int_eq(chain_skip(&it, 2), 0);
        ck_assert_int_eq(chain_peek_iov(&it, 7, out, 3), 3);
        ck_assert_ptr_eq(out[0].iov_base, a + 2);
        ck_assert_uint_eq(out[0].iov_len, 2);
        ck_assert_uint_eq(out[1].iov_len, 4);
        ck_assert_uint_eq(out[2].iov_len, 1);
        ck_assert_int_eq(chain_peek_iov(&it, 7, out, 2), -E2BIG);
        ck_assert_int_eq(chain_peek_iov(&it, 11, out, 3), -ENOSPC);
        /* peek consumes nothing */
        ck_assert_uint_eq(chain_left(&it), 10);

        ck_assert_int_eq(chain_split(&it, 3, &sub), 0);
        ck_assert_uint_eq(chain_left(&sub), 3);
        ck_assert_uint_eq(chain_left(&it), 7);
        /* the sub-iterator never reaches past its length */
        ck_assert_int_eq(chain_write(&sub, "wxyz", 4), -ENOSPC);
        ck_assert_int_eq(chain_write(&sub, "xyz", 3), 0);
        ck_assert_mem_eq(a + 2, "xy", 2);
        ck_assert_mem_eq(b, "z", 1);
        ck_assert_int_eq(chain_peek_iov(&sub, 1, out, 3), -ENOSPC);
        ck_assert_int_eq(chain_split(&it, 8, &sub), -EBADMSG);
}
END_TEST

/* Reads and writes that fit in the current iovec take a shortcut; it must leave the iterator exactly
 * where the general walk would (past empty iovecs, on the next byte). */
START_TEST(test_contiguous_shortcut) {
        char a[4] = "abcd", b[3] = "efg", w1[2], w2[3];
        struct iovec v[] = { { a, 4 }, { NULL, 0 }, { NULL, 0 }, { b, 3 } };
        struct iovec wv[] = { { w1, 2 }, { NULL, 0 }, { w2, 3 } };
        struct iovec peek[2];
        ChainIter it;
        char out[4];

        chain_iter_init(&it, v, 4);
        ck_assert_int_eq(chain_read(&it, out, 2), 0);
        ck_assert_mem_eq(out, "ab", 2);
        ck_assert_int_eq(chain_read(&it, out, 2), 0); /* ends exactly at an iovec's end */
        ck_assert_mem_eq(out, "cd", 2);
        ck_assert_uint_eq(it.idx, 3);
        ck_assert_uint_eq(chain_left(&it), 3);
        ck_assert_uint_eq(chain_consumed(&it), 4);
        ck_assert_int_eq(chain_peek_iov(&it, 3, peek, 2), 1);
        ck_assert_ptr_eq(peek[0].iov_base, b);
        ck_assert_int_eq(chain_read(&it, out, 3), 0);
        ck_assert_mem_eq(out, "efg", 3);
        ck_assert_uint_eq(it.idx, 4);
        ck_assert_int_eq(chain_read(&it, out, 1), -EBADMSG);

        chain_iter_init(&it, wv, 3);
        ck_assert_int_eq(chain_write(&it, "12", 2), 0);
        ck_assert_uint_eq(it.idx, 2);
        ck_assert_int_eq(chain_write(&it, "345", 3), 0);
        ck_assert_mem_eq(w1, "12", 2);
        ck_assert_mem_eq(w2, "345", 3);
        ck_assert_int_eq(chain_write(&it, "6", 1), -ENOSPC);
}
END_TEST

static Suite *chain_suite(void) {
        Suite *s = suite_create("chain");
        TCase *tc = tcase_create("core");
        tcase_add_test(tc, test_read_across_iovecs);
        tcase_add_test(tc, test_write_and_zero);
        tcase_add_test(tc, test_peek_and_split);
        tcase_add_test(tc, test_contiguous_shortcut);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(chain_suite)
