/* race.h: runs one function on several threads at once, for the tests that race a shared map. */
#pragma once

#include <check.h>
#include <pthread.h>

#define RACE_THREADS 4

/* One racing thread: its random seed, and how often it saw the outcome its test must see at least
 * once (a race test that never raced would pass without testing anything). */
typedef struct RaceThread {
        pthread_t thread;
        unsigned seed;
        unsigned seen;
} RaceThread;

/* Starts RACE_THREADS threads on fn (each gets its RaceThread, seeds 1..N), waits for all of them
 * and returns the sum of what they saw. */
static inline unsigned race_run(void *(*fn)(void *)) {
        RaceThread t[RACE_THREADS] = {};
        unsigned seen = 0;

        for (unsigned k = 0; k < RACE_THREADS; k++) {
                t[k].seed = k + 1;
                ck_assert_int_eq(pthread_create(&t[k].thread, NULL, fn, &t[k]), 0);
        }
        for (unsigned k = 0; k < RACE_THREADS; k++) {
                ck_assert_int_eq(pthread_join(t[k].thread, NULL), 0);
                seen += t[k].seen;
        }
        return seen;
}
