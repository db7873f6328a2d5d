/* frontend.h: a test frontend that plays QEMU 7.2's vhost-user-fs role against a backend process. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fe-mem.h"
#include "vring.h"
#include "vu-proto.h"

#define FE_MAX_QUEUES 32

/* ---- backend process ---- */

typedef struct FeBackend {
        pid_t pid;
        bool reaped;
        int status;             /* waitpid() status once reaped */
        char *socket_path;
} FeBackend;

/* Starts argv[0] with argv and waits (timeout_ms) until socket_path is a listening socket.
 * The child gets SIGKILL if the calling thread dies (tests that abort leave nothing behind). */
int fe_backend_spawn(FeBackend **ret, char *const argv[], const char *socket_path, int timeout_ms);
/* True while the process has not exited. */
bool fe_backend_alive(FeBackend *b);
/* Waits for the process to exit; 0 with *ret_status = waitpid status, or -ETIMEDOUT. */
int fe_backend_wait(FeBackend *b, int timeout_ms, int *ret_status);
/* SIGTERM, then SIGKILL after timeout_ms; returns the waitpid status (or -errno). */
int fe_backend_stop(FeBackend *b, int timeout_ms);
FeBackend *fe_backend_free(FeBackend *b);
/* Human readable "exited 0" / "killed by SIGSEGV" for messages. */
const char *fe_backend_describe(int status, char *buf, size_t len);

/* ---- vhost-user connection ---- */

typedef struct FeOptions {
        uint64_t mem_size;          /* default 64 MiB */
        FeMemLayout mem_layout;     /* default FE_MEM_QEMU_SPLIT */
        bool add_mem_reg;           /* send memory with ADD_MEM_REG (if CONFIGURE_MEM_SLOTS is offered) */
        unsigned num_queues;        /* vrings including hiprio; default 2 */
        uint16_t queue_size;        /* default 128 */
        uint64_t features_mask;     /* virtio features we accept; default VERSION_1|PROTOCOL_FEATURES|INDIRECT|EVENT_IDX */
        uint64_t protocol_mask;     /* protocol features we accept; default MQ|REPLY_ACK|CONFIGURE_MEM_SLOTS */
        int ring_region;            /* region for ring memory, -1 any */
        int timeout_ms;             /* reply and completion timeout; default 5000 */
} FeOptions;

typedef struct Frontend {
        FeOptions opts;
        int sock;
        uint64_t backend_features, features;
        uint64_t backend_protocol, protocol;
        uint64_t queue_num, max_mem_slots;
        FeMem *mem;
        bool mem_regs_added;        /* ADD_MEM_REG mode: memory is sent once per connection */
        FeVring *vq[FE_MAX_QUEUES];
        uint16_t vring_base[FE_MAX_QUEUES]; /* last GET_VRING_BASE answer */
        bool started;
        bool ever_started;          /* rings have carried traffic: a fresh start must reallocate them */
        uint64_t last_ack;
        char error[256];            /* why the last call failed */
} Frontend;

void fe_options_init(FeOptions *o);

/* Connects to a listening backend socket (retrying while it is not yet accepting) and creates guest memory. */
int fe_connect(Frontend **ret, const char *socket_path, const FeOptions *opts);
/* Closes the connection (the backend sees EOF) and frees memory and rings. */
Frontend *fe_free(Frontend *fe);

static inline bool fe_has_protocol(Frontend *fe, unsigned bit) {
        return fe->protocol & (1ull << bit);
}
static inline bool fe_has_feature(Frontend *fe, unsigned bit) {
        return fe->features & (1ull << bit);
}

/* Raw: one message, header as given (any flags/size), payload of payload_len bytes, fds attached. */
int fe_vu_send_raw(Frontend *fe, uint32_t request, uint32_t flags, uint32_t size, const void *payload,
                   size_t payload_len, const int *fds, unsigned nfds);
/* Raw: arbitrary bytes on the socket (e.g. a truncated header). */
int fe_vu_send_bytes(Frontend *fe, const void *buf, size_t len, const int *fds, unsigned nfds);
/* Receives one message; returns its payload size. -ECONNRESET on EOF, -ETIMEDOUT. */
int fe_vu_recv(Frontend *fe, FeVuHeader *hdr, void *payload, size_t max, int timeout_ms);
/* Returns true if the backend has closed its end (EOF readable within timeout_ms). */
bool fe_vu_closed(Frontend *fe, int timeout_ms);

/* A well-formed request: flags = version (| NEED_REPLY if need_reply). If the request has a defined reply
 * (GET_*) it is read into reply/reply_size and checked (flags 0x5, same id, exact size); if need_reply and it
 * has none, the REPLY_ACK u64 is read: a non-zero ack gives -EBADE (value in fe->last_ack). */
int fe_vu_request(Frontend *fe, uint32_t request, bool need_reply, const void *payload, size_t size,
                  const int *fds, unsigned nfds, void *reply, size_t reply_size);

int fe_vu_get_u64(Frontend *fe, uint32_t request, uint64_t *ret);
int fe_vu_set_u64(Frontend *fe, uint32_t request, uint64_t value, bool need_reply);
int fe_vu_vring_state(Frontend *fe, uint32_t request, unsigned index, unsigned num, bool need_reply);
int fe_vu_get_vring_base(Frontend *fe, unsigned index, unsigned *ret_num);
int fe_vu_vring_addr(Frontend *fe, const struct vhost_vring_addr *addr, bool need_reply);
/* KICK/CALL/ERR: fd < 0 sends the NOFD flag without an fd. */
int fe_vu_vring_fd(Frontend *fe, uint32_t request, unsigned index, int fd, bool need_reply);
int fe_vu_set_mem_table(Frontend *fe);
int fe_vu_add_mem_reg(Frontend *fe, unsigned region);
int fe_vu_rem_mem_reg(Frontend *fe, unsigned region);
/* GET_FEATURES round trip: the connection works and the backend answers sanely. */
int fe_vu_ping(Frontend *fe);
/* NEED_REPLY is set where QEMU sets it (memory messages) iff REPLY_ACK was negotiated. */
static inline bool fe_ack(Frontend *fe) {
        return fe_has_protocol(fe, FE_VU_PROTOCOL_F_REPLY_ACK);
}

/* ---- live migration: QEMU 8.2's sequence (docs/migration.md), the device already stopped ---- */

/* Source: a pipe, SET_DEVICE_STATE_FD(save) with its write end, everything read until EOF, then
 * CHECK_DEVICE_STATE, which must answer 0. *ret is malloc'd. */
int fe_save_state(Frontend *fe, uint8_t **ret, size_t *ret_len);
/* Destination: SET_DEVICE_STATE_FD(load) with a pipe's read end, buf written and the pipe closed,
 * then CHECK_DEVICE_STATE: its answer in *ret_check (0 = loaded). */
int fe_load_state(Frontend *fe, const uint8_t *buf, size_t len, uint64_t *ret_check);
/* CHECK_DEVICE_STATE alone. */
int fe_check_state(Frontend *fe, uint64_t *ret);

/* ---- QEMU sequences (vhost-user-fs.md 5.2) ---- */

/* Device realize: features, protocol features, queue num, mem slots, SET_OWNER, initial CALL/ERR fds. */
int fe_negotiate(Frontend *fe);
/* DRIVER_OK: SET_FEATURES, memory, per queue NUM/BASE/ADDR/KICK, ENABLE 1, CALL.
 * fresh_rings: new rings at new addresses with base 0 (driver reset / reboot); else the old rings
 * continue from the bases returned by the last stop. */
int fe_start(Frontend *fe, bool fresh_rings);
/* Stop: ENABLE 0 per queue, GET_VRING_BASE per queue (stored in vring_base[]), new CALL fds. */
int fe_stop(Frontend *fe);
/* fe_connect + fe_negotiate + fe_start. */
int fe_connect_and_start(Frontend **ret, const char *socket_path, const FeOptions *opts);
