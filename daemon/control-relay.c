/* control-relay.c: the bus connection, the instance's name and the callers' check, in the
 * supervisor; calls relayed to the daemon's object over the control channel (control-relay.h). */
#include "control-relay.h"

#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include "bus-name.h"
#include "log.h"
#include "util.h"

/* Startup must not hang on a stuck bus: every synchronous call we make gets this long. */
#define BUS_CALL_TIMEOUT_USEC (5ULL * 1000 * 1000)
/* A relayed call the daemon does not answer in this time gets NoReply. */
#define RELAY_TIMEOUT_USEC (25ULL * 1000 * 1000)
/* What the daemon sends back is bounded before it reaches the bus: the largest legitimate reply
 * (GetStatistics with every opcode and 257 queues, or the introspection XML) is well below this. */
#define RELAY_MAX_WEIGHT (1024 * 1024)
#define RELAY_MAX_ERROR_MESSAGE 512
/* Calls waiting for the daemon at once; more get LimitsExceeded. */
#define RELAY_MAX_PENDING 64
/* Messages waiting in our bus connection's write queue past which the daemon's PropertiesChanged
 * are dropped: the bus reads us only as fast as its slowest subscriber lets it, and the daemon can
 * write faster (at most this many times RELAY_MAX_WEIGHT held; test-control-channel). */
#define RELAY_MAX_QUEUED_SIGNALS 8

struct ControlRelay {
        const Config *config;
        const char *instance;
        char *name;
        sd_bus *bus;     /* the bus, as the bus user; NULL until start() succeeded */
        sd_bus *channel; /* the client end of the control channel: the daemon serves the object */
        gid_t admin_gid; /* BUS_ADMIN_GROUP, looked up before the lockdown; -1 if none */
        uid_t self_uid;  /* "our own user" for check_caller_privileged(), see relay_connect() */
        unsigned pending;
        bool lost;     /* the bus went away; logged once */
        bool dropping; /* PropertiesChanged dropped since the bus's queue was last short; logged once */
};

/* What is forwarded: the members of the daemon's interface and the standard ones a client reads it
 * with, each with the arguments it takes and the reply it must give. Anything else is answered
 * here (UnknownMethod) and never reaches the daemon. */
typedef struct RelayMember {
        const char *interface, *member, *in, *out;
        bool changing; /* checked against the caller (check_caller_privileged()) */
} RelayMember;

static const RelayMember relay_members[] = {
        { BUS_INTERFACE, "SetThreads", "su", "", true },
        { BUS_INTERFACE, "SetCachePolicy", "s", "", true },
        { BUS_INTERFACE, "SetPollUSec", "u", "", true },
        { BUS_INTERFACE, "SetPollMode", "s", "", true },
        { BUS_INTERFACE, "ResetStatistics", "", "", true },
        { BUS_INTERFACE, "Upgrade", "", "", true },
        { BUS_INTERFACE, "GetStatistics", "", "ttsua{st}a(ustttat)a(ustttat)", false },
        { BUS_INTERFACE, "GetErrorCounts", "", "a(ut)", false },
        { BUS_INTERFACE, "GetLatencySums", "", "a(ut)", false },
        { "org.freedesktop.DBus.Properties", "Get", "ss", "v", false },
        { "org.freedesktop.DBus.Properties", "GetAll", "s", "a{sv}", false },
        { "org.freedesktop.DBus.Properties", "Set", "ssv", "", true },
        { "org.freedesktop.DBus.Introspectable", "Introspect", "", "s", false },
};

static const RelayMember *relay_member_find(const char *interface, const char *member) {
        for (size_t i = 0; i < ELEMENTSOF(relay_members); i++)
                if (interface && member && streq(relay_members[i].interface, interface) &&
                    streq(relay_members[i].member, member))
                        return &relay_members[i];
        return NULL;
}

/* Walks a message's body, adding up its size (every value 8 bytes, strings their length too):
 * -E2BIG past RELAY_MAX_WEIGHT, -EBADMSG for a file descriptor (the channel passes none). */
static int message_weight(sd_bus_message *m, size_t *weight, unsigned depth) {
        for (;;) {
                const char *contents;
                char type;
                int r;

                r = sd_bus_message_peek_type(m, &type, &contents);
                if (r <= 0)
                        return r; /* 0: the end of this container */
                if (type == 'h')
                        return -EBADMSG;
                if (strchr("avre", type)) {
                        if (depth >= 32)
                                return -E2BIG;
                        r = sd_bus_message_enter_container(m, type, contents);
                        if (r >= 0)
                                r = message_weight(m, weight, depth + 1);
                        if (r >= 0)
                                r = sd_bus_message_exit_container(m);
                        if (r < 0)
                                return r;
                } else {
                        union {
                                uint64_t u;
                                double d;
                                const char *s;
                        } v;
                        r = sd_bus_message_read_basic(m, type, &v);
                        if (r < 0)
                                return r;
                        if (strchr("sog", type))
                                *weight += strlen(v.s);
                }
                *weight += 8;
                if (*weight > RELAY_MAX_WEIGHT)
                        return -E2BIG;
        }
}

/* A message of the daemon's that may be relayed: the expected signature, a bounded size. */
static bool daemon_message_ok(sd_bus_message *m, const char *signature) {
        size_t weight = 0;

        if (!sd_bus_message_has_signature(m, signature))
                return false;
        if (sd_bus_message_rewind(m, true) < 0 || message_weight(m, &weight, 0) < 0)
                return false;
        return sd_bus_message_rewind(m, true) >= 0;
}

/* ---- the caller's check ---- */

/* Defence in depth behind the bus policy: changes come from root, our own user, or a member of
 * BUS_ADMIN_GROUP. The uid and groups are what the bus daemon recorded from the caller's socket
 * when it connected (GetConnectionCredentials: UnixUserID, UnixGroupIDs), not /proc, so a caller
 * cannot race them; sd-bus 252 does not hand the groups on, hence the direct call. */
static int check_caller_privileged(ControlRelay *rl, sd_bus_message *msg, sd_bus_error *error) {
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
                                if (rl->admin_gid != (gid_t) -1 && gid == rl->admin_gid)
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
        if (uid == 0 || uid == rl->self_uid || in_group)
                return 0;
        return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                 "Only root and members of the group \"%s\" may change vufsd instance \"%s\"",
                                 BUS_ADMIN_GROUP, rl->instance);
}

/* ---- the relay ---- */

typedef struct RelayCall {
        ControlRelay *relay;
        sd_bus_message *call; /* the caller's, answered when the daemon answers */
        const RelayMember *member;
} RelayCall;

static void relay_call_free(void *userdata) {
        RelayCall *c = userdata;

        c->relay->pending--;
        sd_bus_message_unref(c->call);
        free(c);
}

/* Only error names of our interface and the standard ones, with a bounded message. */
static bool error_name_ok(const char *name) {
        return name && strlen(name) < 256 &&
               (strncmp(name, "org.vufsd.Error.", 16) == 0 || strncmp(name, "org.freedesktop.DBus.Error.", 27) == 0);
}

static int on_daemon_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *out = NULL;
        RelayCall *c = userdata;
        int r;

        if (sd_bus_message_is_method_error(reply, NULL)) {
                const sd_bus_error *e = sd_bus_message_get_error(reply);
                if (!error_name_ok(e->name))
                        return sd_bus_reply_method_errorf(c->call, BUS_ERROR_FAILED,
                                                          "The daemon answered with an unexpected error");
                return sd_bus_reply_method_errorf(c->call, e->name, "%.*s", RELAY_MAX_ERROR_MESSAGE,
                                                  e->message ?: "");
        }
        if (!daemon_message_ok(reply, c->member->out)) {
                log_warning("Dropped the daemon's reply to %s.%s: not the expected signature \"%s\" or too large",
                            c->member->interface, c->member->member, c->member->out);
                return sd_bus_reply_method_errorf(c->call, BUS_ERROR_FAILED, "The daemon's reply was not valid");
        }
        r = sd_bus_message_new_method_return(c->call, &out);
        if (r >= 0)
                r = sd_bus_message_copy(out, reply, true);
        if (r >= 0)
                r = sd_bus_send(NULL, out, NULL);
        if (r < 0)
                log_debug_errno(r, "Cannot relay the reply to %s.%s: %m", c->member->interface, c->member->member);
        return 0;
}

static int relay_forward(ControlRelay *rl, sd_bus_message *msg, const RelayMember *mb, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *fwd = NULL;
        _cleanup_(sd_bus_slot_unrefp) sd_bus_slot *slot = NULL;
        RelayCall *c;
        int r;

        if (rl->pending >= RELAY_MAX_PENDING)
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "Too many calls waiting for vufsd instance \"%s\"", rl->instance);
        r = sd_bus_message_new_method_call(rl->channel, &fwd, NULL, BUS_OBJECT_PATH, mb->interface, mb->member);
        if (r >= 0)
                r = sd_bus_message_rewind(msg, true);
        if (r >= 0)
                r = sd_bus_message_copy(fwd, msg, true);
        if (r < 0)
                return r;
        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        *c = (RelayCall) { .relay = rl, .call = sd_bus_message_ref(msg), .member = mb };
        rl->pending++;
        r = sd_bus_call_async(rl->channel, &slot, fwd, on_daemon_reply, c, RELAY_TIMEOUT_USEC);
        if (r < 0) {
                relay_call_free(c);
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "vufsd instance \"%s\" cannot be reached: %s",
                                         rl->instance, strerror(-r));
        }
        /* The slot frees the call when it is answered, times out, or the channel goes. */
        (void) sd_bus_slot_set_destroy_callback(slot, relay_call_free);
        (void) sd_bus_slot_set_floating(slot, 1);
        return 1;
}

/* Every message to BUS_OBJECT_PATH on the bus comes here first. */
static int on_bus_call(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        ControlRelay *rl = userdata;
        const char *interface = sd_bus_message_get_interface(msg), *member = sd_bus_message_get_member(msg);
        const RelayMember *mb;
        int r;

        if (interface && streq(interface, "org.freedesktop.DBus.Peer"))
                return 0; /* answered by sd-bus itself */
        mb = relay_member_find(interface, member);
        if (!mb)
                return sd_bus_error_setf(error, SD_BUS_ERROR_UNKNOWN_METHOD, "Unknown method %s.%s",
                                         interface ?: "?", member ?: "?");
        if (!sd_bus_message_has_signature(msg, mb->in))
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Invalid arguments for %s: expected \"%s\"",
                                         member, mb->in);
        if (streq(mb->interface, "org.freedesktop.DBus.Properties")) {
                /* Properties of the daemon's interface only; GetAll of another (or all, "") is that. */
                const char *iface;
                r = sd_bus_message_read(msg, "s", &iface);
                if (r < 0)
                        return r;
                if (!streq(iface, BUS_INTERFACE) && !(streq(member, "GetAll") && iface[0] == '\0'))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_UNKNOWN_INTERFACE,
                                                 "No properties of interface %s here", iface);
        }
        if (mb->changing) {
                r = check_caller_privileged(rl, msg, error);
                if (r < 0)
                        return r;
        }
        return relay_forward(rl, msg, mb, error);
}

/* PropertiesChanged of the daemon's interface on BUS_OBJECT_PATH (the match), passed on to the bus. */
static int on_daemon_signal(sd_bus_message *sig, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *out = NULL;
        ControlRelay *rl = userdata;
        const char *iface;
        uint64_t queued = 0;
        int r;

        if (rl->lost || !sd_bus_message_has_signature(sig, "sa{sv}as"))
                return 0;
        (void) sd_bus_get_n_queued_write(rl->bus, &queued);
        if (queued >= RELAY_MAX_QUEUED_SIGNALS) {
                if (!rl->dropping)
                        log_warning("The bus does not take PropertiesChanged as fast as the daemon sends them: "
                                    "dropping them while %" PRIu64 " messages wait", queued);
                rl->dropping = true;
                return 0;
        }
        rl->dropping = false;
        if (sd_bus_message_read(sig, "s", &iface) < 0 || !streq(iface, BUS_INTERFACE) ||
            !daemon_message_ok(sig, "sa{sv}as"))
                return 0;
        r = sd_bus_message_new_signal(rl->bus, &out, BUS_OBJECT_PATH, "org.freedesktop.DBus.Properties",
                                      "PropertiesChanged");
        if (r >= 0)
                r = sd_bus_message_copy(out, sig, true);
        if (r >= 0)
                r = sd_bus_send(rl->bus, out, NULL);
        if (r < 0)
                log_debug_errno(r, "Cannot relay PropertiesChanged: %m");
        return 0;
}

static int on_bus_disconnected(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        ControlRelay *rl = userdata;

        if (!rl->lost)
                log_warning("Lost the connection to the D-Bus bus: %s is gone, the guest is still served",
                            rl->name);
        rl->lost = true;
        return 0;
}

/* ---- the connection (as before in bus.c, now in the supervisor) ---- */

/* Who the bus sees. Run as root, vufsd does not connect to the system bus as root: a root
 * connection may call every root-only service on the host bus (systemd's StartTransientUnit is
 * host root). The connection is made with the dedicated unprivileged identity BusUser= (default
 * BUS_DAEMON_USER) instead; dbus-daemon takes the peer's credentials at connect() (SO_PEERCRED)
 * and checks the uid sd-bus claims in AUTH EXTERNAL against them, so the whole connection belongs
 * to that user, whose only right in the policy is owning org.vufsd.Instance.* names. */
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
        /* A member of the admin group may change every instance: the bus user must not. The list
         * includes the primary group; getgrouplist() says how many when they do not fit. */
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

/* The raw system calls: only the effective ids change; real and saved stay root, so the kernel
 * keeps the permitted capabilities and the effective ones come back with the effective uid. */
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

/* Connects as id: the socket is connected, authenticated and Hello answered with the bus user's
 * effective ids, then the process is root again. -ENOTRECOVERABLE if it cannot return to root. */
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

/* Our own user, whose changes check_caller_privileged() accepts, as the bus sees it (the callers'
 * uids come from the bus too). Connected as another identity (root's BusUser=), only root itself:
 * that identity must not change other instances. */
static uid_t bus_self_uid(sd_bus *bus, const BusIdentity *id) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *unique = NULL;
        uint32_t self = 0;
        int r;

        if (id->switch_ids)
                return 0;
        r = sd_bus_get_unique_name(bus, &unique);
        if (r >= 0)
                r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                       "GetConnectionUnixUser", NULL, &reply, "s", unique);
        if (r >= 0)
                r = sd_bus_message_read(reply, "u", &self);
        return r >= 0 ? (uid_t) self : geteuid();
}

/* The daemon serves the object; it has nothing to call here. sd-bus would answer each method call
 * it sends (UnknownObject, the path repeated in the message) into this process's write queue, which
 * grows while the daemon does not read: a taken-over daemon could make the supervisor hold
 * gigabytes (test-control-channel). Its calls are dropped unanswered, Peer's included; returning
 * 1 ends sd-bus's processing of the message before it answers. */
static int on_channel_message(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        uint8_t type = 0;

        (void) sd_bus_message_get_type(m, &type);
        return type == SD_BUS_MESSAGE_METHOD_CALL;
}

/* The client end of the control channel: a peer-to-peer connection (no bus daemon, no Hello),
 * anonymous (the daemon in its user namespace would see our uid as another), and without fd
 * passing: nothing the daemon sends can put an fd into this process. */
static int channel_open(ControlRelay *rl, int channel) {
        int r;

        r = sd_bus_new(&rl->channel);
        if (r < 0) {
                safe_close(channel);
                return r;
        }
        (void) sd_bus_set_description(rl->channel, "vufsd-control");
        r = sd_bus_set_fd(rl->channel, channel, channel);
        if (r < 0) {
                safe_close(channel);
                return r;
        }
        r = sd_bus_set_anonymous(rl->channel, true);
        if (r >= 0)
                r = sd_bus_negotiate_fds(rl->channel, false);
        if (r >= 0)
                r = sd_bus_add_filter(rl->channel, NULL, on_channel_message, rl);
        if (r >= 0)
                r = sd_bus_start(rl->channel);
        if (r >= 0)
                r = sd_bus_match_signal(rl->channel, NULL, NULL, BUS_OBJECT_PATH, "org.freedesktop.DBus.Properties",
                                        "PropertiesChanged", on_daemon_signal, rl);
        return r;
}

static void relay_close(ControlRelay *rl) {
        rl->bus = sd_bus_close_unref(rl->bus);
        rl->channel = sd_bus_close_unref(rl->channel);
}

/* SupervisorControl.start: takes channel (closed when there is no control plane). */
static int relay_start(void *userdata, int channel) {
        ControlRelay *rl = userdata;
        const char *spec = rl->config->bus, *what = NULL;
        struct group *g;
        BusIdentity id;
        int r;

        if (!spec)
                spec = geteuid() == 0 ? "system" : "session";
        g = getgrnam(BUS_ADMIN_GROUP);
        rl->admin_gid = g ? g->gr_gid : (gid_t) -1;
        r = bus_instance_to_name(rl->instance, &rl->name);
        if (r < 0) {
                log_error_errno(r, "Instance name \"%s\" is not usable: it must be 1..%d bytes", rl->instance,
                                BUS_INSTANCE_MAX);
                goto fail;
        }
        if (resolve_identity(spec, rl->config->bus_user, rl->admin_gid, &id) < 0)
                goto fail;
        r = bus_connect_as(spec, &id, &rl->bus, &what);
        if (r == -ENOTRECOVERABLE)
                goto fail; /* logged; the supervisor's lockdown drops every capability next */
        if (r < 0) {
                log_warning_errno(r, "No D-Bus bus reachable (%s: %m): serving without the control plane", what);
                goto fail;
        }
        (void) sd_bus_set_method_call_timeout(rl->bus, BUS_CALL_TIMEOUT_USEC);
        rl->self_uid = bus_self_uid(rl->bus, &id);

        r = sd_bus_add_object(rl->bus, NULL, BUS_OBJECT_PATH, on_bus_call, rl);
        if (r >= 0)
                r = sd_bus_match_signal(rl->bus, NULL, "org.freedesktop.DBus.Local", NULL,
                                        "org.freedesktop.DBus.Local", "Disconnected", on_bus_disconnected, rl);
        if (r < 0) {
                log_error_errno(r, "Cannot publish %s: %m", BUS_OBJECT_PATH);
                goto fail;
        }
        r = channel_open(rl, TAKE_FD(channel));
        if (r < 0) {
                log_error_errno(r, "Cannot open the control channel: %m");
                goto fail;
        }

        /* Synchronous on purpose: the daemon goes on only after this (sandbox.h), so READY=1 implies
         * that the name is owned. */
        r = sd_bus_request_name(rl->bus, rl->name, 0);
        if (r < 0) {
                if (r == -EEXIST)
                        log_warning("%s is already owned on the %s (another vufsd with instance \"%s\"?): "
                                    "serving without the control plane", rl->name, what, rl->instance);
                else if (r == -EACCES || r == -EPERM)
                        log_warning("Not allowed to own %s on the %s (the policy lets only user \"%s\" own "
                                    "it): serving without the control plane",
                                    rl->name, what, BUS_DAEMON_USER);
                else
                        log_warning_errno(r, "Cannot own %s on the %s (%m): serving without the control plane",
                                          rl->name, what);
                goto fail;
        }
        log_info("Control interface on the %s as %s", what, rl->name);
        return 1;
fail:
        relay_close(rl);
        safe_close(channel);
        return 0;
}

static void watch_one(sd_bus *bus, struct pollfd *p, int *timeout_ms) {
        uint64_t until = UINT64_MAX;
        struct timespec ts;
        int events = sd_bus_get_events(bus);

        p->fd = sd_bus_get_fd(bus);
        p->events = (short) (events > 0 ? events : 0);
        p->revents = 0;
        if (sd_bus_get_timeout(bus, &until) >= 0 && until != UINT64_MAX) {
                uint64_t now;
                int ms;

                clock_gettime(CLOCK_MONOTONIC, &ts);
                now = (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000;
                ms = until <= now ? 0 : (int) MIN((until - now + 999) / 1000, (uint64_t) INT32_MAX);
                if (*timeout_ms < 0 || ms < *timeout_ms)
                        *timeout_ms = ms;
        }
}

static size_t relay_watch(void *userdata, struct pollfd *fds, size_t n, int *ret_timeout_ms) {
        ControlRelay *rl = userdata;
        size_t k = 0;

        if (rl->bus && k < n)
                watch_one(rl->bus, &fds[k++], ret_timeout_ms);
        if (rl->channel && k < n)
                watch_one(rl->channel, &fds[k++], ret_timeout_ms);
        return k;
}

/* A bounded number of messages per round: signals and the daemon's notifications go on too. */
static void relay_dispatch(void *userdata) {
        ControlRelay *rl = userdata;
        int r;

        for (unsigned i = 0; rl->bus && i < 64; i++) {
                r = sd_bus_process(rl->bus, NULL);
                if (r <= 0)
                        break;
        }
        for (unsigned i = 0; rl->channel && i < 64; i++) {
                /* When the daemon closes its end (it is exiting), sd-bus answers the calls still
                 * waiting with an error, and the closed channel is no longer watched. */
                r = sd_bus_process(rl->channel, NULL);
                if (r <= 0)
                        break;
        }
}

static void relay_stop(void *userdata) {
        relay_close(userdata);
}

/* Calls waiting on the old channel are answered with an error by sd-bus when it is closed. */
static void relay_reopen(void *userdata, int channel) {
        ControlRelay *rl = userdata;
        int r;

        rl->channel = sd_bus_close_unref(rl->channel);
        if (!rl->bus) {
                safe_close(channel);
                return;
        }
        r = channel_open(rl, channel);
        if (r < 0) {
                log_error_errno(r, "Cannot open the new control channel: %m");
                rl->channel = sd_bus_close_unref(rl->channel);
        }
}

void control_relay_supervisor(ControlRelay *r, SupervisorControl *ret) {
        *ret = (SupervisorControl) {
                .userdata = r,
                .start = relay_start,
                .watch = relay_watch,
                .dispatch = relay_dispatch,
                .stop = relay_stop,
                .reopen = relay_reopen,
        };
}

int control_relay_new(ControlRelay **ret, const Config *c, const char *instance) {
        ControlRelay *r = calloc(1, sizeof *r);

        if (!r)
                return -ENOMEM;
        r->config = c;
        r->instance = instance;
        r->admin_gid = (gid_t) -1;
        *ret = r;
        return 0;
}

ControlRelay *control_relay_free(ControlRelay *r) {
        if (!r)
                return NULL;
        relay_close(r);
        free(r->name);
        free(r);
        return NULL;
}
