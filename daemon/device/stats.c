/* stats.c: per-thread request counters (one shard per thread and Stats), summed when read.
 *
 * Recording is the hot path: it runs once per request on a queue thread or a pool worker. It finds
 * the calling thread's shard through a small thread-local cache (no lock, no shared write) and bumps
 * counters that only this thread writes, with relaxed atomic loads and stores (plain moves on
 * x86-64: no locked instructions). Readers sum every shard with relaxed loads, so a snapshot taken
 * while requests flow may be a few requests behind, never torn within one counter.
 *
 * Reset never writes a shard (that would race with its owner's load+store increments): it records
 * the current values as a baseline that snapshots subtract.
 *
 * Shards outlive their threads: a thread's counts must still be summed after it exits (a retired
 * pool worker). When a thread exits, its shards are released for reuse by the next new thread, so
 * worker churn from live switching does not grow memory. */
#include "stats.h"

#include <pthread.h>
#include <string.h>

#include "util.h"

#define STATS_TLS_SLOTS 4 /* Stats objects one thread records into without a lookup (1 in the daemon) */

typedef struct StatsShard {
        struct StatsShard *next; /* Stats.shards list; under Stats.lock */
        bool owned;              /* bound to a live thread; under Stats.lock */

        /* Written only by the owning thread (relaxed load + store), read by anyone (relaxed). */
        uint64_t begun;
        uint64_t ended; /* release store: a reader that sees it also sees the matching begun */
        StatsCounters op[STATS_MAX_OPCODE];
        StatsCounters queue[DEVICE_MAX_QUEUES];
        uint64_t errnos[STATS_MAX_ERRNO];

        /* Reset baselines; under Stats.lock. */
        StatsCounters base_op[STATS_MAX_OPCODE];
        StatsCounters base_queue[DEVICE_MAX_QUEUES];
        uint64_t base_errnos[STATS_MAX_ERRNO];
} StatsShard;

struct Stats {
        uint64_t id; /* unique for the process lifetime: thread caches key on it, not on the address */
        Stats *next; /* registry of live Stats; under registry_lock */

        /* Guards the shard list, ownership and baselines: taken when a thread binds its shard (once
         * per thread), on thread exit, and by readers. Never on the recording path. */
        pthread_mutex_t lock;
        StatsShard *shards;
        unsigned n_shards;
};

typedef struct StatsBinding {
        uint64_t id;
        StatsShard *shard;
} StatsBinding;

static _Thread_local StatsBinding tls_bindings[STATS_TLS_SLOTS];
static _Thread_local unsigned tls_next_evict;

/* The live Stats objects, so that a thread exiting after its Stats was freed does not touch it.
 * Taken only when a thread binds, evicts or exits, and by stats_new/free. Lock order: registry_lock,
 * then Stats.lock. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static Stats *registry;
static uint64_t next_id = 1; /* under registry_lock */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

static Stats *registry_find_locked(uint64_t id) {
        for (Stats *s = registry; s; s = s->next)
                if (s->id == id)
                        return s;
        return NULL;
}

/* Gives a binding's shard back to its Stats (if that still exists) for the next new thread. */
static void binding_release_locked(StatsBinding *b) {
        Stats *s;

        if (b->id == 0)
                return;
        s = registry_find_locked(b->id);
        if (s) {
                pthread_mutex_lock(&s->lock);
                b->shard->owned = false;
                pthread_mutex_unlock(&s->lock);
        }
        *b = (StatsBinding) {};
}

static void on_thread_exit(void *unused) {
        pthread_mutex_lock(&registry_lock);
        for (unsigned i = 0; i < STATS_TLS_SLOTS; i++)
                binding_release_locked(&tls_bindings[i]);
        pthread_mutex_unlock(&registry_lock);
}

static void exit_key_init(void) {
        (void) pthread_key_create(&exit_key, on_thread_exit);
}

/* Slow path, once per thread and Stats: adopt a released shard or allocate one. NULL if out of
 * memory (the request then goes uncounted; statistics must never fail a request). */
static StatsShard *shard_bind(Stats *s) {
        StatsBinding *slot = NULL;
        StatsShard *shard;

        pthread_once(&exit_key_once, exit_key_init);
        /* Any non-NULL value makes on_thread_exit() run when this thread ends. */
        (void) pthread_setspecific(exit_key, (void *) 1);

        pthread_mutex_lock(&registry_lock);
        for (unsigned i = 0; i < STATS_TLS_SLOTS && !slot; i++)
                if (tls_bindings[i].id == 0)
                        slot = &tls_bindings[i];
        if (!slot) {
                slot = &tls_bindings[tls_next_evict++ % STATS_TLS_SLOTS];
                binding_release_locked(slot);
        }

        pthread_mutex_lock(&s->lock);
        for (shard = s->shards; shard; shard = shard->next)
                if (!shard->owned)
                        break;
        if (!shard) {
                shard = calloc(1, sizeof *shard);
                if (shard) {
                        shard->next = s->shards;
                        s->shards = shard;
                        s->n_shards++;
                }
        }
        if (shard) {
                shard->owned = true;
                *slot = (StatsBinding) { .id = s->id, .shard = shard };
        }
        pthread_mutex_unlock(&s->lock);
        pthread_mutex_unlock(&registry_lock);
        return shard;
}

static inline StatsShard *shard_get(Stats *s) {
        for (unsigned i = 0; i < STATS_TLS_SLOTS; i++)
                if (tls_bindings[i].id == s->id)
                        return tls_bindings[i].shard;
        return shard_bind(s);
}

int stats_new(Stats **ret) {
        Stats *s = calloc(1, sizeof *s);

        if (!s)
                return -ENOMEM;
        pthread_mutex_init(&s->lock, NULL);
        pthread_mutex_lock(&registry_lock);
        s->id = next_id++;
        s->next = registry;
        registry = s;
        pthread_mutex_unlock(&registry_lock);
        *ret = s;
        return 0;
}

/* The caller guarantees no thread records into s any more. Threads that did may still hold a
 * cached binding; it carries the id, which is never reused, so they will not find s again. */
Stats *stats_free(Stats *s) {
        if (!s)
                return NULL;
        pthread_mutex_lock(&registry_lock);
        for (Stats **p = &registry; *p; p = &(*p)->next)
                if (*p == s) {
                        *p = s->next;
                        break;
                }
        pthread_mutex_unlock(&registry_lock);
        /* Forget this thread's own binding too, so its slot is free for another Stats. */
        for (unsigned i = 0; i < STATS_TLS_SLOTS; i++)
                if (tls_bindings[i].id == s->id)
                        tls_bindings[i] = (StatsBinding) {};
        while (s->shards) {
                StatsShard *n = s->shards->next;
                free(s->shards);
                s->shards = n;
        }
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
}

/* Single-writer increment: the owner is the only thread that stores, so a relaxed load and store
 * cannot lose an update, and readers never see a torn value. */
static inline void counter_add(uint64_t *c, uint64_t v) {
        __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
}

static inline uint64_t counter_get(const uint64_t *c) {
        return __atomic_load_n(c, __ATOMIC_RELAXED);
}

void stats_begin(Stats *s) {
        StatsShard *sh = shard_get(s);

        if (sh)
                counter_add(&sh->begun, 1);
}

static inline void counters_add(StatsCounters *c, bool error, uint64_t bytes, unsigned bucket, uint64_t latency_us) {
        counter_add(&c->requests, 1);
        if (bytes)
                counter_add(&c->bytes, bytes);
        if (error)
                counter_add(&c->errors, 1);
        counter_add(&c->latency_hist[bucket], 1);
        counter_add(&c->latency_sum_us, latency_us);
}

void stats_record(Stats *s, unsigned queue, uint32_t opcode, int error, uint64_t bytes, uint64_t latency_us) {
        StatsShard *sh = shard_get(s);
        unsigned bucket = stats_hist_bucket(latency_us);

        if (!sh)
                return;
        counters_add(&sh->op[opcode < STATS_MAX_OPCODE ? opcode : 0], error != 0, bytes, bucket, latency_us);
        if (queue < DEVICE_MAX_QUEUES)
                counters_add(&sh->queue[queue], error != 0, bytes, bucket, latency_us);
        if (error) /* error is a negative errno; anything else counts as "other" */
                counter_add(&sh->errnos[error < 0 && error > -STATS_MAX_ERRNO ? -error : 0], 1);
        __atomic_store_n(&sh->ended, __atomic_load_n(&sh->ended, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
}

/* acc[i] += cur[i] - base[i] for n counters. */
static void u64s_sum(uint64_t *acc, const uint64_t *cur, const uint64_t *base, size_t n) {
        for (size_t i = 0; i < n; i++) {
                uint64_t v = counter_get(&cur[i]);
                /* Counters only grow and the baseline was read earlier under the same lock. */
                acc[i] += v >= base[i] ? v - base[i] : 0;
        }
}

static void u64s_copy(uint64_t *dst, const uint64_t *cur, size_t n) {
        for (size_t i = 0; i < n; i++)
                dst[i] = counter_get(&cur[i]);
}

/* The same for whole arrays of counters (StatsCounters rows are all uint64_t), counter by counter. */
#define ROWS_SUM(acc, cur, base)                                                                                      \
        u64s_sum((uint64_t *) (acc), (const uint64_t *) (cur), (const uint64_t *) (base),                             \
                 sizeof(cur) / (sizeof(uint64_t)))
#define ROWS_COPY(dst, cur) u64s_copy((uint64_t *) (dst), (const uint64_t *) (cur), sizeof(cur) / (sizeof(uint64_t)))

void stats_snapshot(Stats *s, StatsSnapshot *ret) {
        uint64_t begun = 0, ended = 0;

        memset(ret, 0, sizeof *ret);
        pthread_mutex_lock(&s->lock);
        for (StatsShard *sh = s->shards; sh; sh = sh->next) {
                ROWS_SUM(ret->op, sh->op, sh->base_op);
                ROWS_SUM(ret->queue, sh->queue, sh->base_queue);
                ROWS_SUM(ret->errnos, sh->errnos, sh->base_errnos);
        }
        /* Every ended count first (acquire), then every begun count: a request seen as ended is
         * also seen as begun, so the difference never goes negative. */
        for (StatsShard *sh = s->shards; sh; sh = sh->next)
                ended += __atomic_load_n(&sh->ended, __ATOMIC_ACQUIRE);
        for (StatsShard *sh = s->shards; sh; sh = sh->next)
                begun += counter_get(&sh->begun);
        pthread_mutex_unlock(&s->lock);
        ret->in_flight = begun > ended ? begun - ended : 0;
}

void stats_reset(Stats *s) {
        pthread_mutex_lock(&s->lock);
        for (StatsShard *sh = s->shards; sh; sh = sh->next) {
                ROWS_COPY(sh->base_op, sh->op);
                ROWS_COPY(sh->base_queue, sh->queue);
                ROWS_COPY(sh->base_errnos, sh->errnos);
        }
        pthread_mutex_unlock(&s->lock);
}

unsigned stats_n_shards(Stats *s) {
        unsigned n;

        pthread_mutex_lock(&s->lock);
        n = s->n_shards;
        pthread_mutex_unlock(&s->lock);
        return n;
}
