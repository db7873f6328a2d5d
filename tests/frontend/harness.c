/* harness.c: per-test temporary directories and backend start-up. */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

int fe_harness_new(FeHarness **ret) {
        char tmpl[] = "/tmp/vufsd-fe.XXXXXX";
        FeHarness *h = calloc(1, sizeof(*h));

        if (!h)
                return -ENOMEM;
        if (!mkdtemp(tmpl)) {
                free(h);
                return negative_errno();
        }
        h->dir = strdup(tmpl);
        if (!h->dir || asprintf(&h->share, "%s/share", tmpl) < 0 ||
            asprintf(&h->socket_path, "%s/vhost.sock", tmpl) < 0) {
                h->share = h->socket_path = NULL;
                fe_harness_free(h);
                return -ENOMEM;
        }
        if (mkdir(h->share, 0755) < 0) {
                int r = negative_errno();
                fe_harness_free(h);
                return r;
        }
        *ret = h;
        return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) st;
        (void) ftw;
        if (flag == FTW_DP)
                rmdir(path);
        else
                unlink(path);
        return 0;
}

FeHarness *fe_harness_free(FeHarness *h) {
        if (!h)
                return NULL;
        fe_backend_free(h->backend);
        if (h->dir)
                nftw(h->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        free(h->dir);
        free(h->share);
        free(h->socket_path);
        free(h);
        return NULL;
}

/* The command line of both starts: prefix (a command that execs the rest, or NULL), vufsd, the
 * harness's paths, extra and $VUFSD_TEST_EXTRA_ARGS. */
static int spawn_vufsd(FeHarness *h, const char *const *prefix, const char *const *extra) {
        const char *bin = getenv("VUFSD_BINARY"), *env;
        _cleanup_free_ char *words = NULL;
        const char *argv[40];
        unsigned n = 0;

        if (!bin || !*bin)
                return -ENOENT;
        h->backend = fe_backend_free(h->backend);
        for (unsigned i = 0; prefix && prefix[i]; i++)
                argv[n++] = prefix[i];
        argv[n++] = bin;
        argv[n++] = "--socket-path";
        argv[n++] = h->socket_path;
        argv[n++] = "--shared-dir";
        argv[n++] = h->share;
        for (unsigned i = 0; extra && extra[i] && n < ELEMENTSOF(argv) - 1; i++)
                argv[n++] = extra[i];
        /* $VUFSD_TEST_EXTRA_ARGS (words separated by spaces): one suite run again in another mode,
         * e.g. with file handles (tests/meson.build). */
        env = getenv("VUFSD_TEST_EXTRA_ARGS");
        if (env && *env) {
                words = strdup(env);
                if (!words)
                        return -ENOMEM;
                for (char *save = NULL, *w = strtok_r(words, " ", &save); w && n < ELEMENTSOF(argv) - 1;
                     w = strtok_r(NULL, " ", &save))
                        argv[n++] = w;
        }
        argv[n] = NULL;
        /* --privileged-files=map's key where a unit's StateDirectory= would put it: in the harness's
         * directory (outside the share), kept across restarts of the backend, removed with it. */
        setenv("STATE_DIRECTORY", h->dir, 1);
        return fe_backend_spawn(&h->backend, (char *const *) argv, h->socket_path, 10000);
}

int fe_harness_spawn_vufsd(FeHarness *h, const char *const *extra) {
        return spawn_vufsd(h, NULL, extra);
}

int fe_harness_spawn_vufsd_as_nobody(FeHarness *h, const char *const *extra) {
        /* setpriv execs vufsd: the backend's pid stays the daemon's (or its supervisor's). */
        static const char *const setpriv[] = {
                "/usr/bin/setpriv", "--reuid=" FE_NOBODY_STR, "--regid=" FE_NOBODY_STR, "--clear-groups", "--", NULL,
        };
#ifdef SANITIZER_BUILD
        /* Sanitizer builds default to no sandbox (util.h); nobody's vufsd is tested with the
         * namespace sandbox, a normal build's default, so asked for here first (extra may
         * override it). */
        const char *argv[32];
        unsigned n = 0;

        argv[n++] = "--sandbox=namespace";
        for (unsigned i = 0; extra && extra[i] && n < ELEMENTSOF(argv) - 1; i++)
                argv[n++] = extra[i];
        argv[n] = NULL;
        extra = argv;
#endif
        return spawn_vufsd(h, setpriv, extra);
}

int fe_harness_give_dirs(FeHarness *h, uid_t share_owner, mode_t share_mode) {
        /* nobody creates the socket in the directory and must reach the share through it. */
        if (chown(h->dir, FE_NOBODY, FE_NOBODY) < 0 || chmod(h->dir, 0755) < 0 ||
            chown(h->share, share_owner, share_owner) < 0 || chmod(h->share, share_mode) < 0)
                return negative_errno();
        return 0;
}

int fe_harness_spawn_virtiofsd(FeHarness *h) {
        _cleanup_free_ char *sock = NULL, *src = NULL;
        const char *argv[12];
        unsigned n = 0;

        if (access(FE_VIRTIOFSD_PATH, X_OK) < 0)
                return -ENOENT;
        if (asprintf(&sock, "--socket-path=%s", h->socket_path) < 0 || asprintf(&src, "source=%s", h->share) < 0)
                return -ENOMEM;
        h->backend = fe_backend_free(h->backend);
        argv[n++] = FE_VIRTIOFSD_PATH;
        argv[n++] = sock;
        argv[n++] = "-o";
        argv[n++] = src;
        argv[n++] = "-o";
        argv[n++] = "cache=auto";
        argv[n++] = "-o";
        argv[n++] = "sandbox=chroot";
        argv[n] = NULL;
        return fe_backend_spawn(&h->backend, (char *const *) argv, h->socket_path, 10000);
}

char *fe_harness_path(FeHarness *h, const char *name) {
        char *p;
        if (asprintf(&p, "%s/%s", h->share, name) < 0)
                return NULL;
        return p;
}

pid_t fe_harness_first_child(pid_t pid) {
        char path[64];
        int child = 0;
        FILE *f;

        snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
        f = fopen(path, "re");
        if (f) {
                if (fscanf(f, "%d", &child) != 1)
                        child = 0;
                fclose(f);
        }
        return child > 0 ? (pid_t)child : 0;
}

pid_t fe_harness_daemon_pid(const FeHarness *h) {
        pid_t child = fe_harness_first_child(h->backend->pid);
        return child > 0 ? child : h->backend->pid;
}

long fe_harness_status_kb(pid_t pid, const char *field) {
        char path[64], line[256];
        size_t n = strlen(field);
        long v = -1;
        FILE *f;

        snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return -1;
        while (fgets(line, sizeof line, f))
                if (strncmp(line, field, n) == 0 && line[n] == ':')
                        v = strtol(line + n + 1, NULL, 10);
        fclose(f);
        return v;
}

int fe_harness_count_fds(pid_t pid) {
        char path[64];
        struct dirent *de;
        DIR *d;
        int n = 0;

        snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
        d = opendir(path);
        if (!d)
                return negative_errno();
        while ((de = readdir(d)))
                n += de->d_name[0] != '.';
        closedir(d);
        return n;
}

int fe_harness_session(FeHarness *h, Frontend **ret_fe, FeFuse **ret_c) {
        Frontend *fe = NULL;
        FeFuse *c = NULL;
        FeOptions o;
        int r;

        fe_options_init(&o);
        o.timeout_ms = 10000;
        r = fe_connect(&fe, h->socket_path, &o);
        if (r < 0) {
                fprintf(stderr, "connect: %s\n", strerror(-r));
                return r;
        }
        r = fe_negotiate(fe);
        if (r == 0)
                r = fe_start(fe, true);
        if (r < 0) {
                fprintf(stderr, "negotiate/start: %s\n", fe->error);
                fe_free(fe);
                return r;
        }
        r = fe_fuse_new(&c, fe);
        if (r == 0) {
                r = fe_fuse_init(c);
                if (r < 0)
                        fprintf(stderr, "INIT: %d %s\n", r, c->last_problem);
        }
        if (r < 0) {
                fe_fuse_free(c);
                fe_free(fe);
                return r;
        }
        *ret_fe = fe;
        *ret_c = c;
        return 0;
}

pid_t fe_harness_serving_pid(const FeHarness *h) {
        pid_t spawner = fe_harness_daemon_pid(h);
        return spawner > 0 ? fe_harness_first_child(spawner) : 0;
}

int fe_harness_put_file(FeHarness *h, const char *name, const char *content) {
        _cleanup_free_ char *p = fe_harness_path(h, name);
        FILE *f;
        int r = 0;

        if (!p)
                return -ENOMEM;
        f = fopen(p, "we");
        if (!f)
                return -errno;
        if (fputs(content, f) < 0)
                r = -EIO;
        if (fclose(f) != 0 && r == 0)
                r = -errno;
        return r;
}

int fe_cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}
