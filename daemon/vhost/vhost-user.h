/* vhost-user.h: the vhost-user wire protocol, backend side (messages, fds, replies, handlers).
 *
 * The constants below are not in any system header (linux/vhost_types.h has the vring payloads but
 * not the vhost-user request ids or protocol feature bits). */
#pragma once

#include <linux/vhost_types.h>
#include <stdint.h>

typedef struct Device Device;

enum {
        VHOST_USER_GET_FEATURES = 1,
        VHOST_USER_SET_FEATURES = 2,
        VHOST_USER_SET_OWNER = 3,
        VHOST_USER_RESET_OWNER = 4,
        VHOST_USER_SET_MEM_TABLE = 5,
        VHOST_USER_SET_LOG_BASE = 6,
        VHOST_USER_SET_LOG_FD = 7,
        VHOST_USER_SET_VRING_NUM = 8,
        VHOST_USER_SET_VRING_ADDR = 9,
        VHOST_USER_SET_VRING_BASE = 10,
        VHOST_USER_GET_VRING_BASE = 11,
        VHOST_USER_SET_VRING_KICK = 12,
        VHOST_USER_SET_VRING_CALL = 13,
        VHOST_USER_SET_VRING_ERR = 14,
        VHOST_USER_GET_PROTOCOL_FEATURES = 15,
        VHOST_USER_SET_PROTOCOL_FEATURES = 16,
        VHOST_USER_GET_QUEUE_NUM = 17,
        VHOST_USER_SET_VRING_ENABLE = 18,
        VHOST_USER_SET_BACKEND_REQ_FD = 21,
        VHOST_USER_GET_CONFIG = 24,
        VHOST_USER_SET_CONFIG = 25,
        VHOST_USER_GET_INFLIGHT_FD = 31,
        VHOST_USER_SET_INFLIGHT_FD = 32,
        VHOST_USER_RESET_DEVICE = 34,
        VHOST_USER_GET_MAX_MEM_SLOTS = 36,
        VHOST_USER_ADD_MEM_REG = 37,
        VHOST_USER_REM_MEM_REG = 38,
        _VHOST_USER_MAX,
};

#define VHOST_USER_F_PROTOCOL_FEATURES 30

enum {
        VHOST_USER_PROTOCOL_F_MQ = 0,
        VHOST_USER_PROTOCOL_F_LOG_SHMFD = 1,
        VHOST_USER_PROTOCOL_F_REPLY_ACK = 3,
        VHOST_USER_PROTOCOL_F_BACKEND_REQ = 5,
        VHOST_USER_PROTOCOL_F_CONFIG = 9,
        VHOST_USER_PROTOCOL_F_RESET_DEVICE = 13,
        VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS = 15,
};

#define VHOST_USER_VERSION 0x1u
#define VHOST_USER_VERSION_MASK 0x3u
#define VHOST_USER_REPLY_MASK (1u << 2)
#define VHOST_USER_NEED_REPLY_MASK (1u << 3)
#define VHOST_USER_VRING_IDX_MASK 0xffu
#define VHOST_USER_VRING_NOFD_MASK (1u << 8)

/* At most 8 fds travel with one message (VHOST_MEMORY_BASELINE_NREGIONS). */
#define VHOST_USER_MAX_FDS 8
#define VHOST_USER_MAX_RAM_SLOTS 8 /* regions in one SET_MEM_TABLE */

typedef struct __attribute__((packed)) VhostUserHeader {
        uint32_t request;
        uint32_t flags;
        uint32_t size;
} VhostUserHeader;

/* linux/vhost_types.h's vhost_memory_region names the 4th field flags_padding; vhost-user uses it as
 * the mmap offset, so the wire layouts are declared here. */
typedef struct VhostUserMemoryRegion {
        uint64_t guest_phys_addr;
        uint64_t memory_size;
        uint64_t userspace_addr;
        uint64_t mmap_offset;
} VhostUserMemoryRegion;

typedef struct VhostUserMemory {
        uint32_t nregions;
        uint32_t padding;
        VhostUserMemoryRegion regions[VHOST_USER_MAX_RAM_SLOTS];
} VhostUserMemory;

typedef struct VhostUserMemRegMsg {
        uint64_t padding;
        VhostUserMemoryRegion region;
} VhostUserMemRegMsg;

typedef union VhostUserPayload {
        uint64_t u64;
        struct vhost_vring_state state;
        struct vhost_vring_addr addr;
        VhostUserMemory memory;
        VhostUserMemRegMsg memreg;
        uint8_t raw[512];
} VhostUserPayload;

typedef struct VhostUserMsg {
        VhostUserHeader hdr;
        VhostUserPayload payload;
        int fds[VHOST_USER_MAX_FDS];
        unsigned n_fds;
} VhostUserMsg;

const char *vhost_user_request_to_string(uint32_t request);

/* --tag: the tag (1..36 bytes) the device's config space reports; from then on
 * VHOST_USER_PROTOCOL_F_CONFIG is offered and GET_CONFIG answers. -EINVAL for a bad length. */
int vhost_user_set_config_tag(Device *d, const char *tag);

/* Receives one message with its fds (close them with vhost_user_msg_close_fds()). Returns 0,
 * -ECONNRESET at EOF, -EBADMSG for a message that breaks framing (the connection must go). */
int vhost_user_recv(int fd, VhostUserMsg *msg);
void vhost_user_msg_close_fds(VhostUserMsg *msg);

/* Handles one received message against the device, sending whatever reply the protocol asks for.
 * Takes ownership of the message's fds. Returns 0 to continue, or a negative errno when the
 * connection is unusable and must be closed. */
int vhost_user_handle(Device *d, int fd, VhostUserMsg *msg);
