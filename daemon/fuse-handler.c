/* fuse-handler.c: the FUSE server as the device's request handler (composition glue). */
#include "fuse-handler.h"

static uint32_t fuse_handler_process(void *data, const struct fuse_in_header *h, ChainIter *in, ChainIter *out,
                                     bool may_wait, RequestInfo *info) {
        FuseReqInfo fi = {};
        uint32_t len = h ? fuse_server_process_header(data, h, in, out, may_wait, &fi)
                         : fuse_server_process(data, in, out, &fi); /* answers "no header" */

        *info = (RequestInfo) { .opcode = fi.opcode, .error = fi.error, .bytes = fi.bytes, .replied = fi.replied };
        return len;
}

static void fuse_handler_cancel_waits(void *data) {
        fuse_server_cancel_waits(data);
}

RequestHandler fuse_request_handler(FuseServer *s) {
        return (RequestHandler) {
                .process = fuse_handler_process,
                .cancel_waits = fuse_handler_cancel_waits,
                .data = s,
        };
}
