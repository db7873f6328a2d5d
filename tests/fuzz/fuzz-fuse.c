/* fuzz-fuse.c: the FUSE decoder and dispatcher with the passthrough behind it, on a temporary
 * shared directory (confined with chroot as root, see fuzz-common.h).
 *
 * Input: [0] writable capacity in 512-byte units (0 = no writable bytes), [1] size of the pieces
 * the readable stream is cut into (0 = one piece), then requests back to back: each one is as long
 * as its fuse_in_header.len says (clamped to what is left), so a valid request is followed by the
 * next. Every input starts a new session with a valid FUSE_INIT; the fuzzer may send its own. */
#include <linux/fuse.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "chain.h"
#include "fuse-server.h"
#include "fuzz-common.h"
#include "passthrough.h"

#define MAX_PIECES 256

static Passthrough *pt;
static FuseServer *fs;
static uint8_t outbuf[512 * 256];
static unsigned runs;

static void setup(void) {
        FsOptions o = FS_OPTIONS_DEFAULT;
        struct rlimit fsize = { 16 << 20, 16 << 20 };

        fuzz_quiet_logging();
        /* A guest may ask for huge writes or fallocate: EFBIG instead of a full disk. */
        signal(SIGXFSZ, SIG_IGN);
        (void) setrlimit(RLIMIT_FSIZE, &fsize);
        o.shared_dir = fuzz_shared_dir();
        o.xattr = true;
        /* One thread: a blocking lock held by another owner would wait forever. */
        o.posix_lock = false;
        o.flock = false;
        if (passthrough_new(&pt, &o) < 0 || fuse_server_new(&fs, &o, &passthrough_ops, pt) < 0)
                abort();
        fuzz_confine();
}

static void process(const uint8_t *req, size_t len, size_t piece, size_t out_cap) {
        struct iovec in_iov[MAX_PIECES], out_iov[4];
        unsigned nin = 0, nout = 0;
        ChainIter in, out;
        FuseReqInfo info;
        uint32_t written;
        uint8_t *copy;

        /* A private copy: ASan then sees any read past the request. */
        copy = malloc(len ? len : 1);
        if (!copy)
                abort();
        memcpy(copy, req, len);
        if (piece == 0)
                piece = len ? len : 1;
        for (size_t off = 0; off < len && nin < MAX_PIECES; off += piece) {
                size_t n = len - off < piece ? len - off : piece;
                if (nin == MAX_PIECES - 1)
                        n = len - off;
                in_iov[nin++] = (struct iovec) { copy + off, n };
        }
        if (out_cap > 0) {
                size_t half = out_cap / 2;
                out_iov[nout++] = (struct iovec) { outbuf, half };
                out_iov[nout++] = (struct iovec) { outbuf + half, out_cap - half };
        }
        chain_iter_init(&in, in_iov, nin);
        chain_iter_init(&out, out_iov, nout);
        info = (FuseReqInfo) {};
        written = fuse_server_process(fs, &in, &out, &info);
        if (written > out_cap)
                abort();
        if (written >= sizeof(struct fuse_out_header)) {
                struct fuse_out_header oh;
                memcpy(&oh, outbuf, sizeof oh);
                /* The guest checks exactly this: the reply says how long it is. */
                if (oh.len != written)
                        abort();
        }
        free(copy);
}

static void init_session(void) {
        struct {
                struct fuse_in_header h;
                struct fuse_init_in i;
        } req = {
                .h = { .len = sizeof req, .opcode = FUSE_INIT, .unique = 1 },
                .i = { .major = FUSE_KERNEL_VERSION, .minor = FUSE_KERNEL_MINOR_VERSION, .max_readahead = 1 << 20,
                       .flags = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_DO_READDIRPLUS | FUSE_READDIRPLUS_AUTO |
                                FUSE_WRITEBACK_CACHE | FUSE_INIT_EXT },
        };
        process((const uint8_t *) &req, sizeof req, 0, sizeof outbuf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        size_t out_cap, piece;

        if (!fs)
                setup();
        if (size < 2)
                return 0;
        if (++runs % 4096 == 0)
                fuzz_reset_shared_dir();
        out_cap = (size_t) data[0] * 512;
        piece = data[1];
        data += 2;
        size -= 2;

        fuse_server_reset(fs);
        init_session();
        for (unsigned n = 0; size > 0 && n < 64; n++) {
                uint32_t len = 0;
                if (size >= 4)
                        memcpy(&len, data, 4);
                if (len == 0 || len > size)
                        len = (uint32_t) size;
                process(data, len, piece, out_cap);
                data += len;
                size -= len;
        }
        return 0;
}
