/* request-progress.h: a request's host call is done, said by the layer that made it (the FUSE
 * server) to the layer that records it (the device's in-flight table, inflight.h), through the
 * thread that runs the request: neither knows the other. A serving process killed after this and
 * before the reply is written is answered from the recorded result by the process that takes over,
 * not by calling the host again (docs/survival.md). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct RequestProgress {
        void (*host_done)(struct RequestProgress *p, int64_t result);
        /* Right before the host call: existed says whether the name it acts on was there. A
         * process killed in the call (a SIGKILL lands when the call returns, before anything
         * after it) leaves this, from which the next one tells whether the call happened. */
        void (*started)(struct RequestProgress *p, bool existed);
} RequestProgress;

/* Set by the device around each request it runs on this thread; NULL otherwise. */
extern _Thread_local RequestProgress *request_progress;

/* Whether anyone records progress on this thread (only with --crash-restarts): a caller skips the
 * work of finding out what request_progress_started() needs otherwise. */
static inline bool request_progress_wanted(void) {
        return request_progress != NULL;
}

static inline void request_progress_started(bool existed) {
        RequestProgress *p = request_progress;
        if (p)
                p->started(p, existed);
}

/* result: what the host call returned (0, a count, or a negative errno). */
static inline void request_progress_host_done(int64_t result) {
        RequestProgress *p = request_progress;
        if (p)
                p->host_done(p, result);
}
