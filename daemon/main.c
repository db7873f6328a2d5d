/* main.c: vufsd entry point: configuration, process setup, the manager's loop. */
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>

#include "config.h"
#include "log.h"
#include "manager.h"

static int run(int argc, char *argv[]) {
        _cleanup_(manager_freep) Manager *m = NULL;
        Config config;
        sigset_t mask;
        int r;

        config_init(&config);
        r = config_parse_argv(&config, argc, argv);
        if (r == 0)
                r = config_verify(&config);
        if (r != 0) {
                config_done(&config);
                return r > 0 ? 0 : 1;
        }
        log_set_max_level(config.log_level);
        config.fs.shared_dir = config.shared_dir;

        /* Block the termination signals in every thread: the main loop reads them through a
         * signalfd, and threads created later inherit the mask. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        /* A frontend that vanishes mid-write must give EPIPE, not kill us. */
        signal(SIGPIPE, SIG_IGN);

        r = manager_new(&m, &config);
        if (r >= 0)
                r = manager_listen(m);
        if (r < 0) {
                (void) sd_notifyf(false, "ERRNO=%d", -r);
                m = manager_free(m);
                config_done(&config);
                return 1;
        }
        r = manager_run(m);
        m = manager_free(m);
        config_done(&config);
        return r < 0 ? 1 : r;
}

int main(int argc, char *argv[]) {
        return run(argc, argv);
}
