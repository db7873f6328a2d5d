/* migration.h: live migration of the FUSE session through vhost-user DEVICE_STATE: the device's
 * state handler over the FUSE server and the passthrough (docs/migration.md). */
#pragma once

#include <stdint.h>

#include "config.h"
#include "device.h"
#include "fuse-server.h"
#include "passthrough-state.h"

typedef struct Migration {
        FuseServer *fs;
        Passthrough *passthrough;
        PtStateOptions opts; /* from the --migration-* options */
        /* The last save and load: bytes and microseconds, for the log and the benchmark. */
        size_t last_bytes;
        uint64_t last_usec;
} Migration;

/* The --migration-* options as the passthrough takes them. */
PtStateOptions migration_options(const Config *c);

/* The handler the device saves and loads through (m must outlive the device). */
DeviceStateHandler migration_state_handler(Migration *m);

/* The two halves, also for tests and the benchmark: the whole session (FUSE flags, nodes, handles)
 * into a stream, and a stream restored into the session (which is reset first, and again when the
 * load fails). Negative errno with the reason in err. */
int migration_save(void *data, uint8_t **ret, size_t *ret_len, char *err, size_t errlen);
int migration_load(void *data, const uint8_t *buf, size_t len, char *err, size_t errlen);
