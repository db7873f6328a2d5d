/* fuzz-vhost-user.c: the input is a byte stream from the frontend: vhost_user_recv() frames it into
 * messages and vhost_user_handle() acts on them against a real device (no fds can travel: messages
 * that need one fail, as they must). */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device.h"
#include "executor.h"
#include "fuse-handler.h"
#include "fuse-server.h"
#include "fuzz-common.h"
#include "passthrough.h"
#include "stats.h"
#include "vhost-user.h"

static Passthrough *pt;
static FuseServer *fs;
static Device *dev;

static void setup(void) {
        static Executor *e;
        static Stats *st;
        FsOptions o = FS_OPTIONS_DEFAULT;
        RequestHandler h;

        fuzz_quiet_logging();
        o.shared_dir = fuzz_shared_dir();
        if (passthrough_new(&pt, &o) < 0 || fuse_server_new(&fs, &o, &passthrough_ops, pt) < 0)
                abort();
        h = fuse_request_handler(fs);
        if (device_new(&dev, &h, 2) < 0 || executor_new(&e, THREAD_MODE_INLINE, 1) < 0 || stats_new(&st) < 0)
                abort();
        device_attach(dev, e, st);
        fuzz_confine();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        int sv[2];
        char sink[4096];

        if (!dev)
                setup();
        if (size > 64 * 1024)
                return 0;
        /* The whole stream fits in the socket buffer; replies go to the other end and are drained
         * after each message so the handler never blocks on a full buffer. */
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                abort();
        {
                int sz = 256 * 1024;
                (void) setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
                (void) setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        }
        if (size > 0 && write(sv[1], data, size) != (ssize_t) size)
                abort();
        shutdown(sv[1], SHUT_WR);

        for (unsigned n = 0; n < 256; n++) {
                VhostUserMsg msg;
                if (vhost_user_recv(sv[0], &msg) < 0)
                        break;
                if (vhost_user_handle(&device_vhost_ops, dev, sv[0], &msg) < 0)
                        break;
                while (recv(sv[1], sink, sizeof sink, MSG_DONTWAIT) > 0)
                        ;
        }
        close(sv[0]);
        close(sv[1]);
        /* The next input is a new frontend. */
        device_reset(dev);
        fuse_server_reset(fs);
        return 0;
}
