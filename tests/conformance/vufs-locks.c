/* vufs-locks.c: the lock conformance matrix, run in a guest on the share and on a tmpfs and diffed.
 *
 * Usage:
 *   vufs-locks run DIR [PEERDIR]
 *       Runs every case in DIR (an empty directory on the filesystem under test) and prints one line
 *       per observation, "locks.KIND.CASE.WHAT: result". KIND is posix (fcntl F_SETLK), ofd
 *       (F_OFD_SETLK) or flock. The "peer" cases ask another process, which opens the same file
 *       by its own path, to probe, take and release locks: without PEERDIR a process forked here
 *       (the local filesystem's answer), with PEERDIR a process on the host serving the same files
 *       (vufs-locks peer), reached through request and answer files in PEERDIR.
 *   vufs-locks peer PEERDIR BASEDIR [TIMEOUT_S]
 *       The host side: answers the requests a guest "run" writes to PEERDIR, for files under
 *       BASEDIR (the host's path of the guest's DIR), until "quit" or TIMEOUT_S (default 900).
 *   vufs-locks exec-hold FD RFD GFD
 *       Internal: what a locking process execs into (reports whether FD survived the exec on RFD,
 *       then waits for GFD to close).
 *
 * Nothing in the output depends on the filesystem's identity (no pids, inode numbers or paths),
 * so a tmpfs run and a virtiofs run in the same guest diff cleanly; tests/vm/test-locks.sh fails
 * on any difference docs/conformance.md does not list with the exact value vufsd gives.
 * Exit status 0 when the matrix ran to the end (the verdict is the diff), 2 on a setup failure. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe-util.h"

/* How long a blocked waiter is given to acquire a lock once it is free. */
#define ACQUIRE_MS 20000
/* How long a waiter is given to answer a signal before the holder lets go anyway. */
#define SIGNAL_ANSWER_MS 5000
/* How long a waiter must stay blocked to count as blocked. */
#define BLOCKED_MS 300
#define MSG PROBE_MSG

enum { K_POSIX, K_OFD, K_FLOCK, K_N };
static const char *const kind_name[K_N] = { "posix", "ofd", "flock" };

static const char *peer_dir; /* NULL: the peer is a local process (peer_fd) */
static int peer_fd = -1;
/* The number of the last request to a remote peer: shared by every case process (it lives in a
 * shared mapping), because the peer answers requests strictly in order. */
static unsigned *peer_seq;

/* ---- output and small helpers ---- */

static void die(const char *what) {
        fprintf(stderr, "vufs-locks: setup failed: %s: %m\n", what);
        exit(2);
}

static int cur_kind;
static const char *cur_case;

/* One observation of the current case: "locks.KIND.CASE.WHAT: value". */
static void say(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const char *what, const char *fmt, ...) {
        va_list ap;

        printf("locks.%s.%s.%s: ", kind_name[cur_kind], cur_case, what);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
        fflush(stdout);
}

/* A message, or what stood in for it ("ETIMEDOUT", "EPIPE"). */
static const char *recv_str(int fd, char *buf, int timeout_ms) {
        int r = recv_msg(fd, buf, timeout_ms);

        return r < 0 ? ename(-r) : buf;
}

/* Waits for a child; one that does not end in time is killed. A process that a lock wait in the
 * filesystem keeps even from SIGKILL is left behind after a second try (its case has reported). */
static void reap(pid_t pid) {
        int status;

        for (int i = 0; i < WAIT_LONG_MS / 100; i++) {
                if (waitpid(pid, &status, WNOHANG) == pid)
                        return;
                msleep(100);
        }
        kill(pid, SIGKILL);
        for (int i = 0; i < 50; i++) {
                if (waitpid(pid, &status, WNOHANG) == pid)
                        return;
                msleep(100);
        }
        fprintf(stderr, "vufs-locks: %s.%s: pid %d does not end even after SIGKILL\n", kind_name[cur_kind], cur_case,
                (int)pid);
}

/* A child that reports through a pipe: returns its pid; *ret_fd reads its messages. The child
 * keeps only stdio, its pipe and keep_fd: a copy of another child's command pipe or of a locked
 * descriptor would change what a close means. */
static pid_t spawn(void (*fn)(int wfd, void *), void *ud, int keep_fd, int *ret_fd) {
        int p[2];
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                die("pipe");
        fflush(stdout);
        pid = fork();
        if (pid < 0)
                die("fork");
        if (pid == 0) {
                for (int fd = 3; fd < 1024; fd++)
                        if (fd != p[1] && fd != keep_fd)
                                close(fd);
                fn(p[1], ud);
                _exit(0);
        }
        close(p[1]);
        *ret_fd = p[0];
        return pid;
}

static int open_file(const char *f, int flags) {
        int fd = open(f, flags);

        if (fd < 0)
                fprintf(stderr, "vufs-locks: open %s: %m\n", f);
        return fd;
}

/* ---- the three kinds of lock ---- */

/* Takes (F_RDLCK, F_WRLCK) or drops (F_UNLCK) a lock of this kind through fd: bytes 0-9 for the
 * byte-range kinds, the whole file for flock. 0 or -errno. */
static int lk(int kind, int fd, short type, bool wait) {
        if (kind == K_FLOCK) {
                int op = type == F_RDLCK ? LOCK_SH : type == F_WRLCK ? LOCK_EX : LOCK_UN;

                if (!wait)
                        op |= LOCK_NB;
                return flock(fd, op) < 0 ? -errno : 0;
        }
        struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };
        int cmd = kind == K_POSIX ? (wait ? F_SETLKW : F_SETLK) : (wait ? F_OFD_SETLKW : F_OFD_SETLK);

        return fcntl(fd, cmd, &fl) < 0 ? -errno : 0;
}

/* What a lock test through fd meets for a whole-file write lock: "free", "wr 0+10" (type, start,
 * length) or, for flock, "held". flock's test takes the lock when it is free and drops it again. */
static void test_lock(int kind, int fd, char *out) {
        if (kind == K_FLOCK) {
                if (flock(fd, LOCK_EX | LOCK_NB) < 0)
                        snprintf(out, MSG, "%s", errno == EWOULDBLOCK ? "held" : ename(errno));
                else {
                        flock(fd, LOCK_UN);
                        snprintf(out, MSG, "free");
                }
                return;
        }
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };

        if (fcntl(fd, kind == K_POSIX ? F_GETLK : F_OFD_GETLK, &fl) < 0)
                snprintf(out, MSG, "%s", ename(errno));
        else if (fl.l_type == F_UNLCK)
                snprintf(out, MSG, "free");
        else
                snprintf(out, MSG, "%s %lld+%lld",
                         fl.l_type == F_RDLCK   ? "rd"
                         : fl.l_type == F_WRLCK ? "wr"
                                                : "?",
                         (long long)fl.l_start, (long long)fl.l_len);
}

typedef struct Req {
        int kind;
        const char *file;
} Req;

/* In a fresh process (no locks, no descriptors of the file): what the file's lock state is. */
static void c_probe(int wfd, void *ud) {
        Req *q = ud;
        char out[MSG];
        int fd = open_file(q->file, O_RDWR);

        if (fd < 0)
                snprintf(out, MSG, "open %s", ename(errno));
        else
                test_lock(q->kind, fd, out);
        send_msg(wfd, out);
}

/* In a fresh process: whether a non-blocking write lock of this kind can be taken. */
static void c_try(int wfd, void *ud) {
        Req *q = ud;
        int fd = open_file(q->file, O_RDWR);

        send_msg(wfd, fd < 0 ? "open failed" : ename(-lk(q->kind, fd, F_WRLCK, false)));
}

static const char *in_child(void (*fn)(int, void *), int kind, const char *file, char *out) {
        Req q = { kind, file };
        int fd;
        pid_t pid = spawn(fn, &q, -1, &fd);
        const char *s = recv_str(fd, out, WAIT_LONG_MS);

        if (s != out)
                snprintf(out, MSG, "%s", s);
        close(fd);
        reap(pid);
        return out;
}

/* The lock state of file as another process in this system sees it. */
static const char *probe(int kind, const char *file, char *out) {
        return in_child(c_probe, kind, file, out);
}

/* ---- holders and waiters ---- */

typedef struct Party {
        int kind;
        const char *file;
        int cmd_fd; /* the child's end: commands ('u' unlock, 'c' close, 'x' or EOF exit) */
        bool interruptible;
} Party;

typedef struct Child {
        pid_t pid;
        int msg_fd; /* its reports */
        int cmd_fd; /* our end of its commands */
} Child;

/* Holder: takes a write lock, reports, then obeys commands until told to exit. */
static void c_holder(int wfd, void *ud) {
        Party *a = ud;
        int fd = open_file(a->file, O_RDWR);
        char c;

        send_msg(wfd, fd < 0 ? "open failed" : ename(-lk(a->kind, fd, F_WRLCK, false)));
        while (read(a->cmd_fd, &c, 1) == 1) {
                if (c == 'u')
                        send_msg(wfd, ename(-lk(a->kind, fd, F_UNLCK, false)));
                else if (c == 'c')
                        send_msg(wfd, close(fd) < 0 ? ename(errno) : "closed");
                else
                        break;
        }
}

static void on_signal(int sig) {
        (void)sig;
}

/* Waiter: reports that it is about to block, waits for a write lock, reports the result, then
 * holds what it got until its command pipe closes. */
static void c_waiter(int wfd, void *ud) {
        Party *a = ud;
        char msg[MSG];
        int fd = open_file(a->file, O_RDWR), r;

        if (a->interruptible) {
                struct sigaction sa = { .sa_handler = on_signal };
                sigaction(SIGUSR1, &sa, NULL); /* no SA_RESTART: the wait ends with EINTR */
        }
        send_msg(wfd, "waiting");
        r = lk(a->kind, fd, F_WRLCK, true);
        snprintf(msg, sizeof(msg), "acquired %s", ename(-r));
        send_msg(wfd, msg);
        char c;
        while (read(a->cmd_fd, &c, 1) < 0 && errno == EINTR)
                ;
}

static Child start(void (*fn)(int, void *), int kind, const char *file, bool interruptible) {
        int cp[2];
        Child ch;

        if (pipe2(cp, O_CLOEXEC) < 0)
                die("pipe");
        Party a = { .kind = kind, .file = file, .cmd_fd = cp[0], .interruptible = interruptible };
        ch.pid = spawn(fn, &a, cp[0], &ch.msg_fd);
        close(cp[0]);
        ch.cmd_fd = cp[1];
        return ch;
}

static void command(Child *ch, char c) {
        if (write(ch->cmd_fd, &c, 1) != 1)
                fprintf(stderr, "vufs-locks: command to pid %d: %m\n", (int)ch->pid);
}

static void finish(Child *ch) {
        if (ch->cmd_fd >= 0)
                close(ch->cmd_fd);
        ch->cmd_fd = -1;
        reap(ch->pid);
        close(ch->msg_fd);
}

/* Starts a waiter on file and reports whether it blocks: "waiting", sleeping, still no answer. */
static Child start_waiter(int kind, const char *file, bool interruptible) {
        char msg[MSG];
        Child w = start(c_waiter, kind, file, interruptible);

        say("waiter_started", "%s", recv_str(w.msg_fd, msg, WAIT_LONG_MS));
        say("waiter_sleeps", "%s", wait_sleeping(w.pid) ? "yes" : "no");
        msleep(BLOCKED_MS);
        int r = recv_msg(w.msg_fd, msg, 0);
        say("blocked_while_held", "%s", r == -ETIMEDOUT ? "yes" : r < 0 ? ename(-r) : msg);
        return w;
}

/* ---- the peer: another process that locks the same file by its own path ---- */

static const char *peer_do(const char *req, const char *base, char *ans);

/* Local peer: a process forked before any case, serving requests over a socket. */
static void peer_local_serve(int fd) {
        char req[MSG], ans[MSG];

        while (recv_msg(fd, req, 3600 * 1000) == 0) {
                peer_do(req, ".", ans);
                send_msg(fd, ans);
                if (strcmp(req, "quit") == 0)
                        break;
        }
        _exit(0);
}

/* Remote peer (the host): requests are files PEERDIR/req.N, answers PEERDIR/ans.N, each written
 * under a temporary name and renamed, so a reader never sees a partial one. */
static int write_atomic(const char *dir, const char *name, const char *text) {
        char tmp[4096], dst[4096];
        int fd;
        size_t n = strlen(text);

        snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
        snprintf(dst, sizeof(dst), "%s/%s", dir, name);
        fd = open(tmp, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0666);
        if (fd < 0)
                return -errno;
        if (write(fd, text, n) != (ssize_t)n || close(fd) < 0)
                return -EIO;
        return rename(tmp, dst) < 0 ? -errno : 0;
}

/* Reads and removes dir/name if it exists: 0, -ENOENT, or another -errno. */
static int take_file(const char *dir, const char *name, char *buf) {
        char path[4096];
        ssize_t n;
        int fd;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, MSG - 1);
        close(fd);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        unlink(path);
        return 0;
}

static const char *peer_call(const char *cmd, int kind, const char *file, char *ans) {
        char req[MSG];

        if (kind < 0 || !file)
                snprintf(req, sizeof(req), "%s", cmd);
        else
                snprintf(req, sizeof(req), "%s %s %s", cmd, kind_name[kind], file);
        if (!peer_dir) {
                send_msg(peer_fd, req);
                const char *s = recv_str(peer_fd, ans, WAIT_LONG_MS);
                if (s != ans)
                        snprintf(ans, MSG, "peer %s", s);
                return ans;
        }
        char name[64];
        int r;

        ++*peer_seq;
        snprintf(name, sizeof(name), "req.%u", *peer_seq);
        r = write_atomic(peer_dir, name, req);
        if (r < 0) {
                snprintf(ans, MSG, "peer request %s", ename(-r));
                return ans;
        }
        snprintf(name, sizeof(name), "ans.%u", *peer_seq);
        for (long long end = now_ms() + 2 * WAIT_LONG_MS; now_ms() < end; msleep(20)) {
                r = take_file(peer_dir, name, ans);
                if (r == 0)
                        return ans;
                if (r != -ENOENT)
                        break;
        }
        snprintf(ans, MSG, "peer answer %s", r == -ENOENT ? "ETIMEDOUT" : ename(-r));
        return ans;
}

/* The peer's own holder (one at a time). */
static Child peer_holder = { .pid = -1 };

static int kind_of(const char *s) {
        for (int k = 0; k < K_N; k++)
                if (strcmp(s, kind_name[k]) == 0)
                        return k;
        return -1;
}

/* Executes one request "CMD KIND FILE" (FILE relative to base) and writes the answer. */
static const char *peer_do(const char *req, const char *base, char *ans) {
        char cmd[16], kname[16], file[64], path[4096];
        int kind;

        if (strcmp(req, "quit") == 0) {
                if (peer_holder.pid > 0)
                        finish(&peer_holder);
                snprintf(ans, MSG, "bye");
                return ans;
        }
        if (sscanf(req, "%15s %15s %63s", cmd, kname, file) != 3 || (kind = kind_of(kname)) < 0 || strchr(file, '/')) {
                snprintf(ans, MSG, "bad request");
                return ans;
        }
        snprintf(path, sizeof(path), "%s/%s", base, file);
        if (strcmp(cmd, "probe") == 0)
                return probe(kind, path, ans);
        if (strcmp(cmd, "try") == 0)
                return in_child(c_try, kind, path, ans);
        if (strcmp(cmd, "hold") == 0) {
                if (peer_holder.pid > 0)
                        finish(&peer_holder);
                peer_holder = start(c_holder, kind, path, false);
                const char *s = recv_str(peer_holder.msg_fd, ans, WAIT_LONG_MS);
                if (s != ans)
                        snprintf(ans, MSG, "%s", s);
                return ans;
        }
        if (strcmp(cmd, "release") == 0) {
                if (peer_holder.pid <= 0) {
                        snprintf(ans, MSG, "nothing held");
                        return ans;
                }
                command(&peer_holder, 'u');
                const char *s = recv_str(peer_holder.msg_fd, ans, WAIT_LONG_MS);
                if (s != ans)
                        snprintf(ans, MSG, "%s", s);
                finish(&peer_holder);
                peer_holder.pid = -1;
                return ans;
        }
        snprintf(ans, MSG, "bad request");
        return ans;
}

static int peer_serve(const char *dir, const char *base, int timeout_s) {
        char req[MSG], ans[MSG], name[64];
        long long end = now_ms() + (long long)timeout_s * 1000;
        unsigned seq = 1;

        setvbuf(stdout, NULL, _IOLBF, 0);
        printf("vufs-locks peer: serving %s for files in %s\n", dir, base);
        while (now_ms() < end) {
                snprintf(name, sizeof(name), "req.%u", seq);
                int r = take_file(dir, name, req);
                if (r == -ENOENT) {
                        msleep(10);
                        continue;
                }
                if (r < 0) {
                        fprintf(stderr, "vufs-locks peer: %s: %s\n", name, ename(-r));
                        return 1;
                }
                peer_do(req, base, ans);
                printf("vufs-locks peer: %u %s -> %s\n", seq, req, ans);
                snprintf(name, sizeof(name), "ans.%u", seq);
                r = write_atomic(dir, name, ans);
                if (r < 0) {
                        fprintf(stderr, "vufs-locks peer: writing %s: %s\n", name, ename(-r));
                        return 1;
                }
                if (strcmp(req, "quit") == 0)
                        return 0;
                seq++;
        }
        fprintf(stderr, "vufs-locks peer: no quit request within %d s\n", timeout_s);
        if (peer_holder.pid > 0)
                finish(&peer_holder);
        return 1;
}

/* ---- the cases ---- */

/* Opens file and takes this kind's write lock, reporting it as "lock". */
static int open_locked(int kind, const char *file, int flags) {
        int fd = open_file(file, O_RDWR | flags);

        say("lock", "%s", fd < 0 ? "open failed" : ename(-lk(kind, fd, F_WRLCK, false)));
        return fd;
}

static void say_probe(int kind, const char *file, const char *what) {
        char out[MSG];

        say(what, "%s", probe(kind, file, out));
}

static void t_basic(int k, const char *f) {
        int fd = open_locked(k, f, 0);

        say_probe(k, f, "seen");
        say("unlock", "%s", ename(-lk(k, fd, F_UNLCK, false)));
        say_probe(k, f, "after_unlock");
        close(fd);
}

/* The issue 18 case: the process closes its only descriptor. */
static void t_close_last(int k, const char *f) {
        int fd = open_locked(k, f, 0);

        close(fd);
        say_probe(k, f, "after_close");
}

/* POSIX locks go with any close by their process; OFD locks and flock with the last close of the
 * open file description (a dup shares it). */
static void t_dup_close(int k, const char *f) {
        int fd = open_locked(k, f, 0), fd2 = dup(fd);

        close(fd2);
        say_probe(k, f, "after_dup_close");
        close(fd);
        say_probe(k, f, "after_last_close");
}

/* A second open of the same file in the same process, then closed. */
static void t_other_fd_close(int k, const char *f) {
        int fd = open_locked(k, f, 0), fd2 = open_file(f, O_RDONLY);

        close(fd2);
        say_probe(k, f, "after_other_close");
        close(fd);
        say_probe(k, f, "after_last_close");
}

/* A second open description in the same process: the same POSIX owner, a different OFD one. */
static void t_two_opens(int k, const char *f) {
        int fd = open_locked(k, f, 0), fd2 = open_file(f, O_RDWR);

        say("second_open_setlk", "%s", ename(-lk(k, fd2, F_WRLCK, false)));
        close(fd2);
        say_probe(k, f, "after_second_close");
        close(fd);
        say_probe(k, f, "after_last_close");
}

/* A forked child shares the open file description but not the POSIX owner; its close keeps the
 * parent's locks. */
static void t_fork(int k, const char *f) {
        int fd = open_locked(k, f, 0), status;
        pid_t pid;

        fflush(stdout);
        pid = fork();
        if (pid < 0)
                die("fork");
        if (pid == 0) {
                say("child_setlk", "%s", ename(-lk(k, fd, F_WRLCK, false)));
                say("child_close", "%s", close(fd) < 0 ? ename(errno) : "ok");
                _exit(0);
        }
        waitpid(pid, &status, 0);
        say_probe(k, f, "after_child_exit");
        close(fd);
        say_probe(k, f, "after_parent_close");
}

typedef struct CloneArg {
        int kind, fd;
        bool try_lock;
} CloneArg;

static int clone_child(void *ud) {
        CloneArg *a = ud;

        if (a->try_lock)
                say("child_setlk", "%s", ename(-lk(a->kind, a->fd, F_WRLCK, false)));
        say("child_close", "%s", close(a->fd) < 0 ? ename(errno) : "ok");
        fflush(stdout);
        return 0;
}

/* Runs clone_child in a process made by clone(flags | SIGCHLD) and waits for it. */
static void run_clone(int flags, CloneArg *a) {
        static char stack[256 << 10] __attribute__((aligned(16)));
        int status;
        pid_t pid;

        fflush(stdout);
        pid = clone(clone_child, stack + sizeof(stack), flags | SIGCHLD, a);
        if (pid < 0)
                die("clone");
        waitpid(pid, &status, 0);
}

/* clone(CLONE_FILES): the child shares the descriptor table (and so is the same POSIX owner);
 * its close of the shared descriptor is the last close (xfstests generic/478). */
static void t_clone_files(int k, const char *f) {
        CloneArg a = { .kind = k, .fd = open_locked(k, f, 0), .try_lock = true };

        run_clone(CLONE_FILES, &a);
        say("parent_fd", "%s", fcntl(a.fd, F_GETFD) < 0 ? ename(errno) : "open");
        say_probe(k, f, "after_child_close");
}

/* clone(CLONE_FILES), the child closing another descriptor of the same file. */
static void t_clone_files_other(int k, const char *f) {
        int fd = open_locked(k, f, 0);
        CloneArg a = { .kind = k, .fd = open_file(f, O_RDONLY) };

        run_clone(CLONE_FILES, &a);
        say_probe(k, f, "after_child_close");
        close(fd);
        say_probe(k, f, "after_last_close");
}

/* clone() without CLONE_FILES: a copy of the table, like fork. */
static void t_clone_nofiles(int k, const char *f) {
        CloneArg a = { .kind = k, .fd = open_locked(k, f, 0), .try_lock = true };

        run_clone(0, &a);
        say("parent_fd", "%s", fcntl(a.fd, F_GETFD) < 0 ? ename(errno) : "open");
        say_probe(k, f, "after_child_exit");
        close(a.fd);
        say_probe(k, f, "after_parent_close");
}

/* A child locks, then execs vufs-locks exec-hold: the descriptor (and its locks) survive the exec
 * unless it is close-on-exec. */
static void exec_case(int k, const char *f, bool cloexec) {
        int rp[2], gp[2], status;
        char msg[MSG];
        pid_t pid;

        if (pipe(rp) < 0 || pipe(gp) < 0)
                die("pipe");
        fflush(stdout);
        pid = fork();
        if (pid < 0)
                die("fork");
        if (pid == 0) {
                char a1[16], a2[16], a3[16];
                int fd = open_locked(k, f, cloexec ? O_CLOEXEC : 0);

                close(rp[0]);
                close(gp[1]);
                snprintf(a1, sizeof(a1), "%d", fd);
                snprintf(a2, sizeof(a2), "%d", rp[1]);
                snprintf(a3, sizeof(a3), "%d", gp[0]);
                execl("/proc/self/exe", "vufs-locks", "exec-hold", a1, a2, a3, (char *)NULL);
                fprintf(stderr, "vufs-locks: exec /proc/self/exe: %m\n");
                _exit(5);
        }
        close(rp[1]);
        close(gp[0]);
        say("fd_after_exec", "%s", recv_str(rp[0], msg, WAIT_LONG_MS));
        say_probe(k, f, "after_exec");
        close(gp[1]);
        waitpid(pid, &status, 0);
        close(rp[0]);
        say_probe(k, f, "after_exit");
}

static void t_exec_keep(int k, const char *f) {
        exec_case(k, f, false);
}

static void t_exec_cloexec(int k, const char *f) {
        exec_case(k, f, true);
}

/* Two processes: a holder and a blocked waiter; the holder lets go by how (u: unlock, c: close its
 * descriptor, x: exit); the waiter must get the lock. */
static void contend(int k, const char *f, char how) {
        char msg[MSG];
        Child h = start(c_holder, k, f, false);

        say("holder", "%s", recv_str(h.msg_fd, msg, WAIT_LONG_MS));
        Child w = start_waiter(k, f, false);
        if (how == 'x') {
                finish(&h);
                say("holder_exit", "ok");
        } else {
                command(&h, how);
                say(how == 'u' ? "holder_unlock" : "holder_close", "%s", recv_str(h.msg_fd, msg, WAIT_LONG_MS));
        }
        say("waiter", "%s", recv_str(w.msg_fd, msg, ACQUIRE_MS));
        say_probe(k, f, "held_by_waiter");
        finish(&w);
        if (how != 'x')
                finish(&h);
        say_probe(k, f, "after_both");
}

static void t_contend_unlock(int k, const char *f) {
        contend(k, f, 'u');
}

static void t_contend_close(int k, const char *f) {
        contend(k, f, 'c');
}

static void t_contend_exit(int k, const char *f) {
        contend(k, f, 'x');
}

/* A blocked waiter gets a signal whose handler does not restart system calls. */
static void t_interrupt(int k, const char *f) {
        char msg[MSG], hmsg[MSG];
        Child h = start(c_holder, k, f, false);

        say("holder", "%s", recv_str(h.msg_fd, hmsg, WAIT_LONG_MS));
        Child w = start_waiter(k, f, true);
        kill(w.pid, SIGUSR1);
        int r = recv_msg(w.msg_fd, msg, SIGNAL_ANSWER_MS);
        say("answered_before_release", "%s", r == 0 ? "yes" : "no");
        /* A filesystem that cannot cancel the wait keeps the waiter until the lock is free: let go
         * so it ends either way, and report what it saw. */
        command(&h, 'u');
        say("holder_unlock", "%s", recv_str(h.msg_fd, hmsg, WAIT_LONG_MS));
        if (r == -ETIMEDOUT)
                r = recv_msg(w.msg_fd, msg, ACQUIRE_MS);
        say("result", "%s", r < 0 ? ename(-r) : msg);
        finish(&w);
        finish(&h);
        say_probe(k, f, "after_both");
}

/* The peer (another process here, or a process on the host in the virtiofs run) and this
 * system's processes see each other's locks. */
static void t_peer(int k, const char *f) {
        char ans[MSG];
        int fd = open_locked(k, f, 0);

        say("peer_sees_lock", "%s", peer_call("probe", k, f, ans));
        for (int o = 0; o < K_N; o++)
                if (o != k) {
                        char what[32];
                        snprintf(what, sizeof(what), "peer_try_%s", kind_name[o]);
                        say(what, "%s", peer_call("try", o, f, ans));
                }
        say("unlock", "%s", ename(-lk(k, fd, F_UNLCK, false)));
        say("peer_sees_unlock", "%s", peer_call("probe", k, f, ans));
        say("relock", "%s", ename(-lk(k, fd, F_WRLCK, false)));
        close(fd);
        say("peer_sees_close", "%s", peer_call("probe", k, f, ans));

        /* The peer holds a lock: this system's processes meet it. */
        say("peer_hold", "%s", peer_call("hold", k, f, ans));
        fd = open_file(f, O_RDWR);
        say("setlk_vs_peer", "%s", ename(-lk(k, fd, F_WRLCK, false)));
        if (k != K_FLOCK) {
                test_lock(k, fd, ans);
                say("getlk_vs_peer", "%s", ans);
        }
        close(fd);
        Child w = start_waiter(k, f, false);
        say("peer_release", "%s", peer_call("release", k, f, ans));
        say("waiter", "%s", recv_str(w.msg_fd, ans, ACQUIRE_MS));
        say("peer_sees_waiter", "%s", peer_call("probe", k, f, ans));
        finish(&w);
        say("peer_after_waiter_exit", "%s", peer_call("probe", k, f, ans));
}

static const struct {
        const char *name;
        void (*fn)(int kind, const char *file);
} cases[] = {
        { "basic", t_basic },
        { "close_last", t_close_last },
        { "dup_close", t_dup_close },
        { "other_fd_close", t_other_fd_close },
        { "two_opens", t_two_opens },
        { "fork", t_fork },
        { "clone_files", t_clone_files },
        { "clone_files_other", t_clone_files_other },
        { "clone_nofiles", t_clone_nofiles },
        { "exec_keep", t_exec_keep },
        { "exec_cloexec", t_exec_cloexec },
        { "contend_unlock", t_contend_unlock },
        { "contend_close", t_contend_close },
        { "contend_exit", t_contend_exit },
        { "interrupt", t_interrupt },
        { "peer", t_peer },
};

static int run(const char *dir, const char *pdir) {
        char out[MSG];

        if (chdir(dir) < 0)
                die(dir);
        peer_dir = pdir;
        peer_seq = mmap(NULL, sizeof(*peer_seq), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (peer_seq == MAP_FAILED)
                die("mmap");
        if (!peer_dir) {
                int sp[2];
                pid_t pid;

                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
                        die("socketpair");
                fflush(stdout);
                pid = fork();
                if (pid < 0)
                        die("fork");
                if (pid == 0) {
                        close(sp[0]);
                        peer_local_serve(sp[1]);
                }
                close(sp[1]);
                peer_fd = sp[0];
        }
        for (int k = 0; k < K_N; k++)
                for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                        char file[64];
                        int fd, status;
                        pid_t pid;

                        snprintf(file, sizeof(file), "%s-%s", kind_name[k], cases[i].name);
                        fd = open(file, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0666);
                        if (fd < 0 || write(fd, "0123456789abcdefghij", 20) != 20 || close(fd) < 0)
                                die(file);
                        /* Progress on stderr: where a hang happened shows on the console. */
                        fprintf(stderr, "vufs-locks: %s\n", file);
                        cur_kind = k;
                        cur_case = cases[i].name;
                        /* Each case in its own process: no lock or descriptor outlives it. */
                        fflush(stdout);
                        pid = fork();
                        if (pid < 0)
                                die("fork");
                        if (pid == 0) {
                                cases[i].fn(k, file);
                                fflush(stdout);
                                _exit(0);
                        }
                        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                                say("case_status", "0x%x", status);
                }
        peer_call("quit", -1, NULL, out);
        if (peer_dir && strcmp(out, "bye") != 0)
                fprintf(stderr, "vufs-locks: peer did not answer quit: %s\n", out);
        return 0;
}

/* After the exec: whether the locked descriptor survived, then wait until released. */
static int exec_hold(const char *a1, const char *a2, const char *a3) {
        int fd = atoi(a1), rfd = atoi(a2), gfd = atoi(a3);
        char c;

        send_msg(rfd, fcntl(fd, F_GETFD) < 0 ? ename(errno) : "open");
        while (read(gfd, &c, 1) < 0 && errno == EINTR)
                ;
        return 0;
}

int main(int argc, char **argv) {
        setvbuf(stdout, NULL, _IOLBF, 0);
        signal(SIGPIPE, SIG_IGN);
        if (argc >= 3 && argc <= 4 && strcmp(argv[1], "run") == 0)
                return run(argv[2], argc == 4 ? argv[3] : NULL);
        if (argc >= 4 && argc <= 5 && strcmp(argv[1], "peer") == 0)
                return peer_serve(argv[2], argv[3], argc == 5 ? atoi(argv[4]) : 900);
        if (argc == 5 && strcmp(argv[1], "exec-hold") == 0)
                return exec_hold(argv[2], argv[3], argv[4]);
        fprintf(stderr, "usage: vufs-locks run DIR [PEERDIR] | peer PEERDIR BASEDIR [TIMEOUT_S]\n");
        return 2;
}
