/* poll-policy.c: the adaptive busy-poll window (--poll-us=auto); see poll-policy.h.
 *
 * Spinning pays when the guest's next request comes before the thread would have gone to sleep
 * and been woken: then it costs neither a guest kick (a VM exit) nor a wake-up (several µs of
 * both CPUs). It does not pay when the next request comes later than any window worth spinning:
 * the CPU burns for nothing. So the window follows the gaps polling observed: twice their average
 * (most gaps of a steady guest fit) and a quarter more than the longest recent one (a guest's gaps
 * have a tail: some requests take it longer to send, and a window that misses them pays a kick and
 * a wake-up each), never more than POLL_AUTO_MAX_NS. A longer window costs nothing while it finds
 * its request (the spin ends there); only an empty one burns all of it. Only polling measures the
 * guest's pace (a gap seen after a sleep includes our own wake-up), so when polling stops paying
 * it does not stop for good: attempts back off exponentially, down to one window of at most
 * POLL_AUTO_MAX_NS every POLL_MAX_SKIP + 1 idle moments, and a hit brings polling back at once.
 * A guest that stops sending has no further idle moments: it costs nothing after its last window.
 *
 * Nor does spinning pay on a CPU that another task wants: with a real guest on a host without a
 * CPU to spare, that task is the guest's vCPU, or the frontend thread that delivers the interrupt
 * for the reply just sent, and every µs spun is taken from them (vufsd's default spin made a TCG
 * guest's fio jobs slower than no polling). The scheduler says so by preempting the thread: when
 * its involuntary context switches grew between two looks (every POLL_CPU_SAMPLE_EVERY idle
 * moments), auto does not poll for the next POLL_CONTENDED_MOMENTS. A thread alone on its CPU is
 * preempted rarely (a kernel thread now and then), which costs it a few percent of its windows. */
#include "poll-policy.h"

#include "util.h"

void poll_policy_init(PollPolicy *p) {
        *p = (PollPolicy){ .gap_ns = POLL_GAP_CAP_NS, .until_look = 1, .preemptions = UINT64_MAX };
}

bool poll_policy_sample_due(PollPolicy *p) {
        if (--p->until_look > 0)
                return false;
        p->until_look = POLL_CPU_SAMPLE_EVERY;
        return true;
}

bool poll_policy_cpu(PollPolicy *p, uint64_t preemptions) {
        bool grown = p->preemptions != UINT64_MAX && preemptions != p->preemptions;

        if (grown)
                p->contended = POLL_CONTENDED_MOMENTS;
        p->preemptions = preemptions;
        return grown;
}

uint32_t poll_policy_window(PollPolicy *p) {
        if (p->contended > 0) {
                p->contended--;
                return 0;
        }
        if (p->skip > 0) {
                p->skip--;
                return 0;
        }
        /* Backing off, or nothing learnt: probe with the longest window. */
        if (p->backoff > 0 || p->gap_ns >= POLL_AUTO_MAX_NS / 2)
                return POLL_AUTO_MAX_NS;
        return MIN(MAX(MAX(2 * p->gap_ns, p->peak_ns + p->peak_ns / 4), POLL_MIN_WINDOW_NS), POLL_AUTO_MAX_NS);
}

void poll_policy_update(PollPolicy *p, uint32_t window_ns, uint64_t gap_ns, bool hit) {
        int64_t g;

        if (window_ns == 0)
                return;
        /* A miss says the gap was at least the window (or, woken by a request, how long it was). */
        g = (int64_t)MIN(hit ? gap_ns : MAX(gap_ns, (uint64_t)window_ns), (uint64_t)POLL_GAP_CAP_NS);
        p->gap_ns = (uint32_t)((int64_t)p->gap_ns + (g - (int64_t)p->gap_ns) / 4);
        p->peak_ns = MAX((uint32_t)g, p->peak_ns - p->peak_ns / POLL_PEAK_DECAY);
        if (hit) {
                p->misses = 0;
                p->backoff = 0;
                return;
        }
        if (p->backoff == 0 && ++p->misses < POLL_MISSES_BEFORE_BACKOFF)
                return;
        p->misses = 0;
        p->backoff = MIN(p->backoff + 1u, POLL_MAX_BACKOFF);
        p->skip = (1u << p->backoff) - 1;
}
