/* bus.h: the D-Bus control object (org.vufsd.Daemon1, dbus/org.vufsd.Daemon1.xml) on the main loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus-name.h"

typedef struct Manager Manager;
typedef struct Bus Bus;

/* Connects to the bus chosen by --bus, publishes the object and owns the instance's name, all
 * before returning (so READY=1, sent later, implies the name is owned). As root, the connection to
 * the system bus is made as BUS_DAEMON_USER (bus-name.h) or --bus-user / [Security] BusUser= (any
 * bus, then), never as root: a user that does not exist, is root or is in BUS_ADMIN_GROUP means
 * no connection at all. A bus that cannot be reached, or a name that
 * cannot be owned, is logged once and leaves m->bus NULL: the guest is served anyway. Fails only
 * on bad input (-EINVAL: instance name), -ENOMEM, or -ENOTRECOVERABLE when the thread cannot return
 * to root after connecting. Call it before any sandbox: it needs CAP_SETUID/CAP_SETGID and the
 * user database. */
int bus_open(Manager *m);
Bus *bus_free(Bus *b);

/* The instance name in use (from --instance, the systemd unit, or "pid<PID>"). */
const char *bus_instance(Bus *b);

/* Compares what the manager and device show (connection, negotiated features, running queues)
 * with what was last announced and emits PropertiesChanged for the differences. The manager
 * calls it after each frontend connect, disconnect and vhost-user message. NULL-safe. */
void bus_device_changed(Bus *b);
