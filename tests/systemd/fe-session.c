/* fe-session.c: one vhost-user-fs session against a socket with the test frontend (plays QEMU + guest). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "frontend.h"
#include "fuse-client.h"

static void usage(void) {
        printf("Usage: fe-session SOCKET [--read NAME] [--write NAME=TEXT] [--roundtrip BYTES]\n"
               "                  [--hold SECONDS | --hold-stdin] [--timeout MS]\n"
               "Connects like QEMU, starts the device, FUSE_INIT, then in order: READs NAME from the\n"
               "share root and prints it, CREATEs NAME with TEXT, writes/reads back/deletes a file of\n"
               "BYTES; then keeps the connection open (SECONDS, or until stdin reaches end of file)\n"
               "and disconnects. Exit 0 when everything succeeded.\n");
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

int main(int argc, char *argv[]) {
        static const struct option options[] = { { "read", required_argument, NULL, 'r' },
                                                 { "write", required_argument, NULL, 'w' },
                                                 { "roundtrip", required_argument, NULL, 'R' },
                                                 { "hold", required_argument, NULL, 'H' },
                                                 { "hold-stdin", no_argument, NULL, 'S' },
                                                 { "timeout", required_argument, NULL, 't' },
                                                 { "help", no_argument, NULL, 'h' },
                                                 {} };
        const char *read_name = NULL, *write_spec = NULL;
        long roundtrip = -1, hold = 0;
        bool hold_stdin = false;
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
        fprintf(stderr, "fe-session: session on %s ok\n", argv[optind]);
        if (hold > 0)
                sleep((unsigned) hold);
        if (hold_stdin) {
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
