/* fuse-handler.h: the FUSE server as the device's request handler (composition glue). */
#pragma once

#include <linux/fuse.h>

#include "device.h"
#include "fuse-server.h"

/* Which executor class a FUSE request is, from its header and the bytes after it (args, not
 * consumed; READ/WRITE's size there only picks between two I/O classes). Trusts nothing: the FUSE
 * server validates the request again. Unparseable requests are META (the server answers them with
 * an error quickly). */
ExecClass fuse_request_classify_header(const struct fuse_in_header *h, const ChainIter *args);
/* The same, reading the header from in (a copy: in stays unread); *ret_opcode is 0 without one. */
ExecClass fuse_request_classify(const ChainIter *in, uint32_t *ret_opcode);

/* A RequestHandler that runs every request through s (which must outlive the device). */
RequestHandler fuse_request_handler(FuseServer *s);
