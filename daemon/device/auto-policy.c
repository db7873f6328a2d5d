/* auto-policy.c: what a request is (classification) and where auto mode runs it: the service
 * time estimates, CPU time sampling and the routing rule. Documented in docs/threading.md. */
#include <stddef.h>
#include <string.h>

#include "executor-internal.h"
#include "util.h"

#define EXEC_BACKLOG_BUDGET_NS 50000u /* auto: work waiting in one queue before it is shared out */
#define EXEC_SLOW_NS 200000u /* auto: waiting work at least this slow always leaves */
/* auto: off-CPU time below this is not worth a hand-off (which costs a few µs itself), and is what
 * preemption or a page fault adds to a CPU-bound request now and then */
#define EXEC_WAIT_MIN_NS 20000u
#define EXEC_EWMA_SHIFT 3 /* estimate += (sample - estimate) / 8 */
/* auto: one request of a class in this many has its CPU time measured. Reading a thread's CPU clock
 * is a system call (1.3 µs on the development VM, twice per sample): 1 in 256 costs a 3 µs GETATTR
 * 0.3 %; may-block classes (tens of µs and more) are sampled more often, so that their rarer
 * requests still correct the starting guess soon. Counted per class, so rare classes get samples. */
static const uint16_t sample_every[_EXEC_CLASS_MAX] = {
        [EXEC_CLASS_META] = 256,    [EXEC_CLASS_DIR] = 32, [EXEC_CLASS_IO] = 256,
        [EXEC_CLASS_LARGE_IO] = 32, [EXEC_CLASS_SYNC] = 8, [EXEC_CLASS_LOCK_WAIT] = 8,
};

static const uint32_t est_initial_ns[_EXEC_CLASS_MAX] = {
        [EXEC_CLASS_META] = 12500,       [EXEC_CLASS_DIR] = 25000,    [EXEC_CLASS_IO] = 12500,
        [EXEC_CLASS_LARGE_IO] = 1000000, [EXEC_CLASS_SYNC] = 1000000, [EXEC_CLASS_LOCK_WAIT] = 1000000,
};

static bool class_may_block(ExecClass c) {
        return c == EXEC_CLASS_LARGE_IO || c == EXEC_CLASS_SYNC || c == EXEC_CLASS_LOCK_WAIT;
}

void auto_policy_init_queue(ExecQueue *q) {
        for (unsigned c = 0; c < _EXEC_CLASS_MAX; c++) {
                atomic_init(&q->est_ns[c], est_initial_ns[c]);
                /* Until measured: may-block classes wait for all their time, the rest compute. */
                atomic_init(&q->offcpu_ns[c], class_may_block(c) ? est_initial_ns[c] : 0);
                atomic_init(&q->oncpu_ns[c], class_may_block(c) ? 0 : est_initial_ns[c]);
        }
}

ExecRoute auto_route(Executor *e, ExecQueue *q, ExecClass c, unsigned backlog) {
        uint64_t est = atomic_load_explicit(&q->est_ns[c], memory_order_relaxed);
        /* More than half of the service time off the CPU (both halves from the same samples), and
         * enough of it to pay for a hand-off. */
        uint32_t off = atomic_load_explicit(&q->offcpu_ns[c], memory_order_relaxed);
        bool waits = off >= EXEC_WAIT_MIN_NS && off > atomic_load_explicit(&q->oncpu_ns[c], memory_order_relaxed);
        unsigned live, queued;

        if (!waits)
                return EXEC_ROUTE_INLINE;
        if (est >= EXEC_SLOW_NS)
                return EXEC_ROUTE_POOL;
        if (backlog == 0 || ((uint64_t)backlog + 1) * est <= EXEC_BACKLOG_BUDGET_NS)
                return EXEC_ROUTE_INLINE;
        /* Backed up. Only now look at the pool's shared counters (lock-free reads). */
        live = atomic_load_explicit(&e->pool.live, memory_order_relaxed);
        queued = atomic_load_explicit(&e->pool.queued, memory_order_relaxed);
        if (queued >= 2 * MAX(live, 1u))
                return EXEC_ROUTE_INLINE;
        return EXEC_ROUTE_POOL;
}

bool executor_want_sample(ExecQueue *q, ExecClass c) {
        if (atomic_load_explicit(&q->executor->mode, memory_order_relaxed) != THREAD_MODE_AUTO)
                return false;
        if (q->sample_in[c] > 0) {
                q->sample_in[c]--;
                return false;
        }
        q->sample_in[c] = sample_every[c] - 1;
        return true;
}

/* estimate += (sample - estimate) / 8, as a relaxed store: threads finishing this queue's requests
 * may update concurrently, and a lost update only delays the estimate by one sample. */
static void ewma_update(_Atomic uint32_t *est, uint64_t sample_ns) {
        uint32_t old = atomic_load_explicit(est, memory_order_relaxed);
        uint32_t sample = (uint32_t)MIN(sample_ns, (uint64_t)UINT32_MAX);
        uint32_t next =
                sample >= old ? old + ((sample - old) >> EXEC_EWMA_SHIFT) : old - ((old - sample) >> EXEC_EWMA_SHIFT);

        if (next != old)
                atomic_store_explicit(est, next, memory_order_relaxed);
}

void executor_account_sample(ExecQueue *q, ExecClass c, uint64_t service_ns, uint64_t cpu_ns) {
        cpu_ns = MIN(cpu_ns, service_ns); /* two clocks: the CPU one may run a little ahead */
        ewma_update(&q->oncpu_ns[c], cpu_ns);
        ewma_update(&q->offcpu_ns[c], service_ns - cpu_ns);
}

void executor_account(ExecQueue *q, ExecClass c, uint64_t ns, bool ran_inline) {
        /* A latency that includes waiting says nothing about a rise in service time. */
        if (!ran_inline && ns >= atomic_load_explicit(&q->est_ns[c], memory_order_relaxed))
                return;
        ewma_update(&q->est_ns[c], ns);
}
