/* fuse-handler.h: the FUSE server as the device's request handler (composition glue). */
#pragma once

#include "device.h"
#include "fuse-server.h"

/* A RequestHandler that runs every request through s (which must outlive the device). */
RequestHandler fuse_request_handler(FuseServer *s);
