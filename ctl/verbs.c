/* verbs.c: what each fsctl verb does (the table that names them is in fsctl.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fsctl.h"
#include "util.h"

/* ---- reading ---- */

int verb_list(sd_bus *bus, const char *name, char **args) {
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

int verb_status(sd_bus *bus, const char *name, char **args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        Props p;
        int r;

        r = get_all_properties(bus, name, &p, &error);
        if (r < 0) {
                props_done(&p);
                return bus_error_errno(&error, r, "status");
        }
        if (arg_json) {
                json_props(stdout, name, &p);
                fputc('\n', stdout);
        } else
                print_status(name, &p);
        props_done(&p);
        return 0;
}

/* ---- changing ---- */

/* After a change, unless --quiet: the instance's setting as it now reads it back. */
static int confirm(sd_bus *bus, const char *name, void (*print)(const Props *p)) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        Props p;

        if (arg_quiet)
                return 0;
        if (get_all_properties(bus, name, &p, &error) >= 0)
                print(&p);
        props_done(&p);
        return 0;
}

static void confirm_threads(const Props *p) {
        printf("%s: threads %s, pool size %" PRIu32 "\n", p->instance, p->thread_mode, p->pool_size);
}

static void confirm_cache(const Props *p) {
        printf("%s: cache %s\n", p->instance, p->cache_policy);
}

static void confirm_poll(const Props *p) {
        if (p->poll_mode && streq(p->poll_mode, "auto"))
                printf("%s: busy poll auto (at most %" PRIu32 " us)\n", p->instance, p->poll_usec);
        else if (p->poll_usec > 0)
                printf("%s: busy poll %" PRIu32 " us\n", p->instance, p->poll_usec);
        else
                printf("%s: busy poll off\n", p->instance);
}

int verb_set_threads(sd_bus *bus, const char *name, char **args) {
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
        return confirm(bus, name, confirm_threads);
}

int verb_set_cache(sd_bus *bus, const char *name, char **args) {
        const char *arg = args[0];
        int r;

        r = call_simple(bus, name, "set-cache", "SetCachePolicy", "s", arg);
        if (r < 0)
                return r;
        return confirm(bus, name, confirm_cache);
}

int verb_set_poll_us(sd_bus *bus, const char *name, char **args) {
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
        return confirm(bus, name, confirm_poll);
}

int verb_reset_stats(sd_bus *bus, const char *name, char **args) {
        int r = call_simple(bus, name, "reset-stats", "ResetStatistics", NULL);
        if (r == 0 && !arg_quiet)
                printf("%s: statistics reset\n", arg_instance);
        return r;
}

/* ---- statistics ---- */

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

int verb_stats(sd_bus *bus, const char *name, char **args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        Snapshot prev, cur;
        bool tty = isatty(STDOUT_FILENO);
        int r;

        if (arg_openmetrics)
                return openmetrics_stats(bus, arg_all ? NULL : name);
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


/* ---- live upgrade ---- */

/* Upgrade() returns once the serving process has handed the guest's session over; the next one
 * (the binary now installed, or the running code when that cannot start) then answers with its
 * Upgrades or UpgradeFailures one higher. Waited for here, so that the verb's result is the
 * upgrade's. */
#define UPGRADE_WAIT_MSEC 30000

int verb_upgrade(sd_bus *bus, const char *name, char **args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        struct timespec pause = { 0, 50 * 1000 * 1000 };
        Props before;
        int r;

        r = get_all_properties(bus, name, &before, &error);
        if (r < 0) {
                props_done(&before);
                return bus_error_errno(&error, r, "upgrade");
        }
        if (!before.has_upgrades) {
                fprintf(stderr, "fsctl: upgrade: instance %s runs a vufsd %s without live upgrade\n", arg_instance,
                        before.version ?: "?");
                props_done(&before);
                return ERR_FAILED;
        }
        r = call_simple(bus, name, "upgrade", "Upgrade", NULL);
        for (unsigned waited = 0; r >= 0; waited += 50) {
                Props now;

                if (waited >= UPGRADE_WAIT_MSEC) {
                        fprintf(stderr, "fsctl: upgrade: instance %s handed its session over, but no serving process "
                                        "answered within %u s (see the journal)\n",
                                arg_instance, UPGRADE_WAIT_MSEC / 1000);
                        r = ERR_FAILED;
                        break;
                }
                (void) nanosleep(&pause, NULL);
                sd_bus_error_free(&error);
                if (get_all_properties(bus, name, &now, &error) >= 0 &&
                    (now.upgrades != before.upgrades || now.upgrade_failures != before.upgrade_failures)) {
                        if (now.upgrades != before.upgrades) {
                                if (!arg_quiet)
                                        printf("%s: upgraded from vufsd %s to vufsd %s (the guest paused %.1f ms)\n",
                                               arg_instance, before.version ?: "?", now.version ?: "?",
                                               (double) now.upgrade_pause_usec / 1000.0);
                        } else {
                                fprintf(stderr, "fsctl: upgrade: instance %s: the new binary did not take over; the "
                                                "running vufsd %s fell back to serving the guest (see the journal)\n",
                                        arg_instance, now.version ?: "?");
                                r = ERR_FAILED;
                        }
                        props_done(&now);
                        break;
                }
                props_done(&now);
        }
        props_done(&before);
        return r;
}
