/* vhost-backend.c: the device as the backend of vhost-user messages (VhostUserBackendOps). */
#include "device-internal.h"

static uint64_t vb_offered_features(void *b) {
        return device_offered_features();
}

/* DEVICE_STATE with a state handler (the composition always hands one in: docs/migration.md says
 * why it is offered whatever the options). CONFIG only with a tag (as the Rust virtiofsd: without one there is nothing a VMM should read
 * from us). */
static uint64_t vb_offered_protocol_features(void *b) {
        const Device *d = b;
        return device_offered_protocol_features() | (d->has_tag ? 1ULL << VHOST_USER_PROTOCOL_F_CONFIG : 0) |
               (d->has_state_handler ? 1ULL << VHOST_USER_PROTOCOL_F_DEVICE_STATE : 0);
}

static size_t vb_get_config(void *b, uint8_t *buf, size_t size) {
        return device_get_config(b, buf, size);
}

static uint64_t vb_protocol_features(void *b) {
        Device *d = b;
        return d->protocol_features;
}

static unsigned vb_queue_count(void *b) {
        Device *d = b;
        return d->n_queues;
}

static int vb_set_features(void *b, uint64_t features) {
        return device_set_features(b, features);
}

static void vb_set_protocol_features(void *b, uint64_t features) {
        Device *d = b;
        d->protocol_features = features;
}

static void vb_set_owner(void *b) {
        Device *d = b;
        d->owner_set = true;
}

static void vb_reset(void *b) {
        device_reset(b);
}

static int vb_set_mem_table(void *b, const VhostUserMemory *m, const int *fds, unsigned n_fds) {
        return device_set_mem_table(b, m, fds, n_fds);
}

static int vb_add_mem_region(void *b, const VhostUserMemoryRegion *reg, int fd) {
        return device_add_mem_region(b, reg, fd);
}

static int vb_remove_mem_region(void *b, const VhostUserMemoryRegion *reg) {
        return device_remove_mem_region(b, reg);
}

static int vb_set_vring_num(void *b, unsigned idx, unsigned num) {
        return device_set_vring_num(b, idx, num);
}

static int vb_set_vring_addr(void *b, const struct vhost_vring_addr *addr) {
        return device_set_vring_addr(b, addr);
}

static int vb_set_vring_base(void *b, unsigned idx, unsigned base) {
        return device_set_vring_base(b, idx, base);
}

static int vb_get_vring_base(void *b, unsigned idx, unsigned *ret) {
        return device_get_vring_base(b, idx, ret);
}

static int vb_set_vring_kick(void *b, unsigned idx, int fd) {
        return device_set_vring_kick(b, idx, fd);
}

static int vb_set_vring_call(void *b, unsigned idx, int fd) {
        return device_set_vring_call(b, idx, fd);
}

static int vb_set_vring_err(void *b, unsigned idx, int fd) {
        return device_set_vring_err(b, idx, fd);
}

static int vb_set_vring_enable(void *b, unsigned idx, bool enable) {
        return device_set_vring_enable(b, idx, enable);
}

static int vb_set_log_base(void *b, uint64_t size, uint64_t offset, int fd) {
        return device_set_log_base(b, size, offset, fd);
}

static int vb_set_device_state_fd(void *b, uint32_t direction, int fd) {
        return device_set_state_fd(b, direction, fd);
}

static int vb_check_device_state(void *b) {
        return device_check_state(b);
}

static void vb_before_reply(void *b) {
        Device *d = b;

        if (d->before_reply)
                d->before_reply(d->before_reply_data);
}

const VhostUserBackendOps device_vhost_ops = {
        .before_reply = vb_before_reply,
        .offered_features = vb_offered_features,
        .offered_protocol_features = vb_offered_protocol_features,
        .protocol_features = vb_protocol_features,
        .queue_count = vb_queue_count,
        .set_features = vb_set_features,
        .set_protocol_features = vb_set_protocol_features,
        .set_owner = vb_set_owner,
        .reset = vb_reset,
        .set_mem_table = vb_set_mem_table,
        .add_mem_region = vb_add_mem_region,
        .remove_mem_region = vb_remove_mem_region,
        .set_vring_num = vb_set_vring_num,
        .set_vring_addr = vb_set_vring_addr,
        .set_vring_base = vb_set_vring_base,
        .get_vring_base = vb_get_vring_base,
        .set_vring_kick = vb_set_vring_kick,
        .set_vring_call = vb_set_vring_call,
        .set_vring_err = vb_set_vring_err,
        .set_vring_enable = vb_set_vring_enable,
        .get_config = vb_get_config,
        .set_log_base = vb_set_log_base,
        .set_device_state_fd = vb_set_device_state_fd,
        .check_device_state = vb_check_device_state,
};
