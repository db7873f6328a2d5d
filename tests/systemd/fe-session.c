/* fe-session.c: one vhost-user-fs session against a socket with the test frontend (plays QEMU + guest). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "frontend.h"
#include "fuse-client.h"

static void usage(void) {
        printf("Usage: fe-session SOCKET [--read NAME] [--write NAME=TEXT] [--roundtrip BYTES]\n"
               "                  [--hold SECONDS | --hold-stdin [--loop [--open-write NAME]]] [--timeout MS]\n"
               "Connects like QEMU, starts the device, FUSE_INIT, then in order: READs NAME from the\n"
               "share root and prints it, CREATEs NAME with TEXT, writes/reads back/deletes a file of\n"
               "BYTES; then keeps the connection open (SECONDS, or until stdin reaches end of file)\n"
               "and disconnects. --loop: while held by stdin, requests by name in the share root\n"
               "without a pause (MKDIR, MKNOD, SYMLINK, LOOKUP, RENAME, GETATTR, UNLINK, RMDIR of\n"
               "loop-* names, then FORGET of their nodes), each checked; the first wrong answer ends\n"
               "it. --open-write NAME: before the loop, CREATEs NAME (O_RDWR) and keeps that one\n"
               "handle for the whole loop: each iteration WRITEs its record through it, and at the\n"
               "end every record is READ back through it and checked, then it is RELEASEd. Exit 0\n"
               "when everything succeeded.\n");
}

static int do_read(FeFuse *c, const char *name) {
        struct fuse_entry_out e;
        char buf[4096];
        uint64_t fh;
        int r, n;

        r = fe_fuse_lookup(c, FUSE_ROOT_ID, name, &e);
        if (r < 0)
                return fprintf(stderr, "fe-session: LOOKUP %s: %s %s\n", name, strerror(-r), c->last_problem), r;
        r = fe_fuse_open(c, e.nodeid, O_RDONLY, &fh);
        if (r < 0)
                return fprintf(stderr, "fe-session: OPEN %s: %s\n", name, strerror(-r)), r;
        n = fe_fuse_read(c, e.nodeid, fh, 0, buf, sizeof buf);
        if (n < 0)
                return fprintf(stderr, "fe-session: READ %s: %s\n", name, strerror(-n)), n;
        fwrite(buf, 1, (size_t) n, stdout);
        fflush(stdout);
        r = fe_fuse_release(c, e.nodeid, fh, false);
        if (r < 0)
                return fprintf(stderr, "fe-session: RELEASE %s: %s\n", name, strerror(-r)), r;
        return 0;
}

static int do_write(FeFuse *c, const char *spec) {
        const char *eq = strchr(spec, '=');
        struct fuse_entry_out e;
        char name[256];
        uint64_t fh;
        int r;

        if (!eq || eq == spec || (size_t) (eq - spec) >= sizeof name)
                return fprintf(stderr, "fe-session: --write wants NAME=TEXT\n"), -EINVAL;
        memcpy(name, spec, (size_t) (eq - spec));
        name[eq - spec] = '\0';
        r = fe_fuse_create(c, FUSE_ROOT_ID, name, O_CREAT | O_WRONLY | O_TRUNC, 0100644, &e, &fh);
        if (r < 0)
                return fprintf(stderr, "fe-session: CREATE %s: %s %s\n", name, strerror(-r), c->last_problem), r;
        r = fe_fuse_write(c, e.nodeid, fh, 0, eq + 1, (uint32_t) strlen(eq + 1));
        if (r != (int) strlen(eq + 1))
                return fprintf(stderr, "fe-session: WRITE %s: %s\n", name, r < 0 ? strerror(-r) : "short"), -EIO;
        r = fe_fuse_release(c, e.nodeid, fh, false);
        if (r < 0)
                return fprintf(stderr, "fe-session: RELEASE %s: %s\n", name, strerror(-r)), r;
        return 0;
}

/* One request of the loop: its answer must be 0. */
static bool loop_ok(FeFuse *c, int r, const char *what, const char *name, unsigned long i) {
        if (r >= 0)
                return true;
        fprintf(stderr, "fe-session: loop iteration %lu: %s %s: %s %s\n", i, what, name, strerror(-r), c->last_problem);
        return false;
}

/* The handle --open-write keeps across the loop (a live upgrade keeps it: docs/survival.md). */
typedef struct KeptFile {
        const char *name;
        uint64_t nodeid, fh;
} KeptFile;

#define RECORD_SIZE 16

static void record(char b[static RECORD_SIZE + 1], unsigned long i) {
        snprintf(b, RECORD_SIZE + 1, "%015lu\n", i);
}

/* Reads back the n records the loop wrote through the kept handle, checks each, releases it. */
static int kept_check(FeFuse *c, const KeptFile *k, unsigned long n) {
        char buf[RECORD_SIZE * 256], want[RECORD_SIZE + 1];
        unsigned long i = 0;
        int r;

        while (i < n) {
                unsigned long chunk = n - i < 256 ? n - i : 256;
                r = fe_fuse_read(c, k->nodeid, k->fh, (uint64_t) i * RECORD_SIZE, buf, (uint32_t) (chunk * RECORD_SIZE));
                if (r != (int) (chunk * RECORD_SIZE))
                        return fprintf(stderr, "fe-session: READ %s at record %lu: %s\n", k->name, i,
                                       r < 0 ? strerror(-r) : "short"),
                               -EIO;
                for (unsigned long j = 0; j < chunk; j++, i++) {
                        record(want, i);
                        if (memcmp(buf + j * RECORD_SIZE, want, RECORD_SIZE) != 0)
                                return fprintf(stderr, "fe-session: %s: record %lu is wrong\n", k->name, i), -EIO;
                }
        }
        r = fe_fuse_release(c, k->nodeid, k->fh, false);
        if (r < 0)
                return fprintf(stderr, "fe-session: RELEASE %s: %s\n", k->name, strerror(-r)), r;
        return 0;
}

/* Name requests that change the share, each answered once whatever happens to the serving process
 * meanwhile (docs/survival.md): all in the root, whose node id never goes stale; with a kept file,
 * one WRITE through its handle per iteration too. Runs until stdin reaches end of file; 0 when
 * every answer was right. */
static int name_loop(FeFuse *c, const KeptFile *k) {
        struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
        struct fuse_mknod_in mi = { .mode = S_IFREG | 0644 };
        struct fuse_entry_out e;
        struct fuse_attr_out a;
        uint64_t dn = 0, fn = 0, ln = 0;
        char d[32], d2[32], f[32], l[32], rec[RECORD_SIZE + 1];
        unsigned long i;
        char b[64];

        for (i = 0;; i++) {
                if (poll(&pfd, 1, 0) > 0) {
                        if (read(STDIN_FILENO, b, sizeof b) <= 0)
                                break;
                }
                snprintf(d, sizeof d, "loop-d%lu", i);
                snprintf(d2, sizeof d2, "loop-e%lu", i);
                snprintf(f, sizeof f, "loop-f%lu", i);
                snprintf(l, sizeof l, "loop-l%lu", i);
                if (!loop_ok(c, fe_fuse_mkdir(c, FUSE_ROOT_ID, d, 0755, &e), "MKDIR", d, i))
                        return -EIO;
                dn = e.nodeid;
                if (!loop_ok(c, fe_fuse_request(c, FUSE_MKNOD, FUSE_ROOT_ID,
                                                (FeFuseArg[]){ { &mi, sizeof mi }, { f, strlen(f) + 1 } }, 2, &e,
                                                sizeof e),
                             "MKNOD", f, i))
                        return -EIO;
                fn = e.nodeid;
                if (!loop_ok(c, fe_fuse_request(c, FUSE_SYMLINK, FUSE_ROOT_ID,
                                                (FeFuseArg[]){ { l, strlen(l) + 1 }, { d, strlen(d) + 1 } }, 2, &e,
                                                sizeof e),
                             "SYMLINK", l, i))
                        return -EIO;
                ln = e.nodeid;
                /* Each node forgotten once its name is gone (the symlink's twice: SYMLINK and LOOKUP),
                 * as a guest kernel drops the dentry of a name it removed: the nodes vufsd keeps, and
                 * their fds, stay few however long the loop runs. */
                if (!loop_ok(c, fe_fuse_lookup(c, FUSE_ROOT_ID, l, &e), "LOOKUP", l, i) ||
                    !loop_ok(c, fe_fuse_rename(c, FUSE_ROOT_ID, d, FUSE_ROOT_ID, d2), "RENAME", d, i) ||
                    !loop_ok(c, fe_fuse_getattr(c, FUSE_ROOT_ID, &a), "GETATTR", "/", i) ||
                    !loop_ok(c, fe_fuse_unlink(c, FUSE_ROOT_ID, l), "UNLINK", l, i) ||
                    !loop_ok(c, fe_fuse_unlink(c, FUSE_ROOT_ID, f), "UNLINK", f, i) ||
                    !loop_ok(c, fe_fuse_rmdir(c, FUSE_ROOT_ID, d2), "RMDIR", d2, i) ||
                    !loop_ok(c, fe_fuse_forget(c, dn, 1), "FORGET", d2, i) ||
                    !loop_ok(c, fe_fuse_forget(c, fn, 1), "FORGET", f, i) ||
                    !loop_ok(c, fe_fuse_forget(c, ln, 2), "FORGET", l, i))
                        return -EIO;
                if (k) {
                        int r;

                        record(rec, i);
                        r = fe_fuse_write(c, k->nodeid, k->fh, (uint64_t) i * RECORD_SIZE, rec, RECORD_SIZE);
                        if (r != RECORD_SIZE) {
                                fprintf(stderr, "fe-session: loop iteration %lu: WRITE %s: %s %s\n", i, k->name,
                                        r < 0 ? strerror(-r) : "short", c->last_problem);
                                return -EIO;
                        }
                }
        }
        if (k && kept_check(c, k, i) < 0)
                return -EIO;
        fprintf(stderr, "fe-session: loop: %lu iterations (%lu requests), every answer right%s%s%s\n", i,
                i * (k ? 13 : 12), k ? "; " : "", k ? k->name : "",
                k ? ": one handle throughout, every record read back right" : "");
        return 0;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = { { "read", required_argument, NULL, 'r' },
                                                 { "write", required_argument, NULL, 'w' },
                                                 { "roundtrip", required_argument, NULL, 'R' },
                                                 { "hold", required_argument, NULL, 'H' },
                                                 { "hold-stdin", no_argument, NULL, 'S' },
                                                 { "loop", no_argument, NULL, 'L' },
                                                 { "open-write", required_argument, NULL, 'O' },
                                                 { "timeout", required_argument, NULL, 't' },
                                                 { "help", no_argument, NULL, 'h' },
                                                 {} };
        const char *read_name = NULL, *write_spec = NULL, *open_write = NULL;
        KeptFile kept = {};
        long roundtrip = -1, hold = 0;
        bool hold_stdin = false, loop = false;
        Frontend *fe = NULL;
        FeFuse *c = NULL;
        FeOptions o;
        int opt, r, ret = 1;

        fe_options_init(&o);
        while ((opt = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (opt) {
                case 'r':
                        read_name = optarg;
                        break;
                case 'w':
                        write_spec = optarg;
                        break;
                case 'R':
                        roundtrip = strtol(optarg, NULL, 10);
                        break;
                case 'H':
                        hold = strtol(optarg, NULL, 10);
                        break;
                case 'S':
                        hold_stdin = true;
                        break;
                case 'L':
                        loop = true;
                        break;
                case 'O':
                        open_write = optarg;
                        break;
                case 't':
                        o.timeout_ms = (int) strtol(optarg, NULL, 10);
                        break;
                case 'h':
                        usage();
                        return 0;
                default:
                        return 2;
                }
        }
        if (optind != argc - 1) {
                usage();
                return 2;
        }

        r = fe_connect_and_start(&fe, argv[optind], &o);
        if (r < 0) {
                fprintf(stderr, "fe-session: connect/start %s: %s (%s)\n", argv[optind], strerror(-r),
                        fe ? fe->error : "no connection");
                goto out;
        }
        r = fe_fuse_new(&c, fe);
        if (r < 0)
                goto out;
        r = fe_fuse_init(c);
        if (r < 0) {
                fprintf(stderr, "fe-session: FUSE_INIT: %s %s\n", strerror(-r), c->last_problem);
                goto out;
        }
        if (read_name && do_read(c, read_name) < 0)
                goto out;
        if (write_spec && do_write(c, write_spec) < 0)
                goto out;
        if (roundtrip >= 0) {
                r = fe_fuse_roundtrip(c, "fe-session-roundtrip", (size_t) roundtrip, 42);
                if (r < 0) {
                        fprintf(stderr, "fe-session: roundtrip of %ld bytes: %s\n", roundtrip, c->last_problem);
                        goto out;
                }
        }
        if (open_write) {
                struct fuse_entry_out e;

                kept.name = open_write;
                r = fe_fuse_create(c, FUSE_ROOT_ID, open_write, O_CREAT | O_RDWR | O_TRUNC, 0100644, &e, &kept.fh);
                if (r < 0) {
                        fprintf(stderr, "fe-session: CREATE %s: %s %s\n", open_write, strerror(-r), c->last_problem);
                        goto out;
                }
                kept.nodeid = e.nodeid;
        }
        fprintf(stderr, "fe-session: session on %s ok\n", argv[optind]);
        if (hold > 0)
                sleep((unsigned) hold);
        if (hold_stdin && loop) {
                if (name_loop(c, open_write ? &kept : NULL) < 0)
                        goto out;
        } else if (hold_stdin) {
                char b[64];
                while (read(STDIN_FILENO, b, sizeof b) > 0)
                        ;
        }
        ret = 0;
out:
        c = fe_fuse_free(c);
        fe = fe_free(fe);
        return ret;
}
