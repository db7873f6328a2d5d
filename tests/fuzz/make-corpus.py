#!/usr/bin/env python3
"""make-corpus.py: writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/).

Valid protocol traffic of each kind plus a few hostile classics, in the input formats the targets
document. Deterministic: re-running gives the same files. Crash reproducers found later are added
to the corpus directories by hand (named regress-*) and never regenerated."""
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "corpus")


def write(target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- FUSE ----
FUSE = dict(LOOKUP=1, FORGET=2, GETATTR=3, SETATTR=4, READLINK=5, SYMLINK=6, MKNOD=8, MKDIR=9,
            UNLINK=10, RMDIR=11, RENAME=12, LINK=13, OPEN=14, READ=15, WRITE=16, STATFS=17,
            RELEASE=18, FSYNC=20, SETXATTR=21, GETXATTR=22, LISTXATTR=23, REMOVEXATTR=24,
            FLUSH=25, INIT=26, OPENDIR=27, READDIR=28, RELEASEDIR=29, FSYNCDIR=30, GETLK=31,
            SETLK=32, ACCESS=34, CREATE=35, INTERRUPT=36, DESTROY=38, BATCH_FORGET=42,
            FALLOCATE=43, READDIRPLUS=44, RENAME2=45, LSEEK=46, COPY_FILE_RANGE=47, TMPFILE=51)
unique = [100]


def req(op, nodeid, body=b"", uid=0, gid=0, length=None, ext=b""):
    unique[0] += 1
    n = 40 + len(body) + len(ext) if length is None else length
    # fuse_in_header: len, opcode, unique, nodeid, uid, gid, pid, total_extlen(u16), padding(u16)
    return struct.pack("<IIQQIIIHH", n, FUSE[op], unique[0], nodeid, uid, gid, 4242, len(ext) // 8, 0) + body + ext


def name(s):
    return s.encode() + b"\0"


def fuse(fname, reqs, out_units=16, piece=0):
    write("fuzz-fuse", fname, bytes([out_units, piece]) + b"".join(reqs))


open_in = lambda flags: struct.pack("<II", flags, 0)
read_in = lambda fh, off, size: struct.pack("<QQIIQII", fh, off, size, 0, 0, 0, 0)
write_in = lambda fh, off, size: struct.pack("<QQIIQII", fh, off, size, 0, 0, 0, 0)
release_in = lambda fh: struct.pack("<QIIQ", fh, 0, 0, 0)
create_in = lambda flags, mode: struct.pack("<IIII", flags, mode, 0o022, 0)
mkdir_in = lambda mode: struct.pack("<II", mode, 0o022)
mknod_in = lambda mode, rdev: struct.pack("<IIII", mode, rdev, 0o022, 0)
getattr_in = struct.pack("<IIQ", 0, 0, 0)
forget_in = lambda n: struct.pack("<Q", n)

fuse("lookup-getattr", [req("LOOKUP", 1, name("file")), req("GETATTR", 2, getattr_in),
                        req("LOOKUP", 1, name("dir")), req("LOOKUP", 3, name("inner")),
                        req("FORGET", 2, forget_in(1))])
fuse("read-file", [req("LOOKUP", 1, name("file")), req("OPEN", 2, open_in(0)),
                   req("READ", 2, read_in(0, 0, 4096)), req("FLUSH", 2, struct.pack("<QIIQ", 0, 0, 0, 0)),
                   req("RELEASE", 2, release_in(0))])
fuse("create-write", [req("CREATE", 1, create_in(0o2 | 0o100, 0o100644) + name("new")),
                      req("WRITE", 2, write_in(0, 0, 11) + b"hello world"),
                      req("FSYNC", 2, struct.pack("<QII", 0, 0, 0)),
                      req("SETATTR", 2, struct.pack("<IIQQQQQQIIIIIIII", 1 << 3, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)),
                      req("RELEASE", 2, release_in(0)), req("UNLINK", 1, name("new"))])
fuse("readdir", [req("OPENDIR", 1, open_in(0)), req("READDIR", 1, read_in(0, 0, 4096)),
                 req("READDIRPLUS", 1, read_in(0, 0, 4096)), req("RELEASEDIR", 1, release_in(0))])
fuse("dirs-links", [req("MKDIR", 1, mkdir_in(0o755) + name("d2")),
                    req("SYMLINK", 1, name("s1") + name("/etc/shadow")),
                    req("READLINK", 2, b""),
                    req("LOOKUP", 1, name("file")),
                    req("LINK", 1, struct.pack("<Q", 3) + name("hard")),
                    req("RENAME", 1, struct.pack("<Q", 1) + name("hard") + name("hard2")),
                    req("RENAME2", 1, struct.pack("<QII", 1, 1, 0) + name("hard2") + name("file")),
                    req("RMDIR", 1, name("d2"))], out_units=8)
fuse("mknod-fifo", [req("MKNOD", 1, mknod_in(0o10644, 0) + name("p")),
                    req("MKNOD", 1, mknod_in(0o20644, 0x0103) + name("null")),
                    req("LOOKUP", 1, name("fifo")), req("OPEN", 2, open_in(0))])
fuse("xattr", [req("LOOKUP", 1, name("file")),
               req("SETXATTR", 2, struct.pack("<IIII", 3, 0, 0, 0) + name("user.a") + b"abc"),
               req("GETXATTR", 2, struct.pack("<II", 64, 0) + name("user.a")),
               req("LISTXATTR", 2, struct.pack("<II", 0, 0)),
               req("REMOVEXATTR", 2, name("user.a"))])
fuse("statfs-access", [req("STATFS", 1), req("ACCESS", 1, struct.pack("<II", 7, 0)),
                       req("LSEEK", 1, struct.pack("<QQII", 0, 0, 3, 0))])
fuse("as-user", [req("CREATE", 1, create_in(0o2 | 0o100, 0o100600) + name("u"), uid=1000, gid=1000),
                 req("MKDIR", 1, mkdir_in(0o700) + name("ud"), uid=1000, gid=1000)])
fuse("batch-forget", [req("LOOKUP", 1, name("file")),
                      req("BATCH_FORGET", 0, struct.pack("<II", 2, 0) + struct.pack("<QQ", 2, 5) + struct.pack("<QQ", 1, 1))])
# hostile
fuse("bad-names", [req("LOOKUP", 1, name("..")), req("LOOKUP", 1, name("a/b")), req("LOOKUP", 1, b"nonul"),
                   req("MKDIR", 1, mkdir_in(0o755) + name("")), req("SYMLINK", 1, name("/abs") + name("x")),
                   req("LOOKUP", 1, name("x" * 300))])
fuse("bad-lengths", [req("GETATTR", 1, b"", length=10), req("READ", 1, read_in(0, 0, 0xffffffff)),
                     req("LOOKUP", 1, name("file"), length=0x7fffffff)])
fuse("bad-batch-forget", [req("BATCH_FORGET", 0, struct.pack("<II", 0xffffffff, 0) + struct.pack("<QQ", 1, 1))])
fuse("bad-nodeids", [req("GETATTR", 0, getattr_in), req("GETATTR", 0xdeadbeef, getattr_in),
                     req("OPEN", 1, open_in(0o100 | 2)), req("READDIR", 1, read_in(77, 0, 4096))])
fuse("unknown-op", [struct.pack("<IIQQIIIHH", 40, 9999, 1, 1, 0, 0, 0, 0, 0)])
fuse("second-init", [req("INIT", 0, struct.pack("<IIIIII", 7, 31, 4096, 0, 0, 0) + bytes(44)),
                     req("LOOKUP", 1, name("file")), req("DESTROY", 0)])
fuse("tiny-pieces", [req("LOOKUP", 1, name("dir")), req("WRITE", 1, write_in(0, 0, 3) + b"abc")], piece=3)
fuse("no-out", [req("LOOKUP", 1, name("file"))], out_units=0)

# ---- vhost-user ----
VU = dict(GET_FEATURES=1, SET_FEATURES=2, SET_OWNER=3, RESET_OWNER=4, SET_MEM_TABLE=5, SET_LOG_BASE=6,
          SET_VRING_NUM=8, SET_VRING_ADDR=9, SET_VRING_BASE=10, GET_VRING_BASE=11, SET_VRING_KICK=12,
          SET_VRING_CALL=13, SET_VRING_ERR=14, GET_PROTOCOL_FEATURES=15, SET_PROTOCOL_FEATURES=16,
          GET_QUEUE_NUM=17, SET_VRING_ENABLE=18, SET_BACKEND_REQ_FD=21, GET_CONFIG=24,
          GET_INFLIGHT_FD=31, RESET_DEVICE=34, GET_MAX_MEM_SLOTS=36, ADD_MEM_REG=37, REM_MEM_REG=38)


def vu(op, payload=b"", flags=1, size=None):
    return struct.pack("<III", VU[op], flags, len(payload) if size is None else size) + payload


u64 = lambda v: struct.pack("<Q", v)
state = lambda i, n: struct.pack("<II", i, n)
addr = lambda i, d, u, a: struct.pack("<IIQQQQ", i, 0, d, u, a, 0)
NOFD = 1 << 8
REPLY = 1 | (1 << 3)

write("fuzz-vhost-user", "negotiate", vu("GET_FEATURES") + vu("GET_PROTOCOL_FEATURES") +
      vu("SET_PROTOCOL_FEATURES", u64((1 << 0) | (1 << 3) | (1 << 15))) + vu("GET_QUEUE_NUM") +
      vu("GET_MAX_MEM_SLOTS") + vu("SET_OWNER") + vu("SET_VRING_CALL", u64(0 | NOFD)) +
      vu("SET_VRING_ERR", u64(0 | NOFD)))
write("fuzz-vhost-user", "start-queue", vu("SET_FEATURES", u64((1 << 32) | (1 << 30) | (1 << 28) | (1 << 29))) +
      vu("SET_VRING_NUM", state(0, 128)) + vu("SET_VRING_BASE", state(0, 0)) +
      vu("SET_VRING_ADDR", addr(0, 0x7f0000000000, 0x7f0000001000, 0x7f0000002000)) +
      vu("SET_VRING_KICK", u64(0 | NOFD)) + vu("SET_VRING_ENABLE", state(0, 1)) + vu("GET_VRING_BASE", state(0, 0)))
write("fuzz-vhost-user", "mem-table-no-fd", vu("SET_MEM_TABLE", struct.pack("<II", 1, 0) +
      struct.pack("<QQQQ", 0, 1 << 20, 0x7f0000000000, 0), flags=REPLY) +
      vu("ADD_MEM_REG", u64(0) + struct.pack("<QQQQ", 0, 1 << 20, 0x7f0000000000, 0), flags=REPLY) +
      vu("REM_MEM_REG", u64(0) + struct.pack("<QQQQ", 0, 1 << 20, 0x7f0000000000, 0), flags=REPLY))
write("fuzz-vhost-user", "need-reply", vu("SET_OWNER", flags=REPLY) + vu("SET_VRING_NUM", state(1, 256), flags=REPLY) +
      vu("SET_VRING_NUM", state(1, 3), flags=REPLY) + vu("SET_VRING_NUM", state(99, 128), flags=REPLY) +
      vu("GET_CONFIG", bytes(12 + 8)) + vu("GET_INFLIGHT_FD", bytes(24)) + vu("RESET_DEVICE") + vu("RESET_OWNER"))
write("fuzz-vhost-user", "bad-framing", vu("GET_FEATURES", size=4096) + b"\0" * 16)
write("fuzz-vhost-user", "bad-version", struct.pack("<III", 1, 2, 0) + vu("SET_VRING_ENABLE", state(0, 1), size=4))
write("fuzz-vhost-user", "truncated", vu("SET_VRING_ADDR", addr(0, 1, 2, 3))[:20])
write("fuzz-vhost-user", "unknown", vu("GET_FEATURES") + struct.pack("<III", 77, 1, 8) + u64(1) +
      vu("SET_LOG_BASE", u64(0) + u64(4096)))

# ---- descriptor chains ----
def vq(log2num, flags, last_avail, mem):
    return bytes([log2num, flags]) + struct.pack("<H", last_avail) + mem


def memory(descs, avail, used_idx=0, extra=None):
    # Up to the used ring; buffers past the input's end are zeroes of region A.
    size = max([0x3010] + [off + len(d) for off, d in (extra or {}).items()])
    m = bytearray(size)
    for i, (a, l, f, n) in enumerate(descs):
        struct.pack_into("<QIHH", m, i * 16, a, l, f, n)
    struct.pack_into("<HH", m, 0x2000, 0, len(avail))
    for i, h in enumerate(avail):
        struct.pack_into("<H", m, 0x2004 + 2 * i, h)
    struct.pack_into("<HH", m, 0x3000, 0, used_idx)
    for off, data in (extra or {}).items():
        m[off:off + len(data)] = data
    return bytes(m)


NEXT, WRITE, INDIRECT = 1, 2, 4
write("fuzz-virtqueue", "one-chain", vq(7, 0, 0, memory([(0x4000, 64, NEXT, 1), (0x4100, 128, WRITE, 0)], [0])))
write("fuzz-virtqueue", "many", vq(3, 1, 0, memory([(0x4000 + 32 * i, 32, 0, 0) for i in range(8)], list(range(8)))))
write("fuzz-virtqueue", "indirect", vq(4, 2, 0, memory([(0x4800, 48, INDIRECT, 0)], [0],
      extra={0x4800: struct.pack("<QIHH", 0x4000, 16, NEXT, 1) + struct.pack("<QIHH", 0x4100, 16, NEXT, 2) +
             struct.pack("<QIHH", 0x4200, 64, WRITE, 0)})))
write("fuzz-virtqueue", "region-b", vq(2, 0, 0, memory([(0x20000, 256, NEXT, 1), (0x20100, 4096, WRITE, 0)], [0])))
write("fuzz-virtqueue", "loop", vq(2, 0, 0, memory([(0x4000, 16, NEXT, 1), (0x4000, 16, NEXT, 0)], [0])))
write("fuzz-virtqueue", "hole", vq(2, 0, 0, memory([(0x10000, 16, 0, 0)], [0])))
write("fuzz-virtqueue", "wrap", vq(2, 0, 0, memory([(0xfffffffffffffff0, 0x20, 0, 0)], [0])))
write("fuzz-virtqueue", "nested-indirect", vq(2, 2, 0, memory([(0x4800, 16, INDIRECT, 0)], [0],
      extra={0x4800: struct.pack("<QIHH", 0x4900, 16, INDIRECT, 0)})))
write("fuzz-virtqueue", "bad-head", vq(2, 0, 0, memory([(0x4000, 16, 0, 0)], [9])))
write("fuzz-virtqueue", "write-then-read", vq(2, 0, 0, memory([(0x4000, 16, WRITE | NEXT, 1), (0x4100, 16, 0, 0)], [0])))
write("fuzz-virtqueue", "avail-jump", vq(2, 0, 0, memory([(0x4000, 16, 0, 0)], [0, 0, 0, 0, 0, 0])))
write("fuzz-virtqueue", "huge-len", vq(2, 0, 0, memory([(0x0, 0xffffffff, NEXT, 1), (0x0, 0xffffffff, 0, 0)], [0])))
# ---- vhost-user sequences (fuzz-vhost-sequence.c documents the program format) ----
SQ = dict(features=0, memtable=1, addreg=2, remreg=3, start=4, stop=5, enable=6, fuse=7, kick=8, call=9,
          reset=10, wait=11, poke=12, truncate=13, protocol=14, raw=15)
K = dict(init=0, lookup=1, getattr=2, readdir=3, read=4, statfs=5, forget=6, garbage=7)


def sq(*ops):
    out = b""
    for op in ops:
        out += bytes([SQ[op[0]]] + list(op[1:]))
    return out


boot = [("features", 3), ("memtable", 3), ("start", 0, 4, 0, 0), ("start", 1, 4, 0, 0),
        ("fuse", 1, K["init"], 0)]
write("fuzz-vhost-sequence", "boot-and-traffic", sq(*boot, ("fuse", 1, K["lookup"], 1, 1), ("fuse", 1, K["getattr"], 1),
      ("fuse", 1, K["readdir"], 0, 0), ("fuse", 1, K["statfs"], 2), ("fuse", 0, K["forget"], 0, 0), ("wait", 8),
      ("stop", 1), ("stop", 0)))
write("fuzz-vhost-sequence", "remove-ring-region-in-flight", sq(*boot, ("fuse", 1, K["getattr"], 1),
      ("fuse", 1, K["read"], 1, 0, 0), ("remreg", 0), ("fuse", 1, K["getattr"], 1), ("wait", 4), ("addreg", 0),
      ("stop", 1), ("start", 1, 4, 1, 0), ("fuse", 1, K["getattr"], 1)))
write("fuzz-vhost-sequence", "table-swap-under-traffic", sq(*boot, ("fuse", 1, K["getattr"], 0), ("memtable", 1),
      ("fuse", 1, K["getattr"], 0), ("memtable", 3), ("fuse", 1, K["getattr"], 1), ("memtable", 2),
      ("fuse", 1, K["lookup"], 0, 0), ("wait", 2), ("memtable", 3)))
write("fuzz-vhost-sequence", "add-remove-regions", sq(("features", 1), ("addreg", 0), ("addreg", 1), ("start", 1, 3, 1, 7),
      ("fuse", 1, K["init"], 0), ("remreg", 1), ("addreg", 1), ("kick", 1), ("remreg", 0), ("remreg", 1)))
write("fuzz-vhost-sequence", "stop-start-features", sq(*boot, ("fuse", 1, K["getattr"], 0), ("stop", 1), ("features", 0),
      ("start", 1, 5, 0, 200), ("fuse", 1, K["getattr"], 2), ("enable", 1, 0), ("fuse", 1, K["getattr"], 0),
      ("enable", 1, 1), ("call", 1, 0), ("fuse", 1, K["getattr"], 0), ("call", 1, 1), ("reset",),
      ("memtable", 3), ("start", 1, 2, 0, 0)))
write("fuzz-vhost-sequence", "ring-full", sq(("features", 0), ("memtable", 3), ("start", 1, 1, 0, 0),
      ("fuse", 1, K["init"], 0), ("fuse", 1, K["getattr"], 0), ("fuse", 1, K["getattr"], 0),
      ("fuse", 1, K["getattr"], 0), ("kick", 1), ("wait", 15)))
write("fuzz-vhost-sequence", "hostile-guest", sq(*boot, ("poke", 1, 0x80, 0xff), ("fuse", 1, K["getattr"], 0),
      ("poke", 1, 0x81, 0x40), ("fuse", 1, K["garbage"], 0, 40, *range(40)), ("kick", 1)))
write("fuzz-vhost-sequence", "truncate", sq(*boot, ("fuse", 1, K["getattr"], 0), ("truncate", 0), ("kick", 1), ("wait", 3),
      ("stop", 1), ("memtable", 2)))
write("fuzz-vhost-sequence", "raw-messages", sq(("protocol", 8), ("raw", 1, 0), ("raw", 11, 8, 1, 0, 0, 0, 0, 0, 0, 0),
      ("raw", 5, 8, 1, 0, 0, 0, 0, 0, 0, 0), ("raw", 34, 0)))
# ---- FUSE_CREATE_SUPP_GROUP (Linux 6.3): struct fuse_ext_header {size, type 32} + fuse_supp_groups ----
def groups_ext(*gids, nr=None, pad=True):
    body = struct.pack("<I", len(gids) if nr is None else nr) + b"".join(struct.pack("<I", g) for g in gids)
    size = 8 + len(body)
    if pad:
        size = (size + 7) // 8 * 8
    return struct.pack("<II", size, 32) + body + bytes(size - 8 - len(body))
init_supp = req("INIT", 0, struct.pack("<IIIII", 7, 38, 131072, 0x7bfffffb, 0xf) + bytes(44))
fuse("supp-groups", [init_supp,
                     req("MKDIR", 1, mkdir_in(0o770) + name("team"), uid=0, gid=0),
                     req("CREATE", 1, create_in(0o2 | 0o100, 0o100640) + name("sg"), uid=1000, gid=1000,
                         ext=groups_ext(4242)),
                     req("MKNOD", 1, mknod_in(0o10644, 0) + name("sgp"), uid=1000, gid=1000, ext=groups_ext(4242)),
                     req("SYMLINK", 1, name("sgl") + name("target"), uid=1000, gid=1000, ext=groups_ext(0)),
                     req("LOOKUP", 1, name("file"), ext=groups_ext(7))])
fuse("supp-groups-bad", [init_supp,
                         req("MKDIR", 1, mkdir_in(0o755) + name("b1"), uid=1000, gid=1000, ext=groups_ext(5, nr=9)),
                         req("MKDIR", 1, mkdir_in(0o755) + name("b2"), uid=1000, gid=1000,
                             ext=groups_ext(0xffffffff)),
                         req("MKDIR", 1, mkdir_in(0o755) + name("b3"), ext=groups_ext(1) + groups_ext(2)),
                         req("MKDIR", 1, mkdir_in(0o755) + name("b4"), ext=struct.pack("<II", 8, 32)),
                         req("MKDIR", 1, mkdir_in(0o755) + name("b5"), ext=groups_ext(*range(40)))])

# ---- --translate-uid entries, a NUL, then ids ----
def idt(name_, entries, ids):
    write("fuzz-id-translate", name_, "\n".join(entries).encode() + b"\0" + b"".join(struct.pack("<I", i) for i in ids))
edge = [0, 1, 999, 1000, 1001, 65533, 65534, 65535, 65536, 100000, 4294967294, 4294967295]
idt("rootless", ["guest:0:1000:1", "host:1000:0:1", "map:1:100000:65533", "forbid-guest:65534:2"], edge)
idt("squash-all", ["squash-guest:0:1000:4294967295", "squash-host:0:0:4294967295"], edge)
idt("separators-case", ["MAP/0/5000/10", "Guest,20,30,5", "host+1+2+3", "squash-host:+7:8:9"], edge)
idt("overlaps", ["map:0:0:10", "guest:5:100:10", "host:9:0:1", "forbid-guest:10:1", "squash-guest:11:4294967295:1"],
    edge)
idt("overflow", ["guest:4294967290:0:10", "map:0:4294967290:10", "forbid-guest:4294967294:1", "guest:0:0:0",
                 "map:1:2", "map:1:2:3:4", "nope:1:2:3", ""], edge)

# ---- session state streams (daemon/state/session-state.h documents the format) ----
import hashlib


def st_rec(typ, payload):
    return struct.pack("<HHI", typ, 0, len(payload)) + payload


def st_session(minor=38, flags=0x1234, fs_flags=1):
    return st_rec(1, struct.pack("<IIQIIIIQ", 7, minor, flags, 1 << 20, 1 << 17, 256, 1, fs_flags))


def st_node(nid, parent, nm, typ, nlookup=1, slot=-1, handle=b"", flags=0):
    nb = nm.encode() if nm else b""
    return st_rec(2, struct.pack("<QQQQQQQIiIHHII", nid, nlookup, parent, 0x801, 1000 + nid, 42, 0, typ, slot, flags,
                                 len(nb), len(handle), 1 if handle else 0, 0) + nb + handle)


def st_handle(fh, node, oflags=2, flags=0, slot=-1, off=0):
    return st_rec(3, struct.pack("<QQiIiIQ", fh, node, oflags, flags, slot, 0, off))


def st_lock(owner, node, fh, start, end, kind=1, typ=2, slot=-1):
    return st_rec(4, struct.pack("<QQQQQIIiI", owner, node, fh, start, end, kind, typ, slot, 0))


EOF_OFF = (1 << 63) - 1


def state(fname, records, version=1):
    body = b"".join(records)
    total = 64 + len(body)
    hdr = b"VUFSSTAT" + struct.pack("<IIQII", version, 64, total, len(records), 0)
    digest = hashlib.sha256(hdr + bytes(32) + body).digest()
    write("fuzz-state", fname, hdr + digest + body)


DIR, REG = 0o040000, 0o100000
state("tree", [st_session(), st_node(65, 1, "d", DIR), st_node(133, 65, "f", REG, 3), st_node(201, 1, "g", REG),
               st_node(265, 0, None, REG, handle=bytes(range(8))), st_handle(0x101, 133), st_handle(0x202, 65, 0, 1, off=5),
               st_handle(0x303, 1, 0, 1)])
state("fd-slots", [st_session(), st_node(2, 0, None, REG, slot=0), st_handle(9, 2, slot=1)])
state("empty-session", [st_session()])
state("dangling-parent", [st_session(), st_node(10, 77, "x", REG)])
state("loop", [st_session(), st_node(10, 11, "a", DIR), st_node(11, 10, "b", DIR)])
state("duplicate-node", [st_session(), st_node(10, 1, "a", REG), st_node(10, 1, "b", REG)])
state("duplicate-handle", [st_session(), st_node(10, 1, "a", REG), st_handle(1, 10), st_handle(1, 10)])
state("newer-version", [st_session()], version=2)
state("two-sessions", [st_session(), st_session()])
LOCKED = [st_session(), st_node(10, 1, "a", REG), st_handle(1, 10), st_handle(2, 10)]
state("locks", LOCKED + [st_lock(0x77, 10, 1, 0, 9, slot=0), st_lock(0x77, 10, 1, 20, 29, typ=1),
                         st_lock(0x88, 10, 2, 0, EOF_OFF, kind=2)])
state("lock-overlap", LOCKED + [st_lock(0x77, 10, 1, 0, 9), st_lock(0x77, 10, 1, 9, 19, typ=1)])
state("lock-two-handles", LOCKED + [st_lock(0x77, 10, 1, 0, 9), st_lock(0x77, 10, 2, 20, 29)])
state("lock-unknown-handle", LOCKED + [st_lock(0x77, 10, 9, 0, 9)])



# ---- crash survival journals: after a 64-byte header, entries each behind a length byte (its low
# seven bits: length / 4; its top bit: the entry has an fd); fuzz-state.c says more ----
def journal(fname, entries):
    body = b""
    for recs, fd in entries:
        e = b"".join(recs)
        e += bytes(-len(e) % 4)
        assert len(e) // 4 < 128
        body += bytes([len(e) // 4 | (0x80 if fd else 0)]) + e
    write("fuzz-state", fname, bytes(64) + body)


journal("journal-tree", [([st_node(133, 65, "fcde", REG, slot=-1)], False), ([st_node(65, 1, "dabc", DIR)], False),
                         ([st_handle(0x101, 133, slot=0), st_lock(0, 133, 0x101, 0, EOF_OFF, kind=2, typ=1)], True),
                         ([st_lock(0x77, 133, 0x101, 0, 9, slot=0), st_lock(0x77, 133, 0x101, 20, 29)], True),
                         ([st_node(201, 0, None, REG, slot=0)], True)])
journal("journal-out-of-step", [([st_node(133, 65, "orph", REG)], False), ([st_handle(0x101, 133, slot=0)], True),
                                ([st_lock(0x77, 9, 0x999, 0, 9, slot=0)], True), ([st_node(7, 1, "kept", REG)], False),
                                ([st_session()], False)])
# ---- kills interleaved with traffic (fuzz-survive.c documents the program format) ----
SK = dict(mkdir=0, create=1, write=2, unlink=3, rename=4, rmdir=5, link=6, symlink=7, mknod=8, lookup=9,
          getattr=10, setxattr=11, removexattr=12, fallocate=13, open=14)
# kill_opcodes in fuzz-survive.c; names: a b c file dir
KILL_OP = dict(any=0, mkdir=1, create=2, write=3, unlink=4, rename=5, link=6, rmdir=7, setxattr=8, lookup=9)
STEPS = ["popped", "host", "replied", "pushed", "published"]


def sv(setup, *ops):
    b = bytes([setup])
    for o in ops:
        if o[0] == "fuse":
            b += bytes([0, SK[o[1]], o[2] if len(o) > 2 else 0, o[3] if len(o) > 3 else 0])
        elif o[0] == "kill":
            b += bytes([3, STEPS.index(o[1]), KILL_OP[o[2]]])
        elif o[0] == "die":
            b += bytes([4])
        elif o[0] == "wait":
            b += bytes([5, o[1]])
        elif o[0] == "vhost":
            b += bytes([6, o[1], o[2] if len(o) > 2 else 0])
        elif o[0] == "poison":
            b += bytes([7, o[1], o[2] & 0xff, o[2] >> 8, o[3]])
    return b


W = ("wait", 0x80)  # until every request is answered
# The request each opcode's kill needs before it: a file open for WRITE, an existing name for
# UNLINK and RENAME ("file", name 3), a new name for MKDIR and CREATE ("a", "b").
before = dict(mkdir=[], create=[], write=[("fuse", "create", 1, 0), W], unlink=[], rename=[])
req = dict(mkdir=("fuse", "mkdir", 0), create=("fuse", "create", 1, 1), write=("fuse", "write", 5, 0),
           unlink=("fuse", "unlink", 3), rename=("fuse", "rename", 3, 0))
for op in ["mkdir", "create", "write", "unlink", "rename"]:
    for i, step in enumerate(STEPS):
        # setup byte: thread mode inline, pool, auto in turn
        write("fuzz-survive", "kill-%s-%s" % (step, op),
              sv(i % 3, *before[op], ("kill", step, op), req[op], W, W, ("fuse", "getattr", 0), W))
write("fuzz-survive", "three-deaths", sv(2, ("fuse", "mkdir", 0), ("die",), ("fuse", "create", 1), ("kill", "host", "any"),
                                         ("fuse", "unlink", 3), W, ("die",), ("fuse", "rename", 1, 2), W))
write("fuzz-survive", "die-at-once", sv(0, ("die",), ("fuse", "lookup", 3), W))
write("fuzz-survive", "idle", sv(0, ("fuse", "getattr", 0), W))
write("fuzz-survive", "call-swap-enable", sv(4, ("fuse", "mkdir", 1), ("vhost", 0), ("kill", "pushed", "any"),
                                             ("fuse", "mkdir", 2), ("vhost", 1), W, ("fuse", "link", 0), W))
write("fuzz-survive", "ring-32-full", sv(8 | 1, *[("fuse", "symlink", i % 3, i % 5) for i in range(20)],
                                         ("kill", "replied", "any"), *[("fuse", "lookup", i % 5) for i in range(10)], W))
write("fuzz-survive", "xattr", sv(2, ("fuse", "lookup", 3), W, W, ("kill", "host", "setxattr"), ("fuse", "setxattr", 0, 1), W,
                                  ("fuse", "removexattr", 0), W))
write("fuzz-survive", "poison-table", sv(0, ("kill", "popped", "mkdir"), ("fuse", "mkdir", 0), ("poison", 0, 16 + 32 * 0, 4), W))
write("fuzz-survive", "poison-record", sv(0, ("fuse", "getattr", 0), ("poison", 1, 8 + 16, 0xff), ("die",), W))
write("fuzz-survive", "poison-session", sv(0, ("fuse", "getattr", 0), ("poison", 2, 4, 0x11), ("die",), W))

print("corpus written to", out, file=sys.stderr)
