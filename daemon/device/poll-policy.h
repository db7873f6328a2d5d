/* poll-policy.h: how long a request queue thread busy-polls its ring at an idle moment under
 * --poll-us=auto. A pure function of what the thread observed, so it is tested on its own
 * (tests/unit/device/test-poll-policy.c); queue.c feeds it and obeys it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* The longest window auto spins (a guest whose next request comes later than this is served by the
 * kick and the wake-up, like a quiet one). */
#define POLL_AUTO_MAX_NS 50000u
/* Gaps enter the average capped at this, so one long pause cannot keep the window at the maximum
 * for long after the guest is quick again. */
#define POLL_GAP_CAP_NS (4 * POLL_AUTO_MAX_NS)
/* Shortest window worth starting (a clock read and a few ring looks). */
#define POLL_MIN_WINDOW_NS 2000u
/* Empty windows in a row, while polling paid, before attempts back off; once backing off, each
 * further empty window doubles the idle moments skipped (1, 3, 7, ... POLL_MAX_SKIP). */
#define POLL_MISSES_BEFORE_BACKOFF 2u
#define POLL_MAX_BACKOFF 8u
#define POLL_MAX_SKIP ((1u << POLL_MAX_BACKOFF) - 1)

/* How fast the remembered longest gap fades: by 1/POLL_PEAK_DECAY per polled idle moment (a
 * long gap is forgotten after ~100 moments, a few milliseconds of a busy guest). */
#define POLL_PEAK_DECAY 32u

/* Idle moments between two looks at the thread's count of involuntary context switches (a
 * system call, getrusage()), and idle moments without polling after a look found it grown: the
 * scheduler gave this CPU to another task while the thread ran, so there is none to spare. */
#define POLL_CPU_SAMPLE_EVERY 64u
#define POLL_CONTENDED_MOMENTS 256u

typedef struct PollPolicy {
        uint32_t gap_ns; /* average (weight 1/4) of the gaps from an idle moment to the next
                          * request, capped at POLL_GAP_CAP_NS; POLL_GAP_CAP_NS = not known */
        uint32_t peak_ns; /* the longest recent gap, fading (POLL_PEAK_DECAY); same cap */
        uint32_t skip; /* idle moments left that do not poll (backoff) */
        uint8_t misses; /* empty windows in a row */
        uint8_t backoff; /* log2(skip + 1) of the last backoff; 0 = polling pays */
        uint32_t until_look; /* idle moments to the next look at the preemption count */
        uint32_t contended; /* idle moments left that do not poll: the CPU is wanted */
        uint64_t preemptions; /* the count at the last look; UINT64_MAX = not looked yet */
} PollPolicy;

/* Starts knowing nothing: the first idle moments probe with the longest window. A quiet guest has
 * no idle moments after its last request but one, so that costs it one window. */
void poll_policy_init(PollPolicy *p);

/* Whether the thread should look at its involuntary context switches at this idle moment (every
 * POLL_CPU_SAMPLE_EVERY calls), and pass the count to poll_policy_cpu() before asking for the
 * window. */
bool poll_policy_sample_due(PollPolicy *p);
/* The thread's involuntary context switches so far (getrusage(RUSAGE_THREAD), ru_nivcsw): if they
 * grew since the last look, no window for POLL_CONTENDED_MOMENTS idle moments. */
bool poll_policy_cpu(PollPolicy *p, uint64_t preemptions); /* true: found grown */

/* The window to spin at this idle moment, in ns; 0 = sleep at once. Counts a skipped moment. */
uint32_t poll_policy_window(PollPolicy *p);

/* What the idle moment brought, when a window was spun (window_ns as returned by
 * poll_policy_window(), not 0): hit = the poll found a request, gap_ns after the idle moment began;
 * not hit = it found none (gap_ns is then the time to the request that woke the thread, if known,
 * else UINT64_MAX). Idle moments without a window teach nothing: a gap measured across a sleep
 * holds the thread's own wake-up, not only the guest's pace. */
void poll_policy_update(PollPolicy *p, uint32_t window_ns, uint64_t gap_ns, bool hit);
