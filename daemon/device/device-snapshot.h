/* device-snapshot.h: what the frontend configured, as one fixed-size record and the fds it names,
 * for a keeper to hold while this process serves and to hand to the next one if it dies
 * (docs/survival.md). The record is plain data: the process that restores it validates every
 * field through the same device_set_*() calls a vhost-user message goes through, as if a frontend
 * had sent them (a taken-over serving process can write anything into it). */
#pragma once

#include "device.h"
#include "guest-memory.h"

#define DEVICE_SNAPSHOT_MAGIC 0x76756673u /* "vufs" */
#define DEVICE_SNAPSHOT_VERSION 1
/* fds: regions, then per queue kick, call, err, in-flight table. */
#define DEVICE_SNAPSHOT_MAX_FDS (GUEST_MEMORY_MAX_REGIONS + 4 * DEVICE_MAX_QUEUES)

typedef struct DeviceSnapshotQueue {
        uint32_t num;
        uint16_t last_avail; /* SET_VRING_BASE's, for a queue not started */
        uint8_t addr_set, started, enabled;
        /* Index into the fds of each, -1 when the queue has none. */
        int8_t kick, call, err, table;
        uint8_t pad[5];
        uint64_t desc, avail, used;
} DeviceSnapshotQueue;

typedef struct DeviceSnapshot {
        uint32_t magic, version;
        uint32_t n_queues, n_regions;
        uint64_t features, protocol_features;
        uint8_t owner_set, pad[7];
        VhostUserMemoryRegion regions[GUEST_MEMORY_MAX_REGIONS]; /* fd i is region i's */
        DeviceSnapshotQueue queues[DEVICE_MAX_QUEUES];
} DeviceSnapshot;

/* Fills *ret and fds (borrowed: the device's own) from the device as the main thread sees it
 * between two vhost-user messages. Returns the number of fds. */
int device_snapshot(Device *d, DeviceSnapshot *ret, int fds[static DEVICE_SNAPSHOT_MAX_FDS]);
/* Configures a fresh device as the snapshot says, taking the n fds (closed on every path); started
 * queues resume from their in-flight tables. */
int device_restore(Device *d, const DeviceSnapshot *s, int *fds, unsigned n);
