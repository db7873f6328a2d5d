/* fe-traffic.c: verified FUSE traffic against a vufsd socket with the test frontend, for the
 * control-plane shell tests (fsctl changes settings while this keeps the data path busy). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "frontend.h"
#include "fuse-client.h"

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "seconds", required_argument, NULL, 's' },
                { "count", required_argument, NULL, 'n' },
                { "size", required_argument, NULL, 'b' },
                { "queues", required_argument, NULL, 'q' },
                { "stop-file", required_argument, NULL, 'f' },
                { "pause-us", required_argument, NULL, 'p' },
                { "eexist", required_argument, NULL, 'e' },
                { "help", no_argument, NULL, 'h' },
                {}
        };
        const char *stop_file = NULL;
        double seconds = 0, start;
        long count = 0, size = 65536, pause_us = 0, eexist = 0;
        unsigned queues = 1, done = 0;
        Frontend *fe = NULL;
        FeFuse *c = NULL;
        FeOptions o;
        int opt, r;

        while ((opt = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (opt) {
                case 's':
                        seconds = atof(optarg);
                        break;
                case 'n':
                        count = atol(optarg);
                        break;
                case 'b':
                        size = atol(optarg);
                        break;
                case 'q':
                        queues = (unsigned) atoi(optarg);
                        break;
                case 'f':
                        stop_file = optarg;
                        break;
                case 'p':
                        pause_us = atol(optarg);
                        break;
                case 'e':
                        eexist = atol(optarg);
                        break;
                case 'h':
                        printf("Usage: fe-traffic SOCKET [--seconds S | --count N] [--size BYTES] [--queues N]\n"
                               "                  [--stop-file PATH] [--pause-us N] [--eexist N]\n"
                               "Connects like QEMU, FUSE_INIT, then create/write/read back/verify/unlink round trips\n"
                               "(sizes up to BYTES) for S seconds or N times, or until PATH exists. Prints the round\n"
                               "trips done; exit 0 when every reply was correct.\n"
                               "--pause-us: sleep N microseconds after each round trip (a guest that thinks).\n"
                               "--eexist: then N MKDIRs of an existing directory: N known errors, all EEXIST.\n");
                        return 0;
                default:
                        return 2;
                }
        }
        if (optind + 1 != argc || (seconds <= 0 && count <= 0) || size < 1 || queues < 1 || queues > 16 ||
            pause_us < 0 || eexist < 0) {
                fprintf(stderr, "fe-traffic: need SOCKET and --seconds or --count (see --help)\n");
                return 2;
        }

        fe_options_init(&o);
        o.num_queues = 1 + queues;
        r = fe_connect_and_start(&fe, argv[optind], &o);
        if (r < 0) {
                fprintf(stderr, "fe-traffic: cannot start the device: %s\n", fe ? fe->error : strerror(-r));
                return 1;
        }
        if (fe_fuse_new(&c, fe) < 0 || (r = fe_fuse_init(c)) < 0) {
                fprintf(stderr, "fe-traffic: FUSE_INIT failed: %s\n", c ? c->last_problem : "no memory");
                return 1;
        }
        start = now_s();
        for (unsigned i = 0;; i++) {
                char name[64];
                if (count > 0 && done >= (unsigned long) count)
                        break;
                if (seconds > 0 && now_s() - start >= seconds)
                        break;
                if (stop_file && access(stop_file, F_OK) == 0)
                        break;
                c->queue = 1 + i % queues;
                snprintf(name, sizeof name, "fe-traffic-%d-%u", (int) getpid(), i);
                r = fe_fuse_roundtrip(c, name, 1 + (size_t) ((i * 7919UL) % (unsigned long) size), i);
                if (r < 0 || c->proto_errors) {
                        fprintf(stderr, "fe-traffic: round trip %u failed: %s\n", i, c->last_problem);
                        return 1;
                }
                done++;
                if (pause_us > 0)
                        usleep((useconds_t) pause_us);
        }
        if (eexist > 0) {
                char dir[64];
                snprintf(dir, sizeof dir, "fe-traffic-%d-dir", (int) getpid());
                r = fe_fuse_mkdir(c, FUSE_ROOT_ID, dir, 0755, NULL);
                for (long i = 0; r == 0 && i < eexist; i++)
                        if (fe_fuse_mkdir(c, FUSE_ROOT_ID, dir, 0755, NULL) != -EEXIST)
                                r = -EPROTO;
                if (r == 0)
                        r = fe_fuse_rmdir(c, FUSE_ROOT_ID, dir);
                if (r < 0 || c->proto_errors) {
                        fprintf(stderr, "fe-traffic: MKDIR for EEXIST failed: %d %s\n", r, c->last_problem);
                        return 1;
                }
        }
        printf("%u\n", done);
        fe_fuse_free(c);
        fe_free(fe);
        return 0;
}
