/* queue.h: what device.c (configuration) and queue.c (the data path) share about a queue. Inside
 * the device folder only; locking as in device.h's header comment. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "device-internal.h"

static inline bool has_feature(uint64_t features, unsigned bit) {
        return features & (1ULL << bit);
}

/* A fresh, stopped queue of d. */
void queue_init(Queue *q, Device *d, unsigned index);
/* Starts the queue thread once the ring is complete (size, addresses, kick fd, enabled). */
int queue_start(Queue *q);
/* Stops the thread and waits for the queue's requests still running elsewhere (cancelling blocking
 * waits after a grace period). */
void queue_stop(Queue *q);
/* Back to the state of a fresh connection; keeps the wake fd. */
void queue_reset(Queue *q);
/* With q->lock: the ring is unusable (logged once); the guest must reset it. */
void queue_mark_broken_locked(Queue *q, const char *why);
