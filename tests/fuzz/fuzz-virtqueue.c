/* fuzz-virtqueue.c: the descriptor-chain walker. The input is a few parameters followed by the
 * guest's memory itself: descriptor table, avail ring, used ring and buffers all come from it, in
 * two memory regions with a hole between them. Every popped chain is read and written completely
 * through the chain iterator, as the FUSE layer would.
 *
 * Input: [0] log2 of the queue size (low 3 bits: 1..128), [1] bit 0 event idx, bit 1 indirect,
 * [2..3] the avail index to start from, then guest memory from guest-physical 0. Rings: the
 * descriptor table at 0x0000, avail at 0x2000, used at 0x3000. Region A: gpa 0..64 KiB;
 * region B: gpa 128..192 KiB (the input's bytes after the first 64 KiB of memory go there). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "chain.h"
#include "fuzz-common.h"
#include "guest-memory.h"
#include "virtqueue.h"

#define REGION_SIZE 0x10000
#define UADDR_A 0x7f0000000000ULL
#define UADDR_B 0x7f0000400000ULL

static GuestMemory *mem;
static GuestRegion *ra, *rb;
static VqElem elem;
static uint8_t scratch[1 << 20];

static void setup(void) {
        _cleanup_(guest_memory_unrefp) GuestMemory *m0 = NULL, *m1 = NULL;
        int fd;

        fuzz_quiet_logging();
        fd = memfd_create("fuzz-guest", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, 2 * REGION_SIZE) < 0)
                abort();
        if (guest_region_new(&ra, fd, 0, REGION_SIZE, UADDR_A, 0) < 0 ||
            guest_region_new(&rb, fd, 2 * REGION_SIZE, REGION_SIZE, UADDR_B, REGION_SIZE) < 0)
                abort();
        close(fd);
        if (guest_memory_new(&m0) < 0 || guest_memory_add(m0, ra, &m1) < 0 || guest_memory_add(m1, rb, &mem) < 0)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        VirtQueue vq = {};
        size_t n;

        if (!mem)
                setup();
        if (size < 4)
                return 0;
        vq.num = 1u << (data[0] & 7);
        vq.event_idx = data[1] & 1;
        vq.indirect = data[1] & 2;
        vq.last_avail = (uint16_t) (data[2] | data[3] << 8);
        data += 4;
        size -= 4;

        memset(ra->host, 0, REGION_SIZE);
        memset(rb->host, 0, REGION_SIZE);
        n = size < REGION_SIZE ? size : REGION_SIZE;
        memcpy(ra->host, data, n);
        if (size > n)
                memcpy(rb->host, data + n, size - n < REGION_SIZE ? size - n : REGION_SIZE);

        vq.desc_qva = UADDR_A;
        vq.avail_qva = UADDR_A + 0x2000;
        vq.used_qva = UADDR_A + 0x3000;
        if (vq_map(&vq, mem) < 0)
                abort(); /* the fixed layout always fits */

        for (unsigned i = 0; i < 2 * vq.num + 2; i++) {
                ChainIter in, out;
                int r = vq_pop(&vq, mem, &elem);

                if (r == VQ_POP_EMPTY || r < 0)
                        break;
                if (r == VQ_POP_BAD_CHAIN) {
                        vq_push(&vq, elem.head, 0);
                        continue;
                }
                if (elem.n_in + elem.n_out > VQ_ELEM_MAX_IOV)
                        abort();
                /* Every translated byte must be readable (readable part) and writable (the rest). */
                chain_iter_init(&in, elem.iov, elem.n_in);
                chain_iter_init(&out, elem.iov + elem.n_in, elem.n_out);
                while (chain_left(&in) > 0) {
                        size_t k = chain_left(&in) < sizeof scratch ? chain_left(&in) : sizeof scratch;
                        if (chain_read(&in, scratch, k) < 0)
                                abort();
                }
                while (chain_left(&out) > 0) {
                        size_t k = chain_left(&out) < sizeof scratch ? chain_left(&out) : sizeof scratch;
                        if (chain_write(&out, scratch, k) < 0)
                                abort();
                }
                vq_push(&vq, elem.head, (uint32_t) chain_consumed(&out));
                (void) vq_flush(&vq);
        }
        (void) vq_enable_notify(&vq);
        vq_disable_notify(&vq);
        return 0;
}
