/* test-bus.c: the D-Bus control interface of a running vufsd over a private dbus-daemon. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "bus-name.h"
#include "frontend.h"
#include "fuse-client.h"
#include "stats-histogram.h"
#include "harness.h"
#include "util.h"
#include "test-main.h"

/* After util.h: GLib redefines MIN and MAX the same way, without a warning. */
#include <gio/gio.h>

#define HIST_BUCKETS STATS_HIST_BUCKETS /* stats-histogram.h */

/* ---- a private bus ---- */

typedef struct TestBus {
        char *dir;
        char *address;
        pid_t pid;
} TestBus;

static int64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Starts dbus-daemon with a session-like configuration that lets every user in (the daemon's own
 * access check is then what stands between a caller and a change). */
static void test_bus_start(TestBus *tb) {
        char tmpl[] = "/tmp/vufsd-bus.XXXXXX", conf[256], buf[512];
        int pipefd[2];
        ssize_t n;
        size_t len = 0;
        FILE *f;

        ck_assert_ptr_nonnull(mkdtemp(tmpl));
        /* vufsd with --bus-user connects as that (unprivileged) user: the socket must be reachable. */
        ck_assert_int_eq(chmod(tmpl, 0755), 0);
        tb->dir = strdup(tmpl);
        snprintf(conf, sizeof conf, "%s/bus.conf", tmpl);
        f = fopen(conf, "we");
        ck_assert_ptr_nonnull(f);
        fprintf(f,
                "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
                " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
                "<busconfig>\n"
                "  <type>session</type>\n"
                "  <listen>unix:path=%s/bus.sock</listen>\n"
                "  <auth>EXTERNAL</auth>\n"
                "  <policy context=\"default\">\n"
                "    <allow user=\"*\"/>\n"
                "    <allow send_destination=\"*\" eavesdrop=\"true\"/>\n"
                "    <allow eavesdrop=\"true\"/>\n"
                "    <allow own=\"*\"/>\n"
                "  </policy>\n"
                "</busconfig>\n",
                tmpl);
        fclose(f);

        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        tb->pid = fork();
        ck_assert_int_ge(tb->pid, 0);
        if (tb->pid == 0) {
                char conf_arg[300], fd_arg[32], log[300];
                int logfd;
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                dup2(pipefd[1], 3);
                /* Its complaints (rlimits in containers, rejected messages) go to a file. */
                snprintf(log, sizeof log, "%s/dbus-daemon.log", tmpl);
                logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                if (logfd >= 0)
                        dup2(logfd, STDERR_FILENO);
                snprintf(conf_arg, sizeof conf_arg, "--config-file=%s", conf);
                snprintf(fd_arg, sizeof fd_arg, "--print-address=3");
                execlp("dbus-daemon", "dbus-daemon", conf_arg, "--nofork", fd_arg, (char *) NULL);
                _exit(127);
        }
        close(pipefd[1]);
        while (len < sizeof buf - 1 && (n = read(pipefd[0], buf + len, sizeof buf - 1 - len)) > 0) {
                len += (size_t) n;
                if (memchr(buf, '\n', len))
                        break;
        }
        close(pipefd[0]);
        buf[len] = '\0';
        ck_assert_msg(strchr(buf, '\n'), "dbus-daemon printed no address (is the dbus package installed?)");
        *strchr(buf, '\n') = '\0';
        tb->address = strdup(buf);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        if (flag == FTW_DP)
                rmdir(path);
        else
                unlink(path);
        return 0;
}

static void test_bus_stop(TestBus *tb) {
        if (tb->pid > 0) {
                kill(tb->pid, SIGTERM);
                waitpid(tb->pid, NULL, 0);
                tb->pid = 0;
        }
        if (tb->dir)
                (void) nftw(tb->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        free(tb->dir);
        free(tb->address);
        *tb = (TestBus) {};
}

static sd_bus *bus_connect(const char *address) {
        sd_bus *bus = NULL;

        ck_assert_int_ge(sd_bus_new(&bus), 0);
        ck_assert_int_ge(sd_bus_set_address(bus, address), 0);
        ck_assert_int_ge(sd_bus_set_bus_client(bus, true), 0);
        ck_assert_int_ge(sd_bus_start(bus), 0);
        return bus;
}

/* ---- fixture: a bus, a harness, vufsd on both ---- */

static TestBus tb;
static FeHarness *h;
static sd_bus *bus;
static char *bus_name;

static void setup(void) {
        test_bus_start(&tb);
        ck_assert_int_eq(fe_harness_new(&h), 0);
        bus = bus_connect(tb.address);
}

static void teardown(void) {
        bus = sd_bus_flush_close_unref(bus);
        h = fe_harness_free(h);
        test_bus_stop(&tb);
        free(bus_name);
        bus_name = NULL;
}

static bool name_has_owner(sd_bus *b, const char *name) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        int has = 0;

        if (sd_bus_call_method(b, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                               "NameHasOwner", &e, &reply, "s", name) < 0)
                return false;
        (void) sd_bus_message_read(reply, "b", &has);
        sd_bus_message_unref(reply);
        return has;
}

/* Starts vufsd on the private bus as instance `instance` with more options; waits for its name. */
static void spawn_on_bus(const char *instance, const char *const *more) {
        const char *argv[24];
        unsigned n = 0;
        int64_t deadline;
        int r;

        argv[n++] = "--bus";
        argv[n++] = tb.address;
        argv[n++] = "--instance";
        argv[n++] = instance;
        argv[n++] = "--keep-listening";
        for (unsigned i = 0; more && more[i] && n < ELEMENTSOF(argv) - 1; i++)
                argv[n++] = more[i];
        argv[n] = NULL;
        r = fe_harness_spawn_vufsd(h, argv);
        ck_assert_msg(r == 0, "starting vufsd ($VUFSD_BINARY=%s): %s", getenv("VUFSD_BINARY"), strerror(-r));
        free(bus_name);
        ck_assert_int_eq(bus_instance_to_name(instance, &bus_name), 0);
        /* The socket comes first (launchers wait for it; main.c), the name is taken right after:
         * wait for it. */
        deadline = now_ms() + 5000;
        while (!name_has_owner(bus, bus_name)) {
                ck_assert_msg(now_ms() < deadline, "vufsd never owned %s", bus_name);
                usleep(10000);
        }
}

static char *get_string(const char *prop) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        char *s = NULL;
        int r = sd_bus_get_property_string(bus, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, prop, &e, &s);
        ck_assert_msg(r >= 0, "Get %s: %s", prop, e.message ?: strerror(-r));
        return s;
}

static uint64_t get_number(const char *prop, char type) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        int r;

        if (type == 'u') {
                uint32_t u = 0;
                r = sd_bus_get_property_trivial(bus, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, prop, &e, 'u', &u);
                ck_assert_msg(r >= 0, "Get %s: %s", prop, e.message ?: strerror(-r));
                return u;
        }
        if (type == 'b') {
                int b = 0;
                r = sd_bus_get_property_trivial(bus, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, prop, &e, 'b', &b);
                ck_assert_msg(r >= 0, "Get %s: %s", prop, e.message ?: strerror(-r));
                return (uint64_t) b;
        }
        uint64_t t = 0;
        r = sd_bus_get_property_trivial(bus, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, prop, &e, 't', &t);
        ck_assert_msg(r >= 0, "Get %s: %s", prop, e.message ?: strerror(-r));
        return t;
}

static void assert_string_prop(const char *prop, const char *want) {
        _cleanup_free_ char *s = get_string(prop);
        ck_assert_msg(streq(s, want), "%s is \"%s\", expected \"%s\"", prop, s, want);
}

/* Calls a method; returns 0 or the error name's errno with *ret_error filled. */
static int call_set_threads(sd_bus *b, const char *mode, uint32_t size, sd_bus_error *e) {
        return sd_bus_call_method(b, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, "SetThreads", e, NULL, "su", mode,
                                  size);
}

static int call_set_cache(sd_bus *b, const char *policy, sd_bus_error *e) {
        return sd_bus_call_method(b, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, "SetCachePolicy", e, NULL, "s",
                                  policy);
}

static int call_set_poll_us(sd_bus *b, uint32_t usec, sd_bus_error *e) {
        return sd_bus_call_method(b, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, "SetPollUSec", e, NULL, "u", usec);
}

static int call_set_poll_mode(sd_bus *b, const char *mode, sd_bus_error *e) {
        return sd_bus_call_method(b, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, "SetPollMode", e, NULL, "s", mode);
}

static void set_poll_mode_ok(const char *mode) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        int r = call_set_poll_mode(bus, mode, &e);
        ck_assert_msg(r >= 0, "SetPollMode(%s): %s", mode, e.message ?: strerror(-r));
}

static void set_poll_us_ok(uint32_t usec) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        int r = call_set_poll_us(bus, usec, &e);
        ck_assert_msg(r >= 0, "SetPollUSec(%u): %s", usec, e.message ?: strerror(-r));
}

static void set_threads_ok(const char *mode, uint32_t size) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        int r = call_set_threads(bus, mode, size, &e);
        ck_assert_msg(r >= 0, "SetThreads(%s, %u): %s", mode, size, e.message ?: strerror(-r));
}

static void set_cache_ok(const char *policy) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        int r = call_set_cache(bus, policy, &e);
        ck_assert_msg(r >= 0, "SetCachePolicy(%s): %s", policy, e.message ?: strerror(-r));
}

/* ---- statistics ---- */

typedef struct Row {
        uint32_t index;
        char name[32];
        uint64_t requests, bytes, errors, hist[HIST_BUCKETS];
} Row;

typedef struct Stats {
        uint64_t timestamp, in_flight;
        char mode[16];
        uint32_t pool_size;
        uint64_t mode_switches, inline_runs, pool_runs, auto_inline, auto_pool, live_workers, poll_hits;
        uint64_t polls, poll_usec, poll_contended;
        bool has_poll_hits, has_polls, has_poll_contended;
        unsigned n_exec;
        Row ops[64], queues[32];
        unsigned n_ops, n_queues;
} Stats;

static void read_rows(sd_bus_message *m, Row *rows, unsigned max, unsigned *n) {
        *n = 0;
        ck_assert_int_ge(sd_bus_message_enter_container(m, 'a', "(ustttat)"), 0);
        while (sd_bus_message_enter_container(m, 'r', "ustttat") > 0) {
                const char *name;
                const void *hist;
                size_t sz;
                Row *r = &rows[*n];
                ck_assert_uint_lt(*n, max);
                ck_assert_int_ge(sd_bus_message_read(m, "usttt", &r->index, &name, &r->requests, &r->bytes,
                                                     &r->errors), 0);
                ck_assert_int_ge(sd_bus_message_read_array(m, 't', &hist, &sz), 0);
                ck_assert_uint_eq(sz, sizeof r->hist);
                memcpy(r->hist, hist, sz);
                snprintf(r->name, sizeof r->name, "%s", name);
                ck_assert_int_ge(sd_bus_message_exit_container(m), 0);
                (*n)++;
        }
        ck_assert_int_ge(sd_bus_message_exit_container(m), 0);
}

static void get_stats(Stats *s) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *m = NULL;
        const char *mode, *k;
        uint64_t v;
        int r;

        *s = (Stats) {};
        r = sd_bus_call_method(bus, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, "GetStatistics", &e, &m, NULL);
        ck_assert_msg(r >= 0, "GetStatistics: %s", e.message ?: strerror(-r));
        ck_assert_str_eq(sd_bus_message_get_signature(m, true), "ttsua{st}a(ustttat)a(ustttat)");
        ck_assert_int_ge(sd_bus_message_read(m, "ttsu", &s->timestamp, &s->in_flight, &mode, &s->pool_size), 0);
        snprintf(s->mode, sizeof s->mode, "%s", mode);
        ck_assert_int_ge(sd_bus_message_enter_container(m, 'a', "{st}"), 0);
        while (sd_bus_message_read(m, "{st}", &k, &v) > 0) {
                s->n_exec++;
                if (streq(k, "mode_switches"))
                        s->mode_switches = v;
                else if (streq(k, "inline_runs"))
                        s->inline_runs = v;
                else if (streq(k, "pool_runs"))
                        s->pool_runs = v;
                else if (streq(k, "auto_inline"))
                        s->auto_inline = v;
                else if (streq(k, "auto_pool"))
                        s->auto_pool = v;
                else if (streq(k, "live_workers"))
                        s->live_workers = v;
                else if (streq(k, "poll_hits")) {
                        s->poll_hits = v;
                        s->has_poll_hits = true;
                } else if (streq(k, "polls")) {
                        s->polls = v;
                        s->has_polls = true;
                } else if (streq(k, "poll_usec"))
                        s->poll_usec = v;
                else if (streq(k, "poll_contended")) {
                        s->poll_contended = v;
                        s->has_poll_contended = true;
                }
        }
        ck_assert_int_ge(sd_bus_message_exit_container(m), 0);
        read_rows(m, s->ops, ELEMENTSOF(s->ops), &s->n_ops);
        read_rows(m, s->queues, ELEMENTSOF(s->queues), &s->n_queues);
        sd_bus_message_unref(m);
}

/* GetErrorCounts into counts[errno] (the daemon's table ends below 512, where EIO takes over);
 * returns the sum. */
static uint64_t get_error_counts(uint64_t counts[512]) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *m = NULL;
        uint64_t count, total = 0;
        uint32_t err, last = 0;
        bool first = true;
        int r;

        memset(counts, 0, 512 * sizeof *counts);
        r = sd_bus_call_method(bus, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, "GetErrorCounts", &e, &m, NULL);
        ck_assert_msg(r >= 0, "GetErrorCounts: %s", e.message ?: strerror(-r));
        ck_assert_str_eq(sd_bus_message_get_signature(m, true), "a(ut)");
        ck_assert_int_ge(sd_bus_message_enter_container(m, 'a', "(ut)"), 0);
        while ((r = sd_bus_message_read(m, "(ut)", &err, &count)) > 0) {
                ck_assert_uint_lt(err, 512);
                ck_assert_msg(first || err > last, "errno %u after %u: not in order", err, last);
                ck_assert_uint_gt(count, 0); /* only non-zero entries */
                counts[err] = count;
                total += count;
                last = err;
                first = false;
        }
        ck_assert_int_ge(r, 0);
        ck_assert_int_ge(sd_bus_message_exit_container(m), 0);
        sd_bus_message_unref(m);
        return total;
}

static const Row *find_op(const Stats *s, uint32_t op) {
        for (unsigned i = 0; i < s->n_ops; i++)
                if (s->ops[i].index == op)
                        return &s->ops[i];
        return NULL;
}

static uint64_t hist_sum(const Row *r) {
        uint64_t t = 0;
        for (unsigned b = 0; b < HIST_BUCKETS; b++)
                t += r->hist[b];
        return t;
}

/* ---- frontend ---- */

static Frontend *fe_start_default(void) {
        Frontend *fe = NULL;
        FeOptions o;
        int r;

        fe_options_init(&o);
        r = fe_connect_and_start(&fe, h->socket_path, &o);
        ck_assert_msg(r == 0, "frontend start: %s", fe ? fe->error : strerror(-r));
        return fe;
}

static FeFuse *fuse_client(Frontend *fe) {
        FeFuse *c = NULL;
        ck_assert_int_eq(fe_fuse_new(&c, fe), 0);
        int r = fe_fuse_init(c);
        ck_assert_msg(r == 0, "INIT: %d %s", r, c->last_problem);
        return c;
}

static void roundtrip(FeFuse *c, const char *name, size_t size, uint32_t seed) {
        int r = fe_fuse_roundtrip(c, name, size, seed);
        ck_assert_msg(r == 0, "roundtrip %s: %s", name, c->last_problem);
        ck_assert_msg(c->proto_errors == 0, "protocol errors: %s", c->last_problem);
}

/* ---- tests ---- */

START_TEST(test_properties) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        static const char *const more[] = { "--threads", "pool", "--thread-pool-size", "3", "--cache", "metadata",
                                            "--num-request-queues", "2", "--xattr", "--poll-us", "30",
                                            "--max-inode-fds", "77", NULL };
        char **options = NULL;
        bool has_max_nodes = false, has_xattr = false, has_privileged = false, has_max_inode_fds = false;
        uint64_t up1, up2;

        spawn_on_bus("props-1", more);
        assert_string_prop("Instance", "props-1");
        assert_string_prop("Version", PACKAGE_VERSION);
        assert_string_prop("SharedDirectory", h->share);
        assert_string_prop("Socket", h->socket_path);
        assert_string_prop("ThreadMode", "pool");
        assert_string_prop("CachePolicy", "metadata");
        ck_assert_uint_eq(get_number("PoolSize", 'u'), 3);
        ck_assert_uint_eq(get_number("PollUSec", 'u'), 30);
        assert_string_prop("PollMode", "fixed");
        ck_assert_uint_eq(get_number("RequestQueues", 'u'), 2);
        ck_assert_uint_eq(get_number("RunningQueues", 'u'), 0);
        ck_assert_uint_eq(get_number("Connections", 'u'), 0);
        ck_assert_uint_eq(get_number("Connected", 'b'), 0);
        ck_assert_uint_eq(get_number("NegotiatedFeatures", 't'), 0);
        ck_assert_uint_eq(get_number("NegotiatedProtocolFeatures", 't'), 0);
        ck_assert_uint_eq(get_number("InFlight", 't'), 0);
        up1 = get_number("UptimeUSec", 't');
        usleep(20000);
        up2 = get_number("UptimeUSec", 't');
        ck_assert_uint_gt(up1, 0);
        ck_assert_uint_ge(up2, up1 + 20000);
        ck_assert_int_ge(sd_bus_get_property_strv(bus, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, "Options", &e,
                                                  &options), 0);
        for (char **o = options; o && *o; o++) {
                has_xattr |= streq(*o, "xattr");
                has_max_nodes |= streq(*o, "max_nodes=1000000"); /* the node budget's default */
                has_privileged |= streq(*o, "privileged_files=map"); /* --privileged-files in force */
                has_max_inode_fds |= streq(*o, "max_inode_fds=77");
                free(*o);
        }
        free(options);
        ck_assert_msg(has_xattr, "Options lacks xattr");
        ck_assert_msg(has_max_nodes, "Options lacks max_nodes=1000000");
        ck_assert_msg(has_privileged, "Options lacks privileged_files=map");
        ck_assert_msg(has_max_inode_fds, "Options lacks max_inode_fds=77");
        ck_assert_uint_eq(get_number("InodeFdsMax", 't'), 77);
        ck_assert_uint_eq(get_number("LocksPending", 't'), 0); /* no migration: none */
        ck_assert_uint_eq(get_number("LocksLost", 't'), 0);
        ck_assert_uint_eq(get_number("InodeFdsCached", 't'), 0); /* the root keeps its fd outside the clock */

        /* Read-only: Set is refused. */
        sd_bus_error_free(&e);
        ck_assert_int_lt(sd_bus_set_property(bus, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, "CachePolicy", &e, "s",
                                             "never"),
                         0);
        ck_assert_str_eq(e.name, SD_BUS_ERROR_PROPERTY_READ_ONLY);
        assert_string_prop("CachePolicy", "metadata");
        sd_bus_error_free(&e);
        ck_assert_int_lt(sd_bus_set_property(bus, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, "PollUSec", &e, "u", 5),
                         0);
        ck_assert_str_eq(e.name, SD_BUS_ERROR_PROPERTY_READ_ONLY);
        ck_assert_uint_eq(get_number("PollUSec", 'u'), 30);

        /* The frontend connecting shows in the properties. */
        Frontend *fe = fe_start_default();
        ck_assert_uint_eq(get_number("Connected", 'b'), 1);
        ck_assert_uint_eq(get_number("Connections", 'u'), 1);
        ck_assert_uint_eq(get_number("NegotiatedFeatures", 't'), fe->features);
        ck_assert_uint_eq(get_number("NegotiatedProtocolFeatures", 't'), fe->protocol);
        ck_assert_uint_ge(get_number("RunningQueues", 'u'), 2);
        fe_free(fe);
}
END_TEST

/* Member by member: what the running daemon introspects equals dbus/org.vufsd.Daemon1.xml. */
static const char *emits_changed(GDBusPropertyInfo *p) {
        const char *v = p->annotations
                                ? g_dbus_annotation_info_lookup(p->annotations,
                                                                "org.freedesktop.DBus.Property.EmitsChangedSignal")
                                : NULL;
        return v ?: "true";
}

static void compare_args(const char *what, GDBusArgInfo **a, GDBusArgInfo **b) {
        unsigned na = 0, nb = 0;
        while (a && a[na])
                na++;
        while (b && b[nb])
                nb++;
        ck_assert_msg(na == nb, "%s: %u arguments in the daemon, %u in the XML", what, na, nb);
        for (unsigned i = 0; i < na; i++) {
                ck_assert_msg(streq(a[i]->signature, b[i]->signature), "%s arg %u: %s vs %s", what, i,
                              a[i]->signature, b[i]->signature);
                ck_assert_msg(a[i]->name && b[i]->name && streq(a[i]->name, b[i]->name), "%s arg %u: name %s vs %s",
                              what, i, a[i]->name, b[i]->name);
        }
}

START_TEST(test_introspection) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        const char *xml_path = getenv("VUFSD_DBUS_XML");
        g_autoptr(GError) err = NULL;
        g_autofree char *file_xml = NULL;
        GDBusNodeInfo *live, *ref;
        GDBusInterfaceInfo *li, *ri;
        sd_bus_message *reply = NULL;
        const char *live_xml;
        unsigned n;

        ck_assert_msg(xml_path, "VUFSD_DBUS_XML is not set");
        ck_assert_msg(g_file_get_contents(xml_path, &file_xml, NULL, &err), "%s: %s", xml_path,
                      err ? err->message : "?");
        spawn_on_bus("introspect", NULL);
        ck_assert_int_ge(sd_bus_call_method(bus, bus_name, BUS_OBJECT_PATH, "org.freedesktop.DBus.Introspectable",
                                            "Introspect", &e, &reply, NULL),
                         0);
        ck_assert_int_ge(sd_bus_message_read(reply, "s", &live_xml), 0);

        live = g_dbus_node_info_new_for_xml(live_xml, &err);
        ck_assert_msg(live, "daemon introspection does not parse: %s", err ? err->message : "?");
        ref = g_dbus_node_info_new_for_xml(file_xml, &err);
        ck_assert_msg(ref, "%s does not parse: %s", xml_path, err ? err->message : "?");
        li = g_dbus_node_info_lookup_interface(live, BUS_INTERFACE);
        ri = g_dbus_node_info_lookup_interface(ref, BUS_INTERFACE);
        ck_assert_msg(li, "the daemon does not introspect %s", BUS_INTERFACE);
        ck_assert_msg(ri, "%s does not describe %s", xml_path, BUS_INTERFACE);

        /* Methods: same set, same arguments in the same order. */
        for (n = 0; ri->methods && ri->methods[n]; n++) {
                GDBusMethodInfo *rm = ri->methods[n], *lm = g_dbus_interface_info_lookup_method(li, rm->name);
                ck_assert_msg(lm, "method %s is in the XML but not in the daemon", rm->name);
                compare_args(rm->name, lm->in_args, rm->in_args);
                compare_args(rm->name, lm->out_args, rm->out_args);
        }
        for (unsigned i = 0; li->methods && li->methods[i]; i++)
                ck_assert_msg(g_dbus_interface_info_lookup_method(ri, li->methods[i]->name),
                              "method %s is in the daemon but not in the XML", li->methods[i]->name);
        ck_assert_uint_eq(n, 9);

        /* Properties: type, access and change signalling. */
        for (n = 0; ri->properties && ri->properties[n]; n++) {
                GDBusPropertyInfo *rp = ri->properties[n], *lp = g_dbus_interface_info_lookup_property(li, rp->name);
                ck_assert_msg(lp, "property %s is in the XML but not in the daemon", rp->name);
                ck_assert_msg(streq(lp->signature, rp->signature), "%s: type %s vs %s", rp->name, lp->signature,
                              rp->signature);
                ck_assert_msg(lp->flags == rp->flags, "%s: access differs", rp->name);
                ck_assert_msg(streq(emits_changed(lp), emits_changed(rp)), "%s: EmitsChangedSignal %s vs %s",
                              rp->name, emits_changed(lp), emits_changed(rp));
        }
        for (unsigned i = 0; li->properties && li->properties[i]; i++)
                ck_assert_msg(g_dbus_interface_info_lookup_property(ri, li->properties[i]->name),
                              "property %s is in the daemon but not in the XML", li->properties[i]->name);
        ck_assert_uint_eq(n, 34);

        /* Signals: none of its own (PropertiesChanged belongs to org.freedesktop.DBus.Properties). */
        ck_assert(!(li->signals && li->signals[0]));
        ck_assert(!(ri->signals && ri->signals[0]));

        g_dbus_node_info_unref(live);
        g_dbus_node_info_unref(ref);
        sd_bus_message_unref(reply);
}
END_TEST

START_TEST(test_set_threads) {
        static const char *const more[] = { "--threads", "inline", NULL };

        spawn_on_bus("threads", more);
        assert_string_prop("ThreadMode", "inline");
        uint64_t default_size = get_number("PoolSize", 'u');
        ck_assert_uint_ge(default_size, 1);

        set_threads_ok("pool", 5);
        assert_string_prop("ThreadMode", "pool");
        ck_assert_uint_eq(get_number("PoolSize", 'u'), 5);
        set_threads_ok("inline", 0); /* keeps the size for later */
        assert_string_prop("ThreadMode", "inline");
        ck_assert_uint_eq(get_number("PoolSize", 'u'), 5);
        set_threads_ok("auto", 0); /* 0 = keep the current size */
        assert_string_prop("ThreadMode", "auto");
        ck_assert_uint_eq(get_number("PoolSize", 'u'), 5);
        set_threads_ok("auto", 1024);
        ck_assert_uint_eq(get_number("PoolSize", 'u'), 1024);
        set_threads_ok("pool", 1);
        ck_assert_uint_eq(get_number("PoolSize", 'u'), 1);

        static const struct {
                const char *mode;
                uint32_t size;
                const char *error, *mentions;
        } bad[] = {
                { "turbo", 2, BUS_ERROR_INVALID_MODE, "turbo" },
                { "", 2, BUS_ERROR_INVALID_MODE, "inline, pool or auto" },
                { "POOL", 2, BUS_ERROR_INVALID_MODE, "POOL" },
                { "pool", 1025, BUS_ERROR_OUT_OF_RANGE, "1025" },
                { "auto", 4000000000u, BUS_ERROR_OUT_OF_RANGE, "1..1024" },
                { "inline", 5000, BUS_ERROR_OUT_OF_RANGE, "5000" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
                int r = call_set_threads(bus, bad[i].mode, bad[i].size, &e);
                ck_assert_int_lt(r, 0);
                ck_assert_msg(e.name && streq(e.name, bad[i].error), "SetThreads(%s, %u): %s, expected %s",
                              bad[i].mode, bad[i].size, e.name, bad[i].error);
                ck_assert_msg(e.message && strstr(e.message, bad[i].mentions), "message \"%s\" lacks \"%s\"",
                              e.message, bad[i].mentions);
        }
        /* Refused calls changed nothing. */
        assert_string_prop("ThreadMode", "pool");
        ck_assert_uint_eq(get_number("PoolSize", 'u'), 1);

        /* A wrong signature is refused by sd-bus itself. */
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        ck_assert_int_lt(sd_bus_call_method(bus, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, "SetThreads", &e, NULL,
                                            "s", "pool"),
                         0);
        ck_assert_str_eq(e.name, SD_BUS_ERROR_INVALID_ARGS);
}
END_TEST

START_TEST(test_set_poll_us) {
        spawn_on_bus("poll-set", NULL);
        /* The default: auto, whose longest window PollUSec shows. */
        assert_string_prop("PollMode", "auto");
        ck_assert_uint_eq(get_number("PollUSec", 'u'), 50);

        static const uint32_t ok[] = { 50, 1, 1000000, 0, 7 };
        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                set_poll_us_ok(ok[i]);
                ck_assert_uint_eq(get_number("PollUSec", 'u'), ok[i]);
                assert_string_prop("PollMode", ok[i] ? "fixed" : "off");
        }

        static const uint32_t bad[] = { 1000001, 2000000, UINT32_MAX };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
                char num[16];

                ck_assert_int_lt(call_set_poll_us(bus, bad[i], &e), 0);
                ck_assert_msg(e.name && streq(e.name, BUS_ERROR_OUT_OF_RANGE), "SetPollUSec(%u): %s", bad[i],
                              e.name);
                snprintf(num, sizeof num, "%u", bad[i]);
                ck_assert_msg(e.message && strstr(e.message, num) && strstr(e.message, "0..1000000 microseconds"),
                              "message \"%s\" lacks the value or the range", e.message);
        }
        /* Refused calls changed nothing. */
        ck_assert_uint_eq(get_number("PollUSec", 'u'), 7);

        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        ck_assert_int_lt(sd_bus_call_method(bus, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, "SetPollUSec", &e, NULL,
                                            "s", "50"),
                         0);
        ck_assert_str_eq(e.name, SD_BUS_ERROR_INVALID_ARGS);
        ck_assert_uint_eq(get_number("PollUSec", 'u'), 7);
}
END_TEST

START_TEST(test_set_poll_mode) {
        spawn_on_bus("poll-mode", NULL);
        /* "fixed" before any window was set: the default fixed window. */
        set_poll_mode_ok("fixed");
        assert_string_prop("PollMode", "fixed");
        ck_assert_uint_eq(get_number("PollUSec", 'u'), 50);
        set_poll_us_ok(20);
        set_poll_mode_ok("off");
        assert_string_prop("PollMode", "off");
        ck_assert_uint_eq(get_number("PollUSec", 'u'), 0);
        set_poll_mode_ok("auto");
        assert_string_prop("PollMode", "auto");
        ck_assert_uint_eq(get_number("PollUSec", 'u'), 50);
        /* "fixed" returns to the last window set, not to the default. */
        set_poll_mode_ok("fixed");
        ck_assert_uint_eq(get_number("PollUSec", 'u'), 20);

        static const char *const bad[] = { "Auto", "", "on", "50", "fixed " };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;

                ck_assert_int_lt(call_set_poll_mode(bus, bad[i], &e), 0);
                ck_assert_msg(e.name && streq(e.name, BUS_ERROR_INVALID_MODE), "SetPollMode(%s): %s", bad[i],
                              e.name);
        }
        /* Refused calls changed nothing. */
        assert_string_prop("PollMode", "fixed");
        ck_assert_uint_eq(get_number("PollUSec", 'u'), 20);
}
END_TEST

START_TEST(test_set_cache) {
        spawn_on_bus("cache", NULL);
        assert_string_prop("CachePolicy", "auto");
        static const char *const ok[][2] = { { "never", "never" }, { "metadata", "metadata" }, { "always", "always" },
                                             { "none", "never" },  { "auto", "auto" } };
        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                set_cache_ok(ok[i][0]);
                assert_string_prop("CachePolicy", ok[i][1]);
        }
        static const char *const bad[] = { "sometimes", "", "ALWAYS", "never " };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
                ck_assert_int_lt(call_set_cache(bus, bad[i], &e), 0);
                ck_assert_str_eq(e.name, BUS_ERROR_INVALID_CACHE_POLICY);
                ck_assert_msg(strstr(e.message, "never, metadata, auto or always"), "message: %s", e.message);
        }
        assert_string_prop("CachePolicy", "auto");
}
END_TEST

/* ---- PropertiesChanged ---- */

typedef struct Changes {
        char names[16][40];
        char values[16][40];
        unsigned n;
} Changes;

static int on_properties_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Changes *c = userdata;
        const char *iface, *name, *contents;

        if (sd_bus_message_read(m, "s", &iface) < 0 || !streq(iface, BUS_INTERFACE))
                return 0;
        ck_assert_int_ge(sd_bus_message_enter_container(m, 'a', "{sv}"), 0);
        while (sd_bus_message_enter_container(m, 'e', "sv") > 0) {
                ck_assert_int_ge(sd_bus_message_read(m, "s", &name), 0);
                ck_assert_int_ge(sd_bus_message_peek_type(m, NULL, &contents), 0);
                ck_assert_int_ge(sd_bus_message_enter_container(m, 'v', contents), 0);
                ck_assert_uint_lt(c->n, 16);
                snprintf(c->names[c->n], sizeof c->names[0], "%s", name);
                if (streq(contents, "s")) {
                        const char *s;
                        ck_assert_int_ge(sd_bus_message_read(m, "s", &s), 0);
                        snprintf(c->values[c->n], sizeof c->values[0], "%s", s);
                } else if (streq(contents, "u")) {
                        uint32_t u;
                        ck_assert_int_ge(sd_bus_message_read(m, "u", &u), 0);
                        snprintf(c->values[c->n], sizeof c->values[0], "%u", u);
                } else if (streq(contents, "b")) {
                        int b;
                        ck_assert_int_ge(sd_bus_message_read(m, "b", &b), 0);
                        snprintf(c->values[c->n], sizeof c->values[0], "%s", b ? "true" : "false");
                } else if (streq(contents, "t")) {
                        uint64_t t;
                        ck_assert_int_ge(sd_bus_message_read(m, "t", &t), 0);
                        snprintf(c->values[c->n], sizeof c->values[0], "%" PRIu64, t);
                } else
                        ck_assert_int_ge(sd_bus_message_skip(m, contents), 0);
                c->n++;
                ck_assert_int_ge(sd_bus_message_exit_container(m), 0);
                ck_assert_int_ge(sd_bus_message_exit_container(m), 0);
        }
        return 0;
}

/* Processes everything the bus has for us. A Ping to the daemon orders after every signal the
 * daemon sent before answering it, so afterwards nothing more is on its way. */
static void drain(sd_bus *b) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        ck_assert_int_ge(sd_bus_call_method(b, bus_name, BUS_OBJECT_PATH, "org.freedesktop.DBus.Peer", "Ping", &e,
                                            NULL, NULL),
                         0);
        while (sd_bus_process(b, NULL) > 0)
                ;
}

static const char *changed_value(const Changes *c, const char *name) {
        const char *v = NULL;
        for (unsigned i = 0; i < c->n; i++)
                if (streq(c->names[i], name))
                        v = c->values[i]; /* the last one counts */
        return v;
}

START_TEST(test_properties_changed) {
        Changes c = {};
        sd_bus_slot *slot = NULL;
        Frontend *fe;

        spawn_on_bus("signals", NULL);
        ck_assert_int_ge(sd_bus_match_signal(bus, &slot, bus_name, BUS_OBJECT_PATH, "org.freedesktop.DBus.Properties",
                                             "PropertiesChanged", on_properties_changed, &c),
                         0);
        drain(bus);
        ck_assert_uint_eq(c.n, 0);

        set_cache_ok("always");
        drain(bus);
        ck_assert_uint_eq(c.n, 1);
        ck_assert_str_eq(changed_value(&c, "CachePolicy"), "always");

        /* No change, no signal. */
        c.n = 0;
        set_cache_ok("always");
        drain(bus);
        ck_assert_uint_eq(c.n, 0);

        set_threads_ok("pool", 7);
        drain(bus);
        ck_assert_str_eq(changed_value(&c, "ThreadMode"), "pool");
        ck_assert_str_eq(changed_value(&c, "PoolSize"), "7");
        c.n = 0;
        set_threads_ok("pool", 3);
        drain(bus);
        ck_assert_uint_eq(c.n, 1);
        ck_assert_str_eq(changed_value(&c, "PoolSize"), "3");
        c.n = 0;
        set_threads_ok("pool", 3);
        drain(bus);
        ck_assert_uint_eq(c.n, 0);

        set_poll_us_ok(40); /* from auto (the default): both properties change */
        drain(bus);
        ck_assert_uint_eq(c.n, 2);
        ck_assert_str_eq(changed_value(&c, "PollUSec"), "40");
        ck_assert_str_eq(changed_value(&c, "PollMode"), "fixed");
        c.n = 0;
        set_poll_us_ok(40);
        drain(bus);
        ck_assert_uint_eq(c.n, 0);
        {
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
                ck_assert_int_lt(call_set_poll_us(bus, 1000001, &e), 0); /* refused: no signal */
        }
        set_poll_us_ok(0);
        drain(bus);
        ck_assert_uint_eq(c.n, 2);
        ck_assert_str_eq(changed_value(&c, "PollUSec"), "0");
        ck_assert_str_eq(changed_value(&c, "PollMode"), "off");
        c.n = 0;
        set_poll_us_ok(50);
        drain(bus);
        ck_assert_uint_eq(c.n, 2);
        c.n = 0;
        set_poll_mode_ok("auto"); /* PollUSec stays 50: only the mode is announced */
        drain(bus);
        ck_assert_uint_eq(c.n, 1);
        ck_assert_str_eq(changed_value(&c, "PollMode"), "auto");
        c.n = 0;
        set_poll_mode_ok("auto");
        drain(bus);
        ck_assert_uint_eq(c.n, 0);

        /* A frontend connects: Connected, Connections, features, running queues. */
        fe = fe_start_default();
        drain(bus);
        ck_assert_str_eq(changed_value(&c, "Connected"), "true");
        ck_assert_str_eq(changed_value(&c, "Connections"), "1");
        ck_assert_ptr_nonnull(changed_value(&c, "NegotiatedFeatures"));
        ck_assert_uint_eq(strtoull(changed_value(&c, "NegotiatedFeatures"), NULL, 10), fe->features);
        ck_assert_uint_eq(strtoull(changed_value(&c, "NegotiatedProtocolFeatures"), NULL, 10), fe->protocol);
        ck_assert_str_eq(changed_value(&c, "RunningQueues"), "2");

        /* ... and leaves. */
        c.n = 0;
        fe_free(fe);
        {
                int64_t deadline = now_ms() + 5000;
                while (!changed_value(&c, "Connected") && now_ms() < deadline) {
                        (void) sd_bus_wait(bus, 100000);
                        while (sd_bus_process(bus, NULL) > 0)
                                ;
                }
        }
        drain(bus);
        ck_assert_ptr_nonnull(changed_value(&c, "Connected"));
        ck_assert_str_eq(changed_value(&c, "Connected"), "false");
        ck_assert_str_eq(changed_value(&c, "RunningQueues"), "0");
        ck_assert_uint_eq(get_number("Connected", 'b'), 0);
        sd_bus_slot_unref(slot);
}
END_TEST

START_TEST(test_statistics) {
        static const char *const more[] = { "--threads", "inline", NULL };
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        Stats s, s2;
        const Row *w, *l;
        uint64_t sum_ops = 0, sum_queues = 0, sum_errors = 0, errnos[512];

        spawn_on_bus("stats", more);
        get_stats(&s);
        ck_assert_str_eq(s.mode, "inline");
        ck_assert_uint_eq(s.n_ops, 0);
        ck_assert_uint_eq(s.n_queues, 2); /* hiprio + 1 request queue */
        ck_assert_str_eq(s.queues[0].name, "hiprio");
        ck_assert_str_eq(s.queues[1].name, "request0");
        ck_assert_uint_ge(s.n_exec, 9);

        Frontend *fe = fe_start_default();
        FeFuse *c = fuse_client(fe);
        roundtrip(c, "stats-file", 100000, 1);
        roundtrip(c, "stats-file2", 5000, 2);
        ck_assert_int_eq(fe_fuse_unlink(c, FUSE_ROOT_ID, "never-was"), -ENOENT);
        ck_assert_int_eq(fe_fuse_unlink(c, FUSE_ROOT_ID, "never-was-either"), -ENOENT);

        get_stats(&s);
        ck_assert_uint_gt(s.timestamp, 0);
        ck_assert_uint_eq(s.in_flight, 0);
        w = find_op(&s, FUSE_WRITE);
        l = find_op(&s, FUSE_LOOKUP);
        ck_assert_ptr_nonnull(w);
        ck_assert_ptr_nonnull(l);
        ck_assert_str_eq(w->name, "WRITE");
        ck_assert_str_eq(l->name, "LOOKUP");
        ck_assert_uint_ge(w->requests, 2);
        ck_assert_uint_ge(w->bytes, 105000);
        ck_assert_uint_ge(find_op(&s, FUSE_READ)->bytes, 105000);
        ck_assert_uint_eq(find_op(&s, FUSE_UNLINK)->errors, 2);
        ck_assert_uint_ge(find_op(&s, FUSE_UNLINK)->requests, 4);
        ck_assert_uint_eq(w->errors, 0);
        ck_assert_ptr_nonnull(find_op(&s, FUSE_INIT));
        for (unsigned i = 0; i < s.n_ops; i++) {
                ck_assert_uint_eq(hist_sum(&s.ops[i]), s.ops[i].requests);
                sum_ops += s.ops[i].requests;
        }
        for (unsigned i = 0; i < s.n_queues; i++) {
                ck_assert_uint_eq(hist_sum(&s.queues[i]), s.queues[i].requests);
                sum_queues += s.queues[i].requests;
        }
        ck_assert_uint_eq(sum_ops, sum_queues);
        /* Errors by errno: the same errors as the opcode rows, counted by what they were. */
        for (unsigned i = 0; i < s.n_ops; i++)
                sum_errors += s.ops[i].errors;
        ck_assert_uint_eq(get_error_counts(errnos), sum_errors);
        ck_assert_uint_ge(errnos[ENOENT], 2);
        ck_assert_uint_gt(s.queues[1].requests, 0);
        ck_assert_uint_gt(s.queues[0].requests, 0); /* FORGET goes to hiprio */
        /* The property and the statistics agree. */
        ck_assert_uint_eq(get_number("InFlight", 't'), 0);

        /* Statistics per mode: what set-threads changes is visible in the executor counters. */
        ck_assert_uint_gt(s.inline_runs, 0);
        ck_assert_uint_eq(s.pool_runs, 0);
        set_threads_ok("pool", 2);
        get_stats(&s);
        roundtrip(c, "stats-pool", 20000, 3);
        get_stats(&s2);
        ck_assert_str_eq(s2.mode, "pool");
        ck_assert_uint_eq(s2.pool_size, 2);
        ck_assert_uint_ge(s2.pool_runs - s.pool_runs, 5);
        ck_assert_uint_le(s2.live_workers, 2);
        ck_assert_uint_eq(s2.mode_switches, s.mode_switches);
        set_threads_ok("auto", 2);
        get_stats(&s);
        ck_assert_uint_eq(s.mode_switches, s2.mode_switches + 1);
        roundtrip(c, "stats-auto", 20000, 4);
        get_stats(&s2);
        ck_assert_str_eq(s2.mode, "auto");
        ck_assert_uint_ge((s2.auto_inline + s2.auto_pool) - (s.auto_inline + s.auto_pool), 5);

        /* Reset: every counter back to zero. */
        ck_assert_int_ge(sd_bus_call_method(bus, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, "ResetStatistics", &e,
                                            NULL, NULL),
                         0);
        get_stats(&s);
        ck_assert_uint_eq(s.n_ops, 0);
        for (unsigned i = 0; i < s.n_queues; i++)
                ck_assert_uint_eq(s.queues[i].requests, 0);
        ck_assert_uint_eq(get_error_counts(errnos), 0);
        /* Known failures after the reset, counted exactly. */
        ck_assert_int_eq(fe_fuse_unlink(c, FUSE_ROOT_ID, "never-was"), -ENOENT);
        ck_assert_int_eq(fe_fuse_mkdir(c, FUSE_ROOT_ID, "stats-dir", 0755, NULL), 0);
        ck_assert_int_eq(fe_fuse_mkdir(c, FUSE_ROOT_ID, "stats-dir", 0755, NULL), -EEXIST);
        ck_assert_int_eq(fe_fuse_mkdir(c, FUSE_ROOT_ID, "stats-dir", 0755, NULL), -EEXIST);
        ck_assert_int_eq(fe_fuse_rmdir(c, FUSE_ROOT_ID, "never-was"), -ENOENT);
        ck_assert_uint_eq(get_error_counts(errnos), 4);
        ck_assert_uint_eq(errnos[ENOENT], 2);
        ck_assert_uint_eq(errnos[EEXIST], 2);
        ck_assert_int_ge(sd_bus_call_method(bus, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, "ResetStatistics", &e,
                                            NULL, NULL),
                         0);
        roundtrip(c, "stats-after-reset", 10, 5);
        get_stats(&s);
        ck_assert_uint_eq(find_op(&s, FUSE_CREATE)->requests, 1);

        fe_fuse_free(c);
        fe_free(fe);
}
END_TEST

/* set-cache changes the timeouts and open flags of the following replies. */
static void lookup_and_open(FeFuse *c, const char *name, struct fuse_entry_out *entry, uint32_t *open_flags) {
        FeFuseReq *req = NULL;
        struct fuse_open_in in = { .flags = O_RDONLY };
        struct fuse_open_out out;
        int r;

        r = fe_fuse_lookup(c, FUSE_ROOT_ID, name, entry);
        ck_assert_msg(r == 0, "LOOKUP %s: %d %s", name, r, c->last_problem);
        ck_assert_int_eq(fe_fuse_req_new(&req, c, FUSE_OPEN, entry->nodeid, sizeof out), 0);
        ck_assert_int_eq(fe_fuse_req_add(req, &in, sizeof in), 0);
        r = fe_fuse_call(c, req);
        ck_assert_msg(r == 0, "OPEN: %d %s", r, c->last_problem);
        ck_assert_uint_ge(req->payload_len, sizeof out);
        memcpy(&out, req->payload, sizeof out);
        *open_flags = out.open_flags;
        fe_fuse_req_free(c, req);
        ck_assert_int_eq(fe_fuse_release(c, entry->nodeid, out.fh, false), 0);
}

START_TEST(test_cache_effect) {
        static const char *const more[] = { "--cache", "auto", NULL };
        struct fuse_entry_out entry;
        uint32_t flags;
        char *path;
        int fd;

        spawn_on_bus("cache-effect", more);
        path = fe_harness_path(h, "cached");
        fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, "data", 4), 4);
        close(fd);
        free(path);

        Frontend *fe = fe_start_default();
        FeFuse *c = fuse_client(fe);

        set_cache_ok("never");
        lookup_and_open(c, "cached", &entry, &flags);
        ck_assert_uint_eq(entry.entry_valid, 0);
        ck_assert_uint_eq(entry.entry_valid_nsec, 0);
        ck_assert_uint_eq(entry.attr_valid, 0);
        ck_assert_uint_eq(entry.attr_valid_nsec, 0);
        ck_assert_msg(flags & FOPEN_DIRECT_IO, "cache=never: open flags 0x%x lack DIRECT_IO", flags);
        ck_assert_msg(!(flags & FOPEN_KEEP_CACHE), "cache=never: open flags 0x%x have KEEP_CACHE", flags);
        uint64_t never_entry = entry.entry_valid * 1000000000ull + entry.entry_valid_nsec;

        set_cache_ok("always");
        lookup_and_open(c, "cached", &entry, &flags);
        uint64_t always_entry = entry.entry_valid * 1000000000ull + entry.entry_valid_nsec;
        ck_assert_uint_gt(always_entry, never_entry);
        ck_assert_uint_gt(entry.attr_valid * 1000000000ull + entry.attr_valid_nsec, 0);
        ck_assert_msg(flags & FOPEN_KEEP_CACHE, "cache=always: open flags 0x%x lack KEEP_CACHE", flags);
        ck_assert_msg(!(flags & FOPEN_DIRECT_IO), "cache=always: open flags 0x%x have DIRECT_IO", flags);

        /* metadata: entries cached, data direct. */
        set_cache_ok("metadata");
        lookup_and_open(c, "cached", &entry, &flags);
        ck_assert_uint_gt(entry.entry_valid * 1000000000ull + entry.entry_valid_nsec, 0);
        ck_assert_msg(flags & FOPEN_DIRECT_IO, "cache=metadata: open flags 0x%x lack DIRECT_IO", flags);

        /* Back to never: the very next replies follow. */
        set_cache_ok("never");
        lookup_and_open(c, "cached", &entry, &flags);
        ck_assert_uint_eq(entry.entry_valid, 0);
        ck_assert_uint_eq(entry.entry_valid_nsec, 0);
        ck_assert(flags & FOPEN_DIRECT_IO);
        ck_assert_uint_eq(c->proto_errors, 0);

        fe_fuse_free(c);
        fe_free(fe);
}
END_TEST

static uint64_t cpu_ticks(pid_t pid);
static pid_t parent_pid(pid_t pid);

/* The process that serves the guest: vufsd forks for its sandbox (also --sandbox=chroot, as the
 * harness runs it) and the parent only waits, so its CPU time says nothing about the queues. */
static pid_t serving_pid(pid_t pid) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        pid_t found = 0;

        ck_assert_ptr_nonnull(d);
        while (!found && (de = readdir(d))) {
                pid_t p = (pid_t) atoi(de->d_name);
                if (p > 0 && parent_pid(p) == pid)
                        found = p;
        }
        closedir(d);
        return found ?: pid;
}

/* A guest doing one thing at a time with a pause after each: n GETATTRs 2 ms apart. (Back to back
 * requests do not tell: the queue thread finds the next one when it re-checks the ring right after
 * answering, before any polling window starts.) */
/* n GETATTRs of the root, pause_us apart (0: back to back). */
static void getattrs(FeFuse *c, unsigned n, unsigned pause_us) {
        for (unsigned i = 0; i < n; i++) {
                struct fuse_attr_out a;
                int r = fe_fuse_getattr(c, FUSE_ROOT_ID, &a);
                ck_assert_msg(r == 0, "GETATTR: %d %s", r, c->last_problem);
                if (pause_us > 0)
                        usleep(pause_us);
        }
}

/* The window set over D-Bus reaches the data path: the queue thread finds requests while polling
 * (the executor counter poll_hits) and spins after the last one; with the window at 0 it does
 * neither. */
START_TEST(test_poll_data_path) {
        static const char *const more[] = { "--threads", "inline", NULL };
        const uint64_t tck = (uint64_t) sysconf(_SC_CLK_TCK);
        Stats sb, s0, s1, s2, s3;
        uint64_t t0, t1, idle_off, idle_on;
        char name[32];

        spawn_on_bus("poll-path", more);
        Frontend *fe = fe_start_default();
        FeFuse *c = fuse_client(fe);
        pid_t pid = serving_pid(h->backend->pid);

        /* Off: no window ever finds anything, and a quiet second costs no CPU. (auto, the
         * default, may have probed during the connection's first requests.) */
        set_poll_us_ok(0);
        get_stats(&sb);
        for (unsigned i = 0; i < 3; i++) {
                snprintf(name, sizeof name, "off-%u", i);
                roundtrip(c, name, 8192, i);
        }
        getattrs(c, 30, 2000);
        get_stats(&s0);
        ck_assert_msg(s0.has_poll_hits, "GetStatistics has no poll_hits counter");
        ck_assert_uint_eq(s0.poll_hits, sb.poll_hits);
        ck_assert_msg(s0.has_polls, "GetStatistics has no polls counter");
        ck_assert_uint_eq(s0.polls, sb.polls);
        t0 = cpu_ticks(pid);
        usleep(1000000);
        t1 = cpu_ticks(pid);
        idle_off = t1 - t0;
        ck_assert_msg(idle_off < tck / 10, "idle vufsd without polling used %" PRIu64 " ticks in 1 s", idle_off);

        /* On, live, with a window much wider than the pauses: nearly every request arrives while
         * the queue thread watches the ring (a few may not on a loaded machine: the thread was
         * not running when the request came and found it in its re-check before polling). */
        set_poll_us_ok(100000);
        getattrs(c, 30, 2000);
        get_stats(&s1);
        ck_assert_msg(s1.poll_hits - s0.poll_hits >= 15,
                      "only %" PRIu64 " polling windows found a request (of %" PRIu64 " run)",
                      s1.poll_hits - s0.poll_hits, s1.inline_runs - s0.inline_runs);
        ck_assert_uint_le(s1.poll_hits - s0.poll_hits, s1.inline_runs - s0.inline_runs);
        ck_assert_uint_ge(s1.polls, s1.poll_hits);
        ck_assert_uint_gt(s1.poll_usec, 0);
        for (unsigned i = 0; i < 3; i++) { /* and verified I/O works while polling */
                snprintf(name, sizeof name, "on-%u", i);
                roundtrip(c, name, 8192, 100 + i);
        }

        /* A quiet guest: after its last request the queue thread spins through the whole window. */
        set_poll_us_ok(1000000);
        roundtrip(c, "last", 100, 7);
        t0 = cpu_ticks(pid);
        usleep(800000);
        t1 = cpu_ticks(pid);
        idle_on = t1 - t0;
        ck_assert_msg(idle_on >= tck / 20 && idle_on > idle_off,
                      "vufsd polling 1 s used %" PRIu64 " ticks in 0.8 s (%" PRIu64 " without polling)", idle_on,
                      idle_off);

        /* Off again. The window already running ends on its own (it was 1 s): wait until the
         * process stops spinning, then the following requests are not found by polling. */
        set_poll_us_ok(0);
        {
                int64_t deadline = now_ms() + 5000;
                uint64_t a = cpu_ticks(pid), b;
                for (;;) {
                        usleep(200000);
                        b = cpu_ticks(pid);
                        if (b - a <= 1)
                                break;
                        ck_assert_msg(now_ms() < deadline, "vufsd still spins 5 s after SetPollUSec(0)");
                        a = b;
                }
        }
        get_stats(&s2);
        getattrs(c, 20, 2000);
        get_stats(&s3);
        ck_assert_uint_gt(s3.inline_runs, s2.inline_runs);
        ck_assert_uint_eq(s3.poll_hits, s2.poll_hits);
        /* ResetStatistics leaves executor counters alone, poll_hits included. */
        {
                _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
                ck_assert_int_ge(sd_bus_call_method(bus, bus_name, BUS_OBJECT_PATH, BUS_INTERFACE, "ResetStatistics",
                                                    &e, NULL, NULL),
                                 0);
        }
        get_stats(&s2);
        ck_assert_uint_eq(s2.poll_hits, s3.poll_hits);
        ck_assert(fe_backend_alive(h->backend));
        fprintf(stderr, "poll: %" PRIu64 " of 30 paced requests found while polling; CPU ticks (of %" PRIu64
                        "/s) with the guest quiet: %" PRIu64 " in 1 s off, %" PRIu64 " in 0.8 s with a 1 s window\n",
                s1.poll_hits, tck, idle_off, idle_on);

        fe_fuse_free(c);
        fe_free(fe);
}
END_TEST

/* --poll-us=auto, the default: a guest sending requests back to back is polled, one pausing 2 ms
 * between them is not (after at most a few windows), and a connected guest doing nothing costs no
 * CPU: a thread spinning through its idle time would use all of it, a fixed window all of it for
 * the window's length after each request. */
START_TEST(test_poll_auto) {
        static const char *const more[] = { "--threads", "inline", NULL };
        const uint64_t tck = (uint64_t) sysconf(_SC_CLK_TCK);
        const unsigned quiet_s = 5;
        Stats s0, s1, s2, s3;
        uint64_t t0, t1;

        spawn_on_bus("poll-auto", more);
        assert_string_prop("PollMode", "auto");
        Frontend *fe = fe_start_default();
        FeFuse *c = fuse_client(fe);
        pid_t pid = serving_pid(h->backend->pid);

        get_stats(&s0);
        ck_assert(s0.has_polls);
        /* Nothing learnt yet: the connection's first requests (FUSE_INIT) probed a few windows. */
        ck_assert_uint_le(s0.polls, 8);
        getattrs(c, 3000, 0);
        get_stats(&s1);
        fprintf(stderr, "auto, back to back: %" PRIu64 " windows, %" PRIu64 " hits, %" PRIu64 " us spinning\n",
                s1.polls, s1.poll_hits, s1.poll_usec);
        /* It tried. (Whether the windows find requests depends on how fast this frontend answers on
         * this machine, unpinned: not asserted; vufs-bench measures that, pinned.) */
        ck_assert_msg(s1.polls > s0.polls, "auto never polled for 3000 back-to-back requests");
        ck_assert_uint_ge(s1.polls, s1.poll_hits);

        /* 2 ms between requests is far past the longest window: the first empty window ends it. */
        getattrs(c, 50, 2000);
        get_stats(&s2);
        ck_assert_msg(s2.polls - s1.polls <= 5, "auto spun %" PRIu64 " windows for 50 requests 2 ms apart",
                      s2.polls - s1.polls);

        /* Connected and quiet: under 1 % of a CPU (generously: spinning would be 100 %). */
        t0 = cpu_ticks(pid);
        sleep(quiet_s);
        t1 = cpu_ticks(pid);
        get_stats(&s3);
        fprintf(stderr, "auto, quiet: %" PRIu64 " ticks (of %" PRIu64 "/s) in %u s, %" PRIu64 " windows\n", t1 - t0,
                tck, quiet_s, s3.polls - s2.polls);
        ck_assert_msg(t1 - t0 <= tck * quiet_s / 100, "a quiet guest cost vufsd %" PRIu64 " ticks in %u s", t1 - t0,
                      quiet_s);
        ck_assert_uint_eq(s3.polls, s2.polls);
        ck_assert_uint_eq(s3.poll_usec, s2.poll_usec);
        ck_assert(fe_backend_alive(h->backend));

        fe_fuse_free(c);
        fe_free(fe);
}
END_TEST

/* Pins every thread of pid to cpu. */
static void pin_threads(pid_t pid, int cpu) {
        _cleanup_free_ char *path = NULL;
        cpu_set_t set;
        DIR *d;
        struct dirent *de;

        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        ck_assert_int_gt(asprintf(&path, "/proc/%d/task", (int) pid), 0);
        d = opendir(path);
        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        ck_assert_int_eq(sched_setaffinity(atoi(de->d_name), sizeof set, &set), 0);
        closedir(d);
}

/* A process that wakes every 100 µs and burns 300 µs, until killed: the frontend's and the guest's
 * threads on a host without a CPU to spare (each wake-up takes the CPU from whatever runs there). */
static pid_t spawn_hog(int cpu) {
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                cpu_set_t set;

                CPU_ZERO(&set);
                CPU_SET(cpu, &set);
                (void) sched_setaffinity(0, sizeof set, &set);
                for (;;) {
                        struct timespec t0, t;

                        (void) usleep(100);
                        clock_gettime(CLOCK_MONOTONIC, &t0);
                        do
                                clock_gettime(CLOCK_MONOTONIC, &t);
                        while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 300000);
                }
        }
        return pid;
}

/* --poll-us=auto on a CPU another task wants: the queue thread is preempted, auto sees it and stops
 * spinning (the spin would take that task's time), and starts again once the CPU is its own. Without
 * the check every back-to-back request polled. */
START_TEST(test_poll_auto_contended) {
        static const char *const more[] = { "--threads", "inline", NULL };
        const unsigned n = 3000;
        uint64_t alone = 0;
        Stats s0, s1, s2;
        pid_t hog;

        if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
                fprintf(stderr, "one CPU: the frontend would share the daemon's; not run\n");
                return;
        }
        spawn_on_bus("poll-contended", more);
        Frontend *fe = fe_start_default();
        FeFuse *c = fuse_client(fe);
        pid_t pid = serving_pid(h->backend->pid);
        cpu_set_t mine;

        /* The daemon on CPU 0, this frontend on CPU 1: only the hog competes with the daemon. */
        pin_threads(pid, 0);
        CPU_ZERO(&mine);
        CPU_SET(1, &mine);
        ck_assert_int_eq(sched_setaffinity(0, sizeof mine, &mine), 0);

        getattrs(c, n, 0); /* learn the pace */
        get_stats(&s0);
        ck_assert(s0.has_poll_contended);
        hog = spawn_hog(0);
        getattrs(c, n, 0);
        get_stats(&s1);
        kill(hog, SIGKILL);
        ck_assert_int_eq(waitpid(hog, NULL, 0), hog);
        /* Alone again, polling resumes. Other tests running in parallel may take the CPU as well
         * (meson runs them side by side), so allow some batches for a quiet moment. */
        s2 = s1;
        for (unsigned tries = 0; tries < 20 && alone < n / 4; tries++) {
                uint64_t before = s2.polls;

                getattrs(c, n, 0);
                get_stats(&s2);
                alone = s2.polls - before;
        }
        CPU_ZERO(&mine);
        for (int i = 0; i < CPU_SETSIZE && i < sysconf(_SC_NPROCESSORS_ONLN); i++)
                CPU_SET(i, &mine);
        (void) sched_setaffinity(0, sizeof mine, &mine);

        fprintf(stderr, "auto, %u requests each: alone %" PRIu64 " windows; beside a hog %" PRIu64 " windows, %" PRIu64
                        " preempted looks; alone again %" PRIu64 " windows\n",
                n, s0.polls, s1.polls - s0.polls, s1.poll_contended - s0.poll_contended, alone);
        ck_assert_uint_gt(s1.poll_contended, s0.poll_contended);
        ck_assert_msg(s1.polls - s0.polls < n / 2, "auto spun %" PRIu64 " windows for %u requests beside a hog",
                      s1.polls - s0.polls, n);
        ck_assert_msg(alone > n / 4, "auto spun only %" PRIu64 " windows for %u requests alone again", alone, n);
        ck_assert(fe_backend_alive(h->backend));

        fe_fuse_free(c);
        fe_free(fe);
}
END_TEST

/* ---- concurrent control calls while requests flow ---- */

typedef struct Traffic {
        FeFuse *c;
        atomic_bool stop;
        unsigned done;
        int failed;
        char problem[256];
} Traffic;

static void *traffic_thread(void *p) {
        Traffic *t = p;
        char name[32];

        for (unsigned i = 0; !atomic_load(&t->stop) || t->done < 20; i++) {
                snprintf(name, sizeof name, "traffic-%u", i);
                int r = fe_fuse_roundtrip(t->c, name, 1 + (i * 7919) % 200000, i);
                if (r < 0 || t->c->proto_errors) {
                        t->failed = r < 0 ? r : -EPROTO;
                        snprintf(t->problem, sizeof t->problem, "%s: %s", name, t->c->last_problem);
                        break;
                }
                t->done++;
        }
        return NULL;
}

typedef struct Setter {
        const char *address;
        unsigned seed, calls;
        int failed;
        char problem[256];
} Setter;

static void *setter_thread(void *p) {
        static const char *const modes[] = { "inline", "pool", "auto" };
        static const char *const caches[] = { "never", "metadata", "auto", "always" };
        Setter *s = p;
        sd_bus *b = NULL;
        int r = 0;

        /* Its own connection: sd-bus objects are not shared between threads. */
        if (sd_bus_new(&b) < 0 || sd_bus_set_address(b, s->address) < 0 || sd_bus_set_bus_client(b, true) < 0 ||
            sd_bus_start(b) < 0) {
                s->failed = -ENOTCONN;
                return NULL;
        }
        for (unsigned i = 0; i < 150; i++) {
                sd_bus_error e = SD_BUS_ERROR_NULL;
                unsigned x = rand_r(&s->seed);
                if (x % 3 == 0)
                        r = call_set_cache(b, caches[x / 3 % 4], &e);
                else
                        r = call_set_threads(b, modes[x / 3 % 3], 1 + x / 9 % 6, &e);
                if (r < 0)
                        snprintf(s->problem, sizeof s->problem, "%s", e.message ?: strerror(-r));
                sd_bus_error_free(&e);
                if (r < 0) {
                        s->failed = r;
                        break;
                }
                s->calls++;
        }
        sd_bus_flush_close_unref(b);
        return NULL;
}

START_TEST(test_concurrent_set_calls) {
        static const char *const more[] = { "--threads", "auto", "--thread-pool-size", "2", NULL };
        Traffic t = {};
        Setter s[3];
        pthread_t tt, st[3];
        Stats before, after;

        spawn_on_bus("concurrent", more);
        Frontend *fe = fe_start_default();
        t.c = fuse_client(fe);
        get_stats(&before);

        ck_assert_int_eq(pthread_create(&tt, NULL, traffic_thread, &t), 0);
        for (unsigned i = 0; i < 3; i++) {
                s[i] = (Setter) { .address = tb.address, .seed = 17 + i };
                ck_assert_int_eq(pthread_create(&st[i], NULL, setter_thread, &s[i]), 0);
        }
        for (unsigned i = 0; i < 3; i++)
                pthread_join(st[i], NULL);
        atomic_store(&t.stop, true);
        pthread_join(tt, NULL);

        for (unsigned i = 0; i < 3; i++)
                ck_assert_msg(s[i].failed == 0, "setter %u failed after %u calls: %s", i, s[i].calls, s[i].problem);
        ck_assert_msg(t.failed == 0, "guest I/O failed after %u round trips: %s", t.done, t.problem);
        ck_assert_uint_ge(t.done, 20);
        ck_assert(fe_backend_alive(h->backend));

        get_stats(&after);
        ck_assert_uint_gt(after.mode_switches, before.mode_switches);
        ck_assert_uint_eq(after.in_flight, 0);
        /* Every request went somewhere: inline or the pool. */
        ck_assert_uint_gt((after.inline_runs + after.pool_runs) - (before.inline_runs + before.pool_runs), 0);

        /* The last word wins and is what the properties show. */
        set_threads_ok("pool", 4);
        set_cache_ok("metadata");
        assert_string_prop("ThreadMode", "pool");
        ck_assert_uint_eq(get_number("PoolSize", 'u'), 4);
        assert_string_prop("CachePolicy", "metadata");
        roundtrip(t.c, "after-storm", 4096, 99);

        fe_fuse_free(t.c);
        fe_free(fe);
}
END_TEST

/* ---- without a bus ---- */

static char *spawn_capturing_stderr(const char *const *args) {
        char *log = NULL;
        int fd, saved;
        int r;

        ck_assert_int_ge(asprintf(&log, "%s/vufsd.log", h->dir), 0);
        fd = open(log, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
        ck_assert_int_ge(fd, 0);
        saved = dup(STDERR_FILENO);
        dup2(fd, STDERR_FILENO);
        r = fe_harness_spawn_vufsd(h, args);
        dup2(saved, STDERR_FILENO);
        close(saved);
        close(fd);
        ck_assert_msg(r == 0, "starting vufsd: %s", strerror(-r));
        return log;
}

static unsigned count_in_file(const char *path, const char *needle) {
        g_autofree char *text = NULL;
        unsigned n = 0;

        ck_assert(g_file_get_contents(path, &text, NULL, NULL));
        for (const char *p = text; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

START_TEST(test_no_bus_keeps_serving) {
        _cleanup_free_ char *addr = NULL, *log = NULL;

        ck_assert_int_ge(asprintf(&addr, "unix:path=%s/no-such-bus", h->dir), 0);
        const char *const args[] = { "--bus", addr, "--instance", "lonely", NULL };
        log = spawn_capturing_stderr(args);

        Frontend *fe = fe_start_default();
        FeFuse *c = fuse_client(fe);
        roundtrip(c, "no-bus", 3000, 7);
        roundtrip(c, "no-bus-2", 3000, 8);
        fe_fuse_free(c);
        fe_free(fe);
        /* vufsd exits when the frontend leaves (no --keep-listening): cleanly. */
        int st = 0;
        ck_assert_int_eq(fe_backend_wait(h->backend, 10000, &st), 0);
        ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        ck_assert_uint_eq(count_in_file(log, "No D-Bus bus reachable"), 1);
}
END_TEST

START_TEST(test_bus_none) {
        _cleanup_free_ char *log = NULL;
        const char *const args[] = { "--bus", "none", NULL };

        log = spawn_capturing_stderr(args);
        Frontend *fe = fe_start_default();
        FeFuse *c = fuse_client(fe);
        roundtrip(c, "bus-none", 100, 9);
        fe_fuse_free(c);
        fe_free(fe);
        ck_assert_int_eq(fe_backend_wait(h->backend, 10000, NULL), 0);
        ck_assert_uint_eq(count_in_file(log, "D-Bus"), 0);
        ck_assert_uint_eq(count_in_file(log, "Control interface"), 0);
}
END_TEST

/* --bus-user: root's vufsd connects as that user (the bus takes SO_PEERCRED at connect()), and root
 * still changes it: the daemon's check is about the caller, not about its own bus identity. */
START_TEST(test_bus_user) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        uint32_t uid = 0;
        const char *const args[] = { "--bus-user", "nobody", NULL };

        spawn_on_bus("asnobody", args);
        ck_assert_int_ge(sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                            "org.freedesktop.DBus", "GetConnectionUnixUser", &e, &reply, "s",
                                            bus_name),
                         0);
        ck_assert_int_ge(sd_bus_message_read(reply, "u", &uid), 0);
        sd_bus_message_unref(reply);
        ck_assert_uint_eq(uid, 65534);
        ck_assert_int_ge(call_set_threads(bus, "pool", 3, &e), 0);
        assert_string_prop("ThreadMode", "pool");

        /* The daemon itself is still root: it serves the guest as before. */
        Frontend *fe = fe_start_default();
        FeFuse *c = fuse_client(fe);
        roundtrip(c, "bus-user", 100, 4);
        fe_fuse_free(c);
        fe_free(fe);
}
END_TEST

/* Fail closed: a bus user that does not exist, or is root, means no bus connection at all (never a
 * root one), and the guest is served without the control plane. */
START_TEST(test_bus_user_missing) {
        const char *const users[] = { "vufsd-no-such-user", "root" };

        for (unsigned i = 0; i < ELEMENTSOF(users); i++) {
                _cleanup_free_ char *log = NULL;
                const char *const args[] = { "--bus", tb.address, "--instance", "closed", "--bus-user", users[i],
                                             NULL };

                log = spawn_capturing_stderr(args);
                Frontend *fe = fe_start_default();
                FeFuse *c = fuse_client(fe);
                roundtrip(c, "closed", 100, 5);
                fe_fuse_free(c);
                ck_assert(!name_has_owner(bus, "org.vufsd.Instance.closed"));
                fe_free(fe);
                ck_assert_int_eq(fe_backend_wait(h->backend, 10000, NULL), 0);
                ck_assert_uint_eq(count_in_file(log, i == 0 ? "does not exist" : "is root"), 1);
                ck_assert_uint_eq(count_in_file(log, "Control interface"), 0);
        }
}
END_TEST

static uint64_t cpu_ticks(pid_t pid) {
        char path[64], buf[1024];
        unsigned long ut = 0, st = 0;
        FILE *f;

        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        f = fopen(path, "re");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
        fclose(f);
        /* Fields 14 and 15 after the ")" that ends the command name. */
        const char *p = strrchr(buf, ')');
        ck_assert_int_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st), 2);
        return ut + st;
}

START_TEST(test_bus_goes_away) {
        spawn_on_bus("orphan", NULL);
        Frontend *fe = fe_start_default();
        FeFuse *c = fuse_client(fe);
        roundtrip(c, "before", 1000, 1);

        /* The bus daemon dies under a running instance. */
        bus = sd_bus_flush_close_unref(bus);
        kill(tb.pid, SIGKILL);
        waitpid(tb.pid, NULL, 0);
        tb.pid = 0;
        usleep(200000);

        /* The serving child runs the loop that would spin, not the waiting parent (sanitizer
         * builds do not sandbox, and so do not fork: then it is the process itself). */
        pid_t server = serving_pid(h->backend->pid);
        uint64_t t0 = cpu_ticks(server);
        sleep(1);
        uint64_t t1 = cpu_ticks(server);
        ck_assert_msg(t1 - t0 < (uint64_t) sysconf(_SC_CLK_TCK) / 5, "vufsd spins after losing the bus: %" PRIu64
                      " ticks in 1 s", t1 - t0);
        roundtrip(c, "after", 1000, 2);
        ck_assert(fe_backend_alive(h->backend));
        fe_fuse_free(c);
        fe_free(fe);
}
END_TEST

static pid_t parent_pid(pid_t pid) {
        char path[64], buf[512];
        int ppid = 0;
        FILE *f;

        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return 0;
        if (fgets(buf, sizeof buf, f) && strrchr(buf, ')'))
                (void) sscanf(strrchr(buf, ')') + 2, "%*c %d", &ppid);
        fclose(f);
        return ppid;
}

START_TEST(test_name_taken) {
        _cleanup_free_ char *log = NULL;
        FeHarness *h2 = NULL;
        uint32_t owner_pid = 0;
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;

        spawn_on_bus("twin", NULL);
        /* A second daemon with the same instance name on the same bus: serves, without the name. */
        ck_assert_int_eq(fe_harness_new(&h2), 0);
        {
                FeHarness *first = h;
                h = h2;
                const char *const args[] = { "--bus", tb.address, "--instance", "twin", NULL };
                log = spawn_capturing_stderr(args);
                h = first;
        }
        /* The socket exists before the bus is connected (main.c): wait for the line. */
        for (int64_t deadline = now_ms() + 5000; count_in_file(log, "is already owned") == 0 && now_ms() < deadline;)
                usleep(10000);
        ck_assert_uint_eq(count_in_file(log, "is already owned"), 1);
        ck_assert(fe_backend_alive(h2->backend));
        ck_assert_int_ge(sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                            "org.freedesktop.DBus", "GetConnectionUnixProcessID", &e, &reply, "s",
                                            bus_name),
                         0);
        ck_assert_int_ge(sd_bus_message_read(reply, "u", &owner_pid), 0);
        sd_bus_message_unref(reply);
        /* The owner is the first daemon (or its sandboxed child), not the second one. */
        ck_assert_msg(owner_pid == (uint32_t) h->backend->pid || parent_pid(owner_pid) == h->backend->pid,
                      "%s is owned by pid %u, not by the first vufsd (%d)", bus_name, owner_pid,
                      (int) h->backend->pid);

        Frontend *fe = NULL;
        FeOptions o;
        fe_options_init(&o);
        ck_assert_int_eq(fe_connect_and_start(&fe, h2->socket_path, &o), 0);
        FeFuse *c = fuse_client(fe);
        roundtrip(c, "twin", 100, 3);
        fe_fuse_free(c);
        fe_free(fe);
        h2 = fe_harness_free(h2);
}
END_TEST

int main(void) {
        Suite *s = suite_create("bus");
        TCase *tc = tcase_create("daemon");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, test_properties);
        tcase_add_test(tc, test_introspection);
        tcase_add_test(tc, test_set_threads);
        tcase_add_test(tc, test_set_poll_us);
        tcase_add_test(tc, test_set_poll_mode);
        tcase_add_test(tc, test_set_cache);
        tcase_add_test(tc, test_properties_changed);
        tcase_add_test(tc, test_statistics);
        tcase_add_test(tc, test_cache_effect);
        tcase_add_test(tc, test_poll_data_path);
        tcase_add_test(tc, test_poll_auto);
        tcase_add_test(tc, test_poll_auto_contended);
        tcase_add_test(tc, test_concurrent_set_calls);
        tcase_add_test(tc, test_no_bus_keeps_serving);
        tcase_add_test(tc, test_bus_none);
        tcase_add_test(tc, test_bus_goes_away);
        tcase_add_test(tc, test_name_taken);
        tcase_add_test(tc, test_bus_user);
        tcase_add_test(tc, test_bus_user_missing);
        suite_add_tcase(s, tc);

        return test_main_run(s);
}
