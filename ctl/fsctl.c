/* fsctl.c: the command-line client of vufsd's D-Bus interface (org.vufsd.Daemon1). */
#include <errno.h>
#include <stddef.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "bus-name.h"
#include "stats-histogram.h" /* the latency buckets GetStatistics sends */
#include "util.h"

/* Exit codes (fsctl(1) documents them). Everything below returns 0 or a negative errno, printing
 * its own message; exit_status() alone turns that into one of these. */
enum {
        EXIT_OK = 0,
        EXIT_FAILED = 1,       /* the call failed for another reason */
        EXIT_USAGE = 2,        /* bad command line or a value the daemon refused */
        EXIT_NO_INSTANCE = 3,  /* no such instance, or none / several when -i is omitted */
        EXIT_DENIED = 4,       /* the bus policy or the daemon refused the caller */
        EXIT_UNREACHABLE = 5,  /* no bus to talk to */
};

#define HIST_BUCKETS STATS_HIST_BUCKETS

/* The errno that stands for each exit code (what exit_status() maps back). */
#define ERR_USAGE (-EINVAL)           /* EXIT_USAGE */
#define ERR_NO_INSTANCE (-ENXIO)      /* EXIT_NO_INSTANCE */
#define ERR_DENIED (-EACCES)          /* EXIT_DENIED */
#define ERR_UNREACHABLE (-EHOSTUNREACH) /* EXIT_UNREACHABLE */
#define ERR_FAILED (-EIO)             /* EXIT_FAILED */

static enum { BUS_SYSTEM, BUS_USER, BUS_ADDRESS } arg_bus_type = BUS_SYSTEM;
static const char *arg_address;
static const char *arg_instance;
static bool arg_json;
static bool arg_quiet;
static bool arg_watch;
static double arg_interval = 1.0;
static long arg_count = -1; /* --count: refreshes before --watch stops; -1 = until interrupted */
static long arg_size = -1;  /* set-threads --size */

static const char *bus_label(void) {
        switch (arg_bus_type) {
        case BUS_SYSTEM:
                return "system bus";
        case BUS_USER:
                return "user bus";
        default:
                return arg_address;
        }
}

/* ---- JSON output: hand written, every string escaped ---- */

static void json_string(FILE *f, const char *s) {
        fputc('"', f);
        for (const unsigned char *p = (const unsigned char *) (s ?: ""); *p; p++) {
                switch (*p) {
                case '"':
                        fputs("\\\"", f);
                        break;
                case '\\':
                        fputs("\\\\", f);
                        break;
                case '\n':
                        fputs("\\n", f);
                        break;
                case '\t':
                        fputs("\\t", f);
                        break;
                case '\r':
                        fputs("\\r", f);
                        break;
                default:
                        if (*p < 0x20 || *p == 0x7f)
                                fprintf(f, "\\u%04x", *p);
                        else
                                fputc(*p, f); /* D-Bus strings are valid UTF-8: copy as is */
                }
        }
        fputc('"', f);
}

static void json_key(FILE *f, bool *first, const char *key) {
        fputs(*first ? "" : ",", f);
        *first = false;
        json_string(f, key);
        fputc(':', f);
}

/* ---- errors ---- */

static int exit_status(int r) {
        switch (r) {
        case 0:
                return 0;
        case ERR_USAGE:
                return EXIT_USAGE;
        case ERR_NO_INSTANCE:
                return EXIT_NO_INSTANCE;
        case ERR_DENIED:
                return EXIT_DENIED;
        case ERR_UNREACHABLE:
                return EXIT_UNREACHABLE;
        default:
                return EXIT_FAILED;
        }
}

/* Explains a failed call and returns the errno of its exit code. */
static int bus_error_errno(const sd_bus_error *e, int r, const char *what) {
        const char *name = e && e->name ? e->name : NULL;
        const char *msg = e && e->message ? e->message : strerror(r < 0 ? -r : EIO);

        if (name && (streq(name, SD_BUS_ERROR_SERVICE_UNKNOWN) || streq(name, SD_BUS_ERROR_NAME_HAS_NO_OWNER))) {
                fprintf(stderr, "fsctl: no such instance \"%s\" on the %s (fsctl list shows the running ones)\n",
                        arg_instance ?: "?", bus_label());
                return ERR_NO_INSTANCE;
        }
        if (name && streq(name, SD_BUS_ERROR_ACCESS_DENIED)) {
                fprintf(stderr, "fsctl: %s: access denied: only root and members of the group \"%s\" may change "
                                "an instance\nfsctl: the bus said: %s\n",
                        what, BUS_ADMIN_GROUP, msg);
                return ERR_DENIED;
        }
        if (name && (streq(name, BUS_ERROR_INVALID_MODE) || streq(name, BUS_ERROR_OUT_OF_RANGE) ||
                     streq(name, BUS_ERROR_INVALID_CACHE_POLICY))) {
                fprintf(stderr, "fsctl: %s: invalid value: %s\n", what, msg);
                return ERR_USAGE;
        }
        if (name && (streq(name, SD_BUS_ERROR_NO_REPLY) || streq(name, SD_BUS_ERROR_TIMEOUT))) {
                fprintf(stderr, "fsctl: %s: instance \"%s\" did not answer: %s\n", what, arg_instance ?: "?", msg);
                return ERR_FAILED;
        }
        if (!name && (r == -ENOTCONN || r == -ECONNRESET)) {
                fprintf(stderr, "fsctl: %s: lost the connection to the %s\n", what, bus_label());
                return ERR_UNREACHABLE;
        }
        fprintf(stderr, "fsctl: %s failed: %s%s%s%s\n", what, msg, name ? " (" : "", name ?: "", name ? ")" : "");
        return ERR_FAILED;
}

/* ---- connecting and finding instances ---- */

static int open_bus(sd_bus **ret) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r;

        switch (arg_bus_type) {
        case BUS_SYSTEM:
                r = sd_bus_open_system(&bus);
                break;
        case BUS_USER:
                r = sd_bus_open_user(&bus);
                break;
        default:
                r = sd_bus_new(&bus);
                if (r >= 0)
                        r = sd_bus_set_address(bus, arg_address);
                if (r >= 0)
                        r = sd_bus_set_bus_client(bus, true);
                if (r >= 0)
                        r = sd_bus_start(bus);
        }
        if (r >= 0) {
                /* Make sure the bus is really there (connect may succeed lazily). */
                const char *unique;
                r = sd_bus_get_unique_name(bus, &unique);
        }
        if (r < 0) {
                fprintf(stderr, "fsctl: cannot connect to the %s: %s\n", bus_label(), strerror(-r));
                return ERR_UNREACHABLE;
        }
        *ret = TAKE_PTR(bus);
        return 0;
}

static void strv_free(char **l) {
        for (char **p = l; p && *p; p++)
                free(*p);
        free(l);
}
static void strv_freep(char ***l) {
        strv_free(*l);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Bus names of the running instances, sorted. Returns their number or a negative errno. */
static int list_instance_names(sd_bus *bus, char ***ret) {
        _cleanup_(strv_freep) char **acquired = NULL;
        char **out;
        size_t n = 0, k = 0;
        int r;

        r = sd_bus_list_names(bus, &acquired, NULL);
        if (r < 0) {
                fprintf(stderr, "fsctl: cannot list the names on the %s: %s\n", bus_label(), strerror(-r));
                return ERR_FAILED;
        }
        for (char **p = acquired; p && *p; p++)
                n++;
        out = calloc(n + 1, sizeof *out);
        if (!out)
                return ERR_FAILED;
        for (char **p = acquired; p && *p; p++)
                if (strncmp(*p, BUS_NAME_PREFIX, strlen(BUS_NAME_PREFIX)) == 0) {
                        out[k] = strdup(*p);
                        if (!out[k]) {
                                strv_free(out);
                                return ERR_FAILED;
                        }
                        k++;
                }
        qsort(out, k, sizeof *out, cmp_str);
        *ret = out;
        return (int) k;
}

/* Picks the target: -i NAME, or the only running instance. Returns 0 or a negative errno. */
static int resolve_target(sd_bus *bus, char **ret_name) {
        _cleanup_(strv_freep) char **names = NULL;
        int n, r;

        if (arg_instance) {
                r = bus_instance_to_name(arg_instance, ret_name);
                if (r < 0) {
                        fprintf(stderr, "fsctl: \"%s\" is not an instance name (1..%d bytes)\n", arg_instance,
                                BUS_INSTANCE_MAX);
                        return ERR_USAGE;
                }
                return 0;
        }
        n = list_instance_names(bus, &names);
        if (n < 0)
                return n;
        if (n == 0) {
                fprintf(stderr, "fsctl: no vufsd instance is running on the %s\n", bus_label());
                return ERR_NO_INSTANCE;
        }
        if (n > 1) {
                fprintf(stderr, "fsctl: %d instances are running on the %s; choose one with -i:", n, bus_label());
                for (int i = 0; i < n; i++) {
                        _cleanup_free_ char *inst = NULL;
                        if (bus_instance_unescape(names[i] + strlen(BUS_NAME_PREFIX), &inst) >= 0)
                                fprintf(stderr, " %s", inst);
                }
                fputc('\n', stderr);
                return ERR_NO_INSTANCE;
        }
        *ret_name = strdup(names[0]);
        if (!*ret_name)
                return ERR_FAILED;
        if (!arg_instance) {
                static char *inst;
                if (bus_instance_unescape(names[0] + strlen(BUS_NAME_PREFIX), &inst) >= 0)
                        arg_instance = inst; /* for messages; lives until exit */
        }
        return 0;
}

/* Whoever owns an instance's name reads the caller's changes and answers with whatever state it
 * likes, so fsctl talks only to the owner that vufsd would be:
 * - on the system bus, root or BUS_DAEMON_USER (what vufsd as root connects as). The policy lets
 *   nobody else own the name, but an old or hand-written policy might;
 * - on the session bus (--user), the caller's own uid: the user's vufsd (systemctl --user start
 *   vufsd@NAME.socket) runs as the user. A session bus normally admits only its user, but one
 *   started with a looser configuration, or reached through a DBUS_SESSION_BUS_ADDRESS pointing
 *   at another user's bus, would let another uid answer in the user's place.
 * An explicit --address is the caller's own choice of bus and is not checked.
 * Returns 0 or a negative errno. */
static int check_owner(sd_bus *bus, const char *name) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        struct passwd *pw;
        uint32_t uid;
        int r;

        if (arg_bus_type == BUS_ADDRESS)
                return 0;
        r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                               "GetConnectionUnixUser", &e, &reply, "s", name);
        if (r >= 0)
                r = sd_bus_message_read(reply, "u", &uid);
        if (r < 0)
                return bus_error_errno(&e, r, "finding the instance's owner");
        if (arg_bus_type == BUS_USER) {
                if (uid == (uint32_t) getuid())
                        return 0;
                fprintf(stderr,
                        "fsctl: %s on the user bus is owned by uid %" PRIu32 ", not by you (uid %u): not "
                        "talking to it (is DBUS_SESSION_BUS_ADDRESS another user's bus?)\n",
                        name, uid, (unsigned) getuid());
                return ERR_FAILED;
        }
        if (uid == 0)
                return 0;
        pw = getpwnam(BUS_DAEMON_USER);
        if (pw && pw->pw_uid == uid)
                return 0;
        fprintf(stderr,
                "fsctl: %s is owned by uid %" PRIu32 ", not by vufsd (root or user \"%s\"): not "
                "talking to it (check the bus policy, docs/dbus.md)\n",
                name, uid, BUS_DAEMON_USER);
        return ERR_FAILED;
}

/* ---- properties ---- */

typedef struct Props {
        char *instance, *version, *shared_directory, *socket, *thread_mode, *cache_policy;
        char *poll_mode; /* PollMode ("auto", "fixed", "off"); NULL for a daemon without it */
        char **options;
        uint32_t request_queues, connections, running_queues, pool_size;
        uint32_t poll_usec; /* PollUSec; has_poll_usec false for a daemon without it */
        uint64_t features, protocol_features, uptime_usec, in_flight;
        int connected;
        bool has_poll_usec;
} Props;

static void props_done(Props *p) {
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

static int get_all_properties(sd_bus *bus, const char *name, Props *p, sd_bus_error *error) {
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

static void print_features(const char *label, uint64_t v, const char *const names[64]) {
        printf("%-16s 0x%" PRIx64, label, v);
        if (v) {
                fputs(" (", stdout);
                bool first = true;
                for (unsigned b = 0; b < 64; b++)
                        if (v & (1ULL << b)) {
                                printf("%s", first ? "" : " ");
                                first = false;
                                if (names[b])
                                        fputs(names[b], stdout);
                                else
                                        printf("bit%u", b);
                        }
                fputc(')', stdout);
        }
        fputc('\n', stdout);
}

static const char *const virtio_feature_names[64] = {
        [VIRTIO_F_NOTIFY_ON_EMPTY] = "NOTIFY_ON_EMPTY",
        [VIRTIO_F_ANY_LAYOUT] = "ANY_LAYOUT",
        [VIRTIO_RING_F_INDIRECT_DESC] = "INDIRECT_DESC",
        [VIRTIO_RING_F_EVENT_IDX] = "EVENT_IDX",
        [30] = "PROTOCOL_FEATURES", /* vhost-user's VHOST_USER_F_PROTOCOL_FEATURES */
        [VIRTIO_F_VERSION_1] = "VERSION_1",
        [VIRTIO_F_ACCESS_PLATFORM] = "ACCESS_PLATFORM",
        [VIRTIO_F_RING_PACKED] = "RING_PACKED",
        [VIRTIO_F_IN_ORDER] = "IN_ORDER",
};

/* vhost-user protocol feature bits (the vhost-user specification's numbering). */
static const char *const protocol_feature_names[64] = {
        [0] = "MQ",
        [1] = "LOG_SHMFD",
        [2] = "RARP",
        [3] = "REPLY_ACK",
        [4] = "NET_MTU",
        [5] = "BACKEND_REQ",
        [6] = "CROSS_ENDIAN",
        [7] = "CRYPTO_SESSION",
        [8] = "PAGEFAULT",
        [9] = "CONFIG",
        [10] = "BACKEND_SEND_FD",
        [11] = "HOST_NOTIFIER",
        [12] = "INFLIGHT_SHMFD",
        [13] = "RESET_DEVICE",
        [14] = "INBAND_NOTIFICATIONS",
        [15] = "CONFIGURE_MEM_SLOTS",
        [16] = "STATUS",
};

static void format_duration(char *buf, size_t len, uint64_t usec) {
        uint64_t s = usec / 1000000;

        if (s >= 86400)
                snprintf(buf, len, "%" PRIu64 "d %" PRIu64 "h %" PRIu64 "min", s / 86400, s % 86400 / 3600,
                         s % 3600 / 60);
        else if (s >= 3600)
                snprintf(buf, len, "%" PRIu64 "h %" PRIu64 "min %" PRIu64 "s", s / 3600, s % 3600 / 60, s % 60);
        else if (s >= 60)
                snprintf(buf, len, "%" PRIu64 "min %" PRIu64 "s", s / 60, s % 60);
        else
                snprintf(buf, len, "%.1fs", usec / 1e6);
}

static void json_props(FILE *f, const char *bus_name, const Props *p) {
        bool first = true;

        fputc('{', f);
        json_key(f, &first, "instance");
        json_string(f, p->instance);
        json_key(f, &first, "bus_name");
        json_string(f, bus_name);
        json_key(f, &first, "version");
        json_string(f, p->version);
        json_key(f, &first, "shared_directory");
        json_string(f, p->shared_directory);
        json_key(f, &first, "socket");
        json_string(f, p->socket);
        json_key(f, &first, "connected");
        fputs(p->connected > 0 ? "true" : "false", f);
        json_key(f, &first, "connections");
        fprintf(f, "%" PRIu32, p->connections);
        json_key(f, &first, "request_queues");
        fprintf(f, "%" PRIu32, p->request_queues);
        json_key(f, &first, "running_queues");
        fprintf(f, "%" PRIu32, p->running_queues);
        json_key(f, &first, "negotiated_features");
        fprintf(f, "%" PRIu64, p->features);
        json_key(f, &first, "negotiated_protocol_features");
        fprintf(f, "%" PRIu64, p->protocol_features);
        json_key(f, &first, "thread_mode");
        json_string(f, p->thread_mode);
        json_key(f, &first, "pool_size");
        fprintf(f, "%" PRIu32, p->pool_size);
        json_key(f, &first, "cache_policy");
        json_string(f, p->cache_policy);
        if (p->has_poll_usec) {
                json_key(f, &first, "poll_usec");
                fprintf(f, "%" PRIu32, p->poll_usec);
        }
        if (p->poll_mode) {
                json_key(f, &first, "poll_mode");
                json_string(f, p->poll_mode);
        }
        json_key(f, &first, "options");
        fputc('[', f);
        for (char **o = p->options; o && *o; o++) {
                if (o != p->options)
                        fputc(',', f);
                json_string(f, *o);
        }
        fputc(']', f);
        json_key(f, &first, "uptime_usec");
        fprintf(f, "%" PRIu64, p->uptime_usec);
        json_key(f, &first, "in_flight");
        fprintf(f, "%" PRIu64, p->in_flight);
        fputc('}', f);
}

/* ---- verbs ---- */

static int verb_list(sd_bus *bus, const char *name, char **args) {
        _cleanup_(strv_freep) char **names = NULL;
        bool any = false;
        int n;

        n = list_instance_names(bus, &names);
        if (n < 0)
                return n;
        if (arg_json)
                fputc('[', stdout);
        else if (!arg_quiet && n > 0)
                printf("%-20s %-40s %-9s %-6s %-4s %s\n", "INSTANCE", "SOCKET", "CONNECTED", "MODE", "POOL", "CACHE");
        for (int i = 0; i < n; i++) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                Props p;

                /* An instance may exit between ListNames and GetAll: skip it. */
                if (get_all_properties(bus, names[i], &p, &error) < 0) {
                        props_done(&p);
                        continue;
                }
                if (arg_json) {
                        if (any)
                                fputc(',', stdout);
                        json_props(stdout, names[i], &p);
                } else if (arg_quiet)
                        printf("%s\n", p.instance);
                else
                        printf("%-20s %-40s %-9s %-6s %-4" PRIu32 " %s\n", p.instance, p.socket,
                               p.connected > 0 ? "yes" : "no", p.thread_mode, p.pool_size, p.cache_policy);
                any = true;
                props_done(&p);
        }
        if (arg_json)
                fputs("]\n", stdout);
        else if (!any && !arg_quiet)
                printf("No vufsd instance is running on the %s.\n", bus_label());
        return 0;
}

static int verb_status(sd_bus *bus, const char *name, char **args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        Props p;
        char up[64];
        int r;

        r = get_all_properties(bus, name, &p, &error);
        if (r < 0) {
                props_done(&p);
                return bus_error_errno(&error, r, "status");
        }
        if (arg_json) {
                json_props(stdout, name, &p);
                fputc('\n', stdout);
                props_done(&p);
                return 0;
        }
        format_duration(up, sizeof up, p.uptime_usec);
        printf("%-16s %s\n", "Instance:", p.instance);
        printf("%-16s %s\n", "Bus name:", name);
        printf("%-16s %s\n", "Version:", p.version);
        printf("%-16s %s\n", "Shared dir:", p.shared_directory);
        printf("%-16s %s\n", "Socket:", *p.socket ? p.socket : "(unnamed)");
        printf("%-16s %s (%" PRIu32 " connection%s since start)\n", "Connected:", p.connected > 0 ? "yes" : "no",
               p.connections, p.connections == 1 ? "" : "s");
        printf("%-16s %" PRIu32 " request queue%s, %" PRIu32 " virtqueue%s running\n", "Queues:",
               p.request_queues, p.request_queues == 1 ? "" : "s", p.running_queues,
               p.running_queues == 1 ? "" : "s");
        if (streq(p.thread_mode, "inline"))
                printf("%-16s inline (pool size %" PRIu32 " kept for pool/auto)\n", "Threads:", p.pool_size);
        else
                printf("%-16s %s, %" PRIu32 " worker%s\n", "Threads:", p.thread_mode, p.pool_size,
                       p.pool_size == 1 ? "" : "s");
        printf("%-16s %s\n", "Cache:", p.cache_policy);
        if (p.has_poll_usec) {
                if (p.poll_mode && streq(p.poll_mode, "auto"))
                        printf("%-16s auto, at most %" PRIu32 " us per request queue\n", "Busy poll:", p.poll_usec);
                else if (p.poll_usec > 0)
                        printf("%-16s %" PRIu32 " us per request queue\n", "Busy poll:", p.poll_usec);
                else
                        printf("%-16s off\n", "Busy poll:");
        }
        printf("%-16s", "Options:");
        for (char **o = p.options; o && *o; o++)
                printf(" %s", *o);
        fputc('\n', stdout);
        print_features("Features:", p.features, virtio_feature_names);
        print_features("Protocol:", p.protocol_features, protocol_feature_names);
        printf("%-16s %" PRIu64 "\n", "In flight:", p.in_flight);
        printf("%-16s %s\n", "Uptime:", up);
        props_done(&p);
        return 0;
}

static int call_simple(sd_bus *bus, const char *name, const char *what, const char *method, const char *sig, ...) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        va_list ap;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, name, BUS_OBJECT_PATH, BUS_INTERFACE, method);
        if (r >= 0 && sig) {
                va_start(ap, sig);
                r = sd_bus_message_appendv(m, sig, ap);
                va_end(ap);
        }
        if (r >= 0)
                r = sd_bus_call(bus, m, 0, &error, &reply);
        if (r < 0)
                return bus_error_errno(&error, r, what);
        return 0;
}

static int parse_number(const char *s, long max, long *ret) {
        char *end;
        long v;

        if (!s || !*s || *s == '-' || *s == '+')
                return -EINVAL;
        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || *end)
                return -EINVAL;
        if (v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

static int verb_set_threads(sd_bus *bus, const char *name, char **args) {
        const char *arg = args[0], *mode;
        long n, size = arg_size >= 0 ? arg_size : 0;
        int r;

        if (parse_number(arg, UINT32_MAX, &n) == 0) {
                if (arg_size >= 0) {
                        fprintf(stderr, "fsctl: set-threads %s already says the size; --size goes with inline, "
                                        "pool or auto\n", arg);
                        return ERR_USAGE;
                }
                /* Like --thread-pool-size: 0 = no pool, N = a pool of N. */
                mode = n == 0 ? "inline" : "pool";
                size = n;
        } else if (streq(arg, "inline") || streq(arg, "pool") || streq(arg, "auto"))
                mode = arg;
        else {
                fprintf(stderr, "fsctl: invalid thread setting \"%s\": give a pool size N (0 = inline), inline, "
                                "pool or auto\n", arg);
                return ERR_USAGE;
        }
        r = call_simple(bus, name, "set-threads", "SetThreads", "su", mode, (uint32_t) size);
        if (r < 0)
                return r;
        if (!arg_quiet) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                Props p;
                if (get_all_properties(bus, name, &p, &error) >= 0)
                        printf("%s: threads %s, pool size %" PRIu32 "\n", p.instance, p.thread_mode, p.pool_size);
                props_done(&p);
        }
        return 0;
}

static int verb_set_cache(sd_bus *bus, const char *name, char **args) {
        const char *arg = args[0];
        int r;

        r = call_simple(bus, name, "set-cache", "SetCachePolicy", "s", arg);
        if (r < 0)
                return r;
        if (!arg_quiet) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                Props p;
                if (get_all_properties(bus, name, &p, &error) >= 0)
                        printf("%s: cache %s\n", p.instance, p.cache_policy);
                props_done(&p);
        }
        return 0;
}

static int verb_set_poll_us(sd_bus *bus, const char *name, char **args) {
        const char *arg = args[0];
        long us;
        int r;

        /* The range (0..1000000) is the daemon's to enforce: it answers OutOfRange with the limit. */
        if (streq(arg, "auto"))
                r = call_simple(bus, name, "set-poll-us", "SetPollMode", "s", "auto");
        else if (parse_number(arg, UINT32_MAX, &us) < 0) {
                fprintf(stderr,
                        "fsctl: invalid busy-poll window \"%s\": give auto or microseconds, 0 turns polling off\n",
                        arg);
                return ERR_USAGE;
        } else
                r = call_simple(bus, name, "set-poll-us", "SetPollUSec", "u", (uint32_t) us);
        if (r < 0)
                return r;
        if (!arg_quiet) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                Props p;
                if (get_all_properties(bus, name, &p, &error) >= 0) {
                        if (p.poll_mode && streq(p.poll_mode, "auto"))
                                printf("%s: busy poll auto (at most %" PRIu32 " us)\n", p.instance, p.poll_usec);
                        else if (p.poll_usec > 0)
                                printf("%s: busy poll %" PRIu32 " us\n", p.instance, p.poll_usec);
                        else
                                printf("%s: busy poll off\n", p.instance);
                }
                props_done(&p);
        }
        return 0;
}

static int verb_reset_stats(sd_bus *bus, const char *name, char **args) {
        int r = call_simple(bus, name, "reset-stats", "ResetStatistics", NULL);
        if (r == 0 && !arg_quiet)
                printf("%s: statistics reset\n", arg_instance);
        return r;
}

/* ---- statistics ---- */

typedef struct Row {
        uint32_t index;
        char *name;
        uint64_t requests, bytes, errors;
        uint64_t hist[HIST_BUCKETS];
} Row;

typedef struct Snapshot {
        uint64_t timestamp, in_flight;
        char *thread_mode;
        uint32_t pool_size;
        uint32_t poll_usec; /* the PollUSec property next to the snapshot */
        bool has_poll_usec;
        bool poll_auto; /* PollMode is "auto" */
        size_t n_exec;
        char *exec_name[32];
        uint64_t exec_value[32];
        Row *ops, *queues;
        size_t n_ops, n_queues;
} Snapshot;

static void rows_free(Row *rows, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(rows[i].name);
        free(rows);
}

static void snapshot_done(Snapshot *s) {
        free(s->thread_mode);
        for (size_t i = 0; i < s->n_exec; i++)
                free(s->exec_name[i]);
        rows_free(s->ops, s->n_ops);
        rows_free(s->queues, s->n_queues);
        *s = (Snapshot) {};
}

static int read_rows(sd_bus_message *m, Row **ret, size_t *ret_n) {
        Row *rows = NULL;
        size_t n = 0;
        int r;

        r = sd_bus_message_enter_container(m, 'a', "(ustttat)");
        while (r >= 0 && (r = sd_bus_message_enter_container(m, 'r', "ustttat")) > 0) {
                const char *name;
                const void *hist;
                size_t hist_size;
                Row *nr = realloc(rows, (n + 1) * sizeof *rows);
                if (!nr) {
                        r = -ENOMEM;
                        break;
                }
                rows = nr;
                rows[n] = (Row) {};
                r = sd_bus_message_read(m, "ustt", &rows[n].index, &name, &rows[n].requests, &rows[n].bytes);
                if (r >= 0)
                        r = sd_bus_message_read(m, "t", &rows[n].errors);
                if (r >= 0)
                        r = sd_bus_message_read_array(m, 't', &hist, &hist_size);
                if (r < 0)
                        break;
                memcpy(rows[n].hist, hist, MIN(hist_size, sizeof rows[n].hist));
                rows[n].name = strdup(name);
                n++;
                if (!rows[n - 1].name) {
                        r = -ENOMEM;
                        break;
                }
                r = sd_bus_message_exit_container(m);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        if (r < 0) {
                rows_free(rows, n);
                return r;
        }
        *ret = rows;
        *ret_n = n;
        return 0;
}

static int get_statistics(sd_bus *bus, const char *name, Snapshot *s, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *mode;
        int r;

        *s = (Snapshot) {};
        r = sd_bus_call_method(bus, name, BUS_OBJECT_PATH, BUS_INTERFACE, "GetStatistics", error, &reply, NULL);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "ttsu", &s->timestamp, &s->in_flight, &mode, &s->pool_size);
        if (r >= 0)
                r = (s->thread_mode = strdup(mode)) ? 0 : -ENOMEM;
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', "{st}");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, 'e', "st")) > 0) {
                const char *k;
                uint64_t v;
                r = sd_bus_message_read(reply, "st", &k, &v);
                if (r >= 0 && s->n_exec < ELEMENTSOF(s->exec_name)) {
                        s->exec_name[s->n_exec] = strdup(k);
                        s->exec_value[s->n_exec++] = v;
                }
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0)
                r = read_rows(reply, &s->ops, &s->n_ops);
        if (r >= 0)
                r = read_rows(reply, &s->queues, &s->n_queues);
        if (r < 0 && !sd_bus_error_is_set(error))
                sd_bus_error_set_errnof(error, r, "Cannot parse the statistics: %s", strerror(-r));
        if (r >= 0) {
                /* Not part of GetStatistics: a separate read, optional (older daemons lack it). */
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
                _cleanup_free_ char *poll_mode = NULL;
                s->has_poll_usec = sd_bus_get_property_trivial(bus, name, BUS_OBJECT_PATH, BUS_INTERFACE,
                                                               "PollUSec", &e, 'u', &s->poll_usec) >= 0;
                sd_bus_error_free(&e);
                s->poll_auto = sd_bus_get_property_string(bus, name, BUS_OBJECT_PATH, BUS_INTERFACE, "PollMode",
                                                          &e, &poll_mode) >= 0 &&
                               streq(poll_mode, "auto");
        }
        return r;
}

/* The upper bound in µs of the bucket holding quantile q (0 when empty); *open for the last,
 * unbounded bucket, whose lower bound is then returned. */
static uint64_t hist_quantile(const uint64_t *h, double q, bool *open) {
        uint64_t total = 0, cum = 0, target;

        *open = false;
        for (unsigned b = 0; b < HIST_BUCKETS; b++)
                total += h[b];
        if (total == 0)
                return 0;
        target = (uint64_t) ceil(q * (double) total);
        if (target < 1)
                target = 1;
        for (unsigned b = 0; b < HIST_BUCKETS; b++) {
                cum += h[b];
                if (cum >= target) {
                        if (b == HIST_BUCKETS - 1) {
                                *open = true;
                                return stats_hist_open_lower_us();
                        }
                        return stats_hist_bucket_upper_us(b);
                }
        }
        return 0;
}

static void format_usec(char *buf, size_t len, uint64_t us, bool open, bool empty) {
        if (empty)
                snprintf(buf, len, "-");
        else if (us < 1000)
                snprintf(buf, len, "%s%" PRIu64 "us", open ? ">" : "", us);
        else if (us < 1000000)
                snprintf(buf, len, "%s%.1fms", open ? ">" : "", us / 1e3);
        else
                snprintf(buf, len, "%s%.2fs", open ? ">" : "", us / 1e6);
}

static void format_bytes(char *buf, size_t len, double b) {
        static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
        unsigned u = 0;

        while (b >= 1024 && u + 1 < ELEMENTSOF(units)) {
                b /= 1024;
                u++;
        }
        if (u == 0)
                snprintf(buf, len, "%.0f%s", b, units[u]);
        else
                snprintf(buf, len, "%.1f%s", b, units[u]);
}

/* "off", "50us" or "auto", for headers; a static buffer (one use per printf). */
static const char *format_poll(uint32_t us, bool is_auto) {
        static char buf[32];

        if (is_auto)
                return "auto";
        if (us == 0)
                return "off";
        snprintf(buf, sizeof buf, "%" PRIu32 "us", us);
        return buf;
}

static bool hist_empty(const uint64_t *h) {
        for (unsigned b = 0; b < HIST_BUCKETS; b++)
                if (h[b])
                        return false;
        return true;
}

static void print_rows_table(const char *title, const Row *rows, size_t n) {
        printf("%-16s %12s %10s %8s %9s %9s\n", title, "REQUESTS", "BYTES", "ERRORS", "P50", "P99");
        for (size_t i = 0; i < n; i++) {
                char bytes[32], p50[32], p99[32];
                bool o50, o99, empty = hist_empty(rows[i].hist);
                uint64_t v50 = hist_quantile(rows[i].hist, 0.5, &o50), v99 = hist_quantile(rows[i].hist, 0.99, &o99);

                format_bytes(bytes, sizeof bytes, (double) rows[i].bytes);
                format_usec(p50, sizeof p50, v50, o50, empty);
                format_usec(p99, sizeof p99, v99, o99, empty);
                printf("%-16s %12" PRIu64 " %10s %8" PRIu64 " %9s %9s\n", rows[i].name, rows[i].requests, bytes,
                       rows[i].errors, p50, p99);
        }
}

static void json_rows(FILE *f, const Row *rows, size_t n) {
        fputc('[', f);
        for (size_t i = 0; i < n; i++) {
                bool first = true, open;
                if (i)
                        fputc(',', f);
                fputc('{', f);
                json_key(f, &first, "index");
                fprintf(f, "%" PRIu32, rows[i].index);
                json_key(f, &first, "name");
                json_string(f, rows[i].name);
                json_key(f, &first, "requests");
                fprintf(f, "%" PRIu64, rows[i].requests);
                json_key(f, &first, "bytes");
                fprintf(f, "%" PRIu64, rows[i].bytes);
                json_key(f, &first, "errors");
                fprintf(f, "%" PRIu64, rows[i].errors);
                json_key(f, &first, "latency_histogram");
                fputc('[', f);
                for (unsigned b = 0; b < HIST_BUCKETS; b++)
                        fprintf(f, "%s%" PRIu64, b ? "," : "", rows[i].hist[b]);
                fputc(']', f);
                json_key(f, &first, "p50_usec");
                fprintf(f, "%" PRIu64, hist_quantile(rows[i].hist, 0.5, &open));
                json_key(f, &first, "p99_usec");
                fprintf(f, "%" PRIu64, hist_quantile(rows[i].hist, 0.99, &open));
                fputc('}', f);
        }
        fputc(']', f);
}

static void print_snapshot(const Snapshot *s) {
        if (arg_json) {
                bool first = true;
                fputc('{', stdout);
                json_key(stdout, &first, "instance");
                json_string(stdout, arg_instance);
                json_key(stdout, &first, "timestamp_usec");
                printf("%" PRIu64, s->timestamp);
                json_key(stdout, &first, "in_flight");
                printf("%" PRIu64, s->in_flight);
                json_key(stdout, &first, "thread_mode");
                json_string(stdout, s->thread_mode);
                json_key(stdout, &first, "pool_size");
                printf("%" PRIu32, s->pool_size);
                if (s->has_poll_usec) {
                        json_key(stdout, &first, "poll_usec");
                        printf("%" PRIu32, s->poll_usec);
                        json_key(stdout, &first, "poll_mode");
                        json_string(stdout, s->poll_auto ? "auto" : s->poll_usec ? "fixed" : "off");
                }
                json_key(stdout, &first, "executor");
                fputc('{', stdout);
                bool efirst = true;
                for (size_t i = 0; i < s->n_exec; i++) {
                        json_key(stdout, &efirst, s->exec_name[i]);
                        printf("%" PRIu64, s->exec_value[i]);
                }
                fputc('}', stdout);
                json_key(stdout, &first, "opcodes");
                json_rows(stdout, s->ops, s->n_ops);
                json_key(stdout, &first, "queues");
                json_rows(stdout, s->queues, s->n_queues);
                fputs("}\n", stdout);
                return;
        }
        printf("Instance %s: threads %s (pool size %" PRIu32 ")", arg_instance, s->thread_mode, s->pool_size);
        if (s->has_poll_usec)
                printf(", busy poll %s", format_poll(s->poll_usec, s->poll_auto));
        printf(", %" PRIu64 " in flight\n", s->in_flight);
        fputs("Executor:", stdout);
        for (size_t i = 0; i < s->n_exec; i++)
                printf(" %s=%" PRIu64, s->exec_name[i], s->exec_value[i]);
        fputs("\n\n", stdout);
        if (s->n_ops == 0)
                fputs("No requests since the last reset.\n", stdout);
        else
                print_rows_table("OPCODE", s->ops, s->n_ops);
        fputc('\n', stdout);
        print_rows_table("QUEUE", s->queues, s->n_queues);
}

/* One refresh of --watch: rates between two snapshots. */
typedef struct Rate {
        const char *name;
        double req_s, mb_s, err_s;
        uint64_t hist[HIST_BUCKETS];
} Rate;

static const Row *find_row(const Row *rows, size_t n, uint32_t index) {
        for (size_t i = 0; i < n; i++)
                if (rows[i].index == index)
                        return &rows[i];
        return NULL;
}

static int rate_cmp(const void *a, const void *b) {
        const Rate *x = a, *y = b;
        return x->req_s < y->req_s ? 1 : x->req_s > y->req_s ? -1 : strcmp(x->name, y->name);
}

static void print_watch(const Snapshot *prev, const Snapshot *cur, bool tty) {
        double dt = (double) (cur->timestamp - prev->timestamp) / 1e6;
        _cleanup_free_ Rate *rates = calloc(cur->n_ops + 1, sizeof *rates);
        Rate total = { .name = "TOTAL" };
        size_t n = 0;

        if (!rates || dt <= 0)
                return;
        for (size_t i = 0; i < cur->n_ops; i++) {
                const Row *c = &cur->ops[i], *p = find_row(prev->ops, prev->n_ops, c->index);
                Rate *r = &rates[n];
                /* A reset between two refreshes makes counters go down: start from zero then. */
                bool reset = p && c->requests < p->requests;

                r->name = c->name;
                r->req_s = (double) (c->requests - (p && !reset ? p->requests : 0)) / dt;
                r->mb_s = (double) (c->bytes - (p && !reset ? p->bytes : 0)) / dt / 1e6;
                r->err_s = (double) (c->errors - (p && !reset && c->errors >= p->errors ? p->errors : 0)) / dt;
                for (unsigned b = 0; b < HIST_BUCKETS; b++)
                        r->hist[b] = c->hist[b] - (p && !reset && c->hist[b] >= p->hist[b] ? p->hist[b] : 0);
                if (r->req_s <= 0 && r->err_s <= 0)
                        continue;
                total.req_s += r->req_s;
                total.mb_s += r->mb_s;
                total.err_s += r->err_s;
                for (unsigned b = 0; b < HIST_BUCKETS; b++)
                        total.hist[b] += r->hist[b];
                n++;
        }
        qsort(rates, n, sizeof *rates, rate_cmp);

        if (arg_json) {
                bool first = true;
                fputc('{', stdout);
                json_key(stdout, &first, "instance");
                json_string(stdout, arg_instance);
                json_key(stdout, &first, "timestamp_usec");
                printf("%" PRIu64, cur->timestamp);
                json_key(stdout, &first, "interval_usec");
                printf("%" PRIu64, cur->timestamp - prev->timestamp);
                json_key(stdout, &first, "thread_mode");
                json_string(stdout, cur->thread_mode);
                json_key(stdout, &first, "pool_size");
                printf("%" PRIu32, cur->pool_size);
                if (cur->has_poll_usec) {
                        json_key(stdout, &first, "poll_usec");
                        printf("%" PRIu32, cur->poll_usec);
                }
                json_key(stdout, &first, "in_flight");
                printf("%" PRIu64, cur->in_flight);
                json_key(stdout, &first, "opcodes");
                fputc('[', stdout);
                for (size_t i = 0; i <= n; i++) {
                        const Rate *r = i < n ? &rates[i] : &total;
                        bool f2 = true, open;
                        if (i)
                                fputc(',', stdout);
                        fputc('{', stdout);
                        json_key(stdout, &f2, "name");
                        json_string(stdout, r->name);
                        json_key(stdout, &f2, "requests_per_sec");
                        printf("%.3f", r->req_s);
                        json_key(stdout, &f2, "mb_per_sec");
                        printf("%.6f", r->mb_s);
                        json_key(stdout, &f2, "errors_per_sec");
                        printf("%.3f", r->err_s);
                        json_key(stdout, &f2, "p50_usec");
                        printf("%" PRIu64, hist_quantile(r->hist, 0.5, &open));
                        json_key(stdout, &f2, "p99_usec");
                        printf("%" PRIu64, hist_quantile(r->hist, 0.99, &open));
                        fputc('}', stdout);
                }
                fputs("]}\n", stdout);
                fflush(stdout);
                return;
        }

        if (tty)
                fputs("\033[H\033[2J", stdout);
        else
                fputc('\n', stdout);
        {
                char clock[16];
                time_t t = time(NULL);
                struct tm tm;
                strftime(clock, sizeof clock, "%H:%M:%S", localtime_r(&t, &tm));
                printf("vufsd %s  %s  threads %s (pool %" PRIu32 ")%s%s  in flight %" PRIu64 "  every %.1fs\n",
                       arg_instance, clock, cur->thread_mode, cur->pool_size, cur->has_poll_usec ? "  poll " : "",
                       cur->has_poll_usec ? format_poll(cur->poll_usec, cur->poll_auto) : "", cur->in_flight, dt);
        }
        printf("%-16s %10s %9s %8s %9s %9s\n", "OPCODE", "REQ/S", "MB/S", "ERR/S", "P50", "P99");
        for (size_t i = 0; i <= n; i++) {
                const Rate *r = i < n ? &rates[i] : &total;
                char p50[32], p99[32];
                bool o50, o99, empty = hist_empty(r->hist);
                uint64_t v50 = hist_quantile(r->hist, 0.5, &o50), v99 = hist_quantile(r->hist, 0.99, &o99);

                format_usec(p50, sizeof p50, v50, o50, empty);
                format_usec(p99, sizeof p99, v99, o99, empty);
                printf("%-16s %10.1f %9.2f %8.1f %9s %9s\n", r->name, r->req_s, r->mb_s, r->err_s, p50, p99);
        }
        fflush(stdout);
}

static int sleep_interval(void) {
        struct timespec ts = {
                .tv_sec = (time_t) arg_interval,
                .tv_nsec = (long) ((arg_interval - (double) (time_t) arg_interval) * 1e9),
        };
        while (nanosleep(&ts, &ts) < 0)
                if (errno != EINTR)
                        return -errno;
        return 0;
}

static int verb_stats(sd_bus *bus, const char *name, char **args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        Snapshot prev, cur;
        bool tty = isatty(STDOUT_FILENO);
        int r;

        r = get_statistics(bus, name, &prev, &error);
        if (r < 0) {
                snapshot_done(&prev);
                return bus_error_errno(&error, r, "stats");
        }
        if (!arg_watch) {
                print_snapshot(&prev);
                snapshot_done(&prev);
                return 0;
        }
        for (long i = 0; arg_count < 0 || i < arg_count; i++) {
                (void) sleep_interval();
                r = get_statistics(bus, name, &cur, &error);
                if (r < 0) {
                        snapshot_done(&prev);
                        snapshot_done(&cur);
                        return bus_error_errno(&error, r, "stats --watch");
                }
                print_watch(&prev, &cur, tty);
                snapshot_done(&prev);
                prev = cur;
        }
        snapshot_done(&prev);
        return 0;
}

/* ---- command line ---- */

static void help(void) {
        printf("Usage: fsctl [OPTIONS] VERB [ARGS]\n"
               "\n"
               "Controls running vufsd instances (virtio-fs backends) over D-Bus.\n"
               "\n"
               "Verbs:\n"
               "  list                          running instances: name, socket, connected, mode, cache\n"
               "  status                        properties of one instance\n"
               "  set-threads N|inline|pool|auto [--size N]\n"
               "                                where requests run: N = a pool of N threads (0 = inline);\n"
               "                                pool/auto with --size N (default: keep the current size)\n"
               "  set-cache never|metadata|auto|always\n"
               "                                cache policy for new lookups and opens\n"
               "  set-poll-us auto|N            busy-poll window of the request queues: adaptive, or N\n"
               "                                microseconds (0..1000000, 0 = off)\n"
               "  stats [--watch [--interval SEC] [--count N]]\n"
               "                                request statistics; --watch refreshes a table of\n"
               "                                requests/s, MB/s, p50/p99 latency per opcode\n"
               "  reset-stats                   set the statistics to zero\n"
               "\n"
               "Options:\n"
               "  -i, --instance=NAME           the instance (may be omitted when exactly one runs)\n"
               "      --system                  use the system bus (default; DBUS_SYSTEM_BUS_ADDRESS)\n"
               "      --user                    use the user's session bus\n"
               "      --address=ADDRESS         use the bus at this D-Bus address\n"
               "      --json                    JSON output for list, status and stats\n"
               "  -q, --quiet                   list: names only; set-*: no confirmation\n"
               "  -h, --help                    show this help\n"
               "      --version                 show the version\n"
               "\n"
               "Exit status: 0 ok, 1 failure, 2 invalid usage or value, 3 no such instance,\n"
               "4 access denied, 5 bus unreachable. See fsctl(1).\n");
}

static int parse_argv(int argc, char *argv[]) {
        enum {
                ARG_SYSTEM = 0x100,
                ARG_USER,
                ARG_ADDRESS,
                ARG_JSON,
                ARG_SIZE,
                ARG_WATCH,
                ARG_INTERVAL,
                ARG_COUNT,
                ARG_VERSION,
        };
        static const struct option options[] = {
                { "instance", required_argument, NULL, 'i' },
                { "system", no_argument, NULL, ARG_SYSTEM },
                { "user", no_argument, NULL, ARG_USER },
                { "address", required_argument, NULL, ARG_ADDRESS },
                { "json", no_argument, NULL, ARG_JSON },
                { "quiet", no_argument, NULL, 'q' },
                { "size", required_argument, NULL, ARG_SIZE },
                { "watch", no_argument, NULL, ARG_WATCH },
                { "interval", required_argument, NULL, ARG_INTERVAL },
                { "count", required_argument, NULL, ARG_COUNT },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "hi:q", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("fsctl %s\n", PACKAGE_VERSION);
                        return 0;
                case 'i':
                        arg_instance = optarg;
                        break;
                case ARG_SYSTEM:
                        arg_bus_type = BUS_SYSTEM;
                        break;
                case ARG_USER:
                        arg_bus_type = BUS_USER;
                        break;
                case ARG_ADDRESS:
                        arg_bus_type = BUS_ADDRESS;
                        arg_address = optarg;
                        break;
                case ARG_JSON:
                        arg_json = true;
                        break;
                case 'q':
                        arg_quiet = true;
                        break;
                case ARG_SIZE:
                        if (parse_number(optarg, UINT32_MAX, &arg_size) < 0) {
                                fprintf(stderr, "fsctl: invalid --size \"%s\": give a number of threads\n", optarg);
                                return ERR_USAGE;
                        }
                        break;
                case ARG_WATCH:
                        arg_watch = true;
                        break;
                case ARG_INTERVAL: {
                        char *end;
                        errno = 0;
                        arg_interval = strtod(optarg, &end);
                        if (errno || *end || !(arg_interval >= 0.05 && arg_interval <= 3600)) {
                                fprintf(stderr, "fsctl: invalid --interval \"%s\": give seconds, 0.05..3600\n",
                                        optarg);
                                return ERR_USAGE;
                        }
                        break;
                }
                case ARG_COUNT:
                        if (parse_number(optarg, 1000000000, &arg_count) < 0 || arg_count < 1) {
                                fprintf(stderr, "fsctl: invalid --count \"%s\": give a positive number\n", optarg);
                                return ERR_USAGE;
                        }
                        break;
                default:
                        fprintf(stderr, "fsctl: see fsctl --help\n");
                        return ERR_USAGE;
                }
        }
        return 1;
}

/* ---- verbs: the table ---- */

enum {
        VERB_ANY_INSTANCE = 1 << 0, /* works on every instance: no -i target to resolve (list) */
        VERB_JSON = 1 << 1,         /* reads: --json applies */
        VERB_SIZE = 1 << 2,         /* --size applies */
        VERB_WATCH = 1 << 3,        /* --watch (and --count) apply */
};

typedef struct Verb {
        const char *name;
        unsigned n_args; /* exactly this many arguments */
        unsigned flags;  /* VERB_* */
        int (*run)(sd_bus *bus, const char *name, char **args);
} Verb;

static const Verb verbs[] = {
        { "list", 0, VERB_ANY_INSTANCE | VERB_JSON, verb_list },
        { "status", 0, VERB_JSON, verb_status },
        { "set-threads", 1, VERB_SIZE, verb_set_threads },
        { "set-cache", 1, 0, verb_set_cache },
        { "set-poll-us", 1, 0, verb_set_poll_us },
        { "stats", 0, VERB_JSON | VERB_WATCH, verb_stats },
        { "reset-stats", 0, 0, verb_reset_stats },
};

static const Verb *verb_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (streq(verbs[i].name, name))
                        return &verbs[i];
        return NULL;
}

/* The verbs with all of flags (0: every verb) as "a, b and c", or "a, b, c" with commas only. */
static void verb_names(char *buf, size_t len, unsigned flags, bool and) {
        size_t n = 0, k = 0, off = 0;

        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                n += (verbs[i].flags & flags) == flags;
        buf[0] = 0;
        for (size_t i = 0; i < ELEMENTSOF(verbs) && off < len; i++) {
                if ((verbs[i].flags & flags) != flags)
                        continue;
                off += (size_t) snprintf(buf + off, len - off, "%s%s", k == 0 ? "" : and && k + 1 == n ? " and " : ", ",
                                         verbs[i].name);
                k++;
        }
}

/* The options that only some verbs take. */
static int check_verb_options(const Verb *v) {
        char names[128];

        if (arg_json && !(v->flags & VERB_JSON)) {
                verb_names(names, sizeof names, VERB_JSON, true);
                fprintf(stderr, "fsctl: --json goes with %s\n", names);
                return ERR_USAGE;
        }
        if (arg_size >= 0 && !(v->flags & VERB_SIZE)) {
                verb_names(names, sizeof names, VERB_SIZE, true);
                fprintf(stderr, "fsctl: --size goes with %s\n", names);
                return ERR_USAGE;
        }
        if (arg_watch && !(v->flags & VERB_WATCH)) {
                verb_names(names, sizeof names, VERB_WATCH, true);
                fprintf(stderr, "fsctl: --watch goes with %s\n", names);
                return ERR_USAGE;
        }
        if (arg_count > 0 && !arg_watch) {
                fprintf(stderr, "fsctl: --count goes with stats --watch\n");
                return ERR_USAGE;
        }
        return 0;
}

static int run(int argc, char *argv[]) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char *name = NULL;
        const Verb *v;
        unsigned nargs;
        int r;

        r = parse_argv(argc, argv);
        if (r <= 0)
                return r;
        if (optind >= argc) {
                char names[160];
                verb_names(names, sizeof names, 0, false);
                fprintf(stderr, "fsctl: missing verb (%s); see fsctl --help\n", names);
                return ERR_USAGE;
        }
        v = verb_find(argv[optind]);
        if (!v) {
                fprintf(stderr, "fsctl: unknown verb \"%s\"; see fsctl --help\n", argv[optind]);
                return ERR_USAGE;
        }
        nargs = (unsigned) (argc - optind - 1);
        if (nargs != v->n_args) {
                if (v->n_args == 0)
                        fprintf(stderr, "fsctl: %s takes no argument\n", v->name);
                else
                        fprintf(stderr, "fsctl: %s needs exactly one argument; see fsctl --help\n", v->name);
                return ERR_USAGE;
        }
        r = check_verb_options(v);
        if (r < 0)
                return r;

        r = open_bus(&bus);
        if (r < 0)
                return r;
        (void) sd_bus_set_method_call_timeout(bus, 10ULL * 1000 * 1000);
        if (!(v->flags & VERB_ANY_INSTANCE)) {
                r = resolve_target(bus, &name);
                if (r >= 0)
                        r = check_owner(bus, name);
                if (r < 0)
                        return r;
        }
        return v->run(bus, name, argv + optind + 1);
}

int main(int argc, char *argv[]) {
        /* A closed pipe (fsctl stats --watch | head) ends us quietly. */
        signal(SIGPIPE, SIG_DFL);
        return exit_status(run(argc, argv));
}
