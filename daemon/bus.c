/* bus.c: the org.vufsd.Daemon1 object: properties, methods and PropertiesChanged over sd-bus. */
#include "bus.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-id128.h>
#include <systemd/sd-login.h>
#include <time.h>
#include <unistd.h>
#include <linux/fuse.h>

#include "executor.h"
#include "log.h"
#include "manager.h"
#include "sandbox.h"
#include "stats.h"
#include "upgrade.h"

struct Bus {
        Manager *manager;
        sd_bus *bus;
        char *instance;
        uint64_t start_usec; /* CLOCK_MONOTONIC at bus_open(), for UptimeUSec */

        /* What PropertiesChanged last announced (bus_device_changed() compares against it). */
        bool connected;
        unsigned connections;
        unsigned running_queues;
        uint64_t features;
        uint64_t protocol_features;

        bool lost; /* the control channel went away; nothing more is sent */
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

/* This build's version; a weak definition so that a test build can report another one
 * (tests/frontend/test-hooks.c: live upgrade between two builds that differ in their version). */
__attribute__((weak)) const char *vufsd_version(void) {
        return PACKAGE_VERSION;
}

/* ---- properties ---- */

static int property_get_instance(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        return sd_bus_message_append(reply, "s", b->instance);
}

static int property_get_version(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "s", vufsd_version());
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
        char timeout[64], nodes[64], privileged[64], inode_fds[64];
        int r;

        r = sd_bus_message_open_container(reply, 'a', "s");
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(opts); i++)
                if (opts[i].on)
                        r = sd_bus_message_append(reply, "s", opts[i].name);
        if (r >= 0 && o->timeout >= 0) {
                snprintf(timeout, sizeof timeout, "timeout=%g", o->timeout);
                r = sd_bus_message_append(reply, "s", timeout);
        }
        if (r >= 0) { /* the node budget in force, default or not (docs/security.md, "Bounds") */
                snprintf(nodes, sizeof nodes, "max_nodes=%" PRIu64, passthrough_max_nodes(((Bus *) userdata)->manager->passthrough));
                r = sd_bus_message_append(reply, "s", nodes);
        }
        if (r >= 0) { /* as it works: map without a key or user xattrs works as refuse (docs/security.md) */
                snprintf(privileged, sizeof privileged, "privileged_files=%s",
                         privileged_files_to_string(passthrough_privileged_files(((Bus *) userdata)->manager->passthrough)));
                r = sd_bus_message_append(reply, "s", privileged);
        }
        if (r >= 0) { /* the inode fds kept open, default or not (--max-inode-fds) */
                snprintf(inode_fds, sizeof inode_fds, "max_inode_fds=%" PRIu64,
                         passthrough_max_inode_fds(((Bus *) userdata)->manager->passthrough));
                r = sd_bus_message_append(reply, "s", inode_fds);
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

/* Serving processes started after a death (--crash-restarts, docs/survival.md): the spawner counts
 * them, each new process knows its number; the pause is the last takeover's. */
static int property_get_restarts(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "u", (uint32_t) sandbox_restarts());
}

static int property_get_restart_pause(sd_bus *bus, const char *path, const char *interface, const char *property,
                                      sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        return sd_bus_message_append(reply, "t", b->manager->restart_pause_usec);
}

static int property_get_upgrades(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "u", (uint32_t) (streq(property, "Upgrades") ? sandbox_upgrades()
                                                                                         : sandbox_upgrade_failures()));
}

static int property_get_upgrade_pause(sd_bus *bus, const char *path, const char *interface, const char *property,
                                      sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        return sd_bus_message_append(reply, "t", b->manager->upgrade_pause_usec);
}

static int property_get_in_flight(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        _cleanup_free_ StatsSnapshot *snap = malloc(sizeof *snap);

        if (!snap)
                return -ENOMEM;
        stats_snapshot(((Bus *) userdata)->manager->stats, snap);
        return sd_bus_message_append(reply, "t", snap->in_flight);
}

/* The guest's share of the daemon's resources against their bounds (docs/security.md, "Bounds"):
 * fds held for the guest's inodes and handles, and the inodes it made us remember. NodesUsed
 * counts the linked inodes (the root included); forgotten ones a request still uses are charged to
 * the budget too, so the budget may be reached a little before NodesUsed reads NodeBudgetMax. */
static int property_get_budget(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = ((Bus *) userdata)->manager;
        uint64_t v;

        if (streq(property, "FdsUsed"))
                v = passthrough_fds_used(m->passthrough);
        else if (streq(property, "FdBudgetMax"))
                v = passthrough_fd_budget_max(m->passthrough);
        else if (streq(property, "NodesUsed"))
                v = passthrough_inode_count(m->passthrough);
        else if (streq(property, "InodeFdsCached"))
                v = passthrough_inode_fds(m->passthrough);
        else if (streq(property, "InodeFdsMax"))
                v = passthrough_max_inode_fds(m->passthrough);
        else
                v = passthrough_max_nodes(m->passthrough);
        return sd_bus_message_append(reply, "t", v);
}

/* What the takeover this process made (after a death or an upgrade) carried over: requests it ran
 * again or whose replies it published again from the in-flight tables, and the nodes and open files
 * it restored under their ids. 0 in a process that took over nothing. */
static int property_get_takeover(sd_bus *bus, const char *path, const char *interface, const char *property,
                                 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = ((Bus *) userdata)->manager;
        uint64_t v;

        if (streq(property, "LastTakeoverReplayed"))
                v = device_replayed(m->device);
        else if (streq(property, "LastTakeoverNodes"))
                v = m->restored_nodes;
        else
                v = m->restored_handles;
        return sd_bus_message_append(reply, "t", v);
}

/* The guest's locks a migration found held on this host: pending now, and lost since start
 * (docs/migration.md "Locks"). */
static int property_get_locks(sd_bus *bus, const char *path, const char *interface, const char *property,
                              sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        uint64_t pending, lost;

        passthrough_lock_counts(((Bus *) userdata)->manager->passthrough, &pending, &lost);
        return sd_bus_message_append(reply, "t", streq(property, "LocksPending") ? pending : lost);
}

/* ---- methods ---- */

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

        stats_reset(b->manager->stats);
        log_info("Statistics reset (by bus request)");
        return sd_bus_reply_method_return(msg, NULL);
}

/* Live upgrade (upgrade.h): answered before this process exits, so the caller knows the session
 * was handed over; the new process's Upgrades property then tells it is served. */
static int method_upgrade(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        char why[256] = "";
        int r;

        log_info("Live upgrade requested (by bus request)");
        r = upgrade_start(b->manager, why, sizeof why);
        if (r == -EOPNOTSUPP)
                return sd_bus_error_setf(error, BUS_ERROR_NOT_SUPPORTED, "%s", why);
        if (r < 0)
                return sd_bus_error_setf(error, BUS_ERROR_FAILED, "%s", why);
        r = sd_bus_reply_method_return(msg, NULL);
        (void) sd_bus_flush(sd_bus_message_get_bus(msg));
        return r;
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

/* Failed requests by errno, all opcodes together, since the last reset: only non-zero entries,
 * by errno; 0 counts the errnos beyond the table (STATS_MAX_ERRNO). */
static int append_error_counts(sd_bus_message *reply, const StatsSnapshot *snap) {
        int r = 0;

        for (unsigned e = 0; r >= 0 && e < STATS_MAX_ERRNO; e++)
                if (snap->errnos[e] > 0)
                        r = sd_bus_message_append(reply, "(ut)", e, snap->errnos[e]);
        return r;
}

/* The sum of the latencies in microseconds per opcode seen since the last reset (the _sum of the
 * histogram GetStatistics gives), by opcode; 0 is "unknown", as there. */
static int append_latency_sums(sd_bus_message *reply, const StatsSnapshot *snap) {
        int r = 0;

        for (unsigned op = 0; r >= 0 && op < STATS_MAX_OPCODE; op++)
                if (snap->op[op].requests > 0)
                        r = sd_bus_message_append(reply, "(ut)", op, snap->op[op].latency_sum_us);
        return r;
}

/* Replies with one a(ut) array that append() fills from a fresh snapshot. */
static int reply_snapshot_pairs(sd_bus_message *msg, Bus *b,
                                int (*append)(sd_bus_message *reply, const StatsSnapshot *snap)) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ StatsSnapshot *snap = malloc(sizeof *snap);
        int r;

        if (!snap)
                return -ENOMEM;
        stats_snapshot(b->manager->stats, snap);
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(ut)");
        if (r >= 0)
                r = append(reply, snap);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_get_error_counts(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return reply_snapshot_pairs(msg, userdata, append_error_counts);
}

static int method_get_latency_sums(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return reply_snapshot_pairs(msg, userdata, append_latency_sums);
}

/* Every member carries SD_BUS_VTABLE_UNPRIVILEGED: the only peer is the supervisor's relay, which
 * has checked the caller (the bus policy, and control-relay.c's check for the changing methods);
 * sd-bus's own check would demand CAP_SYS_ADMIN of a peer it knows nothing about. */
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
        SD_BUS_METHOD_WITH_ARGS("Upgrade", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_upgrade,
                                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetStatistics", SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("t", timestamp, "t", in_flight, "s", thread_mode, "u", pool_size,
                                              "a{st}", executor, "a(ustttat)", opcodes, "a(ustttat)", queues),
                                method_get_statistics, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetErrorCounts", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ut)", errors),
                                method_get_error_counts, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetLatencySums", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ut)", sums),
                                method_get_latency_sums, SD_BUS_VTABLE_UNPRIVILEGED),
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
        SD_BUS_PROPERTY("Restarts", "u", property_get_restarts, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("LastRestartPauseUSec", "t", property_get_restart_pause, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Upgrades", "u", property_get_upgrades, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("UpgradeFailures", "u", property_get_upgrades, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("LastUpgradePauseUSec", "t", property_get_upgrade_pause, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("FdsUsed", "t", property_get_budget, 0, 0),
        SD_BUS_PROPERTY("FdBudgetMax", "t", property_get_budget, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("NodesUsed", "t", property_get_budget, 0, 0),
        SD_BUS_PROPERTY("NodeBudgetMax", "t", property_get_budget, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("InodeFdsCached", "t", property_get_budget, 0, 0),
        SD_BUS_PROPERTY("InodeFdsMax", "t", property_get_budget, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("LastTakeoverReplayed", "t", property_get_takeover, 0, 0),
        SD_BUS_PROPERTY("LastTakeoverNodes", "t", property_get_takeover, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("LastTakeoverHandles", "t", property_get_takeover, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("LocksPending", "t", property_get_locks, 0, 0),
        SD_BUS_PROPERTY("LocksLost", "t", property_get_locks, 0, 0),
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

        /* The supervisor is going away (it outlives the daemon otherwise). */
        if (!b->lost)
                log_debug("The control channel closed: %s is no longer reachable", b->instance);
        b->lost = true;
        return 0;
}

int bus_resolve_instance(const Config *c, char **ret) {
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

Bus *bus_free(Bus *b) {
        if (!b)
                return NULL;
        b->bus = sd_bus_flush_close_unref(b->bus);
        free(b->instance);
        free(b);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(Bus *, bus_free);

const char *bus_instance(Bus *b) {
        return b ? b->instance : NULL;
}

int bus_open(Manager *m, const char *instance, int channel) {
        _cleanup_(bus_freep) Bus *b = NULL;
        _cleanup_close_ int fd = channel;
        sd_id128_t id;
        int r;

        if (fd < 0)
                return 0;
        b = calloc(1, sizeof *b);
        if (!b)
                return -ENOMEM;
        b->manager = m;
        b->start_usec = now_usec();
        b->instance = strdup(instance);
        if (!b->instance)
                return -ENOMEM;

        /* The server end of a peer-to-peer connection: the supervisor's relay is the only client.
         * Anonymous (in a user namespace its uid reads as another one), no fd passing. */
        r = sd_bus_new(&b->bus);
        if (r < 0)
                return r;
        (void) sd_bus_set_description(b->bus, "vufsd-control");
        r = sd_bus_set_fd(b->bus, fd, fd);
        if (r < 0)
                return r;
        TAKE_FD(fd);
        r = sd_id128_randomize(&id);
        if (r >= 0)
                r = sd_bus_set_server(b->bus, true, id);
        if (r >= 0)
                r = sd_bus_set_anonymous(b->bus, true);
        if (r >= 0)
                r = sd_bus_negotiate_fds(b->bus, false);
        if (r >= 0)
                r = sd_bus_start(b->bus);
        if (r < 0)
                return log_error_errno(r, "Cannot serve the control channel: %m");

        r = sd_bus_add_object_vtable(b->bus, NULL, BUS_OBJECT_PATH, BUS_INTERFACE, daemon_vtable, b);
        if (r < 0)
                return log_error_errno(r, "Cannot publish %s: %m", BUS_OBJECT_PATH);
        r = sd_bus_match_signal(b->bus, NULL, "org.freedesktop.DBus.Local", NULL, "org.freedesktop.DBus.Local",
                                "Disconnected", on_bus_disconnected, b);
        if (r < 0)
                return log_error_errno(r, "Cannot watch the control channel: %m");
        r = sd_bus_attach_event(b->bus, m->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return log_error_errno(r, "Cannot attach the control channel to the event loop: %m");
        m->bus = TAKE_PTR(b);
        return 0;
}
