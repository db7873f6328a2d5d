/* properties.c: an instance's properties (GetAll), read by name into Props. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "bus-name.h"
#include "fsctl.h"
#include "util.h"

/* ---- properties ---- */

void props_done(Props *p) {
        free(p->instance);
        free(p->version);
        free(p->shared_directory);
        free(p->socket);
        free(p->thread_mode);
        free(p->cache_policy);
        free(p->poll_mode);
        strv_free(p->options);
        *p = (Props) {};
}

static int read_string(sd_bus_message *m, char **dst) {
        const char *s;
        int r = sd_bus_message_read(m, "s", &s);
        if (r < 0)
                return r;
        free(*dst);
        *dst = strdup(s);
        return *dst ? 0 : -ENOMEM;
}

/* The properties fsctl reads, by name: where each goes in Props and its D-Bus type. A property of
 * another type (an older or newer daemon) is skipped like an unknown one. */
typedef struct PropField {
        const char *name;
        const char *sig; /* "s", "u", "t", "b" (into an int) or "as" */
        size_t offset;
        ssize_t present; /* offset of a bool set when the property was there, or -1 */
} PropField;

#define PROP(n, sig, field) { n, sig, offsetof(Props, field), -1 }
static const PropField prop_fields[] = {
        PROP("Instance", "s", instance),
        PROP("Version", "s", version),
        PROP("SharedDirectory", "s", shared_directory),
        PROP("Socket", "s", socket),
        PROP("ThreadMode", "s", thread_mode),
        PROP("CachePolicy", "s", cache_policy),
        PROP("PollMode", "s", poll_mode),
        PROP("Options", "as", options),
        PROP("RequestQueues", "u", request_queues),
        PROP("Connections", "u", connections),
        PROP("RunningQueues", "u", running_queues),
        PROP("PoolSize", "u", pool_size),
        { "PollUSec", "u", offsetof(Props, poll_usec), offsetof(Props, has_poll_usec) },
        PROP("NegotiatedFeatures", "t", features),
        PROP("NegotiatedProtocolFeatures", "t", protocol_features),
        PROP("UptimeUSec", "t", uptime_usec),
        PROP("InFlight", "t", in_flight),
        PROP("Connected", "b", connected),
        { "FdsUsed", "t", offsetof(Props, fds_used), offsetof(Props, has_budgets) },
        PROP("FdBudgetMax", "t", fd_budget_max),
        PROP("NodesUsed", "t", nodes_used),
        PROP("NodeBudgetMax", "t", node_budget_max),
        { "Restarts", "u", offsetof(Props, restarts), offsetof(Props, has_restarts) },
        PROP("LastRestartPauseUSec", "t", restart_pause_usec),
        { "Upgrades", "u", offsetof(Props, upgrades), offsetof(Props, has_upgrades) },
        PROP("UpgradeFailures", "u", upgrade_failures),
        PROP("LastUpgradePauseUSec", "t", upgrade_pause_usec),
        { "LastTakeoverReplayed", "t", offsetof(Props, takeover_replayed), offsetof(Props, has_takeover) },
        PROP("LastTakeoverNodes", "t", takeover_nodes),
        PROP("LastTakeoverHandles", "t", takeover_handles),
        { "LocksPending", "t", offsetof(Props, locks_pending), offsetof(Props, has_locks) },
        PROP("LocksLost", "t", locks_lost),
        { "InodeFdsCached", "t", offsetof(Props, inode_fds_cached), offsetof(Props, has_inode_fds) },
        PROP("InodeFdsMax", "t", inode_fds_max),
};
#undef PROP

static const PropField *prop_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(prop_fields); i++)
                if (streq(prop_fields[i].name, name))
                        return &prop_fields[i];
        return NULL;
}

/* Reads the variant's value (of type f->sig) into its field of p. */
static int prop_read(sd_bus_message *m, const PropField *f, Props *p) {
        void *field = (char *) p + f->offset;
        int r;

        if (streq(f->sig, "s"))
                r = read_string(m, field);
        else if (streq(f->sig, "as")) {
                strv_free(*(char ***) field);
                *(char ***) field = NULL;
                r = sd_bus_message_read_strv(m, field);
        } else if (streq(f->sig, "b")) {
                int b;
                r = sd_bus_message_read(m, "b", &b);
                if (r >= 0)
                        *(int *) field = b;
        } else
                r = sd_bus_message_read_basic(m, f->sig[0], field);
        if (r >= 0 && f->present >= 0)
                *(bool *) ((char *) p + f->present) = true;
        return r;
}

int get_all_properties(sd_bus *bus, const char *name, Props *p, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        *p = (Props) { .connected = -1 };
        r = sd_bus_call_method(bus, name, BUS_OBJECT_PATH, "org.freedesktop.DBus.Properties", "GetAll", error,
                               &reply, "s", BUS_INTERFACE);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *key, *contents;
                const PropField *prop;

                r = sd_bus_message_read(reply, "s", &key);
                if (r >= 0)
                        r = sd_bus_message_peek_type(reply, NULL, &contents);
                if (r < 0)
                        break;
                prop = prop_find(key);
                r = sd_bus_message_enter_container(reply, 'v', contents);
                if (r < 0)
                        break;
                if (prop && streq(contents, prop->sig))
                        r = prop_read(reply, prop, p);
 else
                        r = sd_bus_message_skip(reply, contents); /* newer daemon: unknown property */
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r < 0 && !sd_bus_error_is_set(error))
                sd_bus_error_set_errnof(error, r, "Cannot parse the properties: %s", strerror(-r));
        return r;
}
