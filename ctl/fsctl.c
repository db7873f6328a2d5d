/* fsctl.c: the command-line client of vufsd's D-Bus interface (org.vufsd.Daemon1): the command
 * line, the table of verbs, and main(). The verbs are in verbs.c, what they print in output.c. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsctl.h"
#include "util.h"

BusType arg_bus_type = BUS_SYSTEM;
const char *arg_address;
const char *arg_instance;
bool arg_json;
bool arg_quiet;
bool arg_watch;
bool arg_openmetrics;
bool arg_all;
const char *arg_output;
double arg_interval = 1.0;
long arg_count = -1; /* --count: refreshes before --watch stops; -1 = until interrupted */
long arg_size = -1;  /* set-threads --size */

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

int parse_number(const char *s, long max, long *ret) {
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
               "  stats --format=openmetrics [--all] [--output=PATH]\n"
               "                                the statistics in the Prometheus text format, of one\n"
               "                                or --all instances; --output replaces PATH atomically\n"
               "  reset-stats                   set the statistics to zero\n"
               "  upgrade                       replace the serving process with the vufsd binary now installed\n"
               "                                (needs --crash-restarts; the guest keeps its session)\n"
               "\n"
               "Options:\n"
               "  -i, --instance=NAME           the instance (may be omitted when exactly one runs)\n"
               "      --system                  use the system bus (default; DBUS_SYSTEM_BUS_ADDRESS)\n"
               "      --user                    use the user's session bus\n"
               "      --address=ADDRESS         use the bus at this D-Bus address\n"
               "      --json                    JSON output for list, status and stats\n"
               "      --format=table|json|openmetrics\n"
               "                                output format (--json = --format=json)\n"
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
                ARG_FORMAT,
                ARG_ALL,
                ARG_OUTPUT,
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
                { "format", required_argument, NULL, ARG_FORMAT },
                { "all", no_argument, NULL, ARG_ALL },
                { "output", required_argument, NULL, ARG_OUTPUT },
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
                case ARG_FORMAT:
                        arg_json = streq(optarg, "json");
                        arg_openmetrics = streq(optarg, "openmetrics");
                        if (!arg_json && !arg_openmetrics && !streq(optarg, "table")) {
                                fprintf(stderr, "fsctl: invalid --format \"%s\": table, json or openmetrics\n",
                                        optarg);
                                return ERR_USAGE;
                        }
                        break;
                case ARG_ALL:
                        arg_all = true;
                        break;
                case ARG_OUTPUT:
                        arg_output = optarg;
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
        VERB_METRICS = 1 << 4,      /* --format=openmetrics (with --all and --output) applies */
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
        { "stats", 0, VERB_JSON | VERB_WATCH | VERB_METRICS, verb_stats },
        { "reset-stats", 0, 0, verb_reset_stats },
        { "upgrade", 0, 0, verb_upgrade },
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
        if (arg_openmetrics && !(v->flags & VERB_METRICS)) {
                verb_names(names, sizeof names, VERB_METRICS, true);
                fprintf(stderr, "fsctl: --format=openmetrics goes with %s\n", names);
                return ERR_USAGE;
        }
        if (arg_openmetrics && arg_watch) {
                fprintf(stderr, "fsctl: --format=openmetrics writes one snapshot: no --watch\n");
                return ERR_USAGE;
        }
        if ((arg_all || arg_output) && !arg_openmetrics) {
                fprintf(stderr, "fsctl: --all and --output go with stats --format=openmetrics\n");
                return ERR_USAGE;
        }
        if (arg_all && arg_instance) {
                fprintf(stderr, "fsctl: --all and -i exclude each other\n");
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
        if (!(v->flags & VERB_ANY_INSTANCE) && !arg_all) {
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
