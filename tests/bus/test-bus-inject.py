#!/usr/bin/python3
# test-bus-inject.py: sends one D-Bus method call over an existing connection, as a taken-over vufsd
# would: "steal PID BUS-SOCKET" duplicates PID's own connection to BUS-SOCKET (pidfd_getfd) and
# writes the call on it, so the bus judges it by the identity that connection was authenticated
# with; "root BUS-SOCKET" makes a fresh connection as this (root) process, the positive control
# that shows the same bytes do work when the sender may send them. The call is
#   DEST /org/vufsd/Daemon org.vufsd.Daemon1.SetThreads("pool", SIZE)
# Usage: test-bus-inject.py steal|root PID|- BUS-SOCKET DEST SIZE. Exits 0 once the bytes are
# written (the caller checks the effect), 2 when the connection cannot be found or used.
# "own PID BUS-SOCKET NAME" is what a taken-over serving process would try first (issue 31 finding
# 3): on every socket of PID alone (the process that handles guest input, not its children) that
# is connected to BUS-SOCKET it writes RequestName(NAME); it lists PID's sockets and exits 2 when
# none is connected to the bus (the caller checks that NAME has no owner either way).
# "flood SUPERVISOR-PID COUNT PATH-LENGTH" is a taken-over serving process that stops reading its
# control channel and writes COUNT method calls to an unknown object with a PATH-LENGTH path on it
# (the serving process is the supervisor's child; it is stopped with SIGSTOP so that nothing reads
# what the supervisor answers, and left stopped). It prints the supervisor's VmRSS in kB before and
# after, one line each ("rss-before N", "rss-after N"); the caller judges the growth.
# "signals SUPERVISOR-PID COUNT SIZE" does the same with COUNT PropertiesChanged signals of the
# daemon's interface, each carrying a SIZE-byte string: what the supervisor passes on to the bus.
# "subscribe BUS-SOCKET SECONDS" is any client of the bus that asks for PropertiesChanged and then
# reads nothing for SECONDS: the bus keeps what it owes it and reads the sender more slowly.
import ctypes
import os
import signal
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


def message(serial, dest, path, iface, member, sig="", body=b"", kind=1, flags=0):
    # little endian, a method call (kind 1) or a signal (4), flags, protocol 1
    buf = bytearray(b"l" + bytes([kind, flags]) + b"\x01")
    buf.extend(struct.pack("<III", len(body), serial, 0))  # the fields' length is set below
    fields = [(1, "o", path), (2, "s", iface), (3, "s", member)] + ([(6, "s", dest)] if dest else [])
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


def sockets_of(p):
    """(fd number, socket) for every socket fd of process p, duplicated with pidfd_getfd."""
    libc = ctypes.CDLL(None, use_errno=True)
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
        yield int(name), socket.socket(fileno=fd)


def peer_of(s):
    try:
        return s.getpeername() if s.family == socket.AF_UNIX else None
    except OSError:
        return None


def own(pid, bus_path, name):
    body = bytearray()
    put_string(body, name)
    pad(body, 4)
    body.extend(struct.pack("<I", 0))
    found = 0
    for num, s in sockets_of(pid):
        peer = peer_of(s)
        print(f"process {pid} fd {num}: {s.family.name} {s.type.name} peer {peer!r}")
        if peer == bus_path:
            found += 1
            s.sendall(message(0x7100 + num, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                              "org.freedesktop.DBus", "RequestName", "su", bytes(body)))
        s.close()
    time.sleep(0.5)  # the bus handles it before the caller asks who owns the name
    return 0 if found else 2


def steal(pid, bus_path):
    for p in [pid] + [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]:
        for _, s in sockets_of(p):
            if peer_of(s) == bus_path:
                return p, s
            s.close()
    return None, None


def vm_rss(p):
    for line in open(f"/proc/{p}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def signal_message(serial, size):
    body = bytearray()
    put_string(body, "org.vufsd.Daemon1")
    pad(body, 4)
    at = len(body)
    body.extend(b"\0\0\0\0")  # a{sv}: its length, set below
    pad(body, 8)
    start = len(body)
    put_string(body, "Flood")
    put_string(body, "s", sig=True)
    put_string(body, "a" * size)
    struct.pack_into("<I", body, at, len(body) - start)
    pad(body, 4)
    body.extend(struct.pack("<I", 0))  # as: empty
    return message(serial, None, "/org/vufsd/Daemon", "org.freedesktop.DBus.Properties", "PropertiesChanged",
                   "sa{sv}as", bytes(body), kind=4, flags=1)  # no reply expected


def flood(sup, count, path_len, signals=False):
    child = int(open(f"/proc/{sup}/task/{sup}/children").read().split()[0])
    channel = None
    for num, s in sockets_of(child):
        # The control channel is the one connected stream socket of the serving process while no
        # frontend is connected (the vhost-user socket listens; the notification one is seqpacket).
        if s.family == socket.AF_UNIX and s.type == socket.SOCK_STREAM and \
                not s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            channel = s
            continue
        s.close()
    if not channel:
        print(f"no control channel in process {child}", file=sys.stderr)
        return 2
    os.kill(child, signal.SIGSTOP)
    print(f"rss-before {vm_rss(sup)}")
    path = "/" + "a" * path_len
    channel.settimeout(60)
    for i in range(count):
        if signals:
            channel.sendall(signal_message(0x10000 + i, path_len))
        else:
            channel.sendall(message(0x10000 + i, None, path, "org.example.Flood", "Call"))
    time.sleep(1)  # the supervisor reads what is left in the socket
    print(f"rss-after {vm_rss(sup)}")
    return 0


def connect_as_self(bus_path):
    """A fresh connection to the bus as this process, Hello sent; None when it is refused."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(bus_path)
    s.sendall(b"\0AUTH EXTERNAL " + str(os.geteuid()).encode().hex().encode() + b"\r\n")
    if not s.recv(4096).startswith(b"OK "):
        return None
    s.sendall(b"BEGIN\r\n")
    s.sendall(message(1, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello"))
    return s


def subscribe(bus_path, seconds):
    s = connect_as_self(bus_path)
    if not s:
        return 2
    rule = bytearray()
    put_string(rule, "type='signal',member='PropertiesChanged'")
    s.sendall(message(2, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "AddMatch",
                      "s", bytes(rule)))
    print("subscribed", flush=True)
    time.sleep(seconds)
    return 0


def main():
    if sys.argv[1] == "subscribe":
        return subscribe(sys.argv[2], float(sys.argv[3]))
    if sys.argv[1] in ("flood", "signals"):
        return flood(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[1] == "signals")
    if sys.argv[1] == "own":
        return own(int(sys.argv[2]), sys.argv[3], sys.argv[4])
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
    s = connect_as_self(bus_path)
    if not s:
        return 2
    s.sendall(call)
    time.sleep(0.5)  # the reply is not parsed: the caller reads the effect
    return 0


sys.exit(main())
