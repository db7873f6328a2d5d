#!/usr/bin/python3
# test-bus-inject.py: sends one D-Bus method call over an existing connection, as a taken-over vufsd
# would: "steal PID BUS-SOCKET" duplicates PID's own connection to BUS-SOCKET (pidfd_getfd) and
# writes the call on it, so the bus judges it by the identity that connection was authenticated
# with; "root BUS-SOCKET" makes a fresh connection as this (root) process, the positive control
# that shows the same bytes do work when the sender may send them. The call is
#   DEST /org/vufsd/Daemon org.vufsd.Daemon1.SetThreads("pool", SIZE)
# Usage: test-bus-inject.py steal|root PID|- BUS-SOCKET DEST SIZE. Exits 0 once the bytes are
# written (the caller checks the effect), 2 when the connection cannot be found or used.
import ctypes
import os
import socket
import struct
import sys
import time

SYS_pidfd_getfd = 438  # x86_64 and every architecture with the generic table


def pad(buf, n):
    buf.extend(b"\0" * (-len(buf) % n))


def put_string(buf, s, sig=False):
    b = s.encode()
    if sig:
        buf.append(len(b))
    else:
        pad(buf, 4)
        buf.extend(struct.pack("<I", len(b)))
    buf.extend(b + b"\0")


def message(serial, dest, path, iface, member, sig="", body=b""):
    buf = bytearray(b"l\x01\x00\x01")  # little endian, method call, no flags, protocol 1
    buf.extend(struct.pack("<III", len(body), serial, 0))  # the fields' length is set below
    fields = [(1, "o", path), (2, "s", iface), (3, "s", member), (6, "s", dest)]
    if sig:
        fields.append((8, "g", sig))
    for code, t, v in fields:  # a(yv), starting at offset 16
        pad(buf, 8)
        buf.append(code)
        put_string(buf, t, sig=True)
        put_string(buf, v, sig=(t == "g"))
    struct.pack_into("<I", buf, 12, len(buf) - 16)
    pad(buf, 8)
    return bytes(buf) + body


def set_threads_body(mode, size):
    b = bytearray()
    put_string(b, mode)
    pad(b, 4)
    b.extend(struct.pack("<I", size))
    return bytes(b)


def steal(pid, bus_path):
    libc = ctypes.CDLL(None, use_errno=True)
    for p in [pid] + [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]:
        pidfd = os.pidfd_open(p)
        for name in os.listdir(f"/proc/{p}/fd"):
            try:
                if not os.readlink(f"/proc/{p}/fd/{name}").startswith("socket:"):
                    continue
            except OSError:
                continue
            fd = libc.syscall(SYS_pidfd_getfd, pidfd, int(name), 0)
            if fd < 0:
                print(f"pidfd_getfd({p}, {name}): {os.strerror(ctypes.get_errno())}", file=sys.stderr)
                continue
            s = socket.socket(fileno=fd)
            try:
                peer = s.getpeername() if s.family == socket.AF_UNIX else None
            except OSError:
                peer = None
            if peer == bus_path:
                return p, s
            s.close()
    return None, None


def main():
    how, pid, bus_path, dest, size = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    call = message(0x7000, dest, "/org/vufsd/Daemon", "org.vufsd.Daemon1", "SetThreads", "su",
                   set_threads_body("pool", size))
    if how == "steal":
        owner, s = steal(int(pid), bus_path)
        if not s:
            print(f"no connection to {bus_path} in process {pid} or its children", file=sys.stderr)
            return 2
        print(f"writing SetThreads on process {owner}'s bus connection")
        s.sendall(call)
        return 0
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(bus_path)
    s.sendall(b"\0AUTH EXTERNAL " + str(os.geteuid()).encode().hex().encode() + b"\r\n")
    if not s.recv(4096).startswith(b"OK "):
        return 2
    s.sendall(b"BEGIN\r\n")
    s.sendall(message(1, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello"))
    s.sendall(call)
    time.sleep(0.5)  # the reply is not parsed: the caller reads the effect
    return 0


sys.exit(main())
