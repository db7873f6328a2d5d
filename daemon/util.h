/* util.h: cleanup attributes, ownership helpers and small macros shared by every module. */
#pragma once

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define ALIGN_TO(x, a) (((x) + ((a) - 1)) & ~((__typeof__(x))(a) - 1))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Hand ownership of a pointer or fd on: returns the value and clears the variable. */
#define TAKE_PTR(p)                          \
        ({                                   \
                __typeof__(p) _tp_ = (p);    \
                (p) = NULL;                  \
                _tp_;                        \
        })
#define TAKE_FD(fd)                          \
        ({                                   \
                int _tf_ = (fd);             \
                (fd) = -1;                   \
                _tf_;                        \
        })

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

/* Closes fd if valid, keeps errno, returns -1 so callers can write fd = safe_close(fd). */
static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                close(fd);
                errno = saved;
        }
        return -1;
}
static inline void closep(int *fd) {
        safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

/* Declares foo_freep() for a foo_free() that accepts NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func) \
        static inline void func##p(type *p) {   \
                if (*p)                         \
                        func(*p);               \
        }

/* Returns -errno for the last libc failure, never 0 (callers rely on a negative value). */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

static inline bool streq(const char *a, const char *b) {
        return __builtin_strcmp(a, b) == 0;
}
