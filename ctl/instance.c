/* instance.c: fsctl's bus connection: connecting, finding the target instance, checking its owner,
 * calling its methods, explaining failures. */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bus-name.h"
#include "fsctl.h"
#include "util.h"

const char *bus_label(void) {
        switch (arg_bus_type) {
        case BUS_SYSTEM:
                return "system bus";
        case BUS_USER:
                return "user bus";
        default:
                return arg_address;
        }
}


/* ---- errors ---- */

/* Explains a failed call and returns the errno of its exit code. */
int bus_error_errno(const sd_bus_error *e, int r, const char *what) {
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

int open_bus(sd_bus **ret) {
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

void strv_free(char **l) {
        for (char **p = l; p && *p; p++)
                free(*p);
        free(l);
}
void strv_freep(char ***l) {
        strv_free(*l);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Bus names of the running instances, sorted. Returns their number or a negative errno. */
int list_instance_names(sd_bus *bus, char ***ret) {
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
int resolve_target(sd_bus *bus, char **ret_name) {
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

/* The real uid of a process ("Uid:" in /proc/PID/status), or -1. */
static int64_t process_real_uid(pid_t pid) {
        char path[64], line[256];
        int64_t uid = -1;
        FILE *f;

        snprintf(path, sizeof path, "/proc/%u/status", (unsigned) pid);
        f = fopen(path, "re");
        if (!f)
                return -1;
        while (fgets(line, sizeof line, f))
                if (strncmp(line, "Uid:", 4) == 0) {
                        unsigned long v;
                        if (sscanf(line + 4, "%lu", &v) == 1)
                                uid = (int64_t) v;
                        break;
                }
        fclose(f);
        return uid;
}

static int bus_owner_pid(sd_bus *bus, const char *owner, uint32_t *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                               "GetConnectionUnixProcessID", &e, &reply, "s", owner);
        if (r >= 0)
                r = sd_bus_message_read(reply, "u", ret);
        return r < 0 ? bus_error_errno(&e, r, "finding the instance's owner") : 0;
}

/* The bus user's connection is trusted only when the process behind it is a root process: root's
 * vufsd connects as BUS_DAEMON_USER from its supervisor (control-relay.c), which runs as root with
 * only its effective ids switched for the connect(). Anyone who merely runs code as that user (the
 * policy lets the user own every instance's name) is a process of that user, and is refused. The
 * process is read while its connection still owns the name and still names that pid, so a pid
 * reused meanwhile is not mistaken for it. Returns 0 or a negative errno. */
static int check_owner_process(sd_bus *bus, const char *name, uint32_t uid) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *owner = NULL;
        const char *unique;
        uint32_t pid, again;
        int64_t real;
        int r;

        r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                               "GetNameOwner", &e, &reply, "s", name);
        if (r >= 0)
                r = sd_bus_message_read(reply, "s", &unique);
        if (r < 0)
                return bus_error_errno(&e, r, "finding the instance's owner");
        owner = strdup(unique);
        if (!owner)
                return -ENOMEM;
        r = bus_owner_pid(bus, owner, &pid);
        if (r < 0)
                return r;
        real = process_real_uid((pid_t) pid);
        r = bus_owner_pid(bus, owner, &again);
        if (r < 0)
                return r;
        if (again != pid)
                real = -1;
        if (real == 0)
                return 0;
        fprintf(stderr,
                "fsctl: %s is owned by a process running as uid %" PRId64 " (pid %" PRIu32 ", bus user %" PRIu32
                "), not by root's vufsd: not talking to it (only root's vufsd connects as user \"%s\"; "
                "docs/dbus.md)\n",
                name, real, pid, uid, BUS_DAEMON_USER);
        return ERR_FAILED;
}

/* Whoever owns an instance's name reads the caller's changes and answers with whatever state it
 * likes, so fsctl talks only to the owner that vufsd would be:
 * - on the system bus, root or BUS_DAEMON_USER (what vufsd as root connects as). The policy lets
 *   nobody else own the name, but an old or hand-written policy might; BUS_DAEMON_USER only from
 *   a root process (check_owner_process());
 * - on the session bus (--user), the caller's own uid: the user's vufsd (systemctl --user start
 *   vufsd@NAME.socket) runs as the user. A session bus normally admits only its user, but one
 *   started with a looser configuration, or reached through a DBUS_SESSION_BUS_ADDRESS pointing
 *   at another user's bus, would let another uid answer in the user's place.
 * An explicit --address is the caller's own choice of bus and is not checked.
 * Returns 0 or a negative errno. */
int check_owner(sd_bus *bus, const char *name) {
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
                return check_owner_process(bus, name, uid);
        fprintf(stderr,
                "fsctl: %s is owned by uid %" PRIu32 ", not by vufsd (root or user \"%s\"): not "
                "talking to it (check the bus policy, docs/dbus.md)\n",
                name, uid, BUS_DAEMON_USER);
        return ERR_FAILED;
}


int call_simple(sd_bus *bus, const char *name, const char *what, const char *method, const char *sig, ...) {
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
