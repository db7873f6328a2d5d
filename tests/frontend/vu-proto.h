/* vu-proto.h: vhost-user wire definitions as the test frontend (the QEMU side) sends them. */
#pragma once

#include <stdint.h>

#include <linux/vhost_types.h>

/* Request ids, frontend → backend (vhost-user.rst numbering). */
enum {
        FE_VU_GET_FEATURES = 1,
        FE_VU_SET_FEATURES = 2,
        FE_VU_SET_OWNER = 3,
        FE_VU_RESET_OWNER = 4,
        FE_VU_SET_MEM_TABLE = 5,
        FE_VU_SET_LOG_BASE = 6,
        FE_VU_SET_LOG_FD = 7,
        FE_VU_SET_VRING_NUM = 8,
        FE_VU_SET_VRING_ADDR = 9,
        FE_VU_SET_VRING_BASE = 10,
        FE_VU_GET_VRING_BASE = 11,
        FE_VU_SET_VRING_KICK = 12,
        FE_VU_SET_VRING_CALL = 13,
        FE_VU_SET_VRING_ERR = 14,
        FE_VU_GET_PROTOCOL_FEATURES = 15,
        FE_VU_SET_PROTOCOL_FEATURES = 16,
        FE_VU_GET_QUEUE_NUM = 17,
        FE_VU_SET_VRING_ENABLE = 18,
        FE_VU_SEND_RARP = 19,
        FE_VU_NET_SET_MTU = 20,
        FE_VU_SET_BACKEND_REQ_FD = 21,
        FE_VU_IOTLB_MSG = 22,
        FE_VU_SET_VRING_ENDIAN = 23,
        FE_VU_GET_CONFIG = 24,
        FE_VU_SET_CONFIG = 25,
        FE_VU_GET_INFLIGHT_FD = 31,
        FE_VU_SET_INFLIGHT_FD = 32,
        FE_VU_RESET_DEVICE = 34,
        FE_VU_VRING_KICK = 35,
        FE_VU_GET_MAX_MEM_SLOTS = 36,
        FE_VU_ADD_MEM_REG = 37,
        FE_VU_REM_MEM_REG = 38,
        FE_VU_SET_STATUS = 39,
        FE_VU_GET_STATUS = 40,
        FE_VU_SET_DEVICE_STATE_FD = 42,
        FE_VU_CHECK_DEVICE_STATE = 43,
};

/* Header flags. */
#define FE_VU_VERSION 0x1u
#define FE_VU_FLAG_REPLY 0x4u
#define FE_VU_FLAG_NEED_REPLY 0x8u

/* Virtio feature bit that gates the protocol-feature messages. */
#define FE_VU_F_PROTOCOL_FEATURES 30

/* Protocol feature bits. */
enum {
        FE_VU_PROTOCOL_F_MQ = 0,
        FE_VU_PROTOCOL_F_LOG_SHMFD = 1,
        FE_VU_PROTOCOL_F_REPLY_ACK = 3,
        FE_VU_PROTOCOL_F_BACKEND_REQ = 5,
        FE_VU_PROTOCOL_F_CONFIG = 9,
        FE_VU_PROTOCOL_F_BACKEND_SEND_FD = 10,
        FE_VU_PROTOCOL_F_HOST_NOTIFIER = 11,
        FE_VU_PROTOCOL_F_INFLIGHT_SHMFD = 12,
        FE_VU_PROTOCOL_F_RESET_DEVICE = 13,
        FE_VU_PROTOCOL_F_CONFIGURE_MEM_SLOTS = 15,
        FE_VU_PROTOCOL_F_STATUS = 16,
        FE_VU_PROTOCOL_F_DEVICE_STATE = 19,
};

/* SET_DEVICE_STATE_FD: direction (save 0, load 1), phase (stopped 0); its reply's "no fd" bit. */
#define FE_VU_TRANSFER_SAVE 0u
#define FE_VU_TRANSFER_LOAD 1u
#define FE_VU_TRANSFER_NO_FD 0x100u

/* Bits 0-7 of a KICK/CALL/ERR payload are the queue index, this bit says "no fd attached". */
#define FE_VU_VRING_NOFD_MASK 0x100u
#define FE_VU_VRING_IDX_MASK 0xffu

/* Most fds QEMU ever attaches to one message (VHOST_MEMORY_BASELINE_NREGIONS). */
#define FE_VU_MAX_FDS 8

typedef struct __attribute__((packed)) FeVuHeader {
        uint32_t request;
        uint32_t flags;
        uint32_t size;
} FeVuHeader;

typedef struct FeVuRegion {
        uint64_t guest_phys_addr;
        uint64_t memory_size;
        uint64_t userspace_addr;
        uint64_t mmap_offset;
} FeVuRegion;

typedef struct FeVuMemTable {
        uint32_t nregions;
        uint32_t padding;
        FeVuRegion regions[FE_VU_MAX_FDS];
} FeVuMemTable;

typedef struct FeVuMemRegMsg {
        uint64_t padding;
        FeVuRegion region;
} FeVuMemRegMsg;

_Static_assert(sizeof(FeVuHeader) == 12, "vhost-user header is 12 bytes");
_Static_assert(sizeof(FeVuRegion) == 32, "region is 32 bytes");
_Static_assert(sizeof(FeVuMemRegMsg) == 40, "mem reg message is 40 bytes");
_Static_assert(sizeof(struct vhost_vring_addr) == 40, "vring addr is 40 bytes");
