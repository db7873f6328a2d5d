/* log.c: stderr logging with priority prefixes (or syslog), and the rate limiter for guest-triggered
 * lines. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <inttypes.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int log_max_level = LOG_INFO;
static bool log_to_syslog;
static char log_ident[64] = "vufsd";
RateLimit guest_log_ratelimit = RATELIMIT_INIT(5 * 1000000ULL, 10);

void log_set_max_level(int level) {
        log_max_level = level;
}

/* --syslog writes datagrams to /dev/log itself rather than through syslog(3): the socket is
 * connected once, here, before the sandbox hides /dev/log and before seccomp forbids socket() and
 * connect() (syslog(3) reconnects on a failed send, and the supervisor's filter would kill it
 * for that). When /dev/log cannot be reached the lines stay on stderr, as the Rust virtiofsd
 * falls back. */
static int syslog_fd = -1;
static int syslog_pid;

int log_open_syslog(const char *instance) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd;

        if (instance)
                snprintf(log_ident, sizeof log_ident, "vufsd@%s", instance);
        strcpy(sa.sun_path, "/dev/log");
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
                int e = errno;
                close(fd);
                return -e;
        }
        syslog_fd = fd;
        syslog_pid = (int)getpid(); /* the process the launcher started, also in a sandbox child */
        log_to_syslog = true;
        return 0;
}

static bool syslog_write(int level, const char *msg) {
        char line[1200];
        int n = snprintf(line, sizeof line, "<%d>%s[%d]: %s", LOG_DAEMON | level, log_ident, syslog_pid, msg);

        if (n < 0)
                return false;
        return send(syslog_fd, line, MIN((size_t)n, sizeof line - 1), MSG_NOSIGNAL) >= 0;
}

int log_level_from_string(const char *s) {
        static const char *const names[] = {
                [LOG_EMERG] = "emerg",     [LOG_ALERT] = "alert",   [LOG_CRIT] = "crit", [LOG_ERR] = "err",
                [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice", [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
        };
        if (!s)
                return -EINVAL;
        if (strcasecmp(s, "error") == 0)
                return LOG_ERR;
        if (strcasecmp(s, "warn") == 0)
                return LOG_WARNING;
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (strcasecmp(s, names[i]) == 0)
                        return (int)i;
        return -EINVAL;
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) {
        char buf[1024];
        va_list ap;
        int saved = errno;

        if (error != 0)
                errno = abs(error); /* so %m in fmt names the error we were given */
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        (void)file;
        (void)line;
        /* syslog when asked for and reachable; stderr otherwise (and if a send fails) */
        if (!log_to_syslog || !syslog_write(level, buf))
                /* One fprintf per line: stderr is unbuffered, and a single write keeps lines from
                 * different threads whole. */
                fprintf(stderr, "<%i>vufsd: %s\n", level, buf);
        errno = saved;
        return -abs(error);
}

static uint64_t now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

bool ratelimit_below(RateLimit *rl) {
        uint64_t t = now_us(), begin = atomic_load(&rl->begin);

        /* Lock-free and approximate: a thread that loses the race to reset the window only miscounts
         * by a line, which is fine for logging. */
        if (begin == 0 || t - begin > rl->interval_us) {
                uint64_t suppressed = atomic_exchange(&rl->suppressed, 0);
                atomic_store(&rl->begin, t);
                atomic_store(&rl->count, 0);
                if (suppressed > 0)
                        log_warning("%" PRIu64 " similar messages suppressed", suppressed);
        }
        if (atomic_fetch_add(&rl->count, 1) < rl->burst)
                return true;
        atomic_fetch_add(&rl->suppressed, 1);
        return false;
}
