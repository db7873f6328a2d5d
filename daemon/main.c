/* main.c: vufsd entry point: configuration, process setup, the manager's loop. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>

#include <fcntl.h>

#include "capabilities.h"
#include "config-file.h"
#include "config.h"
#include "bus.h"
#include "control-relay.h"
#include "log.h"
#include "manager.h"
#include "passthrough.h"
#include "privileged-key.h"
#include "sandbox.h"
#include "seccomp-filter.h"
#include "share-dir.h"
#include "survive.h"

/* Exit status for a configuration file that cannot be used (sysexits' EX_CONFIG); the unit does
 * not restart on it (RestartPreventExitStatus=78). */
#define EXIT_CONFIG 78

/* The QEMU the vm suite runs (Debian 12); device-state migration needs 8.2 or later. */
#define VUFSD_TESTED_QEMU "QEMU 7.2"

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

static int open_share(Config *c) {
        _cleanup_free_ char *why = NULL;
        int fd = share_dir_open(c->shared_dir, geteuid(), &why);

        if (fd == -EPERM) {
                log_error("Refusing the shared directory %s: %s. Only root%s may own (or be able to write) "
                          "the directories on the way to it; move the share, or run vufsd as the user who owns them",
                          c->shared_dir, why, geteuid() != 0 ? " and vufsd's own user" : "");
                return fd;
        }
        if (fd < 0)
                return log_error_errno(fd, "Cannot open the shared directory %s: %m", c->shared_dir);
        c->fs.shared_dir_fd = fd;
        c->fs.has_shared_dir_fd = true;
        return 0;
}

/* Right before serving: the sandbox, then capabilities, then seccomp; each step needs privileges or
 * system calls the next one takes away. */
static int lockdown(Manager *m, const Config *c) {
        _cleanup_close_ int task_dir = -1;
        uint64_t caps;
        bool handles;
        int r;

        /* Opened before the sandbox hides /proc: capabilities are per thread, and the executor may
         * have started workers already. */
        task_dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (task_dir < 0)
                return log_error_errno(errno, "Cannot open /proc/self/task: %m");
        r = sandbox_enter(c->sandbox, c->shared_dir, c->fs.shared_dir_fd);
        if (r < 0)
                return r;
        /* Host paths: inside the sandbox they would name files of the share. The supervisor
         * removes the socket and SOCK.pid instead, in every mode: the daemon has no unlink(). */
        free(m->socket_path);
        free(m->lock_path);
        m->socket_path = m->lock_path = NULL;
        /* File handles (decided when the share was opened): their capability and system calls only
         * when inodes are remembered by handle; a --modcaps that removes it still wins. */
        handles = passthrough_uses_handles(m->passthrough);
        caps = c->capabilities | (handles ? capabilities_file_handles() & c->modcaps_keep : 0);
        r = capabilities_apply(caps, sandbox_netns_fd(), task_dir);
        if (r < 0)
                return log_error_errno(r, "Cannot drop capabilities: %m");
        /* Live migration makes handles (sends them, or compares them) even without using them. */
        r = seccomp_install(c->seccomp, handles,
                            c->migration_mode == MIGRATION_FILE_HANDLES || c->migration_verify_handles);
        if (r < 0)
                return log_error_errno(r, "Cannot install the seccomp filter: %m");
        log_debug("Sandbox %s, seccomp %s, capabilities 0x%" PRIx64 ", file handles %s",
                  sandbox_mode_to_string(c->sandbox), syscall_filter_to_string(c->seccomp), caps,
                  handles ? "in use" : "not in use");
        return 0;
}

/* --privileged-files=map: the key its metadata is authenticated with, read (or made) now, from
 * outside the share, before the sandbox hides where it lives. A key file given by name must work;
 * without one, a default location that cannot hold a key (a read-only state directory) makes the
 * share work as refuse, which gives the host nothing, and says so. */
static int load_privileged_key(Config *c) {
        _cleanup_free_ char *dflt = NULL;
        const char *path = c->privileged_key_file;
        int r = 0;

        if (c->fs.privileged_files != PRIVILEGED_FILES_MAP)
                return 0;
        if (!path) {
                r = privileged_key_default_path(&dflt);
                path = dflt;
        }
        if (r >= 0)
                r = privileged_key_load(path, c->fs.privileged_key);
        if (r >= 0) {
                c->fs.has_privileged_key = true;
                log_debug("--privileged-files=map: key %s", path);
                return 0;
        }
        if (c->privileged_key_file)
                return log_error_errno(r, "--privileged-files-key=%s: cannot use it: %m (it must be a regular file of "
                                          "%d bytes, owned by vufsd's user, mode 0600)", path, FS_PRIVILEGED_KEY_SIZE);
        log_warning_errno(r, "--privileged-files=map: no key at %s (%m); working as --privileged-files=refuse "
                             "(give --privileged-files-key=PATH)", path ? path : "the default location");
        return 0;
}

/* What the command line asked for that deserves a word once logging is set up. */
static void log_startup_notes(const Config *c) {
        if (c->deprecated_socket)
                log_warning("Use of deprecated option --socket: use --socket-path instead");
        if (c->deprecated_o)
                log_info("Using the compatibility option format \"-o\"; the same options exist as --long-options");
        if (c->deprecated_d)
                log_info("-d is deprecated: use --log-level=debug");
        if (c->deprecated_f)
                log_info("-f has no effect: vufsd always runs in the foreground");
        if (c->deprecated_fallback)
                log_warning("Use of deprecated value 'fallback' for --inode-file-handles: use 'prefer'");
        if (c->handles_dropped_by_modcaps)
                log_notice("--modcaps removes dac_read_search, which file handles need: --inode-file-handles=prefer "
                           "works as never");
        if (c->migration_given)
                log_info("Live migration: mode %s, on error %s%s%s (the frontend must offer DEVICE_STATE: QEMU "
                         "8.2 or later; %s cannot migrate a vhost-user-fs device)",
                         migration_mode_to_string(c->migration_mode), migration_on_error_to_string(c->migration_on_error),
                         c->migration_verify_handles ? ", verify handles" : "",
                         c->migration_confirm_paths ? ", confirm paths" : "", VUFSD_TESTED_QEMU);
        if (c->posix_acl_mode == FEATURE_AUTO)
                log_info("--posix-acl=auto: ACLs %s (the share's filesystem %s them)",
                         c->fs.posix_acl ? "offered" : "not offered",
                         c->fs.posix_acl ? "supports" : "does not support");
        if (c->security_label_mode == FEATURE_AUTO)
                log_info("--security-label=auto: security labels %s",
                         c->fs.security_label ? "offered" : "not offered");
}

/* The serving process from here on (the first, one the spawner forked, or a binary it executed for
 * an upgrade): the manager, the control object, the socket, the lockdown, the loop. */
static int serve(Config *cfg, const char *instance, int control_fd, PathSocket *ps, bool upgraded) {
        /* A binary executed for an upgrade that cannot serve says so to the spawner, which lets
         * the running code take over instead. */
        int failed = upgraded ? SANDBOX_EXIT_UPGRADE_REFUSED : 1;
        _cleanup_(manager_freep) Manager *m = NULL;
        sigset_t mask;
        int r;

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
        /* In a user namespace whose setgroups is "deny" (the caller's own gid mapped without
         * newgidmap) the groups cannot change: they stay the host user's own (docs/id-mapping.md). */
        r = userns_setgroups_denied() ? 0 : passthrough_drop_supplementary_groups();
        if (r < 0) {
                log_error_errno(r, "Cannot drop supplementary groups: %m");
                path_socket_done(ps, true);
                config_done(cfg);
                return failed;
        }
        /* Room for the guest's open files, within the system's limits (CVE-2020-10717); the fd
         * budget answers ENFILE before this runs out. */
        (void)passthrough_raise_fd_limit(cfg->rlimit_nofile);

        r = manager_new(&m, cfg);
        /* The object on the control channel; the supervisor owns the instance's name already. */
        if (r >= 0)
                r = bus_open(m, instance, TAKE_FD(control_fd));
        else
                control_fd = safe_close(control_fd);
        if (r >= 0)
                r = manager_listen(m, ps);
        if (r >= 0)
                r = lockdown(m, cfg);
        if (r < 0) {
                (void)sandbox_notifyf("ERRNO=%d", -r);
                m = manager_free(m);
                path_socket_done(ps, true); /* if the manager did not take it yet */
                config_done(cfg);
                return failed;
        }
        r = manager_run(m);
        m = manager_free(m);
        config_done(cfg);
        return r < 0 ? failed : r;
}


/* main() of a binary the spawner executed for a live upgrade: what run() does before it reaches
 * serve() was done by the process it replaces (the socket made, the share opened and mounted, the
 * bus name owned, the namespaces entered), whose results came as fds; the rest is done again. */
static int run_upgraded(Config *c, int control_fd, int listen_fd, pid_t main_pid) {
        PathSocket ps = PATH_SOCKET_NULL;
        _cleanup_free_ char *instance = NULL;
        int r;

        /* As a forked serving process: it dies with the spawner (execve() may have reset it). */
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        c->main_pid = main_pid;
        c->fs.has_shared_dir_fd = true;
        survive_enable(true);
        /* The listening socket (--socket-path); with --fd or socket activation it is where the
         * launcher put it, inherited. Its path is the supervisor's to remove. */
        ps.fd = listen_fd;
        r = load_privileged_key(c);
        if (r >= 0)
                r = bus_resolve_instance(c, &instance);
        /* An instance named after the pid is named after the launcher's, as before. */
        if (r >= 0 && !c->instance && strncmp(instance, "pid", 3) == 0) {
                free(instance);
                instance = NULL;
                r = asprintf(&instance, "pid%d", (int) main_pid) < 0 ? -ENOMEM : 0;
        }
        if (r < 0) {
                safe_close(control_fd);
                path_socket_done(&ps, false);
                config_done(c);
                return SANDBOX_EXIT_UPGRADE_REFUSED;
        }
        return serve(c, instance, control_fd, &ps, true);
}

static int run(int argc, char *argv[]) {
        _cleanup_free_ char *instance = NULL, *exe = NULL;
        ControlRelay *relay = NULL;
        SupervisorControl control;
        PathSocket path_socket = PATH_SOCKET_NULL;
        Config config;
                int r, exit_status = 0, control_fd = -1, upgrade_listen_fd = -1;
        pid_t upgrade_main_pid = 0;

        /* Live upgrade: the path the spawner executes the next binary from, recorded before anything
         * is entered (the sandbox mounts a /proc of its own pid namespace, then leaves the host's
         * root). A package that installs a new vufsd replaces the file at this path. */
        exe = realpath("/proc/self/exe", NULL);
        config_init(&config);
        r = config_parse_argv(&config, argc, argv);
        if (r == 0 && (config.config_file || config.instance)) {
                r = load_config_file(&config, argc, argv);
                if (r == -EINVAL || r == -ENOENT || r == -EIO) {
                        /* The messages are printed; a broken file is not fixed by restarting. */
                        (void)sd_notifyf(false, "STATUS=Bad configuration\nERRNO=%d", -r);
                        config_done(&config);
                        return EXIT_CONFIG;
                }
        }
        if (r == 0) {
                /* The Rust virtiofsd takes its log level from RUST_LOG unless one is given. */
                config_apply_rust_log(&config, getenv("RUST_LOG"));
                r = config_verify(&config);
        }
        if (r != 0) {
                if (r < 0)
                        (void)sd_notifyf(false, "ERRNO=%d", -r);
                config_done(&config);
                /* Usage errors exit 2 (the message named the option), as virtiofsd's do. */
                return r > 0 ? 0 : EXIT_USAGE;
        }
        log_set_max_level(config.log_level);
        if (config.syslog) {
                r = log_open_syslog(config.instance);
                if (r < 0)
                        log_warning_errno(r, "Cannot log to syslog (/dev/log: %m); logging to stderr");
        }
        /* Started by the spawner for a live upgrade (respawn.c): the fds a forked serving process
         * would have inherited, named in the environment; this process is where that one would be
         * (the namespaces made, the share not entered) and goes on from there as it would. */
        r = sandbox_take_upgrade_env(&control_fd, &config.fs.shared_dir_fd, &upgrade_listen_fd, &upgrade_main_pid);
        if (r < 0) {
                log_error("vufsd: %s is malformed", VUFSD_UPGRADE_ENV);
                config_done(&config);
                return SANDBOX_EXIT_UPGRADE_REFUSED;
        }
        if (r > 0)
                return run_upgraded(&config, control_fd, upgrade_listen_fd, upgrade_main_pid);
        log_startup_notes(&config);
        /* The process the launcher started: SOCK.pid holds it, also when a sandboxed child serves. */
        config.main_pid = getpid();
        /* The socket first, before the sandbox, the share or the bus can fail: launchers wait for
         * the file and would otherwise wait for their timeout instead of seeing vufsd exit. The
         * sandboxed child inherits it; the supervisor removes both files when the child is gone
         * (sandbox.h). Connections wait in the backlog until the main loop accepts them, by then
         * the instance's bus name is owned. */
        if (config.socket_path) {
                r = path_socket_create(&config, &path_socket);
                if (r < 0) {
                        (void)sd_notifyf(false, "ERRNO=%d", -r);
                        config_done(&config);
                        return 1;
                }
        }

        /* The bus is chosen as the process is now: inside its user namespace an unprivileged
         * daemon is uid 0, which must not make it pick the system bus (bus.c). */
        if (!config.bus && geteuid() != 0) {
                config.bus = strdup("session");
                if (!config.bus) {
                        path_socket_done(&path_socket, true);
                        config_done(&config);
                        return 1;
                }
        }

        /* The share resolved once, every directory on the way checked (issue 31 finding 8): the
         * bind mount, the root fd and the sandbox's root all come from this fd, never from the path
         * again, and a path someone else could redirect between two looks is refused. Before the
         * sandbox: its owner is checked against the user who started vufsd. */
        r = open_share(&config);
        if (r >= 0)
                r = load_privileged_key(&config);
        if (r < 0) {
                (void)sd_notifyf(false, "ERRNO=%d", -r);
                path_socket_done(&path_socket, true);
                config_done(&config);
                return 1;
        }

        /* First, before anything else is opened: the daemon goes on in a child process (in
         * namespace mode pid 1 of a new pid namespace, in a new mount namespace); this process stays
         * outside as its supervisor, in every mode: it forwards signals and notifications, holds
         * SOCK.pid and the control plane (the bus connection and the instance's name, which the
         * process handling guest input must not hold), and exits as the child does (sandbox.h). */
        r = bus_resolve_instance(&config, &instance);
        if (r >= 0 && !(config.bus && streq(config.bus, "none")))
                r = control_relay_new(&relay, &config, instance);
        if (r < 0) {
                path_socket_done(&path_socket, true);
                config_done(&config);
                return 1;
        }
        if (relay)
                control_relay_supervisor(relay, &control);
        r = sandbox_prepare(config.sandbox, config.shared_dir, &config.fs.shared_dir_fd, config.socket_path,
                            config.seccomp, config.fs.privileged_files == PRIVILEGED_FILES_ALLOW, &config.uid_map, &config.gid_map,
                            &path_socket.lock_fd, relay ? &control : NULL, &control_fd, &exit_status);
        relay = control_relay_free(relay);
        /* --crash-restarts: this process becomes the spawner and returns here in each serving
         * process it starts (sandbox.h); the supervisor is the keeper (keeper.h). */
        if (r > 0 && config.crash_restarts > 0) {
                SandboxExec ex = { .exe = exe, .argv = argv, .listen_fd = path_socket.fd };

                if (!exe)
                        log_warning("Cannot tell vufsd's path (/proc/self/exe): fsctl upgrade will restart the "
                                    "running code");
                r = sandbox_respawn(config.crash_restarts, config.sandbox, &config.fs.shared_dir_fd, &control_fd, &ex);
                survive_enable(true);
        }
        if (r <= 0) {
                /* The supervisor: its copies of the fds are closed, and when the child ran, it
                 * removed the files already; when there was no child, this removes them. */
                if (r == 0)
                        path_socket = (PathSocket){
                                .fd = -1, .lock_fd = -1, .path = path_socket.path, .lock_path = path_socket.lock_path
                        };
                path_socket_done(&path_socket, r < 0);
                config_done(&config);
                return r < 0 ? 1 : exit_status;
        }

        return serve(&config, instance, control_fd, &path_socket, false);
}

int main(int argc, char *argv[]) {
        return run(argc, argv);
}
