/* lock-set.c: one lock owner's POSIX ranges on one inode (lock-set.h). */
#include "lock-set.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>

int lock_set_reserve(LockSet *s) {
        size_t want = s->n + 2, cap;
        LockRange *r, *spare;

        if (want <= s->cap)
                return 0;
        cap = s->cap ? s->cap * 2 : 4;
        while (cap < want)
                cap *= 2;
        r = realloc(s->r, cap * sizeof *r);
        if (!r)
                return -ENOMEM;
        s->r = r;
        spare = realloc(s->spare, cap * sizeof *spare);
        if (!spare)
                return -ENOMEM; /* r grew, cap did not: the next reserve tries again */
        s->spare = spare;
        s->cap = cap;
        return 0;
}

/* Appends x to out[0..*n), merged with the last range when they touch and share a type. */
static void put(LockRange *out, size_t *n, LockRange x) {
        LockRange *last = *n ? &out[*n - 1] : NULL;

        if (last && last->type == x.type && last->end + 1 >= x.start) {
                if (x.end > last->end)
                        last->end = x.end;
                return;
        }
        out[(*n)++] = x;
}

void lock_set_apply(LockSet *s, uint64_t start, uint64_t end, short type) {
        LockRange *out = s->spare, *tmp;
        size_t n = 0;
        bool placed = type != F_RDLCK && type != F_WRLCK; /* an unlock places nothing */

        for (size_t k = 0; k < s->n; k++) {
                LockRange x = s->r[k];
                if (x.end < start) { /* wholly before */
                        put(out, &n, x);
                        continue;
                }
                if (x.start < start) /* the part before the new range */
                        put(out, &n, (LockRange) { x.start, start - 1, x.type });
                if (!placed && x.start > end) {
                        put(out, &n, (LockRange) { start, end, type });
                        placed = true;
                }
                if (!placed) {
                        put(out, &n, (LockRange) { start, end, type });
                        placed = true;
                }
                if (x.end > end) /* the part after it */
                        put(out, &n, (LockRange) { x.start > end ? x.start : end + 1, x.end, x.type });
        }
        if (!placed)
                put(out, &n, (LockRange) { start, end, type });
        tmp = s->r;
        s->r = out;
        s->spare = tmp;
        s->n = n;
}

void lock_set_done(LockSet *s) {
        free(s->r);
        free(s->spare);
        *s = (LockSet) {};
}
