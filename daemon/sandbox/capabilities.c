/* capabilities.c: bounding/permitted/effective sets for every thread, --modcaps, no-new-privs. */
#include "capabilities.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>

#include "log.h"
#include "util.h"

static const char *const cap_names[] = {
        [CAP_CHOWN] = "chown",
        [CAP_DAC_OVERRIDE] = "dac_override",
        [CAP_DAC_READ_SEARCH] = "dac_read_search",
        [CAP_FOWNER] = "fowner",
        [CAP_FSETID] = "fsetid",
        [CAP_KILL] = "kill",
        [CAP_SETGID] = "setgid",
        [CAP_SETUID] = "setuid",
        [CAP_SETPCAP] = "setpcap",
        [CAP_LINUX_IMMUTABLE] = "linux_immutable",
        [CAP_NET_BIND_SERVICE] = "net_bind_service",
        [CAP_NET_BROADCAST] = "net_broadcast",
        [CAP_NET_ADMIN] = "net_admin",
        [CAP_NET_RAW] = "net_raw",
        [CAP_IPC_LOCK] = "ipc_lock",
        [CAP_IPC_OWNER] = "ipc_owner",
        [CAP_SYS_MODULE] = "sys_module",
        [CAP_SYS_RAWIO] = "sys_rawio",
        [CAP_SYS_CHROOT] = "sys_chroot",
        [CAP_SYS_PTRACE] = "sys_ptrace",
        [CAP_SYS_PACCT] = "sys_pacct",
        [CAP_SYS_ADMIN] = "sys_admin",
        [CAP_SYS_BOOT] = "sys_boot",
        [CAP_SYS_NICE] = "sys_nice",
        [CAP_SYS_RESOURCE] = "sys_resource",
        [CAP_SYS_TIME] = "sys_time",
        [CAP_SYS_TTY_CONFIG] = "sys_tty_config",
        [CAP_MKNOD] = "mknod",
        [CAP_LEASE] = "lease",
        [CAP_AUDIT_WRITE] = "audit_write",
        [CAP_AUDIT_CONTROL] = "audit_control",
        [CAP_SETFCAP] = "setfcap",
        [CAP_MAC_OVERRIDE] = "mac_override",
        [CAP_MAC_ADMIN] = "mac_admin",
        [CAP_SYSLOG] = "syslog",
        [CAP_WAKE_ALARM] = "wake_alarm",
        [CAP_BLOCK_SUSPEND] = "block_suspend",
        [CAP_AUDIT_READ] = "audit_read",
        [CAP_PERFMON] = "perfmon",
        [CAP_BPF] = "bpf",
        [CAP_CHECKPOINT_RESTORE] = "checkpoint_restore",
};

#define BIT(c) (UINT64_C(1) << (c))

uint64_t capabilities_default(bool privileged_files) {
        /* chown/fchownat as the daemon and for SETATTR; DAC_OVERRIDE and FOWNER act as root on
         * the guest's behalf (the guest's own permission checks already ran, or the request runs
         * with the guest's fsuid, where effective caps are dropped by the kernel); FSETID keeps
         * setgid bits on writes the guest may make; SETUID/SETGID switch identities per request
         * (credentials.c). Only with --allow-privileged-files: MKNOD for device nodes the guest
         * creates (never opened: see passthrough/inode-fd.c) and SETFCAP for security.capability xattrs.
         * Without that option the filesystem layer refuses both, and a taken-over daemon must not
         * be able to do them either: in chroot mode (no nodev mount) a block device node of a host
         * disk made in the share opens that disk. Whiteouts (character device 0:0) need no
         * capability since Linux 5.8. Nothing else is needed after the sandbox: RLIMIT_NOFILE is
         * raised, sockets are bound and namespaces made before. */
        uint64_t caps = BIT(CAP_CHOWN) | BIT(CAP_DAC_OVERRIDE) | BIT(CAP_FOWNER) | BIT(CAP_FSETID) | BIT(CAP_SETGID) |
                        BIT(CAP_SETUID);

        if (privileged_files)
                caps |= BIT(CAP_MKNOD) | BIT(CAP_SETFCAP);
        return caps;
}

uint64_t capabilities_file_handles(void) {
        /* open_by_handle_at() needs CAP_DAC_READ_SEARCH: kept only while inodes are remembered by
         * handle, since with it a handle opens any inode of the filesystem (docs/security.md). */
        return BIT(CAP_DAC_READ_SEARCH);
}

const char *capability_to_name(int cap) {
        return cap >= 0 && (size_t) cap < ELEMENTSOF(cap_names) ? cap_names[cap] : NULL;
}

int capability_from_name(const char *name) {
        if (!name)
                return -EINVAL;
        if (strncasecmp(name, "cap_", 4) == 0)
                name += 4;
        for (size_t i = 0; i < ELEMENTSOF(cap_names); i++)
                if (cap_names[i] && strcasecmp(name, cap_names[i]) == 0)
                        return (int) i;
        return -EINVAL;
}

int capabilities_modify(uint64_t *mask, const char *spec) {
        _cleanup_free_ char *copy = NULL;
        char *save = NULL;
        uint64_t m = *mask;

        if (!spec)
                return -EINVAL;
        copy = strdup(spec);
        if (!copy)
                return -ENOMEM;
        for (char *t = strtok_r(copy, ":,", &save); t; t = strtok_r(NULL, ":,", &save)) {
                int cap;

                if (t[0] != '+' && t[0] != '-') {
                        fprintf(stderr, "vufsd: --modcaps item \"%s\" must start with + or -\n", t);
                        return -EINVAL;
                }
                cap = capability_from_name(t + 1);
                if (cap < 0) {
                        fprintf(stderr, "vufsd: unknown capability \"%s\" in --modcaps\n", t + 1);
                        return -EINVAL;
                }
                if (t[0] == '+')
                        m |= BIT(cap);
                else
                        m &= ~BIT(cap);
        }
        *mask = m;
        return 0;
}

/* ---- applying, per thread ---- */

static int capget_self(uint64_t *eff, uint64_t *prm) {
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2] = {};

        if (syscall(SYS_capget, &h, d) < 0)
                return -errno;
        *eff = d[0].effective | (uint64_t) d[1].effective << 32;
        *prm = d[0].permitted | (uint64_t) d[1].permitted << 32;
        return 0;
}

/* Async-signal-safe (system calls only): also runs in the signal handler of other threads. */
static int apply_self(uint64_t keep) {
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2] = {};
        uint64_t eff = 0, prm = 0, want;
        int r;

        r = capget_self(&eff, &prm);
        if (r < 0)
                return r;
        /* The bounding set first: dropping from it needs CAP_SETPCAP, which goes below. */
        if (eff & BIT(CAP_SETPCAP))
                for (int c = 0;; c++) {
                        int in = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
                        if (in < 0)
                                break; /* past the kernel's last capability */
                        if (in > 0 && !(keep & BIT(c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
                                return -errno;
                }
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return -errno;
        want = keep & prm;
        d[0].effective = d[0].permitted = (uint32_t) want;
        d[1].effective = d[1].permitted = (uint32_t) (want >> 32);
        if (syscall(SYS_capset, &h, d) < 0)
                return -errno;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        return 0;
}

static struct {
        uint64_t keep;
        int netns_fd;
        _Atomic unsigned done;
        _Atomic int error;
} job;

static void on_apply_signal(int sig) {
        int saved = errno, r = 0;

        if (job.netns_fd >= 0 && setns(job.netns_fd, CLONE_NEWNET) < 0)
                r = -errno;
        if (r == 0)
                r = apply_self(job.keep);
        if (r < 0)
                atomic_store(&job.error, r);
        atomic_fetch_add(&job.done, 1);
        errno = saved;
}

/* Signals every thread not yet in done_tids and waits for each to apply the change to itself.
 * Returns the number of threads signalled (0 = none left), or negative errno. */
static int apply_other_threads(int task_dir_fd, pid_t *done_tids, unsigned *n_done, unsigned max_done) {
        _cleanup_close_ int dfd = -1;
        DIR *d;
        struct dirent *de;
        pid_t self = (pid_t) syscall(SYS_gettid), pid = getpid();
        unsigned sent = 0;

        dfd = openat(task_dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        d = fdopendir(dfd);
        if (!d)
                return -errno;
        TAKE_FD(dfd);
        atomic_store(&job.done, 0);
        while ((de = readdir(d))) {
                pid_t tid = (pid_t) atoi(de->d_name);
                bool seen = tid == self || tid <= 0;

                for (unsigned i = 0; !seen && i < *n_done; i++)
                        seen = done_tids[i] == tid;
                if (seen)
                        continue;
                if (*n_done >= max_done) {
                        closedir(d);
                        return -E2BIG;
                }
                if (syscall(SYS_tgkill, pid, tid, SIGRTMIN) < 0) {
                        if (errno == ESRCH)
                                continue; /* exited meanwhile */
                        closedir(d);
                        return -errno;
                }
                done_tids[(*n_done)++] = tid;
                sent++;
        }
        closedir(d);
        /* Every signalled thread runs the handler soon (none blocks SIGRTMIN); give up after 5 s
         * rather than run with a thread that kept its capabilities. */
        for (int i = 0; i < 5000 && atomic_load(&job.done) < sent; i++)
                nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        if (atomic_load(&job.done) < sent)
                return -ETIMEDOUT;
        return (int) sent;
}

int capabilities_apply(uint64_t keep, int netns_fd, int task_dir_fd) {
        struct sigaction sa = { .sa_handler = on_apply_signal, .sa_flags = SA_RESTART }, old;
        pid_t tids[1024];
        unsigned n_tids = 0;
        sigset_t unblock;
        int r;

        job.keep = keep;
        job.netns_fd = netns_fd;
        atomic_store(&job.error, 0);

        /* Others first: they join the network namespace with our CAP_SYS_ADMIN still around. */
        if (task_dir_fd >= 0) {
                sigemptyset(&unblock);
                sigaddset(&unblock, SIGRTMIN);
                pthread_sigmask(SIG_UNBLOCK, &unblock, NULL);
                sigfillset(&sa.sa_mask);
                if (sigaction(SIGRTMIN, &sa, &old) < 0)
                        return -errno;
                /* Until no new thread shows up: one could be created by a thread not yet reduced. */
                do
                        r = apply_other_threads(task_dir_fd, tids, &n_tids, ELEMENTSOF(tids));
                while (r > 0);
                (void) sigaction(SIGRTMIN, &old, NULL);
                if (r < 0)
                        return r;
                if (atomic_load(&job.error) < 0)
                        return atomic_load(&job.error);
        }
        return apply_self(keep);
}
