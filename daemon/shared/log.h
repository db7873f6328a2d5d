/* log.h: leveled logging to stderr with sd-daemon priority prefixes, and rate limiting. */
#pragma once

#include <stdatomic.h>
#include <stdint.h>
#include <syslog.h>

#include "util.h"

extern int log_max_level;

void log_set_max_level(int level);
/* From now on log to syslog (the journal), as "vufsd[PID]" or "vufsd@INSTANCE[PID]", facility
 * daemon, instead of stderr (--syslog). Returns negative errno (and logging stays on stderr) when
 * /dev/log cannot be reached. */
int log_open_syslog(const char *instance);
int log_level_from_string(const char *s);

/* Writes one line "<N>message" (the prefix lets journald keep the priority). Returns -abs(error)
 * when error != 0, so callers can write "return log_error_errno(r, ...)". */
int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) _printf_(5, 6);

#define log_full_errno(level, error, ...)                                                                             \
        ({                                                                                                            \
                int _l_ = (level), _e_ = (error);                                                                     \
                _l_ <= log_max_level ? log_internal(_l_, _e_, __FILE__, __LINE__, __VA_ARGS__) : -abs(_e_);           \
        })
#define log_debug(...) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_ERR, 0, __VA_ARGS__)
#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, e, __VA_ARGS__)

/* A token bucket for messages a guest can trigger: at most `burst` lines per `interval_us`. */
typedef struct RateLimit {
        uint64_t interval_us;
        unsigned burst;
        _Atomic uint64_t begin;
        _Atomic unsigned count;
        _Atomic uint64_t suppressed;
} RateLimit;

#define RATELIMIT_INIT(interval, b)                                                                                   \
        { .interval_us = (interval), .burst = (b) }

bool ratelimit_below(RateLimit *rl);

/* Guest-triggered warnings: one shared limiter, 10 lines per 5 s. */
extern RateLimit guest_log_ratelimit;
#define log_guest(...)                                                                                                \
        ({                                                                                                            \
                if (ratelimit_below(&guest_log_ratelimit))                                                            \
                        log_warning(__VA_ARGS__);                                                                     \
        })
