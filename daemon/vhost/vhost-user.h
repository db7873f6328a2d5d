/* vhost-user.h: the vhost-user wire protocol, backend side (messages, fds, replies, handlers).
 *
 * The constants below are not in any system header (linux/vhost_types.h has the vring payloads but
 * not the vhost-user request ids or protocol feature bits). */
#pragma once

#include <linux/vhost_types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
        VHOST_USER_SET_DEVICE_STATE_FD = 42,
        VHOST_USER_CHECK_DEVICE_STATE = 43,
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
        VHOST_USER_PROTOCOL_F_DEVICE_STATE = 19,
};

/* SET_DEVICE_STATE_FD: which way the state goes, and in which phase of the migration. */
enum {
        VHOST_USER_TRANSFER_SAVE = 0, /* from the backend to the frontend (the source) */
        VHOST_USER_TRANSFER_LOAD = 1, /* from the frontend to the backend (the destination) */
};
#define VHOST_USER_TRANSFER_PHASE_STOPPED 0u /* the device and all its rings are stopped */
/* Its reply: an error code in the low byte; this bit set when no fd comes with it (the frontend
 * then uses the pipe end it kept). */
#define VHOST_USER_TRANSFER_NO_FD (1ull << 8)

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

/* SET_LOG_BASE with PROTOCOL_F_LOG_SHMFD: the dirty log's size and offset in the fd sent with it. */
typedef struct VhostUserLog {
        uint64_t mmap_size;
        uint64_t mmap_offset;
} VhostUserLog;

typedef struct VhostUserTransferState {
        uint32_t direction;
        uint32_t phase;
} VhostUserTransferState;

typedef union VhostUserPayload {
        uint64_t u64;
        VhostUserLog log;
        VhostUserTransferState transfer;
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

/* Receives one message with its fds (close them with vhost_user_msg_close_fds()). Returns 0,
 * -ECONNRESET at EOF, -EBADMSG for a message that breaks framing (the connection must go). */
int vhost_user_recv(int fd, VhostUserMsg *msg);
void vhost_user_msg_close_fds(VhostUserMsg *msg);

/* What the messages act on, implemented by the device (device/vhost-backend.c): this layer frames,
 * decodes and validates messages and replies; the backend holds the state. Main thread only. The
 * int operations return 0 or a negative errno (the frontend's nack); fd arguments are owned by the
 * callee (-1 = no fd). */
typedef struct VhostUserBackendOps {
        uint64_t (*offered_features)(void *b);
        uint64_t (*offered_protocol_features)(void *b);
        /* Protocol features the frontend acked (REPLY_ACK decides whether requests get an ack). */
        uint64_t (*protocol_features)(void *b);
        unsigned (*queue_count)(void *b);

        int (*set_features)(void *b, uint64_t features);
        /* Only offered bits: checked before. */
        void (*set_protocol_features)(void *b, uint64_t features);
        void (*set_owner)(void *b);
        /* RESET_OWNER / RESET_DEVICE: stop everything, keep the session. */
        void (*reset)(void *b);

        int (*set_mem_table)(void *b, const VhostUserMemory *m, const int *fds, unsigned n_fds);
        int (*add_mem_region)(void *b, const VhostUserMemoryRegion *reg, int fd);
        int (*remove_mem_region)(void *b, const VhostUserMemoryRegion *reg);

        int (*set_vring_num)(void *b, unsigned idx, unsigned num);
        int (*set_vring_addr)(void *b, const struct vhost_vring_addr *addr);
        int (*set_vring_base)(void *b, unsigned idx, unsigned base);
        /* Stops the queue and returns its next avail index. */
        int (*get_vring_base)(void *b, unsigned idx, unsigned *ret);
        int (*set_vring_kick)(void *b, unsigned idx, int fd);
        int (*set_vring_call)(void *b, unsigned idx, int fd);
        int (*set_vring_err)(void *b, unsigned idx, int fd);
        int (*set_vring_enable)(void *b, unsigned idx, bool enable);
        /* SET_LOG_BASE (PROTOCOL_F_LOG_SHMFD): the dirty log, size bytes at offset of fd. */
        int (*set_log_base)(void *b, uint64_t size, uint64_t offset, int fd);
        /* SET_DEVICE_STATE_FD (PROTOCOL_F_DEVICE_STATE): start moving the device's state through fd
         * (the write end of a pipe to save, the read end to load); direction and phase checked
         * before. The backend never hands back a pipe of its own. */
        int (*set_device_state_fd)(void *b, uint32_t direction, int fd);
        /* CHECK_DEVICE_STATE: the outcome of the last transfer (0, or the negative errno that
         * failed it). */
        int (*check_device_state)(void *b);
        /* GET_CONFIG: writes the device's config space (at most size bytes) and returns its
         * length; 0 when there is none. NULL: no config space. */
        size_t (*get_config)(void *b, uint8_t *buf, size_t size);
        /* Right before any reply or ack goes to the frontend, the request applied: a backend that
         * keeps its state outside the process for one that takes over after its death stores it
         * here, so that a change the frontend was answered for is never lost with the process.
         * NULL: nothing to do. */
        void (*before_reply)(void *b);
} VhostUserBackendOps;

/* The largest config space GET_CONFIG serves (the message payload's bound). */
#define VHOST_USER_CONFIG_SPACE_MAX 256

/* Handles one received message against the backend b, sending whatever reply the protocol asks
 * for. Takes ownership of the message's fds. Returns 0 to continue, or a negative errno when the
 * connection is unusable and must be closed. */
int vhost_user_handle(const VhostUserBackendOps *ops, void *b, int fd, VhostUserMsg *msg);
