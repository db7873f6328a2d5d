/* test-virtqueue.c: split-ring popping, pushing and notification, and hostile rings. */
#include <check.h>
#include <string.h>
#include <sys/mman.h>

#include "ring-fixture.h"
#include "virtqueue.h"
#include "test-main.h"

#define IND_GPA 0x3000

static VqElem elem;

static void setup(void) {
        ring_fixture_memory();

        vq = (VirtQueue) { .num = NUM, .desc_qva = UADDR + DESC_GPA, .avail_qva = UADDR + AVAIL_GPA,
                           .used_qva = UADDR + USED_GPA, .indirect = true };
        avail_idx = 0;
        ck_assert_int_eq(vq_map(&vq, mem), 0);
}

static void teardown(void) {
        guest_memory_unref(mem);
        close(memfd);
}

static void set_desc(unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next) {
        desc()[i] = (struct vring_desc) { .addr = addr, .len = len, .flags = flags, .next = next };
}

static void post(uint16_t head) {
        avail()->ring[avail_idx % NUM] = head;
        avail_idx++;
        avail()->idx = avail_idx;
}

START_TEST(test_pop_direct_chain) {
        memcpy(host + BUF_GPA, "request", 7);
        set_desc(3, BUF_GPA, 7, VRING_DESC_F_NEXT, 5);
        set_desc(5, BUF_GPA + 0x100, 16, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 6);
        set_desc(6, BUF_GPA + 0x200, 32, VRING_DESC_F_WRITE, 0);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_EMPTY);
        post(3);
        ck_assert_uint_eq(vq_pending(&vq), 1);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
        ck_assert_uint_eq(elem.head, 3);
        ck_assert_uint_eq(elem.n_in, 1);
        ck_assert_uint_eq(elem.n_out, 2);
        ck_assert_mem_eq(elem.iov[0].iov_base, "request", 7);
        ck_assert_ptr_eq(elem.iov[2].iov_base, host + BUF_GPA + 0x200);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_EMPTY);

        vq_push(&vq, 3, 48);
        ck_assert_uint_eq(used()->idx, 0); /* not published before flush */
        ck_assert(vq_flush(&vq));
        ck_assert_uint_eq(used()->idx, 1);
        ck_assert_uint_eq(used()->ring[0].id, 3);
        ck_assert_uint_eq(used()->ring[0].len, 48);
}
END_TEST

START_TEST(test_pop_indirect) {
        struct vring_desc *t = (struct vring_desc *) (host + IND_GPA);
        t[0] = (struct vring_desc) { BUF_GPA, 40, VRING_DESC_F_NEXT, 1 };
        t[1] = (struct vring_desc) { BUF_GPA + 0x1000, 16, VRING_DESC_F_WRITE, 0 };
        set_desc(0, IND_GPA, 2 * sizeof *t, VRING_DESC_F_INDIRECT, 0);
        post(0);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
        ck_assert_uint_eq(elem.n_in, 1);
        ck_assert_uint_eq(elem.n_out, 1);
        ck_assert_uint_eq(elem.iov[1].iov_len, 16);
}
END_TEST

/* Each malformed chain fails its own request only; the ring keeps working afterwards. */
static void expect_bad_then_good(void) {
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_BAD_CHAIN);
        ck_assert_uint_eq(elem.n_in + elem.n_out, 0);
        set_desc(9, BUF_GPA, 8, 0, 0);
        post(9);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
        ck_assert_uint_eq(elem.head, 9);
}

START_TEST(test_loop) {
        set_desc(1, BUF_GPA, 8, VRING_DESC_F_NEXT, 2);
        set_desc(2, BUF_GPA, 8, VRING_DESC_F_NEXT, 1);
        post(1);
        expect_bad_then_good();
}
END_TEST

START_TEST(test_next_out_of_range) {
        set_desc(1, BUF_GPA, 8, VRING_DESC_F_NEXT, NUM);
        post(1);
        expect_bad_then_good();
}
END_TEST

START_TEST(test_addr_outside_memory) {
        set_desc(1, MEM_SIZE - 4, 8, 0, 0);
        post(1);
        expect_bad_then_good();
}
END_TEST

START_TEST(test_addr_wraps) {
        set_desc(1, UINT64_MAX - 2, 8, 0, 0);
        post(1);
        expect_bad_then_good();
}
END_TEST

/* The region guess (vq.region_hint) saves the search for descriptors in the region of the one
 * before; whatever it holds, each buffer must land where the general path puts it, and nothing
 * outside the snapshot at hand may be reached through a guess left by a larger one. */
/* Posts descriptor i alone (addr, len, flags) and pops it through m. */
static int pop_one(uint16_t i, uint64_t addr, uint32_t len, uint16_t flags, const GuestMemory *m) {
        set_desc(i, addr, len, flags, 0);
        post(i);
        return vq_pop(&vq, m, &elem);
}

START_TEST(test_region_hint) {
        _cleanup_close_ int fd2 = memfd_create("vq2", MFD_CLOEXEC);
        GuestRegion *g2;
        GuestMemory *two;
        uint8_t *host2;

        ck_assert_int_ge(fd2, 0);
        ck_assert_int_eq(ftruncate(fd2, 0x10000), 0);
        ck_assert_int_eq(guest_region_new(&g2, fd2, MEM_SIZE, 0x10000, UADDR + MEM_SIZE, 0), 0);
        ck_assert_int_eq(guest_memory_add(mem, g2, &two), 0);
        host2 = g2->host;
        guest_region_unref(g2);

        /* Second region, then back to the first: the guess follows. */
        ck_assert_int_eq(pop_one(1, MEM_SIZE + 0x100, 16, 0, two), VQ_POP_OK);
        ck_assert_ptr_eq(elem.iov[0].iov_base, host2 + 0x100);
        ck_assert_uint_eq(vq.region_hint, 1);
        ck_assert_int_eq(pop_one(2, BUF_GPA, 16, 0, two), VQ_POP_OK);
        ck_assert_ptr_eq(elem.iov[0].iov_base, host + BUF_GPA);
        ck_assert_uint_eq(vq.region_hint, 0);

        /* A buffer across the boundary is two iovecs, whatever the guess. */
        ck_assert_int_eq(pop_one(3, MEM_SIZE - 8, 16, 0, two), VQ_POP_OK);
        ck_assert_uint_eq(elem.n_in, 2);
        ck_assert_ptr_eq(elem.iov[0].iov_base, host + MEM_SIZE - 8);
        ck_assert_uint_eq(elem.iov[0].iov_len, 8);
        ck_assert_ptr_eq(elem.iov[1].iov_base, host2);

        /* The frontend removed the second region: a guess of 1 is stale, not a way in. */
        vq.region_hint = 1;
        ck_assert_int_eq(pop_one(4, MEM_SIZE + 0x100, 16, 0, mem), VQ_POP_BAD_CHAIN);
        ck_assert_int_eq(pop_one(5, BUF_GPA, 16, 0, mem), VQ_POP_OK);
        ck_assert_ptr_eq(elem.iov[0].iov_base, host + BUF_GPA);
        /* A guess of the right region does not stretch it past its end. */
        ck_assert_uint_eq(vq.region_hint, 0);
        ck_assert_int_eq(pop_one(6, MEM_SIZE - 8, 16, 0, mem), VQ_POP_BAD_CHAIN);
        /* Nor does an offset that would wrap. */
        ck_assert_int_eq(pop_one(7, BUF_GPA, UINT32_MAX, 0, mem), VQ_POP_BAD_CHAIN);
        /* An indirect table through a stale guess is refused the same way. */
        vq.region_hint = 1;
        ck_assert_int_eq(pop_one(8, MEM_SIZE + 0x100, 32, VRING_DESC_F_INDIRECT, mem), VQ_POP_BAD_CHAIN);
        guest_memory_unref(two);
}
END_TEST

START_TEST(test_readable_after_writable) {
        set_desc(1, BUF_GPA, 8, VRING_DESC_F_WRITE | VRING_DESC_F_NEXT, 2);
        set_desc(2, BUF_GPA, 8, 0, 0);
        post(1);
        expect_bad_then_good();
}
END_TEST

START_TEST(test_nested_indirect) {
        struct vring_desc *t = (struct vring_desc *) (host + IND_GPA);
        t[0] = (struct vring_desc) { IND_GPA, 16, VRING_DESC_F_INDIRECT, 0 };
        set_desc(1, IND_GPA, 16, VRING_DESC_F_INDIRECT, 0);
        post(1);
        expect_bad_then_good();
}
END_TEST

START_TEST(test_indirect_bad_len) {
        set_desc(1, IND_GPA, 0, VRING_DESC_F_INDIRECT, 0);
        post(1);
        expect_bad_then_good();
        set_desc(1, IND_GPA, 24, VRING_DESC_F_INDIRECT, 0);
        post(1);
        expect_bad_then_good();
        set_desc(1, IND_GPA, 16 * (VQ_MAX_INDIRECT + 1), VRING_DESC_F_INDIRECT, 0);
        post(1);
        expect_bad_then_good();
        set_desc(1, IND_GPA, 16, VRING_DESC_F_INDIRECT | VRING_DESC_F_NEXT, 2);
        post(1);
        expect_bad_then_good();
}
END_TEST

START_TEST(test_indirect_loop) {
        struct vring_desc *t = (struct vring_desc *) (host + IND_GPA);
        t[0] = (struct vring_desc) { BUF_GPA, 8, VRING_DESC_F_NEXT, 1 };
        t[1] = (struct vring_desc) { BUF_GPA, 8, VRING_DESC_F_NEXT, 0 };
        set_desc(1, IND_GPA, 32, VRING_DESC_F_INDIRECT, 0);
        post(1);
        expect_bad_then_good();
}
END_TEST

START_TEST(test_indirect_not_negotiated) {
        vq.indirect = false;
        set_desc(1, IND_GPA, 16, VRING_DESC_F_INDIRECT, 0);
        post(1);
        expect_bad_then_good();
}
END_TEST

START_TEST(test_too_many_iovecs) {
        /* A whole table of descriptors is fine; more iovecs than an element holds is not. Use an
         * indirect table of 1024 entries each straddling nothing: allowed (== VQ_ELEM_MAX_IOV). */
        struct vring_desc *t = (struct vring_desc *) (host + 0x80000);
        for (unsigned i = 0; i < VQ_MAX_INDIRECT; i++)
                t[i] = (struct vring_desc) { BUF_GPA, 1, i + 1 < VQ_MAX_INDIRECT ? VRING_DESC_F_NEXT : 0, i + 1 };
        set_desc(1, 0x80000, 16 * VQ_MAX_INDIRECT, VRING_DESC_F_INDIRECT, 0);
        post(1);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
        ck_assert_uint_eq(elem.n_in, VQ_MAX_INDIRECT);
}
END_TEST

START_TEST(test_bad_head_breaks_ring) {
        post(NUM);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), -EPROTO);
}
END_TEST

START_TEST(test_avail_jump_breaks_ring) {
        avail()->idx = NUM + 1;
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), -EPROTO);
}
END_TEST

START_TEST(test_ring_outside_memory) {
        VirtQueue bad = vq;
        bad.used_qva = UADDR + MEM_SIZE - 8;
        ck_assert_int_eq(vq_map(&bad, mem), -EFAULT);
        bad = vq;
        bad.desc_qva = 0x1000; /* a guest-physical address is not a frontend address */
        ck_assert_int_eq(vq_map(&bad, mem), -EFAULT);
}
END_TEST

/* A remap that fails (the ring is not in the new table) leaves the ring on the mapping it had: a
 * running queue holds that snapshot and must never be left with NULL or half-updated pointers.
 * Before the fix vq_map() cleared them, and a later completion wrote through NULL. */
START_TEST(test_failed_remap_keeps_mapping) {
        VirtQueue before = vq;
        GuestMemory *other, *m0;
        GuestRegion *g;
        int fd = memfd_create("vq-other", MFD_CLOEXEC);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, 4096), 0);
        ck_assert_int_eq(guest_region_new(&g, fd, 0x100000, 4096, UADDR + 0x100000, 0), 0);
        ck_assert_int_eq(guest_memory_new(&m0), 0);
        ck_assert_int_eq(guest_memory_add(m0, g, &other), 0);
        ck_assert_int_eq(vq_map(&vq, other), -EFAULT);
        ck_assert_ptr_eq(vq.desc, before.desc);
        ck_assert_ptr_eq(vq.avail, before.avail);
        ck_assert_ptr_eq(vq.used, before.used);
        /* Misaligned in a table where it fits: refused the same way. */
        vq.used_qva = UADDR + USED_GPA + 2;
        ck_assert_int_eq(vq_map(&vq, mem), -EFAULT);
        ck_assert_ptr_eq(vq.used, before.used);
        guest_memory_unref(other);
        guest_memory_unref(m0);
        guest_region_unref(g);
        close(fd);
}
END_TEST

START_TEST(test_event_idx) {
        vq.event_idx = true;
        set_desc(1, BUF_GPA, 8, 0, 0);
        post(1);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
        /* Popping asks for no kick (the caller re-arms before it sleeps): avail_event untouched. */
        ck_assert_uint_eq(*(uint16_t *) &used()->ring[NUM], 0);
        vq_push(&vq, 1, 0);
        ck_assert(vq_flush(&vq)); /* first flush after mapping always notifies */
        /* The guest asks for an interrupt only after used idx passes 5. */
        avail()->ring[NUM] = 5;
        for (int i = 0; i < 4; i++) {
                post(1);
                ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
                vq_push(&vq, 1, 0);
                ck_assert(!vq_flush(&vq));
        }
        post(1);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
        vq_push(&vq, 1, 0);
        ck_assert(vq_flush(&vq)); /* used idx went 5 -> 6 */
        ck_assert(!vq_enable_notify(&vq));
        post(1);
        ck_assert(vq_enable_notify(&vq)); /* a request arrived: do not sleep */
}
END_TEST

/* Busy polling (--poll-us): the guest must see that no kick is needed for its next requests, with
 * and without event idx, until notifications are enabled again. */
START_TEST(test_suppress_notify) {
        uint16_t ev, old;

        vq.event_idx = true;
        set_desc(1, BUF_GPA, 8, 0, 0);
        post(1);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
        vq_suppress_notify(&vq);
        ev = *(uint16_t *) &used()->ring[NUM];
        /* The driver's check (virtio spec 2.7.10): kick if new - event - 1 < new - old. */
        old = avail_idx;
        for (uint16_t n = 1; n <= NUM; n++)
                ck_assert(!vring_need_event(ev, (uint16_t) (old + n), old));
        ck_assert(!vq_enable_notify(&vq));
        ev = *(uint16_t *) &used()->ring[NUM];
        ck_assert(vring_need_event(ev, (uint16_t) (old + 1), old));

        vq.event_idx = false;
        vq_suppress_notify(&vq);
        ck_assert(used()->flags & VRING_USED_F_NO_NOTIFY);
        ck_assert(!vq_enable_notify(&vq));
        ck_assert(!(used()->flags & VRING_USED_F_NO_NOTIFY));
}
END_TEST

/* Deferred interrupts (device.c publishes each reply, notifies every few): every reply is visible
 * at once, and one later check covers all of them, wherever the guest's event index fell. */
START_TEST(test_publish_then_notify) {
        vq.event_idx = true;
        set_desc(1, BUF_GPA, 8, 0, 0);
        post(1);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
        vq_push(&vq, 1, 0);
        ck_assert(vq_flush(&vq)); /* used idx 1, notified */
        /* The guest wants an interrupt once used idx passes 2 (after our 3rd reply from now). */
        avail()->ring[NUM] = 2;
        for (int i = 0; i < 6; i++) {
                post(1);
                ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
                vq_push(&vq, 1, 0);
                vq_publish(&vq);
                ck_assert_uint_eq(used()->idx, 2 + i); /* visible without an interrupt */
        }
        ck_assert(vq_need_notify(&vq)); /* 1 -> 7 crossed the event index 2 */
        ck_assert(!vq_need_notify(&vq)); /* nothing new since */
        /* An event index behind what was already signalled asks for nothing more. */
        avail()->ring[NUM] = 3;
        post(1);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
        vq_push(&vq, 1, 0);
        vq_publish(&vq);
        ck_assert(!vq_need_notify(&vq));
        /* Without event idx: whatever the guest's flag says at the time of the check. */
        vq.event_idx = false;
        ck_assert(vq_need_notify(&vq));
        avail()->flags = VRING_AVAIL_F_NO_INTERRUPT;
        ck_assert(!vq_need_notify(&vq));
}
END_TEST

START_TEST(test_no_interrupt_flag) {
        set_desc(1, BUF_GPA, 8, 0, 0);
        post(1);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
        vq_push(&vq, 1, 0);
        avail()->flags = VRING_AVAIL_F_NO_INTERRUPT;
        ck_assert(!vq_flush(&vq));
        avail()->flags = 0;
        vq_disable_notify(&vq);
        ck_assert(used()->flags & VRING_USED_F_NO_NOTIFY);
        ck_assert(!vq_enable_notify(&vq));
        ck_assert(!(used()->flags & VRING_USED_F_NO_NOTIFY));
}
END_TEST

/* While a batch runs, the guest is asked for no kick, even once the thread has popped all it saw:
 * the re-check in vq_enable_notify() finds what arrives meanwhile. A kick is a VM exit in a real
 * guest and an eventfd write in the thread, for nothing. */
START_TEST(test_no_kick_while_popping) {
        uint16_t ev, old;

        vq.event_idx = true;
        set_desc(1, BUF_GPA, 8, 0, 0);
        vq_suppress_notify(&vq);
        for (int i = 0; i < 3; i++)
                post(1);
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
        ev = *(uint16_t *) &used()->ring[NUM];
        old = avail_idx;
        ck_assert(!vring_need_event(ev, (uint16_t) (old + 1), old)); /* the guest's check: no kick */
        post(1);
        ck_assert(vq_enable_notify(&vq)); /* found by the re-check */
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
        ck_assert(!vq_enable_notify(&vq));
        ev = *(uint16_t *) &used()->ring[NUM];
        ck_assert(vring_need_event(ev, (uint16_t) (avail_idx + 1), avail_idx)); /* asleep: kick */
}
END_TEST

/* The avail index is read once per run of entries it published, not once per pop (each read is a
 * cache line the guest keeps writing): what it published stands, and a later jump past the ring
 * still breaks it when the index is next read. */
/* Three requests posted, the first popped: the index was read, two entries are still ahead. */
static void post_three_pop_one(void) {
        set_desc(1, BUF_GPA, 8, 0, 0);
        for (int i = 0; i < 3; i++)
                post(1);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
}

START_TEST(test_avail_index_read_once) {
        post_three_pop_one();
        avail()->idx = (uint16_t) (3 + NUM + 1); /* past the ring once all three are popped */
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), -EPROTO);
}
END_TEST

/* A new base (SET_VRING_BASE, then the start maps the ring) forgets what the old index said. */
START_TEST(test_remap_forgets_avail_index) {
        post_three_pop_one();
        vq.last_avail = 0;
        avail_idx = 0;
        avail()->idx = 0;
        ck_assert_int_eq(vq_map(&vq, mem), 0);
        ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_EMPTY);
}
END_TEST

START_TEST(test_index_wrap) {
        /* Start near the u16 wrap, as after long uptime. */
        avail_idx = 65534;
        avail()->idx = avail_idx;
        vq.last_avail = 65534;
        used()->idx = 65534;
        ck_assert_int_eq(vq_map(&vq, mem), 0);
        set_desc(1, BUF_GPA, 8, 0, 0);
        for (int i = 0; i < 4; i++) {
                post(1);
                ck_assert_int_eq(vq_pop(&vq, mem, &elem), VQ_POP_OK);
                vq_push(&vq, 1, 0);
                vq_flush(&vq);
        }
        ck_assert_uint_eq(vq.last_avail, 2);
        ck_assert_uint_eq(used()->idx, 2);
}
END_TEST

int main(void) {
        Suite *s = suite_create("virtqueue");
        TCase *tc = tcase_create("core");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_pop_direct_chain);
        tcase_add_test(tc, test_pop_indirect);
        tcase_add_test(tc, test_region_hint);
        tcase_add_test(tc, test_suppress_notify);
        tcase_add_test(tc, test_loop);
        tcase_add_test(tc, test_next_out_of_range);
        tcase_add_test(tc, test_addr_outside_memory);
        tcase_add_test(tc, test_addr_wraps);
        tcase_add_test(tc, test_readable_after_writable);
        tcase_add_test(tc, test_nested_indirect);
        tcase_add_test(tc, test_indirect_bad_len);
        tcase_add_test(tc, test_indirect_loop);
        tcase_add_test(tc, test_indirect_not_negotiated);
        tcase_add_test(tc, test_too_many_iovecs);
        tcase_add_test(tc, test_bad_head_breaks_ring);
        tcase_add_test(tc, test_avail_jump_breaks_ring);
        tcase_add_test(tc, test_ring_outside_memory);
        tcase_add_test(tc, test_failed_remap_keeps_mapping);
        tcase_add_test(tc, test_event_idx);
        tcase_add_test(tc, test_publish_then_notify);
        tcase_add_test(tc, test_no_interrupt_flag);
        tcase_add_test(tc, test_index_wrap);
        tcase_add_test(tc, test_no_kick_while_popping);
        tcase_add_test(tc, test_avail_index_read_once);
        tcase_add_test(tc, test_remap_forgets_avail_index);
        suite_add_tcase(s, tc);
        return test_main_run(s);
}
