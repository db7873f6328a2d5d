/* manager.h: the main thread: sd-event loop, listening socket, the vhost-user connection,
 * signals and service-manager notification. */
#pragma once

#include <systemd/sd-event.h>

#include "config.h"
#include "device.h"
#include "executor.h"
#include "fuse-handler.h"
#include "fuse-server.h"
#include "id-translate-fs.h"
#include "migration.h"
#include "passthrough.h"
#include "stats.h"

typedef struct Manager {
        const Config *config;
        sd_event *event;
        Passthrough *passthrough; /* the filesystem the server serves */
        IdTranslateFs *translate; /* --translate-uid/--translate-gid around it, or NULL */
        FuseServer *fs;
        Device *device;
        Migration migration; /* the device's state handler: DEVICE_STATE save and load */
        Executor *executor; /* threading mode and pool: executor_set_mode() switches live */
        Stats *stats;       /* request statistics: stats_snapshot() / stats_reset() */
        struct Bus *bus;    /* the D-Bus control object (bus.h); NULL without a bus */

        int listen_fd;
        char *socket_path; /* the socket we created (removed at exit), NULL with --fd/activation */
        char *lock_path;
        int lock_fd;
        sd_event_source *listen_source;

        int conn_fd;
        sd_event_source *conn_source;
        unsigned n_connections;

        /* STATUS= for the service manager, refreshed periodically (see manager_status()). */
        sd_event_source *status_timer;
        /* The guest's locks a migration found held on this host (pending, locks.c): the eventfd
         * that says some became pending, and the 10 ms retry timer, off while none is. */
        sd_event_source *lock_pending_io, *lock_retry_timer;
        uint64_t status_requests; /* requests counted at the last refresh */
        uint64_t status_usec;     /* CLOCK_MONOTONIC of the last refresh, 0 before the first */
        double status_rate;       /* requests/s over the last interval, < 0 while unknown */

        /* --crash-restarts: from the death of the previous serving process to this one serving its
         * connection (0 in the first process, or when there was no connection to take over). */
        uint64_t restart_pause_usec;

        /* Live upgrade (upgrade.h): this process stopped its rings for one (it exits next); in the
         * process an upgrade started, when the previous one stopped its rings, what it restored
         * and from which version, and the guest's pause (0 when it was not started by one). */
        bool upgrade_started;
        uint64_t upgrade_stopped_usec, upgrade_pause_usec;
        size_t upgrade_nodes, upgrade_handles;
        /* The last takeover after a death: what it restored from the keeper's journal. */
        size_t restored_nodes, restored_handles;
        char upgrade_from[64];
} Manager;

int manager_new(Manager **ret, const Config *c);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

/* The socket at --socket-path and its locked SOCK.pid (holding the launcher's pid). Made by
 * main() right after the configuration is validated, before the share, the bus or the sandbox can
 * fail: launchers wait for the socket file and otherwise wait for their timeout. */
typedef struct PathSocket {
        int fd, lock_fd;
        char *path, *lock_path;
} PathSocket;
#define PATH_SOCKET_NULL ((PathSocket){ .fd = -1, .lock_fd = -1 })
int path_socket_create(const Config *c, PathSocket *ret);
/* Closes what is still held; with remove, unlinks the socket and SOCK.pid too. */
void path_socket_done(PathSocket *s, bool remove);
/* Sets up listening; after this the frontend may connect. With --socket-path the manager takes
 * over *s (made by path_socket_create()). */
int manager_listen(Manager *m, PathSocket *s);

/* Serves the frontend connection fd (taken): accepted, or kept across a serving process's death. */
int manager_attach_connection(Manager *m, int fd);

/* Runs the loop until SIGTERM/SIGINT or the frontend leaves; returns the exit code. */
int manager_run(Manager *m);
