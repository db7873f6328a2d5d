/* bus.h: the D-Bus control object (org.vufsd.Daemon1, dbus/org.vufsd.Daemon1.xml) on the main loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bus-name.h"

typedef struct Manager Manager;
typedef struct Bus Bus;

/* Serves the org.vufsd.Daemon1 object (dbus/org.vufsd.Daemon1.xml) on the daemon's end of the
 * control channel (sandbox.h), a peer-to-peer D-Bus connection whose only peer is the supervisor's
 * relay (control-relay.h): the daemon holds no bus connection itself, and who may change what is
 * checked there. channel is taken (closed on failure); -1 (no control plane) leaves m->bus NULL.
 * Fails only on -ENOMEM or a channel sd-bus cannot use. */
int bus_open(Manager *m, const char *instance, int channel);
Bus *bus_free(Bus *b);

/* The instance name in use (from --instance, the systemd unit, or "pid<PID>"). */
const char *bus_instance(Bus *b);
/* Decides it, once, before the fork: the supervisor owns its name, the daemon shows it. */
typedef struct Config Config;
int bus_resolve_instance(const Config *c, char **ret);

/* Compares what the manager and device show (connection, negotiated features, running queues)
 * with what was last announced and emits PropertiesChanged for the differences. The manager
 * calls it after each frontend connect, disconnect and vhost-user message. NULL-safe. */
void bus_device_changed(Bus *b);

/* The version this build reports (the Version property, --version). */
const char *vufsd_version(void);
