/* inflight.c: one ring's in-flight table in a shared memfd (inflight.h). */
#include "inflight.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* Program order is what survives a kill: the compiler must not move a table store across the
 * next one (the CPU makes every store it retired visible to the keeper's mapping). */
#define ORDER() atomic_signal_fence(memory_order_seq_cst)

size_t inflight_size(unsigned num) {
        return sizeof(InflightHeader) + (size_t) num * sizeof(InflightDesc);
}

static int inflight_map(Inflight *ret, int fd, unsigned num) {
        size_t size = inflight_size(num);
        uint16_t *pushed = calloc(num, sizeof *pushed);
        void *p;

        if (!pushed)
                return -ENOMEM;
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
                free(pushed);
                return -errno;
        }
        *ret = (Inflight) { .h = p, .size = size, .fd = fd, .pushed = pushed };
        return 0;
}

int inflight_new(Inflight *ret, unsigned num) {
        _cleanup_close_ int fd = -1;
        int r;

        if (num == 0 || num > UINT16_MAX + 1u)
                return -EINVAL;
        /* Sealed against growing and shrinking: the keeper maps it too, and a shrink under a
         * mapping would SIGBUS whoever touches it. */
        fd = memfd_create("vufsd-inflight", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        if (ftruncate(fd, (off_t) inflight_size(num)) < 0)
                return -errno;
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
                return -errno;
        r = inflight_map(ret, fd, num);
        if (r < 0)
                return r;
        TAKE_FD(fd);
        ret->h->num = num;
        ret->h->magic = INFLIGHT_MAGIC;
        return 0;
}

int inflight_adopt(Inflight *ret, int fd, unsigned num) {
        _cleanup_close_ int owned = fd;
        struct stat st;
        int seals, r;

        if (fstat(fd, &st) < 0)
                return -errno;
        seals = fcntl(fd, F_GET_SEALS);
        if (seals < 0 || !(seals & F_SEAL_SHRINK) || st.st_size != (off_t) inflight_size(num))
                return -EBADMSG;
        r = inflight_map(ret, fd, num);
        if (r < 0)
                return r;
        TAKE_FD(owned);
        if (ret->h->magic != INFLIGHT_MAGIC || ret->h->num != num) {
                inflight_done(ret);
                return -EBADMSG;
        }
        return 0;
}

void inflight_done(Inflight *t) {
        if (t->h)
                (void) munmap(t->h, t->size);
        safe_close(t->fd);
        free(t->pushed);
        *t = (Inflight) { .fd = -1 };
}

/* The state last: a kill before it leaves the entry as it was. */
static void set_state(InflightDesc *d, uint8_t state) {
        ORDER();
        d->state = state;
        ORDER();
}

void inflight_popped(Inflight *t, uint16_t head, uint16_t avail_slot) {
        InflightDesc *d = &t->h->desc[head];

        d->counter = ++t->h->counter;
        d->avail_slot = avail_slot;
        set_state(d, INFLIGHT_POPPED);
        /* After the entry: a kill in between leaves it POPPED at a slot not yet consumed, which
         * inflight_resume() frees (the pop happens again). */
        t->h->last_avail = (uint16_t) (avail_slot + 1);
}

void inflight_set_last_avail(Inflight *t, uint16_t last_avail) {
        t->h->last_avail = last_avail;
}

void inflight_host_done(Inflight *t, uint16_t head, int64_t result) {
        t->h->desc[head].result = result;
        set_state(&t->h->desc[head], INFLIGHT_HOST_DONE);
}

void inflight_started(Inflight *t, uint16_t head, bool existed) {
        t->h->desc[head].result = existed;
        set_state(&t->h->desc[head], INFLIGHT_STARTED);
}

void inflight_replied(Inflight *t, uint16_t head, uint32_t len) {
        t->h->desc[head].len = len;
        set_state(&t->h->desc[head], INFLIGHT_REPLIED);
}

void inflight_pushed(Inflight *t, uint16_t head, uint16_t used_slot, uint32_t len) {
        InflightDesc *d = &t->h->desc[head];

        d->len = len;
        d->used_slot = used_slot;
        set_state(d, INFLIGHT_PUSHED);
        if (t->n_pushed < t->h->num) /* at most one per head: a head is pushed once per pop */
                t->pushed[t->n_pushed++] = head;
}

void inflight_published(Inflight *t) {
        ORDER(); /* after the used index store */
        for (unsigned i = 0; i < t->n_pushed; i++)
                if (t->h->desc[t->pushed[i]].state == INFLIGHT_PUSHED)
                        t->h->desc[t->pushed[i]].state = INFLIGHT_FREE;
        t->n_pushed = 0;
}

static int cmp_counter(const void *a, const void *b, void *data) {
        const InflightHeader *h = data;
        uint64_t x = h->desc[*(const uint16_t *) a].counter, y = h->desc[*(const uint16_t *) b].counter;
        return x < y ? -1 : x > y;
}

static int cmp_used(const void *a, const void *b, void *data) {
        const InflightHeader *h = data;
        /* Slots are within one ring's worth of each other: order by distance from the first. */
        uint16_t x = h->desc[*(const uint16_t *) a].used_slot, y = h->desc[*(const uint16_t *) b].used_slot;
        int16_t d = (int16_t) (x - y);
        return d < 0 ? -1 : d > 0;
}

int inflight_resume(Inflight *t, uint16_t ring_used_idx, InflightResume *ret) {
        InflightHeader *h = t->h;
        uint16_t *rerun, *repush;
        unsigned nr = 0, np = 0;

        rerun = calloc(h->num, sizeof *rerun);
        repush = calloc(h->num, sizeof *repush);
        if (!rerun || !repush) {
                free(rerun);
                free(repush);
                return -ENOMEM;
        }
        for (unsigned i = 0; i < h->num; i++) {
                InflightDesc *d = &h->desc[i];

                if (d->state == INFLIGHT_POPPED || d->state == INFLIGHT_HOST_DONE || d->state == INFLIGHT_STARTED) {
                        /* Popped at or after the recorded last_avail: that pop is done again. */
                        if ((int16_t) (d->avail_slot - h->last_avail) >= 0)
                                d->state = INFLIGHT_FREE;
                        else
                                rerun[nr++] = (uint16_t) i;
                } else if (d->state == INFLIGHT_PUSHED) {
                        /* Behind the ring's used index: the guest has it. */
                        if ((int16_t) (d->used_slot - ring_used_idx) < 0)
                                d->state = INFLIGHT_FREE;
                        else
                                repush[np++] = (uint16_t) i;
                } else if (d->state == INFLIGHT_REPLIED) {
                        /* Answered, not handed back: a used entry, never a second run. After the
                         * pushed ones in used order: its push would have come after theirs. */
                        d->used_slot = (uint16_t) (ring_used_idx + 0x7fff);
                        repush[np++] = (uint16_t) i;
                } else if (d->state != INFLIGHT_FREE)
                        d->state = INFLIGHT_FREE; /* not a state we write */
        }
        qsort_r(rerun, nr, sizeof *rerun, cmp_counter, h);
        qsort_r(repush, np, sizeof *repush, cmp_used, h);
        *ret = (InflightResume) { .last_avail = h->last_avail, .n_rerun = nr, .n_repush = np,
                                  .rerun = rerun, .repush = repush };
        return 0;
}

void inflight_resume_done(InflightResume *r) {
        free(r->rerun);
        free(r->repush);
        *r = (InflightResume) {};
}
