/* probe-util.h: time, child-message and process-state helpers of the static guest probes (vufs-posix, vufs-locks). */
#pragma once

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Waits that end early when things work; long because a TCG guest on a loaded host is slow. */
#define WAIT_LONG_MS 30000
/* The size of every message a probe's child sends its parent. */
#define PROBE_MSG 128

/* errno's name ("ok" for 0): the same in every run, unlike strerror's text in another locale. */
static inline const char *ename(int e) {
        const char *s;

        if (e == 0)
                return "ok";
        s = strerrorname_np(e);
        return s ? s : "E?";
}

static inline long long now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void msleep(int ms) {
        struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* Sends s (cut to PROBE_MSG - 1 bytes) as one fixed-size message; a child that cannot exits 4. */
static inline void send_msg(int fd, const char *s) {
        char buf[PROBE_MSG];
        size_t n = strlen(s);

        memset(buf, 0, sizeof(buf));
        memcpy(buf, s, n < sizeof(buf) - 1 ? n : sizeof(buf) - 1);
        if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
                _exit(4);
}

/* One fixed-size message within timeout_ms: 0, -ETIMEDOUT or -EPIPE (the sender is gone). A signal
 * during the wait does not end it: the waiting cases send their children signals. */
static inline int recv_msg(int fd, char *buf, int timeout_ms) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        size_t got = 0;
        long long end = now_ms() + timeout_ms;

        while (got < PROBE_MSG) {
                int left = (int)(end - now_ms()), r;
                ssize_t n;

                if (left < 0)
                        left = 0;
                r = poll(&pfd, 1, left);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return -ETIMEDOUT;
                n = read(fd, buf + got, PROBE_MSG - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -EPIPE;
                got += (size_t)n;
        }
        buf[PROBE_MSG - 1] = 0;
        return 0;
}

/* Whether the process sleeps (state S or D), i.e. is blocked in a system call. */
static inline bool sleeping(pid_t pid) {
        char path[64], buf[512], *p;
        FILE *f;
        bool r = false;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return false;
        if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) && p[1] == ' ')
                r = p[2] == 'S' || p[2] == 'D';
        fclose(f);
        return r;
}

/* Whether the process went to sleep within WAIT_LONG_MS. */
static inline bool wait_sleeping(pid_t pid) {
        for (int i = 0; i < WAIT_LONG_MS / 50; i++) {
                if (sleeping(pid))
                        return true;
                msleep(50);
        }
        return false;
}
