/* device-state.c: SET_DEVICE_STATE_FD and CHECK_DEVICE_STATE: the device's state through a pipe,
 * on a thread of its own.
 *
 * The frontend passes one end of a pipe and reads (save) or writes (load) the other; the end of
 * the stream is the writer closing its end. The bytes move on a transfer thread so that the main
 * thread (every vhost-user message, signals, the watchdog, the control channel) never waits for a
 * frontend that reads or writes slowly, nor for the file I/O of saving or restoring the nodes; it
 * waits only in CHECK_DEVICE_STATE, whose answer is that outcome, and at most
 * DEVICE_STATE_CHECK_TIMEOUT_MS. A frontend that neither reads nor writes, or that goes away,
 * leaves the thread in poll() with the cancel eventfd, which a reset or a late check writes. */
#include "device-internal.h"
#include "queue.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define CHUNK (64u << 10)

int device_state_init(Device *d) {
        d->transfer.cancel_fd = -1;
        d->transfer.fd = -1;
        pthread_mutex_init(&d->transfer.lock, NULL);
        pthread_cond_init(&d->transfer.cond, NULL);
        d->transfer.cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        return d->transfer.cancel_fd < 0 ? negative_errno() : 0;
}

void device_state_done(Device *d) {
        safe_close(d->transfer.cancel_fd);
        pthread_mutex_destroy(&d->transfer.lock);
        pthread_cond_destroy(&d->transfer.cond);
}

void device_set_state_handler(Device *d, const DeviceStateHandler *h) {
        d->state_handler = *h;
        d->has_state_handler = true;
}

/* Waits until fd is ready for events or the transfer is cancelled: 0, or -ECANCELED. */
static int wait_fd(Device *d, int fd, short events) {
        struct pollfd p[2] = { { .fd = fd, .events = events }, { .fd = d->transfer.cancel_fd, .events = POLLIN } };

        for (;;) {
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (p[1].revents)
                        return -ECANCELED;
                return 0; /* ready, or an error/hangup the next read or write reports */
        }
}

static int write_all(Device *d, int fd, const uint8_t *buf, size_t len) {
        while (len > 0) {
                ssize_t n = write(fd, buf, MIN(len, (size_t) CHUNK));
                if (n < 0) {
                        int r;
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                return negative_errno(); /* EPIPE: the frontend stopped reading */
                        r = wait_fd(d, fd, POLLOUT);
                        if (r < 0)
                                return r;
                        continue;
                }
                buf += n;
                len -= (size_t) n;
        }
        return 0;
}

/* Everything until EOF, at most max bytes: -EFBIG past that (the rest is not read). */
static int read_all(Device *d, int fd, uint64_t max, uint8_t **ret, size_t *ret_len) {
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len = 0, cap = 0;

        for (;;) {
                ssize_t n;
                if (len == cap) {
                        size_t ncap = cap ? cap * 2 : CHUNK;
                        uint8_t *nb;
                        if (cap >= max + 1)
                                return -EFBIG;
                        ncap = MIN(ncap, (size_t) max + 1);
                        nb = realloc(buf, ncap);
                        if (!nb)
                                return -ENOMEM;
                        buf = nb;
                        cap = ncap;
                }
                n = read(fd, buf + len, cap - len);
                if (n < 0) {
                        int r;
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                return negative_errno();
                        r = wait_fd(d, fd, POLLIN);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
                if (len > max)
                        return -EFBIG;
        }
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

static void *transfer_thread(void *arg) {
        Device *d = arg;
        const DeviceStateHandler *h = &d->state_handler;
        _cleanup_free_ uint8_t *buf = NULL;
        char err[256] = "";
        size_t len = 0;
        int fd = d->transfer.fd, r;

        if (d->transfer.direction == VHOST_USER_TRANSFER_SAVE) {
                r = h->save(h->data, &buf, &len, err, sizeof err);
                if (r >= 0)
                        r = write_all(d, fd, buf, len);
                if (r < 0)
                        log_warning("Saving the device state failed: %s%s%s", err[0] ? err : "", err[0] ? ": " : "",
                                    strerror(-r));
                else
                        log_info("Device state saved: %zu bytes", len);
        } else {
                r = read_all(d, fd, h->max_len, &buf, &len);
                if (r == -EFBIG)
                        snprintf(err, sizeof err, "the stream is longer than %" PRIu64 " bytes", h->max_len);
                if (r >= 0)
                        r = h->load(h->data, buf, len, err, sizeof err);
                if (r < 0)
                        log_warning("Loading the device state failed: %s%s%s", err[0] ? err : "", err[0] ? ": " : "",
                                    strerror(-r));
                else
                        log_info("Device state loaded: %zu bytes", len);
        }
        /* The outcome is set before our end closes: a frontend that sees the end of the stream and
         * asks CHECK_DEVICE_STATE at once finds it. */
        pthread_mutex_lock(&d->transfer.lock);
        d->transfer.result = r;
        d->transfer.done = true;
        pthread_cond_broadcast(&d->transfer.cond);
        pthread_mutex_unlock(&d->transfer.lock);
        safe_close(fd);
        return NULL;
}

static void join_transfer(Device *d) {
        if (!d->transfer.running)
                return;
        pthread_join(d->transfer.thread, NULL);
        d->transfer.running = false;
        (void) eventfd_read(d->transfer.cancel_fd, &(eventfd_t) { 0 }); /* a cancel it did not need */
}

void device_state_cancel(Device *d) {
        if (d->transfer.running) {
                (void) eventfd_write(d->transfer.cancel_fd, 1);
                join_transfer(d);
        }
        d->transfer.any = false;
}

int device_set_state_fd(Device *d, uint32_t direction, int fd) {
        bool busy;
        int r;

        if (!d->has_state_handler) {
                safe_close(fd);
                return log_warning_errno(EOPNOTSUPP, "SET_DEVICE_STATE_FD: this device has no state to move");
        }
        if (device_running_queues(d) > 0) {
                safe_close(fd);
                return log_warning_errno(EBUSY, "SET_DEVICE_STATE_FD while %u queues run: the device must be stopped",
                                         device_running_queues(d));
        }
        pthread_mutex_lock(&d->transfer.lock);
        busy = d->transfer.running && !d->transfer.done;
        pthread_mutex_unlock(&d->transfer.lock);
        if (busy) {
                safe_close(fd);
                return log_warning_errno(EBUSY, "SET_DEVICE_STATE_FD while another transfer is in progress");
        }
        join_transfer(d);
        /* Our end of the pipe never blocks the thread past a cancel (wait_fd()); the frontend's end
         * is another open file, unaffected. */
        if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
                r = negative_errno();
                safe_close(fd);
                return r;
        }
        d->transfer.fd = fd;
        d->transfer.direction = direction;
        d->transfer.done = false;
        d->transfer.result = 0;
        r = -pthread_create(&d->transfer.thread, NULL, transfer_thread, d);
        if (r < 0) {
                safe_close(fd);
                return log_warning_errno(-r, "SET_DEVICE_STATE_FD: no transfer thread: %m");
        }
        d->transfer.running = true;
        d->transfer.any = true;
        log_info("Device state %s started", direction == VHOST_USER_TRANSFER_SAVE ? "save" : "load");
        return 0;
}

int device_check_state(Device *d) {
        struct timespec deadline;
        bool done;
        int r;

        if (!d->transfer.any)
                return log_warning_errno(ENOENT, "CHECK_DEVICE_STATE without a transfer");
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += DEVICE_STATE_CHECK_TIMEOUT_MS / 1000;
        pthread_mutex_lock(&d->transfer.lock);
        while (!d->transfer.done)
                if (pthread_cond_timedwait(&d->transfer.cond, &d->transfer.lock, &deadline) == ETIMEDOUT)
                        break;
        done = d->transfer.done;
        r = d->transfer.result;
        pthread_mutex_unlock(&d->transfer.lock);
        if (!done) {
                log_warning("CHECK_DEVICE_STATE: the transfer did not end within %d s, cancelling it",
                            DEVICE_STATE_CHECK_TIMEOUT_MS / 1000);
                device_state_cancel(d);
                return -ETIMEDOUT;
        }
        join_transfer(d);
        return r;
}
