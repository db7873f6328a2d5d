/* main.c: vufsd entry point: configuration, process setup, the manager's loop. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>

#include <fcntl.h>

#include "capabilities.h"
#include "config-file.h"
#include "config.h"
#include "bus.h"
#include "log.h"
#include "manager.h"
#include "passthrough.h"
#include "sandbox.h"
#include "seccomp-filter.h"

/* Exit status for a configuration file that cannot be used (sysexits' EX_CONFIG); the unit does
 * not restart on it (RestartPreventExitStatus=78). */
#define EXIT_CONFIG 78

/* Reads --config FILE (must exist) or, with --instance NAME, VUFSD_CONFIG_DIR/NAME.conf when it
 * exists, then parses the command line again on top so that it overrides the file. */
static int load_config_file(Config *c, int argc, char *argv[]) {
        _cleanup_free_ char *path = NULL;
        bool must_exist = c->config_file;
        int r, loaded;

        if (c->config_file)
                path = strdup(c->config_file);
        else {
                r = config_file_path_for_instance(c->instance, &path);
                if (r < 0)
                        return r;
        }
        if (!path)
                return -ENOMEM;

        config_done(c);
        config_init(c);
        loaded = config_file_load(c, path, must_exist);
        if (loaded < 0)
                return loaded;
        r = config_parse_argv(c, argc, argv);
        if (r != 0)
                return r < 0 ? -EBADMSG : r; /* cannot happen: the same argv parsed before */
        if (!c->shared_dir) {
                fprintf(stderr, "vufsd: no shared directory: set [Share] Directory= in %s%s or pass --shared-dir\n",
                        path, loaded == 0 ? ", which does not exist," : "");
                return -EINVAL;
        }
        return 0;
}

/* Right before serving: the sandbox, then capabilities, then seccomp; each step needs privileges or
 * system calls the next one takes away. */
static int lockdown(Manager *m, const Config *c, SandboxMode sandbox) {
        SyscallFilter filter = c->seccomp ? syscall_filter_from_string(c->seccomp) : syscall_filter_default();
        uint64_t caps = capabilities_default(c->fs.privileged_files);
        _cleanup_close_ int task_dir = -1;
        int r;

        if (c->modcaps && capabilities_modify(&caps, c->modcaps) < 0)
                return -EINVAL; /* config_verify() checked it */
        /* Opened before the sandbox hides /proc: capabilities are per thread, and the executor may
         * have started workers already. */
        task_dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (task_dir < 0)
                return log_error_errno(errno, "Cannot open /proc/self/task: %m");
        r = sandbox_enter(sandbox, c->shared_dir);
        if (r < 0)
                return r;
        if (sandbox != SANDBOX_NONE) {
                /* Host paths: inside the sandbox they would name files of the share. The supervisor
                 * removes the socket instead. */
                free(m->socket_path);
                free(m->lock_path);
                m->socket_path = m->lock_path = NULL;
        }
        r = capabilities_apply(caps, sandbox_netns_fd(), task_dir);
        if (r < 0)
                return log_error_errno(r, "Cannot drop capabilities: %m");
        r = seccomp_install(filter);
        if (r < 0)
                return log_error_errno(r, "Cannot install the seccomp filter: %m");
        log_debug("Sandbox %s, seccomp %s, capabilities 0x%" PRIx64, sandbox_mode_to_string(sandbox),
                  syscall_filter_to_string(filter), caps);
        return 0;
}

static int run(int argc, char *argv[]) {
        _cleanup_(manager_freep) Manager *m = NULL;
        Config config;
        SandboxMode sandbox;
        sigset_t mask;
        int r, exit_status = 0;

        config_init(&config);
        r = config_parse_argv(&config, argc, argv);
        if (r == 0 && (config.config_file || config.instance)) {
                r = load_config_file(&config, argc, argv);
                if (r == -EINVAL || r == -ENOENT || r == -EIO) {
                        /* The messages are printed; a broken file is not fixed by restarting. */
                        (void) sd_notifyf(false, "STATUS=Bad configuration\nERRNO=%d", -r);
                        config_done(&config);
                        return EXIT_CONFIG;
                }
        }
        if (r == 0)
                r = config_verify(&config);
        if (r != 0) {
                if (r < 0)
                        (void) sd_notifyf(false, "ERRNO=%d", -r);
                config_done(&config);
                return r > 0 ? 0 : 1;
        }
        log_set_max_level(config.log_level);
        config.fs.shared_dir = config.shared_dir;

        /* First, before anything is opened: in namespace and chroot mode the daemon goes on in a
         * child process (pid 1 of a new pid namespace, in a new mount namespace); this process stays
         * outside as its supervisor: it forwards signals and notifications and exits as the child
         * does (sandbox.h). */
        sandbox = config.sandbox ? sandbox_mode_from_string(config.sandbox) : sandbox_mode_default();
        r = sandbox_prepare(sandbox, config.shared_dir, config.socket_path,
                            config.seccomp ? syscall_filter_from_string(config.seccomp) : syscall_filter_default(),
                            config.fs.privileged_files, &exit_status);
        if (r <= 0) {
                config_done(&config);
                return r < 0 ? 1 : exit_status;
        }

        /* Block the termination signals in every thread: the main loop reads them through a
         * signalfd, and threads created later inherit the mask. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        /* A frontend that vanishes mid-write must give EPIPE, not kill us. */
        signal(SIGPIPE, SIG_IGN);

        /* Before any thread exists: requests run as the guest's uid/gid, and root's supplementary
         * groups would otherwise still grant access (CVE-2022-0358). */
        r = passthrough_drop_supplementary_groups();
        if (r < 0) {
                log_error_errno(r, "Cannot drop supplementary groups: %m");
                config_done(&config);
                return 1;
        }
        /* Room for the guest's open files, within the system's limits (CVE-2020-10717); the fd
         * budget answers ENFILE before this runs out. */
        (void) passthrough_raise_fd_limit(config.rlimit_nofile);

        r = manager_new(&m, &config);
        /* Before any sandbox closes the filesystem view: the bus socket must be reachable. Before
         * listening too: once the vhost-user socket accepts, the instance's bus name is owned. */
        if (r >= 0)
                r = bus_open(m);
        if (r >= 0)
                r = manager_listen(m);
        if (r >= 0)
                r = lockdown(m, &config, sandbox);
        if (r < 0) {
                (void) sandbox_notifyf("ERRNO=%d", -r);
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
