/* bus.c: the org.vufsd.Daemon1 object: properties, methods and PropertiesChanged over sd-bus. */
#include "bus.h"

#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-login.h>
#include <time.h>
#include <unistd.h>
#include <linux/fuse.h>

#include "executor.h"
#include "log.h"
#include "manager.h"
#include "stats.h"

/* Startup must not hang on a stuck bus: every synchronous call we make gets this long. */
#define BUS_CALL_TIMEOUT_USEC (5ULL * 1000 * 1000)

struct Bus {
        Manager *manager;
        sd_bus *bus;
        char *instance;
        char *name;
        uint64_t start_usec; /* CLOCK_MONOTONIC at bus_open(), for UptimeUSec */
        gid_t admin_gid;     /* BUS_ADMIN_GROUP, looked up before the sandbox hides /etc; -1 if none */
        uid_t self_uid;      /* "our own user" for check_caller_privileged(), see bus_open() */

        /* What PropertiesChanged last announced (bus_device_changed() compares against it). */
        bool connected;
        unsigned connections;
        unsigned running_queues;
        uint64_t features;
        uint64_t protocol_features;

        bool lost; /* the bus went away; logged once, nothing more is sent */
};

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000;
}

static const char *const fuse_opcode_names[] = {
        [0] = "unknown",
        [FUSE_LOOKUP] = "LOOKUP",
        [FUSE_FORGET] = "FORGET",
        [FUSE_GETATTR] = "GETATTR",
        [FUSE_SETATTR] = "SETATTR",
        [FUSE_READLINK] = "READLINK",
        [FUSE_SYMLINK] = "SYMLINK",
        [FUSE_MKNOD] = "MKNOD",
        [FUSE_MKDIR] = "MKDIR",
        [FUSE_UNLINK] = "UNLINK",
        [FUSE_RMDIR] = "RMDIR",
        [FUSE_RENAME] = "RENAME",
        [FUSE_LINK] = "LINK",
        [FUSE_OPEN] = "OPEN",
        [FUSE_READ] = "READ",
        [FUSE_WRITE] = "WRITE",
        [FUSE_STATFS] = "STATFS",
        [FUSE_RELEASE] = "RELEASE",
        [FUSE_FSYNC] = "FSYNC",
        [FUSE_SETXATTR] = "SETXATTR",
        [FUSE_GETXATTR] = "GETXATTR",
        [FUSE_LISTXATTR] = "LISTXATTR",
        [FUSE_REMOVEXATTR] = "REMOVEXATTR",
        [FUSE_FLUSH] = "FLUSH",
        [FUSE_INIT] = "INIT",
        [FUSE_OPENDIR] = "OPENDIR",
        [FUSE_READDIR] = "READDIR",
        [FUSE_RELEASEDIR] = "RELEASEDIR",
        [FUSE_FSYNCDIR] = "FSYNCDIR",
        [FUSE_GETLK] = "GETLK",
        [FUSE_SETLK] = "SETLK",
        [FUSE_SETLKW] = "SETLKW",
        [FUSE_ACCESS] = "ACCESS",
        [FUSE_CREATE] = "CREATE",
        [FUSE_INTERRUPT] = "INTERRUPT",
        [FUSE_BMAP] = "BMAP",
        [FUSE_DESTROY] = "DESTROY",
        [FUSE_IOCTL] = "IOCTL",
        [FUSE_POLL] = "POLL",
        [FUSE_NOTIFY_REPLY] = "NOTIFY_REPLY",
        [FUSE_BATCH_FORGET] = "BATCH_FORGET",
        [FUSE_FALLOCATE] = "FALLOCATE",
        [FUSE_READDIRPLUS] = "READDIRPLUS",
        [FUSE_RENAME2] = "RENAME2",
        [FUSE_LSEEK] = "LSEEK",
        [FUSE_COPY_FILE_RANGE] = "COPY_FILE_RANGE",
        [FUSE_SETUPMAPPING] = "SETUPMAPPING",
        [FUSE_REMOVEMAPPING] = "REMOVEMAPPING",
        [FUSE_SYNCFS] = "SYNCFS",
        [FUSE_TMPFILE] = "TMPFILE",
};

static const char *opcode_name(unsigned op) {
        if (op < ELEMENTSOF(fuse_opcode_names) && fuse_opcode_names[op])
                return fuse_opcode_names[op];
        return "unknown";
}

/* ---- properties ---- */

static int property_get_instance(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        return sd_bus_message_append(reply, "s", b->instance);
}

static int property_get_version(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "s", PACKAGE_VERSION);
}

static int property_get_shared_directory(sd_bus *bus, const char *path, const char *interface,
                                         const char *property, sd_bus_message *reply, void *userdata,
                                         sd_bus_error *error) {
        Bus *b = userdata;
        return sd_bus_message_append(reply, "s", b->manager->config->shared_dir ?: "");
}

static int property_get_socket(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = ((Bus *) userdata)->manager;
        struct sockaddr_un sa = {};
        socklen_t len = sizeof sa;
        char buf[sizeof sa.sun_path + 1] = "";

        if (m->socket_path)
                return sd_bus_message_append(reply, "s", m->socket_path);
        /* --fd or socket activation: ask the socket itself. */
        if (m->listen_fd >= 0 && getsockname(m->listen_fd, (struct sockaddr *) &sa, &len) == 0 &&
            sa.sun_family == AF_UNIX && len > offsetof(struct sockaddr_un, sun_path)) {
                size_t n = len - offsetof(struct sockaddr_un, sun_path);
                if (sa.sun_path[0] == '\0' && n > 1) { /* abstract: shown as @name */
                        buf[0] = '@';
                        memcpy(buf + 1, sa.sun_path + 1, n - 1);
                        buf[n] = '\0';
                } else
                        snprintf(buf, sizeof buf, "%.*s", (int) n, sa.sun_path);
        }
        return sd_bus_message_append(reply, "s", buf);
}

static int property_get_options(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        const FsOptions *o = &((Bus *) userdata)->manager->config->fs;
        const struct {
                const char *name;
                bool on;
        } opts[] = {
                { "xattr", o->xattr },
                { "posix_acl", o->posix_acl },
                { "security_label", o->security_label },
                { "writeback", o->writeback },
                { "readdirplus", o->readdirplus },
                { "announce_submounts", o->announce_submounts },
                { "allow_direct_io", o->allow_direct_io },
                { "killpriv_v2", o->killpriv_v2 },
                { "preserve_noatime", o->preserve_noatime },
                { "readonly", o->readonly },
                { "posix_lock", o->posix_lock },
                { "flock", o->flock },
        };
        char timeout[64];
        int r;

        r = sd_bus_message_open_container(reply, 'a', "s");
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(opts); i++)
                if (opts[i].on)
                        r = sd_bus_message_append(reply, "s", opts[i].name);
        if (r >= 0 && o->timeout >= 0) {
                snprintf(timeout, sizeof timeout, "timeout=%g", o->timeout);
                r = sd_bus_message_append(reply, "s", timeout);
        }
        if (r < 0)
                return r;
        return sd_bus_message_close_container(reply);
}

static int property_get_request_queues(sd_bus *bus, const char *path, const char *interface,
                                       const char *property, sd_bus_message *reply, void *userdata,
                                       sd_bus_error *error) {
        Bus *b = userdata;
        return sd_bus_message_append(reply, "u", b->manager->config->n_request_queues);
}

static int property_get_connected(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        return sd_bus_message_append(reply, "b", b->manager->conn_fd >= 0);
}

static int property_get_connections(sd_bus *bus, const char *path, const char *interface,
                                    const char *property, sd_bus_message *reply, void *userdata,
                                    sd_bus_error *error) {
        Bus *b = userdata;
        return sd_bus_message_append(reply, "u", b->manager->n_connections);
}

static int property_get_running_queues(sd_bus *bus, const char *path, const char *interface,
                                       const char *property, sd_bus_message *reply, void *userdata,
                                       sd_bus_error *error) {
        Bus *b = userdata;
        return sd_bus_message_append(reply, "u", device_running_queues(b->manager->device));
}

static int property_get_features(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        DeviceInfo info;
        /* Both are written by vhost-user messages, which run on this (the main) thread. */
        device_get_info(((Bus *) userdata)->manager->device, &info);
        return sd_bus_message_append(reply, "t",
                                     streq(property, "NegotiatedFeatures") ? info.features : info.protocol_features);
}

static int property_get_thread_mode(sd_bus *bus, const char *path, const char *interface, const char *property,
                                    sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        ExecutorState st;

        executor_get_state(((Bus *) userdata)->manager->executor, &st);
        return sd_bus_message_append(reply, "s", thread_mode_to_string(st.mode));
}

static int property_get_pool_size(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        ExecutorState st;

        executor_get_state(((Bus *) userdata)->manager->executor, &st);
        return sd_bus_message_append(reply, "u", st.pool_size);
}

static int property_get_cache_policy(sd_bus *bus, const char *path, const char *interface,
                                     const char *property, sd_bus_message *reply, void *userdata,
                                     sd_bus_error *error) {
        Bus *b = userdata;
        return sd_bus_message_append(reply, "s",
                                     cache_policy_to_string(fuse_server_get_cache_policy(b->manager->fs)));
}

/* PollMode: "auto", "fixed" or "off"; PollUSec: the fixed window, 0 when off, and under auto the
 * longest window auto spins (so a client that knows only PollUSec reads a number, not a sentinel). */
static const char *poll_mode_string(unsigned us) {
        return us == DEVICE_POLL_AUTO ? "auto" : us == 0 ? "off" : "fixed";
}

static uint32_t poll_usec_value(unsigned us) {
        return us == DEVICE_POLL_AUTO ? DEVICE_AUTO_POLL_MAX_US : us;
}

static int property_get_poll_us(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        return sd_bus_message_append(reply, "u", poll_usec_value(device_get_poll_us(b->manager->device)));
}

static int property_get_poll_mode(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        return sd_bus_message_append(reply, "s", poll_mode_string(device_get_poll_us(b->manager->device)));
}

static int property_get_uptime(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        return sd_bus_message_append(reply, "t", now_usec() - b->start_usec);
}

static int property_get_in_flight(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        _cleanup_free_ StatsSnapshot *snap = malloc(sizeof *snap);

        if (!snap)
                return -ENOMEM;
        stats_snapshot(((Bus *) userdata)->manager->stats, snap);
        return sd_bus_message_append(reply, "t", snap->in_flight);
}

/* ---- methods ---- */

/* Defence in depth behind the bus policy: changes come from root, our own user, or a member of
 * BUS_ADMIN_GROUP. The uid and groups are what the bus daemon recorded from the caller's socket
 * when it connected (GetConnectionCredentials: UnixUserID, UnixGroupIDs), not /proc, so a caller
 * cannot race them; sd-bus 252 does not hand the groups on, hence the direct call. */
static int check_caller_privileged(Bus *b, sd_bus_message *msg, sd_bus_error *error) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *sender = sd_bus_message_get_sender(msg), *key;
        bool have_uid = false, in_group = false;
        uint32_t uid = 0;
        int r;

        if (!sender)
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "Cannot determine who is calling; changes are refused");
        r = sd_bus_call_method(sd_bus_message_get_bus(msg), "org.freedesktop.DBus", "/org/freedesktop/DBus",
                               "org.freedesktop.DBus", "GetConnectionCredentials", &e, &reply, "s", sender);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                r = sd_bus_message_read(reply, "s", &key);
                if (r < 0)
                        break;
                if (streq(key, "UnixUserID")) {
                        r = sd_bus_message_read(reply, "v", "u", &uid);
                        have_uid = r >= 0;
                } else if (streq(key, "UnixGroupIDs")) {
                        uint32_t gid;
                        r = sd_bus_message_enter_container(reply, 'v', "au");
                        if (r >= 0)
                                r = sd_bus_message_enter_container(reply, 'a', "u");
                        while (r >= 0 && (r = sd_bus_message_read(reply, "u", &gid)) > 0)
                                if (b->admin_gid != (gid_t) -1 && gid == b->admin_gid)
                                        in_group = true;
                        if (r >= 0)
                                r = sd_bus_message_exit_container(reply);
                        if (r >= 0)
                                r = sd_bus_message_exit_container(reply);
                } else
                        r = sd_bus_message_skip(reply, "v");
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        if (r < 0 || !have_uid)
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "Cannot determine who is calling (%s); changes are refused",
                                         e.message ?: strerror(r < 0 ? -r : ENODATA));
        if (uid == 0 || uid == b->self_uid || in_group)
                return 0;
        return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                 "Only root and members of the group \"%s\" may change vufsd instance \"%s\"",
                                 BUS_ADMIN_GROUP, b->instance);
}

static int emit_changed(Bus *b, char **names) {
        int r;

        if (!names[0] || b->lost)
                return 0;
        r = sd_bus_emit_properties_changed_strv(b->bus, BUS_OBJECT_PATH, BUS_INTERFACE, names);
        if (r < 0)
                log_debug_errno(r, "Cannot emit PropertiesChanged: %m");
        return r;
}

static int method_set_threads(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        Executor *e = b->manager->executor;
        ExecutorState before, after;
        const char *mode_str;
        char *changed[3] = {};
        unsigned n = 0;
        uint32_t size;
        ThreadMode mode;
        int r;

        r = sd_bus_message_read(msg, "su", &mode_str, &size);
        if (r < 0)
                return r;
        r = check_caller_privileged(b, msg, error);
        if (r < 0)
                return r;

        mode = thread_mode_from_string(mode_str);
        if (mode < 0)
                return sd_bus_error_setf(error, BUS_ERROR_INVALID_MODE,
                                         "Unknown thread mode \"%s\": expected inline, pool or auto", mode_str);
        if (size > EXECUTOR_MAX_POOL_SIZE)
                return sd_bus_error_setf(error, BUS_ERROR_OUT_OF_RANGE,
                                         "Pool size %" PRIu32 " is out of range: 1..%d threads, or 0 to keep "
                                         "the current size",
                                         size, EXECUTOR_MAX_POOL_SIZE);

        executor_get_state(e, &before);
        if (size == 0)
                size = before.pool_size > 0 ? before.pool_size : executor_default_pool_size();

        r = executor_set_mode(e, mode, size);
        if (r == -ERANGE)
                return sd_bus_error_setf(error, BUS_ERROR_OUT_OF_RANGE, "Pool size %" PRIu32 " is out of range",
                                         size);
        if (r == -EINVAL)
                return sd_bus_error_setf(error, BUS_ERROR_INVALID_MODE, "Thread mode \"%s\" with %" PRIu32
                                         " threads is not accepted", mode_str, size);
        if (r < 0)
                return sd_bus_error_setf(error, BUS_ERROR_FAILED, "Cannot switch to %s with %" PRIu32 " threads: %s",
                                         thread_mode_to_string(mode), size, strerror(-r));

        executor_get_state(e, &after);
        log_info("Thread mode set to %s, pool size %u (by bus request)", thread_mode_to_string(after.mode),
                 after.pool_size);
        if (after.mode != before.mode)
                changed[n++] = (char *) "ThreadMode";
        if (after.pool_size != before.pool_size)
                changed[n++] = (char *) "PoolSize";
        (void) emit_changed(b, changed);
        return sd_bus_reply_method_return(msg, NULL);
}

static int method_set_cache_policy(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        FuseServer *fs = b->manager->fs;
        char *changed[] = { (char *) "CachePolicy", NULL };
        const char *s;
        CachePolicy p, old;
        int r;

        r = sd_bus_message_read(msg, "s", &s);
        if (r < 0)
                return r;
        r = check_caller_privileged(b, msg, error);
        if (r < 0)
                return r;

        p = cache_policy_from_string(s);
        if (p < 0)
                return sd_bus_error_setf(error, BUS_ERROR_INVALID_CACHE_POLICY,
                                         "Unknown cache policy \"%s\": expected never, metadata, auto or always", s);
        old = fuse_server_get_cache_policy(fs);
        r = fuse_server_set_cache_policy(fs, p);
        if (r < 0)
                return sd_bus_error_setf(error, BUS_ERROR_FAILED, "Cannot set the cache policy to %s: %s",
                                         cache_policy_to_string(p), strerror(-r));
        log_info("Cache policy set to %s (by bus request)", cache_policy_to_string(p));
        if (p != old)
                (void) emit_changed(b, changed);
        return sd_bus_reply_method_return(msg, NULL);
}

/* Applies a new poll setting and announces both properties when either changed. */
static void set_poll(Bus *b, unsigned us) {
        Device *d = b->manager->device;
        char *changed[3] = {};
        unsigned old = device_get_poll_us(d), n = 0;

        device_set_poll_us(d, us);
        if (us == DEVICE_POLL_AUTO)
                log_info("Busy polling set to auto, at most %u us (by bus request)", DEVICE_AUTO_POLL_MAX_US);
        else if (us > 0)
                log_info("Busy-poll window set to %u us (by bus request)", us);
        else
                log_info("Busy polling turned off (by bus request)");
        /* Each property that changed, once: 50 fixed and auto read the same PollUSec. */
        if (poll_usec_value(us) != poll_usec_value(old))
                changed[n++] = (char *) "PollUSec";
        if (!streq(poll_mode_string(us), poll_mode_string(old)))
                changed[n++] = (char *) "PollMode";
        if (n > 0)
                (void) emit_changed(b, changed);
}

static int method_set_poll_us(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        uint32_t us;
        int r;

        r = sd_bus_message_read(msg, "u", &us);
        if (r < 0)
                return r;
        r = check_caller_privileged(b, msg, error);
        if (r < 0)
                return r;

        if (us > DEVICE_MAX_POLL_US)
                return sd_bus_error_setf(error, BUS_ERROR_OUT_OF_RANGE,
                                         "Busy-poll window %" PRIu32 " is out of range: 0..%u microseconds "
                                         "(0 turns polling off)",
                                         us, DEVICE_MAX_POLL_US);
        set_poll(b, us);
        return sd_bus_reply_method_return(msg, NULL);
}

static int method_set_poll_mode(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        const char *mode;
        unsigned us;
        int r;

        r = sd_bus_message_read(msg, "s", &mode);
        if (r < 0)
                return r;
        r = check_caller_privileged(b, msg, error);
        if (r < 0)
                return r;

        if (streq(mode, "auto"))
                us = DEVICE_POLL_AUTO;
        else if (streq(mode, "off"))
                us = 0;
        else if (streq(mode, "fixed")) /* the last fixed window (SetPollUSec), or the default one */
                us = device_get_poll_fixed_us(b->manager->device);
        else
                return sd_bus_error_setf(error, BUS_ERROR_INVALID_MODE,
                                         "Unknown busy-poll mode \"%s\": auto, fixed or off", mode);
        set_poll(b, us);
        return sd_bus_reply_method_return(msg, NULL);
}

static int method_reset_statistics(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        int r;

        r = check_caller_privileged(b, msg, error);
        if (r < 0)
                return r;
        stats_reset(b->manager->stats);
        log_info("Statistics reset (by bus request)");
        return sd_bus_reply_method_return(msg, NULL);
}

static int append_counters(sd_bus_message *reply, unsigned index, const char *name, const StatsCounters *c) {
        int r;

        r = sd_bus_message_open_container(reply, 'r', "ustttat");
        if (r >= 0)
                r = sd_bus_message_append(reply, "ustt", index, name, c->requests, c->bytes);
        if (r >= 0)
                r = sd_bus_message_append(reply, "t", c->errors);
        if (r >= 0)
                r = sd_bus_message_append_array(reply, 't', c->latency_hist, sizeof c->latency_hist);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

static int method_get_statistics(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ StatsSnapshot *snap = NULL;
        Bus *b = userdata;
        Manager *m = b->manager;
        ExecutorState st;
        DevicePollStats ps;
        DeviceInfo info;
        uint64_t ts;
        int r;

        snap = malloc(sizeof *snap);
        if (!snap)
                return -ENOMEM;
        ts = now_usec();
        stats_snapshot(m->stats, snap);
        executor_get_state(m->executor, &st);
        device_get_info(m->device, &info);
        device_get_poll_stats(m->device, &ps);

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "ttsu", ts, snap->in_flight, thread_mode_to_string(st.mode),
                                  st.pool_size);
        if (r < 0)
                return r;
        r = sd_bus_message_append(reply, "a{st}", 13, "mode_switches", st.switches, "live_workers",
                                  (uint64_t) st.live_workers, "inline_runs", st.inline_runs, "pool_runs",
                                  st.pool_runs, "helper_runs", st.helper_runs, "auto_inline", st.auto_inline,
                                  "auto_pool", st.auto_pool, "pool_queued", (uint64_t) st.pool_queued,
                                  "live_helpers", (uint64_t) st.live_helpers, "poll_hits", ps.hits, "polls",
                                  ps.polls, "poll_usec", ps.poll_ns / 1000, "poll_contended", ps.contended);
        if (r < 0)
                return r;

        r = sd_bus_message_open_container(reply, 'a', "(ustttat)");
        for (unsigned op = 0; r >= 0 && op < STATS_MAX_OPCODE; op++)
                if (snap->op[op].requests > 0 || snap->op[op].errors > 0)
                        r = append_counters(reply, op, opcode_name(op), &snap->op[op]);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;

        r = sd_bus_message_open_container(reply, 'a', "(ustttat)");
        for (unsigned q = 0; r >= 0 && q < info.n_queues && q < DEVICE_MAX_QUEUES; q++) {
                char name[32];
                if (q == DEVICE_HIPRIO_QUEUE)
                        snprintf(name, sizeof name, "hiprio");
                else
                        snprintf(name, sizeof name, "request%u", q - 1);
                r = append_counters(reply, q, name, &snap->queue[q]);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* Every member carries SD_BUS_VTABLE_UNPRIVILEGED: who may call what is the bus policy's job
 * (policy/org.vufsd.conf), backed by check_caller_privileged() for the changing methods; sd-bus's
 * own check would demand CAP_SYS_ADMIN and lock out the admin group. */
static const sd_bus_vtable daemon_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("SetThreads", SD_BUS_ARGS("s", mode, "u", size), SD_BUS_NO_RESULT,
                                method_set_threads, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SetCachePolicy", SD_BUS_ARGS("s", policy), SD_BUS_NO_RESULT,
                                method_set_cache_policy, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SetPollUSec", SD_BUS_ARGS("u", usec), SD_BUS_NO_RESULT, method_set_poll_us,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SetPollMode", SD_BUS_ARGS("s", mode), SD_BUS_NO_RESULT, method_set_poll_mode,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ResetStatistics", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_reset_statistics,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetStatistics", SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("t", timestamp, "t", in_flight, "s", thread_mode, "u", pool_size,
                                              "a{st}", executor, "a(ustttat)", opcodes, "a(ustttat)", queues),
                                method_get_statistics, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_PROPERTY("Instance", "s", property_get_instance, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Version", "s", property_get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("SharedDirectory", "s", property_get_shared_directory, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Socket", "s", property_get_socket, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Options", "as", property_get_options, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("RequestQueues", "u", property_get_request_queues, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Connected", "b", property_get_connected, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Connections", "u", property_get_connections, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("RunningQueues", "u", property_get_running_queues, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("NegotiatedFeatures", "t", property_get_features, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("NegotiatedProtocolFeatures", "t", property_get_features, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("ThreadMode", "s", property_get_thread_mode, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("PoolSize", "u", property_get_pool_size, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("CachePolicy", "s", property_get_cache_policy, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("PollUSec", "u", property_get_poll_us, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("PollMode", "s", property_get_poll_mode, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("UptimeUSec", "t", property_get_uptime, 0, 0),
        SD_BUS_PROPERTY("InFlight", "t", property_get_in_flight, 0, 0),
        SD_BUS_VTABLE_END
};

/* ---- connection ---- */

void bus_device_changed(Bus *b) {
        char *changed[6] = {};
        unsigned n = 0;
        DeviceInfo info;
        Manager *m;

        if (!b || b->lost)
                return;
        m = b->manager;
        device_get_info(m->device, &info);
#define CHECK(field, value, name)                         \
        do {                                              \
                __typeof__(b->field) _v_ = (value);       \
                if (b->field != _v_) {                    \
                        b->field = _v_;                   \
                        changed[n++] = (char *) (name);   \
                }                                         \
        } while (0)
        CHECK(connected, m->conn_fd >= 0, "Connected");
        CHECK(connections, m->n_connections, "Connections");
        CHECK(running_queues, info.running_queues, "RunningQueues");
        CHECK(features, info.features, "NegotiatedFeatures");
        CHECK(protocol_features, info.protocol_features, "NegotiatedProtocolFeatures");
#undef CHECK
        (void) emit_changed(b, changed);
}

static int on_bus_disconnected(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;

        if (!b->lost)
                log_warning("Lost the connection to the D-Bus bus: %s is gone, the guest is still served",
                            b->name);
        b->lost = true;
        return 0;
}

/* The instance name: --instance, else the instance of the systemd template unit we run in
 * (vufsd@NAME.service), else "pid<PID>" so that unrelated daemons never collide. */
static int resolve_instance(const Config *c, char **ret) {
        _cleanup_free_ char *unit = NULL;
        char *at, *dot;

        if (c->instance) {
                *ret = strdup(c->instance);
                return *ret ? 0 : -ENOMEM;
        }
        if (sd_pid_get_unit(0, &unit) >= 0 && (at = strchr(unit, '@')) && (dot = strrchr(at, '.')) &&
            dot > at + 1) {
                *ret = strndup(at + 1, (size_t) (dot - at - 1));
                return *ret ? 0 : -ENOMEM;
        }
        return asprintf(ret, "pid%d", (int) getpid()) < 0 ? -ENOMEM : 0;
}

/* Who the bus sees. Run as root, vufsd does not connect to the system bus as root: a daemon
 * taken over through a guest would keep a root connection, and root may call every root-only
 * service on the host bus (systemd's StartTransientUnit is host root). The connection is made with
 * the dedicated unprivileged identity BusUser= (default BUS_DAEMON_USER) instead; dbus-daemon takes
 * the peer's credentials at connect() (SO_PEERCRED) and checks the uid sd-bus claims in AUTH
 * EXTERNAL against them, so the whole connection belongs to that user, whose only right in the
 * policy is owning org.vufsd.Instance.* names. */
typedef struct BusIdentity {
        bool switch_ids; /* false: connect as the process is (not root, or a bus chosen by address) */
        uid_t uid;
        gid_t gid;
} BusIdentity;

/* 0 with id filled in, or a negative errno after logging why no connection is made (fail closed:
 * the guest is served without the control plane rather than over a root connection). */
static int resolve_identity(const char *spec, const char *user, gid_t admin_gid, BusIdentity *id) {
        bool system = streq(spec, "system");
        struct passwd pwbuf, *pw = NULL;
        _cleanup_free_ gid_t *groups = NULL;
        int n = 64, r;
        char buf[4096];

        *id = (BusIdentity) {};
        if (geteuid() != 0) {
                if (user)
                        log_warning("BusUser=%s ignored: only root can connect as another user", user);
                return 0;
        }
        /* The session bus and an explicit address are the operator's own choice (a private bus);
         * BusUser= set explicitly applies to them too. */
        if (!user && !system)
                return 0;
        if (!user)
                user = BUS_DAEMON_USER;
        r = getpwnam_r(user, &pwbuf, buf, sizeof buf, &pw);
        if (r != 0 || !pw) {
                log_warning("Bus user \"%s\" does not exist (systemd-sysusers creates it from vufsd.sysusers): "
                            "not connecting to the bus as root, serving without the control plane",
                            user);
                return r > 0 ? -r : -ENOENT;
        }
        if (pw->pw_uid == 0) {
                log_warning("Bus user \"%s\" is root: not connecting to the bus as root, serving without the "
                            "control plane",
                            user);
                return -EPERM;
        }
        /* A member of the admin group may change every instance: a taken-over daemon must not. The
         * list includes the primary group; getgrouplist() says how many when they do not fit. */
        for (;;) {
                int want = n;
                free(groups);
                groups = calloc((size_t) want, sizeof *groups);
                if (!groups)
                        return -ENOMEM;
                if (getgrouplist(user, pw->pw_gid, groups, &n) >= 0)
                        break;
                if (n <= want) { /* cannot tell: do not connect */
                        log_warning("Cannot list the groups of bus user \"%s\": serving without the control plane",
                                    user);
                        return -EIO;
                }
        }
        for (int i = 0; admin_gid != (gid_t) -1 && i < n; i++)
                if (groups[i] == admin_gid) {
                        log_warning("Bus user \"%s\" is in group \"%s\", which may change every instance: "
                                    "serving without the control plane",
                                    user, BUS_ADMIN_GROUP);
                        return -EPERM;
                }
        *id = (BusIdentity) { .switch_ids = true, .uid = pw->pw_uid, .gid = pw->pw_gid };
        return 0;
}

/* Per thread: the raw system calls, since glibc's setresuid() changes every thread of the process
 * (the executor's workers run as root meanwhile and must stay so). Only the effective ids change;
 * real and saved stay root, so the kernel keeps the permitted capabilities and the effective ones
 * come back with the effective uid. */
static int thread_set_effective_ids(uid_t uid, gid_t gid) {
        if (syscall(SYS_setresgid, (gid_t) -1, gid, (gid_t) -1) < 0)
                return negative_errno();
        if (syscall(SYS_setresuid, (uid_t) -1, uid, (uid_t) -1) < 0)
                return negative_errno();
        return 0;
}

static int bus_connect(const char *spec, sd_bus **ret, const char **ret_what) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r;

        if (!spec)
                spec = geteuid() == 0 ? "system" : "session";
        if (streq(spec, "system")) {
                *ret_what = "system bus";
                return sd_bus_open_system_with_description(ret, "vufsd");
        }
        if (streq(spec, "session")) {
                *ret_what = "session bus";
                return sd_bus_open_user_with_description(ret, "vufsd");
        }
        *ret_what = spec;
        r = sd_bus_new(&bus);
        if (r < 0)
                return r;
        (void) sd_bus_set_description(bus, "vufsd");
        r = sd_bus_set_address(bus, spec);
        if (r >= 0)
                r = sd_bus_set_bus_client(bus, true);
        if (r >= 0)
                r = sd_bus_start(bus);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(bus);
        return 0;
}

/* Connects as id: the socket is connected, authenticated and Hello answered while this thread has
 * the bus user's effective ids, then the thread is root again. -ENOTRECOVERABLE if it cannot
 * return to root (the daemon must not go on serving with the wrong ids). */
static int bus_connect_as(const char *spec, const BusIdentity *id, sd_bus **ret, const char **ret_what) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        uid_t euid = geteuid();
        gid_t egid = getegid();
        const char *unique;
        int r, k;

        if (!id->switch_ids)
                return bus_connect(spec, ret, ret_what);
        r = thread_set_effective_ids(id->uid, id->gid);
        if (r >= 0)
                r = bus_connect(spec, &bus, ret_what);
        if (r >= 0) {
                (void) sd_bus_set_method_call_timeout(bus, BUS_CALL_TIMEOUT_USEC);
                /* Waits for the authentication and Hello: both are done before the ids go back. */
                r = sd_bus_get_unique_name(bus, &unique);
        }
        k = thread_set_effective_ids(euid, egid);
        if (k < 0) {
                log_error_errno(k, "Cannot return to uid %u after connecting to the bus: %m", (unsigned) euid);
                return -ENOTRECOVERABLE;
        }
        if (r < 0)
                return r;
        log_debug("Connected to the %s as uid %u, unique name %s", *ret_what, (unsigned) id->uid, unique);
        *ret = TAKE_PTR(bus);
        return 0;
}

Bus *bus_free(Bus *b) {
        if (!b)
                return NULL;
        b->bus = sd_bus_flush_close_unref(b->bus);
        free(b->instance);
        free(b->name);
        free(b);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(Bus *, bus_free);

const char *bus_instance(Bus *b) {
        return b ? b->instance : NULL;
}

int bus_open(Manager *m) {
        _cleanup_(bus_freep) Bus *b = NULL;
        const char *spec = m->config->bus, *what = NULL;
        BusIdentity id;
        int r;

        if (spec && streq(spec, "none"))
                return 0;
        /* Decided here, as the process is: bus_connect_as() may run with another effective uid. */
        if (!spec)
                spec = geteuid() == 0 ? "system" : "session";

        b = calloc(1, sizeof *b);
        if (!b)
                return -ENOMEM;
        b->manager = m;
        b->start_usec = now_usec();
        {
                struct group *g = getgrnam(BUS_ADMIN_GROUP);
                b->admin_gid = g ? g->gr_gid : (gid_t) -1;
        }
        r = resolve_instance(m->config, &b->instance);
        if (r < 0)
                return r;
        r = bus_instance_to_name(b->instance, &b->name);
        if (r == -EINVAL)
                return log_error_errno(r, "Instance name \"%s\" is not usable: it must be 1..%d bytes",
                                       b->instance, BUS_INSTANCE_MAX);
        if (r < 0)
                return r;

        r = resolve_identity(spec, m->config->bus_user, b->admin_gid, &id);
        if (r < 0)
                return 0;
        r = bus_connect_as(spec, &id, &b->bus, &what);
        if (r == -ENOTRECOVERABLE)
                return r;
        if (r < 0) {
                log_warning_errno(r, "No D-Bus bus reachable (%s: %m): serving without the control plane", what);
                return 0;
        }
        (void) sd_bus_set_method_call_timeout(b->bus, BUS_CALL_TIMEOUT_USEC);
        /* Our own user, whose changes check_caller_privileged() accepts, as the bus sees it: the
         * callers' uids come from the bus too, and in a user namespace (an unprivileged vufsd's
         * sandbox maps the user to 0) geteuid() would say 0 while the bus says the user's uid.
         * Connected as another identity (root's BusUser=), only root itself: that identity is what
         * a taken-over daemon holds, and it must not change other instances. */
        b->self_uid = 0;
        if (!id.switch_ids) {
                const char *unique = NULL;
                uint32_t self = 0;
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;

                r = sd_bus_get_unique_name(b->bus, &unique);
                if (r >= 0)
                        r = sd_bus_call_method(b->bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                               "org.freedesktop.DBus", "GetConnectionUnixUser", NULL, &reply, "s",
                                               unique);
                if (r >= 0)
                        r = sd_bus_message_read(reply, "u", &self);
                b->self_uid = r >= 0 ? (uid_t) self : geteuid();
        }

        r = sd_bus_add_object_vtable(b->bus, NULL, BUS_OBJECT_PATH, BUS_INTERFACE, daemon_vtable, b);
        if (r < 0)
                return log_error_errno(r, "Cannot publish %s: %m", BUS_OBJECT_PATH);
        r = sd_bus_match_signal(b->bus, NULL, "org.freedesktop.DBus.Local", NULL, "org.freedesktop.DBus.Local",
                                "Disconnected", on_bus_disconnected, b);
        if (r < 0)
                return log_error_errno(r, "Cannot watch the bus connection: %m");

        /* Synchronous on purpose: READY=1 (sent when the loop starts) then implies the name is ours. */
        r = sd_bus_request_name(b->bus, b->name, 0);
        if (r < 0) {
                if (r == -EEXIST)
                        log_warning("%s is already owned on the %s (another vufsd with instance \"%s\"?): "
                                    "serving without the control plane", b->name, what, b->instance);
                else if (r == -EACCES || r == -EPERM)
                        log_warning("Not allowed to own %s on the %s (the policy lets only user \"%s\" own "
                                    "it): serving without the control plane",
                                    b->name, what, BUS_DAEMON_USER);
                else
                        log_warning_errno(r, "Cannot own %s on the %s (%m): serving without the control plane",
                                          b->name, what);
                return 0;
        }
        r = sd_bus_attach_event(b->bus, m->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return log_error_errno(r, "Cannot attach the bus to the event loop: %m");

        log_info("Control interface on the %s as %s", what, b->name);
        m->bus = TAKE_PTR(b);
        return 0;
}
