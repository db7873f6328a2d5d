/* manager.c: sd-event main loop hosting the listening socket and the vhost-user connection. */
#include "manager.h"

#include <assert.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

#include "bus.h"
#include "log.h"
#include "sandbox.h"
#include "survive.h"
#include "vhost-user.h"

/* A frontend that stops in the middle of a message must not freeze the main loop forever. */
#define VHOST_USER_RECV_TIMEOUT_SEC 5

/* How often STATUS= is refreshed: the request rate changes continuously, and mode and cache policy
 * can be switched over D-Bus at any time. */
#define STATUS_INTERVAL_USEC (5 * 1000000ULL)

static void manager_before_reply(void *userdata) {
        survive_checkpoint(userdata);
}

int manager_new(Manager **ret, const Config *c) {
        _cleanup_(manager_freep) Manager *m = NULL;
        RequestHandler handler;
        DeviceStateHandler state_handler;
        const FsOps *ops;
        void *fs;
        int r;

        m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        m->config = c;
        m->listen_fd = m->conn_fd = m->lock_fd = -1;

        r = sd_event_default(&m->event);
        if (r < 0)
                return log_error_errno(r, "Failed to create event loop: %m");
        r = passthrough_new(&m->passthrough, &c->fs);
        if (r < 0)
                return log_error_errno(r, "Cannot serve %s: %m", c->fs.shared_dir);
        ops = &passthrough_ops;
        fs = m->passthrough;
        if (c->fs.translate_uid || c->fs.translate_gid) {
                /* --translate-uid/--translate-gid: every id crossing the interface goes through it. */
                r = id_translate_fs_new(&m->translate, ops, fs, c->fs.translate_uid, c->fs.translate_gid);
                if (r < 0)
                        return log_error_errno(r, "Failed to set up id translation: %m");
                ops = &id_translate_fs_ops;
                fs = m->translate;
        }
        r = fuse_server_new(&m->fs, &c->fs, ops, fs);
        if (r < 0)
                return log_error_errno(r, "Failed to create the FUSE server: %m");
        handler = fuse_request_handler(m->fs);
        r = device_new(&m->device, &handler, c->n_request_queues);
        if (r < 0)
                return log_error_errno(r, "Failed to create the device: %m");
        /* Live migration (docs/migration.md): the session moves through the frontend's pipe. */
        m->migration = (Migration) { .fs = m->fs, .passthrough = m->passthrough, .opts = migration_options(c) };
        state_handler = migration_state_handler(&m->migration);
        device_set_state_handler(m->device, &state_handler);
        if (c->tag) { /* --tag: served through GET_CONFIG (config_verify() checked the length) */
                r = device_set_config_tag(m->device, c->tag);
                if (r < 0)
                        return log_error_errno(r, "Invalid --tag: %m");
        }

        /* The mode and size config_verify() resolved from the command line. */
        r = executor_new(&m->executor, c->thread_mode, c->pool_size);
        if (r < 0)
                return log_error_errno(r, "Failed to start the %s threads: %m", thread_mode_to_string(c->thread_mode));
        r = stats_new(&m->stats);
        if (r < 0)
                return log_error_errno(r, "Failed to set up statistics: %m");
        device_attach(m->device, m->executor, m->stats);
        device_track_progress(m->device, survive_enabled());
        /* The device's record is stored before a reply tells the frontend a change is made: a death
         * between the two would lose it (fuzz-survive found an acked SET_VRING_ENABLE lost, the
         * ring never ran again). on_connection_io() stores after the messages without a reply. */
        device_set_before_reply(m->device, manager_before_reply, m);
        survive_test_hooks_install(m->device);
        device_set_poll_us(m->device, c->poll_us);
        *ret = TAKE_PTR(m);
        return 0;
}

static void manager_close_connection(Manager *m) {
        m->conn_source = sd_event_source_disable_unref(m->conn_source);
        m->conn_fd = safe_close(m->conn_fd);
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        m->bus = bus_free(m->bus); /* first: its handlers look at everything below */
        m->status_timer = sd_event_source_disable_unref(m->status_timer);
        m->lock_pending_io = sd_event_source_disable_unref(m->lock_pending_io);
        m->lock_retry_timer = sd_event_source_disable_unref(m->lock_retry_timer);
        manager_close_connection(m);
        m->listen_source = sd_event_source_disable_unref(m->listen_source);
        m->device = device_free(m->device); /* first: waits for requests still on workers */
        m->executor = executor_free(m->executor);
        m->stats = stats_free(m->stats);
        m->fs = fuse_server_free(m->fs);
        m->translate = id_translate_fs_free(m->translate); /* after the server that used it */
        m->passthrough = passthrough_free(m->passthrough); /* after the server that used it */
        m->listen_fd = safe_close(m->listen_fd);
        if (m->socket_path)
                (void) unlink(m->socket_path);
        if (m->lock_path)
                (void) unlink(m->lock_path);
        safe_close(m->lock_fd);
        free(m->socket_path);
        free(m->lock_path);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

/* One STATUS= line: connection state, queues, thread mode, cache policy and the request rate
 * measured by the periodic refresh (on_status_timer()). */
static void manager_status(Manager *m, const char *state) {
        ExecutorState es;
        DeviceInfo info;
        char pool[32] = "", rate[32] = "";

        executor_get_state(m->executor, &es);
        device_get_info(m->device, &info);
        if (es.mode != THREAD_MODE_INLINE)
                snprintf(pool, sizeof pool, " (%u threads)", es.pool_size);
        if (m->status_rate >= 0)
                snprintf(rate, sizeof rate, "; %.0f req/s", m->status_rate);
        /* The version last: after a live upgrade systemctl status shows the new one. */
        (void) sandbox_notifyf("STATUS=%s; %u of %u queues running; threads %s%s; cache %s%s; vufsd %s", state,
                              info.running_queues, info.n_queues, thread_mode_to_string(es.mode), pool,
                              cache_policy_to_string(fuse_server_get_cache_policy(m->fs)), rate, vufsd_version());
}

static int on_status_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        StatsSnapshot snap;
        uint64_t now, requests = 0;

        stats_snapshot(m->stats, &snap);
        for (size_t i = 0; i < ELEMENTSOF(snap.op); i++)
                requests += snap.op[i].requests;
        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        /* A statistics reset (D-Bus) makes the counter go back: start measuring again. */
        if (m->status_usec > 0 && now > m->status_usec && requests >= m->status_requests)
                m->status_rate = (double)(requests - m->status_requests) * 1e6 / (double)(now - m->status_usec);
        else
                m->status_rate = -1;
        m->status_requests = requests;
        m->status_usec = now;
        manager_status(m, m->conn_fd >= 0 ? "Frontend connected" : "Waiting for a frontend");

        (void) sd_event_source_set_time_relative(s, STATUS_INTERVAL_USEC);
        return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

/* The frontend is gone: stop the queues, drop the guest's memory and the session's inodes. */
static void manager_disconnect(Manager *m, const char *why) {
        log_info("Frontend disconnected (%s)", why);
        manager_close_connection(m);
        device_reset(m->device);
        fuse_server_reset(m->fs);
        bus_device_changed(m->bus);
        survive_checkpoint(m); /* no connection: a process that takes over listens */

        if (m->config->keep_listening) {
                (void) sd_event_source_set_enabled(m->listen_source, SD_EVENT_ON);
                manager_status(m, "Waiting for a frontend");
                return;
        }
        /* One VM per process: exit cleanly so socket activation starts a fresh instance next time. */
        (void) sandbox_notify("STOPPING=1\nSTATUS=Frontend disconnected, exiting");
        (void) sd_event_exit(m->event, 0);
}

static int on_connection_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Manager *m = userdata;
        VhostUserMsg msg;
        int r;

        r = vhost_user_recv(fd, &msg);
        if (r == -ECONNRESET) {
                manager_disconnect(m, "end of stream");
                return 0;
        }
        if (r < 0) {
                log_warning_errno(r, "Dropping the frontend connection: %m");
                manager_disconnect(m, "protocol error");
                return 0;
        }
        r = vhost_user_handle(&device_vhost_ops, m->device, fd, &msg);
        if (r < 0) {
                log_warning_errno(r, "Dropping the frontend connection after %s: %m",
                                  vhost_user_request_to_string(msg.hdr.request));
                manager_disconnect(m, "reply failed");
                return 0;
        }
        bus_device_changed(m->bus); /* features or running queues may have changed */
        survive_checkpoint(m);
        return 0;
}

static int on_listen_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Manager *m = userdata;
        struct timeval tv = { .tv_sec = VHOST_USER_RECV_TIMEOUT_SEC };
        _cleanup_close_ int c = -1;
        int r;

        c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
                if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
                        return 0;
                return log_error_errno(errno, "accept() failed: %m");
        }
        (void) setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        /* And for replies: a frontend that stops reading must not block the main thread for good
         * once both socket buffers are full (vhost_user_handle() then drops the connection). */
        (void) setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

        r = manager_attach_connection(m, TAKE_FD(c));
        if (r < 0)
                return r;
        /* The Rust virtiofsd's wording: scripts and launchers match it. */
        log_info("Client connected, servicing requests");
        survive_checkpoint(m);
        return 0;
}

int manager_attach_connection(Manager *m, int fd) {
        _cleanup_close_ int c = fd;
        int r;

        r = sd_event_add_io(m->event, &m->conn_source, c, EPOLLIN, on_connection_io, m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch the connection: %m");
        (void) sd_event_source_set_description(m->conn_source, "vhost-user");
        m->conn_fd = TAKE_FD(c);
        m->n_connections++;
        /* One frontend at a time: a vhost-user device has exactly one driver. */
        (void) sd_event_source_set_enabled(m->listen_source, SD_EVENT_OFF);
        bus_device_changed(m->bus);
        manager_status(m, "Frontend connected");
        return 0;
}

/* Takes a lock next to the socket so two daemons never fight over one path, then replaces a
 * stale socket left by a daemon that died. */
int path_socket_create(const Config *c, PathSocket *ret) {
        _cleanup_free_ char *lock_path = NULL, *path = NULL;
        _cleanup_close_ int lock_fd = -1, fd = -1;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        assert(c->socket_path);
        if (strlen(c->socket_path) >= sizeof sa.sun_path)
                return log_error_errno(ENAMETOOLONG, "Socket path too long: %s", c->socket_path);
        path = strdup(c->socket_path);
        /* PATH.pid, as the Rust virtiofsd names it: launchers read the pid from it, and the lock
         * on it keeps a second daemon off the same socket. */
        if (!path || asprintf(&lock_path, "%s.pid", path) < 0)
                return -ENOMEM;
        lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (lock_fd < 0)
                return log_error_errno(errno, "Cannot create pid file %s: %m", lock_path);
        if (flock(lock_fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno == EWOULDBLOCK)
                        return log_error_errno(EADDRINUSE, "%s is in use by another running vufsd", path);
                return log_error_errno(errno, "Cannot lock %s: %m", lock_path);
        }
        {
                char pid[32];
                int n = snprintf(pid, sizeof pid, "%d\n", (int)(c->main_pid > 0 ? c->main_pid : getpid()));
                if (ftruncate(lock_fd, 0) < 0 || pwrite(lock_fd, pid, (size_t)n, 0) != n)
                        return log_error_errno(errno, "Cannot write pid file %s: %m", lock_path);
        }
        if (unlink(path) < 0 && errno != ENOENT)
                return log_error_errno(errno, "Cannot remove stale socket %s: %m", path);

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(errno, "socket() failed: %m");
        strcpy(sa.sun_path, path);
        {
                /* Only the owner (and the socket group) may connect: the socket gives control of a
                 * VM's filesystem. umask is process-wide, so set it around bind() only. */
                mode_t old = umask(c->socket_group ? 0007 : 0077);
                int r = bind(fd, (struct sockaddr *) &sa, sizeof sa);
                umask(old);
                if (r < 0)
                        return log_error_errno(errno, "Cannot bind %s: %m", path);
        }
        /* From here on the socket is ours: a failure removes it. */
        *ret = (PathSocket){ .fd = TAKE_FD(fd),
                             .lock_fd = TAKE_FD(lock_fd),
                             .path = TAKE_PTR(path),
                             .lock_path = TAKE_PTR(lock_path) };
        if (c->socket_group) {
                struct group *g = getgrnam(c->socket_group);
                if (!g || chown(ret->path, (uid_t) -1, g->gr_gid) < 0) {
                        int r = log_error_errno(g ? errno : ENOENT, "Cannot give %s to group %s: %m", ret->path,
                                                c->socket_group);
                        path_socket_done(ret, true);
                        return r;
                }
        }
        /* Listening at once: a launcher that sees the file may connect right away; the connection
         * waits in the backlog until the main loop accepts it, after the bus name is owned. */
        if (listen(ret->fd, 1) < 0) {
                int r = log_error_errno(errno, "listen() failed: %m");
                path_socket_done(ret, true);
                return r;
        }
        return 0;
}

void path_socket_done(PathSocket *s, bool remove) {
        if (remove && s->path)
                (void) unlink(s->path);
        if (remove && s->lock_path)
                (void) unlink(s->lock_path);
        s->fd = safe_close(s->fd);
        s->lock_fd = safe_close(s->lock_fd);
        free(s->path);
        free(s->lock_path);
        s->path = s->lock_path = NULL;
}

static int check_listening_socket(int fd, const char *what) {
        int r = sd_is_socket(fd, AF_UNIX, SOCK_STREAM, 1);
        if (r < 0)
                return log_error_errno(r, "%s (fd %d) is not usable: %m", what, fd);
        if (r == 0)
                return log_error_errno(ENOTSOCK, "%s (fd %d) is not a listening unix stream socket", what, fd);
        return 0;
}

int manager_listen(Manager *m, PathSocket *s) {
        const Config *c = m->config;
        int n, r;

        n = sd_listen_fds(true);
        if (n < 0)
                return log_error_errno(n, "Cannot read the sockets passed by systemd: %m");
        /* systemd-vmspawn runs virtiofsd under sd-socket-activate and also passes "--fd 3": the
         * same socket named twice is one socket. */
        if (n == 1 && c->listen_fd == SD_LISTEN_FDS_START)
                n = 0;
        if ((n > 0) + (c->listen_fd >= 0) + !!c->socket_path != 1)
                return log_error_errno(EINVAL,
                                       "Give exactly one of --socket-path, --fd or a systemd socket "
                                       "(got %s%s%s)",
                                       n > 0 ? "activation " : "", c->listen_fd >= 0 ? "--fd " : "",
                                       c->socket_path ? "--socket-path" : "");
        if (n > 1)
                return log_error_errno(EINVAL, "systemd passed %d sockets; vufsd serves exactly one", n);

        if (c->socket_path) {
                assert(s && s->fd >= 0);
                m->socket_path = TAKE_PTR(s->path);
                m->lock_path = TAKE_PTR(s->lock_path);
                m->lock_fd = TAKE_FD(s->lock_fd);
                m->listen_fd = TAKE_FD(s->fd);
                r = 0;
        } else {
                int fd = n > 0 ? SD_LISTEN_FDS_START : c->listen_fd;
                r = check_listening_socket(fd, n > 0 ? "The activated socket" : "--fd");
                if (r >= 0) {
                        m->listen_fd = fd;
                        (void) fcntl(fd, F_SETFD, FD_CLOEXEC);
                        (void) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
                }
        }
        if (r < 0)
                return r;

        r = sd_event_add_io(m->event, &m->listen_source, m->listen_fd, EPOLLIN, on_listen_io, m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch the listening socket: %m");
        (void) sd_event_source_set_description(m->listen_source, "listen");
        return 0;
}

static int manager_loop(Manager *m);

/* The journal's line per upgrade: which binary serves now, what it took over, the guest's pause
 * (from the previous process stopping its rings to this one resuming them). */
static void log_upgrade(Manager *m) {
        const char *version = vufsd_version();

        if (m->upgrade_stopped_usec > 0) {
                struct timespec ts;
                uint64_t now;

                clock_gettime(CLOCK_MONOTONIC, &ts);
                now = (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000;
                m->upgrade_pause_usec = now > m->upgrade_stopped_usec ? now - m->upgrade_stopped_usec : 0;
        }
        if (sandbox_upgrade_executed())
                log_notice("Live upgrade %u: vufsd %s serves the guest's session of vufsd %s (%zu nodes, %zu handles); "
                           "the guest paused %.1f ms",
                           sandbox_upgrades(), version, m->upgrade_from[0] ? m->upgrade_from : "?", m->upgrade_nodes,
                           m->upgrade_handles, (double) m->upgrade_pause_usec / 1000.0);
        else
                log_warning("Live upgrade failed: the running vufsd %s serves on (%zu nodes, %zu handles); the guest "
                            "paused %.1f ms",
                            version, m->upgrade_nodes, m->upgrade_handles, (double) m->upgrade_pause_usec / 1000.0);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;

        log_info("Received %s, shutting down", strsignal((int) si->ssi_signo));
        (void) sandbox_notify("STOPPING=1");
        return sd_event_exit(m->event, 0);
}

/* Pending locks (docs/migration.md "Locks"): retried every 10 ms until each is taken or lost. */
#define LOCK_RETRY_USEC (10 * 1000ULL)

static int on_lock_retry_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        if (passthrough_locks_retry(m->passthrough) > 0)
                (void) sd_event_source_set_time_relative(s, LOCK_RETRY_USEC);
        else
                (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
        return 0;
}

/* Locks became pending (a migration's load, on the transfer thread): start the retries here, on
 * the loop, which sd-event requires. */
static int on_lock_pending(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Manager *m = userdata;
        uint64_t n;

        (void) !read(fd, &n, sizeof n);
        (void) sd_event_source_set_time_relative(m->lock_retry_timer, LOCK_RETRY_USEC);
        (void) sd_event_source_set_enabled(m->lock_retry_timer, SD_EVENT_ON);
        return 0;
}

static int watch_pending_locks(Manager *m) {
        int r;

        r = sd_event_add_time_relative(m->event, &m->lock_retry_timer, CLOCK_MONOTONIC, LOCK_RETRY_USEC, 0,
                                       on_lock_retry_timer, m);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(m->lock_retry_timer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(m->lock_retry_timer, "lock-retry");
        r = sd_event_add_io(m->event, &m->lock_pending_io, passthrough_locks_pending_fd(m->passthrough), EPOLLIN,
                            on_lock_pending, m);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(m->lock_pending_io, "lock-pending");
        return 0;
}

int manager_run(Manager *m) {
        int r;

        /* Handled on the loop; the signals were blocked in main() before any thread started so
         * that queue threads never receive them. */
        r = sd_event_add_signal(m->event, NULL, SIGTERM, on_signal, m);
        if (r >= 0)
                r = sd_event_add_signal(m->event, NULL, SIGINT, on_signal, m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch signals: %m");
        (void) sandbox_watchdog_attach(m->event);
        m->status_rate = -1;
        r = sd_event_add_time_relative(m->event, &m->status_timer, CLOCK_MONOTONIC, STATUS_INTERVAL_USEC, 0,
                                       on_status_timer, m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the status timer: %m");
        (void) sd_event_source_set_description(m->status_timer, "status");
        r = watch_pending_locks(m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the retry of pending locks: %m");

        if (survive_enabled() && sandbox_generation() > 0) {
                /* The previous serving process died, or stopped for an upgrade: take over what it
                 * served. */
                r = survive_resume(m);
                if (r < 0)
                        return log_error_errno(r, "Cannot take over from the previous serving process: %m");
                /* A binary the spawner executed (an upgrade, or a restart after one) tells it that
                 * it serves; a forked process has nothing to tell. */
                sandbox_upgrade_took_over();
                if (sandbox_upgrading()) {
                        log_upgrade(m);
                        if (r > 0)
                                manager_status(m, "Frontend connected");
                }
                if (r > 0) {
                        uint64_t now;
                        (void) sd_event_now(m->event, CLOCK_MONOTONIC, &now);
                        if (!sandbox_upgrading()) {
                                m->restart_pause_usec = now - sandbox_death_usec();
                                log_notice("Took over the guest's connection and rings (restart %u), %.1f ms after "
                                           "the previous serving process died",
                                           sandbox_restarts(), (double) (now - sandbox_death_usec()) / 1000.0);
                        }
                        return manager_loop(m);
                }
        }
        log_info("Serving %s, %u request queue%s", m->config->shared_dir, m->config->n_request_queues,
                 m->config->n_request_queues == 1 ? "" : "s");
        (void) sandbox_notify("READY=1");
        manager_status(m, "Waiting for a frontend");
        /* The line Kata's runtime-rs (and scripts written for virtiofsd) wait for before starting
         * the VM; the socket is listening by now. */
        log_info("Waiting for vhost-user socket connection...");
        return manager_loop(m);
}

static int manager_loop(Manager *m) {
        int r;

        r = sd_event_loop(m->event);
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        return r;
}
