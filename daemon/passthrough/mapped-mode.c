/* mapped-mode.c: --privileged-files=map: set-id bits, device nodes and file capabilities a guest makes, kept as authenticated metadata. */
#include "mapped-mode.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "inode-fd.h"
#include "log.h"
#include "util.h"

/* The attribute's bytes, little-endian: version (1), reserved (0), capability length (2), mode (4),
 * device number (8: major << 32 | minor), the capability, then the HMAC-SHA256 (32) over a
 * domain string, everything before it and the inode's identity (sign()). Exactly that long. */
#define WIRE_VERSION 1
#define WIRE_HEADER 16
#define WIRE_MAC 32
#define WIRE_MAX (WIRE_HEADER + MAPPED_CAP_MAX + WIRE_MAC)
#define MAC_DOMAIN "vufsd privileged-files v1"

static void put_le(uint8_t *b, uint64_t v, unsigned n) {
        for (unsigned k = 0; k < n; k++)
                b[k] = (uint8_t) (v >> (8 * k));
}

static uint64_t get_le(const uint8_t *b, unsigned n) {
        uint64_t v = 0;
        for (unsigned k = 0; k < n; k++)
                v |= (uint64_t) b[k] << (8 * k);
        return v;
}

/* The identity the authenticator binds the metadata to: a copy on another inode, a recycled inode
 * number (another birth time) or an owner or group the host changed no longer verifies. */
static int identity_statx(int fd, struct statx *s) {
        if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_SYNC_AS_STAT, STATX_BASIC_STATS | STATX_BTIME,
                  s) < 0)
                return negative_errno();
        return 0;
}

static void sign(const Passthrough *p, const uint8_t *data, size_t len, const struct statx *s,
                 uint8_t mac[static WIRE_MAC]) {
        uint8_t id[40];
        gsize n = WIRE_MAC;
        GHmac *h;

        put_le(id, s->stx_dev_major, 4);
        put_le(id + 4, s->stx_dev_minor, 4);
        put_le(id + 8, s->stx_ino, 8);
        put_le(id + 16, s->stx_mask & STATX_BTIME ? (uint64_t) s->stx_btime.tv_sec : 0, 8);
        put_le(id + 24, s->stx_mask & STATX_BTIME ? s->stx_btime.tv_nsec : 0, 4);
        put_le(id + 28, s->stx_uid, 4);
        put_le(id + 32, s->stx_gid, 4);
        put_le(id + 36, 0, 4);
        h = g_hmac_new(G_CHECKSUM_SHA256, p->opts.privileged_key, FS_PRIVILEGED_KEY_SIZE);
        g_hmac_update(h, (const guchar *) MAC_DOMAIN, sizeof MAC_DOMAIN);
        g_hmac_update(h, data, len);
        g_hmac_update(h, id, sizeof id);
        g_hmac_get_digest(h, mac, &n);
        g_hmac_unref(h);
}

static size_t encode(const Passthrough *p, const MappedMeta *m, const struct statx *s, uint8_t buf[static WIRE_MAX]) {
        size_t len = WIRE_HEADER + m->cap_len;

        buf[0] = WIRE_VERSION;
        buf[1] = 0;
        put_le(buf + 2, m->cap_len, 2);
        put_le(buf + 4, m->mode, 4);
        put_le(buf + 8, (uint64_t) major(m->rdev) << 32 | minor(m->rdev), 8);
        memcpy(buf + WIRE_HEADER, m->cap, m->cap_len);
        sign(p, buf, len, s, buf + len);
        return len + WIRE_MAC;
}

/* NULL when buf (n bytes) is metadata vufsd wrote for the inode s, else why not. */
static const char *decode(const Passthrough *p, const uint8_t *buf, size_t n, const struct statx *s, MappedMeta *m) {
        uint8_t mac[WIRE_MAC];
        unsigned diff = 0;
        uint64_t dev;

        if (n < WIRE_HEADER + WIRE_MAC)
                return "too short";
        if (buf[0] != WIRE_VERSION || buf[1] != 0)
                return "unknown version";
        *m = (MappedMeta){ .cap_len = (uint16_t) get_le(buf + 2, 2), .mode = (mode_t) get_le(buf + 4, 4) };
        if (m->cap_len > MAPPED_CAP_MAX || n != (size_t) WIRE_HEADER + m->cap_len + WIRE_MAC)
                return "wrong length";
        sign(p, buf, WIRE_HEADER + m->cap_len, s, mac);
        for (size_t k = 0; k < WIRE_MAC; k++) /* in constant time */
                diff |= mac[k] ^ buf[WIRE_HEADER + m->cap_len + k];
        if (diff != 0)
                return "not written by this vufsd for this file (forged, copied, or changed on the host)";
        /* Signed by us, so well-formed; checked anyway, as a key may be shared by mistake. */
        if (mapped_is_device(m) ? (m->mode & ~(S_IFMT | 07777)) != 0 : (m->mode & ~07000) != 0)
                return "bad mode";
        dev = get_le(buf + 8, 8);
        m->rdev = makedev((unsigned) (dev >> 32), (unsigned) dev);
        memcpy(m->cap, buf + WIRE_HEADER, m->cap_len);
        return NULL;
}

/* Reads the metadata of the inode whose O_PATH fd is fd: 1 with *m, 0 without (logged when an
 * attribute is there but not honoured). *s gets the host's attributes. */
static int read_meta(Passthrough *p, Inode *i, int fd, MappedMeta *m, struct statx *s) {
        uint8_t buf[WIRE_MAX + 1];
        const char *why;
        char name[16];
        ssize_t n;
        int r;

        r = identity_statx(fd, s);
        if (r < 0)
                return r;
        if (!mapped_marked(p, s))
                return 0;
        atomic_store(&i->mapped, true);
        r = proc_cwd_enter(p);
        if (r < 0)
                return r;
        proc_name(name, fd);
        n = getxattr(name, FS_PRIVILEGED_XATTR, buf, sizeof buf);
        r = n < 0 ? negative_errno() : 0;
        proc_cwd_leave();
        if (r == -ENODATA || r == -EOPNOTSUPP)
                return 0; /* a sticky regular file the host made: plain */
        if (r == -ERANGE || n > WIRE_MAX)
                why = "too long";
        else if (r < 0)
                return r;
        else
                why = decode(p, buf, (size_t) n, s, m);
        if (!why)
                return 1;
        log_guest("--privileged-files=map: inode %u:%u/%" PRIu64 " has a " FS_PRIVILEGED_XATTR " attribute that is "
                  "not honoured (%s): the guest sees the plain file",
                  s->stx_dev_major, s->stx_dev_minor, (uint64_t) s->stx_ino, why);
        return 0;
}

static void apply(const MappedMeta *m, struct stat *st) {
        if (mapped_is_device(m)) {
                st->st_mode = m->mode;
                st->st_rdev = m->rdev;
                st->st_size = 0;
                st->st_blocks = 0;
        } else
                st->st_mode = (st->st_mode & ~(mode_t) 07000) | m->mode;
}

int guest_stat(Passthrough *p, Inode *i, int fd, const struct statx *stx, struct stat *st) {
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        struct statx s;
        MappedMeta m;
        int r;

        stat_from_statx(st, stx);
        if (!mapped_marked(p, stx))
                return 0;
        if (fd < 0) {
                r = inode_fd(p, i, &f, NULL);
                if (r < 0)
                        return r;
                fd = f.fd;
        }
        r = read_meta(p, i, fd, &m, &s);
        if (r <= 0)
                return r;
        /* The fresh statx of read_meta() is what was verified. */
        stat_from_statx(st, &s);
        apply(&m, st);
        return 0;
}

int guest_stat_inode(Passthrough *p, Inode *i, struct stat *st) {
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        struct statx stx;
        int r;

        r = inode_fd(p, i, &f, &stx);
        if (r < 0)
                return r;
        return guest_stat(p, i, f.fd, &stx, st);
}

int mapped_get(Passthrough *p, Inode *i, MappedMeta *ret) {
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        struct statx s;
        int r;

        if (!mapped_on(p) || i->type != S_IFREG)
                return 0;
        r = inode_fd(p, i, &f, NULL);
        if (r < 0)
                return r;
        return read_meta(p, i, f.fd, ret, &s);
}

static bool meta_empty(const MappedMeta *m) {
        return !mapped_is_device(m) && (m->mode & 07000) == 0 && m->cap_len == 0;
}

int mapped_put(Passthrough *p, Inode *i, const MappedMeta *m, mode_t perm) {
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        uint8_t buf[WIRE_MAX];
        struct statx s;
        char name[16];
        mode_t host;
        size_t n;
        int r;

        if (!mapped_on(p) || i->type != S_IFREG || m->cap_len > MAPPED_CAP_MAX)
                return -EINVAL;
        r = inode_fd(p, i, &f, NULL);
        if (r < 0)
                return r;
        r = identity_statx(f.fd, &s);
        if (r < 0)
                return r;
        host = mapped_is_device(m) ? m->mode & 0600 : (perm == (mode_t) -1 ? s.stx_mode : perm) & 0777;
        r = proc_cwd_enter(p);
        if (r < 0)
                return r;
        proc_name(name, f.fd);
        if (meta_empty(m)) {
                /* The marker first: a plain file again before its attribute goes. */
                r = fchmodat(p->proc_self_fd, name, host, 0) < 0 ? negative_errno() : 0;
                if (r >= 0 && removexattr(name, FS_PRIVILEGED_XATTR) < 0 && errno != ENODATA)
                        r = negative_errno();
        } else {
                /* The attribute first: the marker never points to metadata not yet there. chmod
                 * changes nothing the authenticator covers. */
                atomic_store(&i->mapped, true);
                n = encode(p, m, &s, buf);
                r = setxattr(name, FS_PRIVILEGED_XATTR, buf, n, 0) < 0 ? negative_errno() : 0;
                if (r >= 0 && fchmodat(p->proc_self_fd, name, host | S_ISVTX, 0) < 0)
                        r = negative_errno();
        }
        proc_cwd_leave();
        return r;
}

bool mapped_kill(MappedMeta *m, unsigned what, mode_t host_mode) {
        MappedMeta before = *m;
        mode_t grp = mapped_is_device(m) ? m->mode : host_mode;

        if (what & MAPPED_KILL_SUIDGID) {
                m->mode &= ~(mode_t) S_ISUID;
                if (grp & S_IXGRP)
                        m->mode &= ~(mode_t) S_ISGID;
        }
        if (what & MAPPED_KILL_CAP)
                m->cap_len = 0;
        return m->mode != before.mode || m->cap_len != before.cap_len;
}

int mapped_kill_inode(Passthrough *p, Inode *i, unsigned what) {
        _cleanup_(inode_fd_done) InodeFd f = INODE_FD_NULL;
        struct statx s;
        MappedMeta m;
        int r;

        /* Never marked while vufsd knew it: nothing to read (the common case, at no cost). */
        if (!mapped_on(p) || !atomic_load(&i->mapped))
                return 0;
        r = inode_fd(p, i, &f, NULL);
        if (r < 0)
                return r;
        r = read_meta(p, i, f.fd, &m, &s);
        if (r <= 0 || !mapped_kill(&m, what, s.stx_mode))
                return r;
        inode_fd_done(&f);
        return mapped_put(p, i, &m, (mode_t) -1);
}

void mapped_mode_init(Passthrough *p, int root_fd) {
        char name[16];
        int r;

        p->privileged = p->opts.privileged_files;
        if (p->privileged != PRIVILEGED_FILES_MAP)
                return;
        if (!p->opts.has_privileged_key) {
                /* The composition said why (main.c); a filesystem made without one (tests) refuses. */
                p->privileged = PRIVILEGED_FILES_REFUSE;
                return;
        }
        r = proc_cwd_enter(p);
        if (r >= 0) {
                proc_name(name, root_fd);
                r = getxattr(name, FS_PRIVILEGED_XATTR, NULL, 0) < 0 ? negative_errno() : 0;
                proc_cwd_leave();
        }
        if (r == -EOPNOTSUPP) {
                p->privileged = PRIVILEGED_FILES_REFUSE;
                log_warning("--privileged-files=map: the shared directory's filesystem has no user extended "
                            "attributes; working as --privileged-files=refuse (set-id bits dropped, device nodes "
                            "and file capabilities refused)");
        }
}

int mapped_chmod(Passthrough *p, Inode *i, mode_t mode) {
        MappedMeta m = {};
        int r;

        if (!mapped_on(p) || i->type != S_IFREG)
                return 0;
        r = atomic_load(&i->mapped) ? mapped_get(p, i, &m) : 0;
        if (r < 0)
                return r;
        if (r == 0 && !(mode & 07000))
                return 0; /* nothing mapped before or after: the caller's plain chmod */
        /* chmod replaces the bits and keeps a capability, as the kernel's does. */
        m.mode = mapped_is_device(&m) ? (m.mode & S_IFMT) | (mode & 07777) : mode & 07000;
        r = mapped_put(p, i, &m, mode & 0777);
        return r < 0 ? r : 1;
}

int mapped_after_chown(Passthrough *p, Inode *i, MappedMeta *m) {
        struct stat st;
        int r = stat_inode(p, i, &st);

        if (r < 0)
                return r;
        /* The kernel's chown of a non-directory: set-user-id goes, set-group-id where
         * group-executable, the capability always. Signed again for the new owner either way. */
        (void) mapped_kill(m, MAPPED_KILL_SUIDGID | MAPPED_KILL_CAP, st.st_mode);
        return mapped_put(p, i, m, (mode_t) -1);
}

/* i's metadata where it may have some (an inode never seen marked has none: no read); *m empty
 * otherwise. */
static int get_if_mapped(Passthrough *p, Inode *i, MappedMeta *m) {
        *m = (MappedMeta){};
        if (!mapped_on(p) || i->type != S_IFREG || !atomic_load(&i->mapped))
                return 0;
        return mapped_get(p, i, m);
}

int mapped_set_capability(Passthrough *p, Inode *i, const void *value, size_t size, int flags) {
        MappedMeta m;
        int r;

        /* The kernel takes a v2 or v3 value only; anything much longer is not a capability. */
        if (size == 0 || size > MAPPED_CAP_MAX)
                return -EINVAL;
        r = get_if_mapped(p, i, &m);
        if (r < 0)
                return r;
        if ((flags & XATTR_CREATE) && m.cap_len > 0)
                return -EEXIST;
        if ((flags & XATTR_REPLACE) && m.cap_len == 0)
                return -ENODATA;
        memcpy(m.cap, value, size);
        m.cap_len = (uint16_t) size;
        return mapped_put(p, i, &m, (mode_t) -1);
}

/* i's metadata when it holds a capability (0), else -ENODATA. */
static int get_capability(Passthrough *p, Inode *i, MappedMeta *m) {
        int r = get_if_mapped(p, i, m);
        if (r < 0)
                return r;
        return m->cap_len > 0 ? 0 : -ENODATA;
}

ssize_t mapped_get_capability(Passthrough *p, Inode *i, void *buf, size_t size) {
        MappedMeta m;
        int r = get_capability(p, i, &m);

        if (r < 0)
                return r;
        if (size == 0)
                return m.cap_len;
        if (size < m.cap_len)
                return -ERANGE;
        memcpy(buf, m.cap, m.cap_len);
        return m.cap_len;
}

int mapped_remove_capability(Passthrough *p, Inode *i) {
        MappedMeta m;
        int r = get_capability(p, i, &m);

        if (r < 0)
                return r;
        m.cap_len = 0;
        return mapped_put(p, i, &m, (mode_t) -1);
}
