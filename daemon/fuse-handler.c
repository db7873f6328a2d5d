/* fuse-handler.c: the FUSE server as the device's request handler (composition glue). */
#include "fuse-handler.h"

#include <linux/fuse.h>
#include <stddef.h>
#include <string.h>

#include "survive.h"

ExecClass fuse_request_classify(const ChainIter *in, uint32_t *ret_opcode) {
        ChainIter it = *in; /* a copy: the request stays unread for the FUSE server */
        struct fuse_in_header h;

        *ret_opcode = 0;
        if (chain_read(&it, &h, sizeof h) < 0)
                return EXEC_CLASS_META;
        *ret_opcode = h.opcode;
        return fuse_request_classify_header(&h, &it);
}

ExecClass fuse_request_classify_header(const struct fuse_in_header *hdr, const ChainIter *rest) {
        ChainIter it = *rest;
        const struct fuse_in_header h = *hdr;

        switch (h.opcode) {
        case FUSE_READ:
        case FUSE_WRITE: {
                /* fuse_read_in and fuse_write_in both start with fh, offset, size. */
                uint8_t args[offsetof(struct fuse_read_in, size) + sizeof(uint32_t)];
                uint32_t size;

                _Static_assert(offsetof(struct fuse_read_in, size) == offsetof(struct fuse_write_in, size),
                               "READ and WRITE carry their size at the same offset");
                if (chain_read(&it, args, sizeof args) < 0)
                        return EXEC_CLASS_IO;
                memcpy(&size, args + offsetof(struct fuse_read_in, size), sizeof size);
                return size >= EXEC_LARGE_IO ? EXEC_CLASS_LARGE_IO : EXEC_CLASS_IO;
        }
        case FUSE_READDIR:
        case FUSE_READDIRPLUS:
                return EXEC_CLASS_DIR;
        case FUSE_FSYNC:
        case FUSE_FSYNCDIR:
        case FUSE_SYNCFS:
        case FUSE_FALLOCATE:
        case FUSE_COPY_FILE_RANGE:
                return EXEC_CLASS_SYNC;
        case FUSE_SETLKW:
                return EXEC_CLASS_LOCK_WAIT;
        default:
                return EXEC_CLASS_META;
        }
}

static ExecClass fuse_handler_classify(void *data, const void *h, const ChainIter *rest) {
        struct fuse_in_header hdr;
        ExecClass c;

        memcpy(&hdr, h, sizeof hdr);
        c = fuse_request_classify_header(&hdr, rest);
        /* A lock wait may now sit queued for a helper: an INTERRUPT meanwhile must not be lost. The
         * device processes every request it classified, which ends the announcement. */
        if (c == EXEC_CLASS_LOCK_WAIT)
                fuse_server_lock_wait_queued(data, &hdr);
        return c;
}

static uint32_t fuse_handler_process(void *data, const void *h, ChainIter *in, ChainIter *out, bool may_wait,
                                     RequestInfo *info) {
        FuseReqInfo fi = {};
        struct fuse_in_header hdr;
        uint32_t len;

        if (h) {
                memcpy(&hdr, h, sizeof hdr);
                if (__builtin_expect(hdr.opcode == FUSE_INIT, 0) && survive_enabled()) {
                        /* The bytes as the server will read them (a copy of the iterator). */
                        uint8_t args[sizeof(struct fuse_init_in)];
                        ChainIter it = *in;
                        size_t n = MIN(chain_left(&it), sizeof args);

                        if (chain_read(&it, args, n) < 0)
                                n = 0;
                        len = fuse_server_process_header(data, &hdr, in, out, may_wait, &fi);
                        if (fi.error == 0 && n > 0)
                                survive_note_init(&hdr, args, n);
                } else
                        len = fuse_server_process_header(data, &hdr, in, out, may_wait, &fi);
        } else
                len = fuse_server_process(data, in, out, &fi); /* answers "no header" */

        *info = (RequestInfo) { .opcode = fi.opcode, .error = fi.error, .bytes = fi.bytes, .replied = fi.replied };
        return len;
}

static uint32_t fuse_handler_replay(void *data, const void *h, ChainIter *in, ChainIter *out, bool started,
                                    int64_t result, RequestInfo *info) {
        FuseReqInfo fi = {};
        struct fuse_in_header hdr;
        uint32_t len;

        memcpy(&hdr, h, sizeof hdr);
        len = fuse_server_replay(data, &hdr, in, out, started, result, &fi);
        *info = (RequestInfo) { .opcode = fi.opcode, .error = fi.error, .bytes = fi.bytes, .replied = fi.replied };
        return len;
}

static void fuse_handler_cancel_waits(void *data) {
        fuse_server_cancel_waits(data);
}

RequestHandler fuse_request_handler(FuseServer *s) {
        return (RequestHandler) {
                .header_size = sizeof(struct fuse_in_header),
                .classify = fuse_handler_classify,
                .process = fuse_handler_process,
                .replay = fuse_handler_replay,
                .cancel_waits = fuse_handler_cancel_waits,
                .data = s,
        };
}
