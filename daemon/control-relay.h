/* control-relay.h: the control plane outside the serving process: the bus connection, the
 * instance's name, the callers' check, and the relay to the daemon's object over the control
 * channel.
 *
 * The process that handles guest input holds no bus connection (issue 31 findings 3 and 9): a
 * taken-over daemon could otherwise own other instances' names or, unprivileged, call the user's
 * systemd. The supervisor (sandbox.h, forked in every mode) runs this instead: before it locks
 * itself down it connects to the bus (as root, as BUS_DAEMON_USER, never as root; see
 * docs/dbus.md), owns org.vufsd.Instance.NAME and becomes the client of a peer-to-peer D-Bus
 * connection on its end of the control channel, whose other end the daemon serves its
 * org.vufsd.Daemon1 object on (bus.h). It then forwards to the daemon only the calls of that
 * interface on BUS_OBJECT_PATH (and property reads and introspection of it), checks the caller of
 * every changing call itself, and relays back replies, errors and PropertiesChanged of the expected
 * signatures and a bounded size: what the daemon sends is the one input from the serving process. */
#pragma once

#include "config.h"
#include "sandbox.h"

typedef struct ControlRelay ControlRelay;

/* Nothing is connected yet: that happens in the supervisor (control_relay_supervisor()). instance
 * must outlive the relay. */
int control_relay_new(ControlRelay **ret, const Config *c, const char *instance);
ControlRelay *control_relay_free(ControlRelay *r);

/* The callbacks sandbox_prepare() runs in the supervisor. */
void control_relay_supervisor(ControlRelay *r, SupervisorControl *ret);
