/* manager.h: the main thread: sd-event loop, listening socket, the vhost-user connection,
 * signals and service-manager notification. */
#pragma once

#include <systemd/sd-event.h>

#include "config.h"
#include "device.h"
#include "fuse-server.h"

typedef struct Manager {
        const Config *config;
        sd_event *event;
        FuseServer *fs;
        Device *device;

        int listen_fd;
        char *socket_path; /* the socket we created (removed at exit), NULL with --fd/activation */
        char *lock_path;
        int lock_fd;
        sd_event_source *listen_source;

        int conn_fd;
        sd_event_source *conn_source;
        unsigned n_connections;
} Manager;

int manager_new(Manager **ret, const Config *c);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

/* Sets up listening; after this the frontend may connect. */
int manager_listen(Manager *m);

/* Runs the loop until SIGTERM/SIGINT or the frontend leaves; returns the exit code. */
int manager_run(Manager *m);
