/* test-inflight.c: the in-flight table (inflight.c) through a ring that a real process pops, pushes
 * and publishes on, killed at each step of a request's life; the table it leaves tells the next
 * process what to run again, what to publish again and where to go on. */
#include <check.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "inflight.h"
#include "ring-fixture.h"
#include "virtqueue.h"
#include "test-main.h"

static Inflight table;

static void setup(void) {
        /* Shared: the killed child's ring writes are the guest's, seen by the parent. */
        ring_fixture_memory();
        ck_assert_int_eq(inflight_new(&table, NUM), 0);
        vq = (VirtQueue) { .num = NUM, .desc_qva = UADDR + DESC_GPA, .avail_qva = UADDR + AVAIL_GPA,
                           .used_qva = UADDR + USED_GPA, .inflight = &table };
        avail_idx = 0;
        ck_assert_int_eq(vq_map(&vq, mem), 0);
        /* Five one-descriptor requests, heads 4..8. */
        for (uint16_t h = 4; h <= 8; h++) {
                desc()[h] =
                        (struct vring_desc) { .addr = BUF_GPA + h * 0x100u, .len = 64, .flags = VRING_DESC_F_WRITE };
                avail()->ring[avail_idx++ % NUM] = h;
        }
        avail()->idx = avail_idx;
}

static void teardown(void) {
        inflight_done(&table);
        guest_memory_unref(mem);
        close(memfd);
}

/* The serving process's steps, numbered: a child runs the first `steps` of them and is killed. */
static void run_steps(unsigned steps) {
        VqElem *e = malloc(sizeof *e);
        unsigned step = 0;

#define STEP(x)                                                                                    \
        do {                                                                                       \
                if (step++ == steps)                                                               \
                        raise(SIGKILL);                                                            \
                x;                                                                                 \
        } while (0)
        STEP(ck_assert_int_eq(vq_pop(&vq, mem, e), VQ_POP_OK));  /* head 4 */
        STEP(ck_assert_int_eq(vq_pop(&vq, mem, e), VQ_POP_OK));  /* head 5 */
        STEP(ck_assert_int_eq(vq_pop(&vq, mem, e), VQ_POP_OK));  /* head 6 */
        STEP(vq_push(&vq, 5, 11));                                /* 5 answered first */
        STEP(vq_publish(&vq));
        STEP(vq_push(&vq, 4, 10));                                /* 4's reply written... */
        STEP(ck_assert_int_eq(vq_pop(&vq, mem, e), VQ_POP_OK));  /* head 7 */
        STEP(raise(SIGKILL));                                     /* ...never published */
#undef STEP
}

/* What a resuming process finds after a kill before step k. */
static void killed_at(unsigned k, InflightResume *res) {
        pid_t pid = fork();
        int status;
        Inflight again;

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                run_steps(k);
                _exit(0);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        /* The next process: the same memfd, mapped anew. */
        ck_assert_int_eq(inflight_adopt(&again, dup(table.fd), NUM), 0);
        ck_assert_int_eq(inflight_resume(&again, used()->idx, res), 0);
        inflight_done(&again);
}

START_TEST(test_kill_before_any_pop) {
        InflightResume res;

        killed_at(0, &res);
        ck_assert_uint_eq(res.last_avail, 0);
        ck_assert_uint_eq(res.n_rerun + res.n_repush, 0);
        inflight_resume_done(&res);
}
END_TEST

START_TEST(test_kill_after_pops) {
        InflightResume res;

        killed_at(3, &res);
        ck_assert_uint_eq(res.last_avail, 3);
        ck_assert_uint_eq(res.n_rerun, 3);
        ck_assert_uint_eq(res.rerun[0], 4); /* in pop order */
        ck_assert_uint_eq(res.rerun[1], 5);
        ck_assert_uint_eq(res.rerun[2], 6);
        ck_assert_uint_eq(res.n_repush, 0);
        inflight_resume_done(&res);
}
END_TEST

/* 5's reply was written and its used entry too, the index not published: published again, not
 * run again (a write would be doubled). */
START_TEST(test_kill_after_push_before_publish) {
        InflightResume res;

        killed_at(4, &res);
        ck_assert_uint_eq(used()->idx, 0);
        ck_assert_uint_eq(res.n_rerun, 2);
        ck_assert_uint_eq(res.rerun[0], 4);
        ck_assert_uint_eq(res.rerun[1], 6);
        ck_assert_uint_eq(res.n_repush, 1);
        ck_assert_uint_eq(res.repush[0], 5);
        inflight_resume_done(&res);
}
END_TEST

/* Published: the guest has it, nothing of 5 is done again. */
START_TEST(test_kill_after_publish) {
        InflightResume res;

        killed_at(5, &res);
        ck_assert_uint_eq(used()->idx, 1);
        ck_assert_uint_eq(res.n_repush, 0);
        ck_assert_uint_eq(res.n_rerun, 2);
        inflight_resume_done(&res);
}
END_TEST

START_TEST(test_kill_at_the_end) {
        InflightResume res;

        killed_at(100, &res);
        ck_assert_uint_eq(res.last_avail, 4);
        ck_assert_uint_eq(res.n_repush, 1);
        ck_assert_uint_eq(res.repush[0], 4);
        ck_assert_uint_eq(table.h->desc[4].len, 10);
        ck_assert_uint_eq(res.n_rerun, 2); /* 6 and 7, in pop order */
        ck_assert_uint_eq(res.rerun[0], 6);
        ck_assert_uint_eq(res.rerun[1], 7);
        inflight_resume_done(&res);
}
END_TEST

/* A kill between a pop's entry and the table's last_avail: the entry is dropped, the pop repeated
 * (not run twice: once from the table and once from the ring). */
START_TEST(test_entry_past_last_avail_is_popped_again) {
        InflightResume res;

        inflight_popped(&table, 4, 0);
        inflight_set_last_avail(&table, 0);
        ck_assert_int_eq(inflight_resume(&table, 0, &res), 0);
        ck_assert_uint_eq(res.last_avail, 0);
        ck_assert_uint_eq(res.n_rerun, 0);
        inflight_resume_done(&res);
}
END_TEST

/* Answered but not pushed (killed between the handler's reply and the used entry): published by
 * the next process, after what was pushed before it, never run again. */
START_TEST(test_replied_is_published_not_run) {
        InflightResume res;

        inflight_popped(&table, 4, 0);
        inflight_popped(&table, 5, 1);
        inflight_replied(&table, 5, 99);
        inflight_pushed(&table, 4, 0, 10);
        ck_assert_int_eq(inflight_resume(&table, 0, &res), 0);
        ck_assert_uint_eq(res.n_rerun, 0);
        ck_assert_uint_eq(res.n_repush, 2);
        ck_assert_uint_eq(res.repush[0], 4);
        ck_assert_uint_eq(res.repush[1], 5);
        ck_assert_uint_eq(table.h->desc[5].len, 99);
        inflight_resume_done(&res);
}
END_TEST

/* Host call done, no reply: in the rerun list in pop order, its result kept for the answer. */
START_TEST(test_host_done_keeps_its_result) {
        InflightResume res;

        inflight_popped(&table, 4, 0);
        inflight_popped(&table, 5, 1);
        inflight_host_done(&table, 4, -17);
        ck_assert_int_eq(inflight_resume(&table, 0, &res), 0);
        ck_assert_uint_eq(res.n_rerun, 2);
        ck_assert_uint_eq(res.rerun[0], 4);
        ck_assert_uint_eq(table.h->desc[4].state, INFLIGHT_HOST_DONE);
        ck_assert_int_eq(table.h->desc[4].result, -17);
        ck_assert_uint_eq(table.h->desc[5].state, INFLIGHT_POPPED);
        inflight_resume_done(&res);
}
END_TEST

/* A table of another size or not a table at all is refused, not read past its end. */
START_TEST(test_adopt_checks) {
        Inflight t;
        int fd = memfd_create("x", MFD_CLOEXEC);

        ck_assert_int_eq(inflight_adopt(&t, dup(table.fd), NUM * 2), -EBADMSG);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, (off_t) inflight_size(NUM)), 0);
        ck_assert_int_eq(inflight_adopt(&t, fd, NUM), -EBADMSG); /* not sealed */
}
END_TEST

static Suite *inflight_suite(void) {
        Suite *s = suite_create("inflight");
        TCase *tc = tcase_create("kills");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_kill_before_any_pop);
        tcase_add_test(tc, test_kill_after_pops);
        tcase_add_test(tc, test_kill_after_push_before_publish);
        tcase_add_test(tc, test_kill_after_publish);
        tcase_add_test(tc, test_kill_at_the_end);
        tcase_add_test(tc, test_entry_past_last_avail_is_popped_again);
        tcase_add_test(tc, test_replied_is_published_not_run);
        tcase_add_test(tc, test_host_done_keeps_its_result);
        tcase_add_test(tc, test_adopt_checks);
        suite_add_tcase(s, tc);
        return s;
}

TEST_MAIN_SUITE(inflight_suite)
