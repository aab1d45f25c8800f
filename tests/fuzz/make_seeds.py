#!/usr/bin/python3
"""Writes the seed corpora in tests/fuzz/corpus/<target>/: one small valid input per message
kind each target parses, so the fuzzers start past the magic numbers. Re-run after a wire
format changes:  python3 tests/fuzz/make_seeds.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    directory = os.path.join(HERE, "corpus", target)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


# handshakes_fuzz: selector byte (0 auth, 1 mesh hello, 2 store handshake), then the bytes.
write("handshakes_fuzz", "auth_hello", bytes([0x30]) + b"PLXA\x01\x02\x00\x00" + b"n" * 32 + b"m" * 32)
fnv = 1469598103934665603
for c in b"world/4":
    fnv = ((fnv ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
write("handshakes_fuzz", "mesh_hello", bytes([1]) + u32(0x54584C50) + struct.pack("<HH", 1, 0) +
      u32(2) + u32(4) + u64(fnv))
write("handshakes_fuzz", "store_handshake", bytes([2]) + u32(0x53584C50) + struct.pack("<HH", 2, 50))


# store_server_fuzz: first byte even = a valid handshake goes first; then request frames.
def store_str(s):
    return u32(len(s)) + s


def frame(payload):
    return u64(len(payload)) + payload


requests = {
    "set_get": frame(b"\x01" + store_str(b"k") + store_str(b"v")) +
               frame(b"\x02" + store_str(b"k") + u64(1000)),
    "add_check": frame(b"\x03" + store_str(b"n") + u64(5)) + frame(b"\x06" + u32(1) + store_str(b"n")),
    "compare_set": frame(b"\x04" + store_str(b"c") + store_str(b"") + store_str(b"x")),
    "wait_missing": frame(b"\x05" + u32(1) + store_str(b"never") + u64(60000)),
    "multi": frame(b"\x0a" + u32(2) + store_str(b"a") + store_str(b"b") + u32(2) + store_str(b"1") +
                   store_str(b"2")) + frame(b"\x09" + u32(2) + store_str(b"a") + store_str(b"b") +
                                            u64(1000)),
    "delete_num_append": frame(b"\x07" + store_str(b"a")) + frame(b"\x08") +
                         frame(b"\x0b" + store_str(b"a") + store_str(b"z")),
    "wait_clients": frame(b"\x0c" + u64(2) + u64(10)),
}
for name, data in requests.items():
    write("store_server_fuzz", name, b"\x00" + data)


# tcp_frames_fuzz: receives to post (first byte % 4), their size unit (second byte), frames.
def tcp_frame(kind, tag, signature, payload):
    return u32(kind) + u32(0) + u64(tag) + u64(signature) + u64(len(payload)) + payload


def tag(operation, step):
    return (operation << 24) | step


write("tcp_frames_fuzz", "matched", bytes([2, 8]) + tcp_frame(1, tag(1, 0), 7, b"x" * 8) +
      tcp_frame(1, tag(1, 1), 7, b"y" * 16))
write("tcp_frames_fuzz", "unexpected_then_goodbye", bytes([0, 4]) +
      tcp_frame(1, tag(3, 2), 9, b"z" * 100) + tcp_frame(3, 0, 0, b""))
write("tcp_frames_fuzz", "abort_heartbeat", bytes([1, 4]) + tcp_frame(4, 0, 0, b"") +
      tcp_frame(2, 1, 10, b"rank 1 gave up"))
write("tcp_frames_fuzz", "mismatch", bytes([1, 4]) + tcp_frame(1, tag(1, 0), 99, b"abcd"))


# master_messages_fuzz: (sender byte, frame) pairs; payload = type, int count, ints, text.
def master(kind, ints, text=b""):
    payload = bytes([kind]) + u64(len(ints)) + b"".join(u64(i) for i in ints) + u32(len(text)) + text
    return u64(len(payload)) + payload


write("master_messages_fuzz", "update_topology", b"\x00" + master(3, [1]) + b"\x01" + master(3, [1]) +
      b"\x00" + master(4, [2]))
write("master_messages_fuzz", "op_start_done", b"\x00" + master(5, [0, 0, 1, 0, 1, 4, 0, 0]) +
      b"\x01" + master(5, [0, 0, 1, 0, 1, 4, 0, 0]) + b"\x00" + master(6, [0, 0, 1, 0, 0]))
write("master_messages_fuzz", "sync_state", b"\x00" + master(8, [5, 0, 1, 0, 1, 4, 10, 123, 0], b"w") +
      b"\x01" + master(8, [5, 0, 1, 0, 1, 4, 10, 124, 0], b"w"))
write("master_messages_fuzz", "optimize", b"\x00" + master(10, [6, 0]) + b"\x01" + master(10, [6, 0]) +
      b"\x00" + master(11, [6, 0, 0, 100, 200]))
write("master_messages_fuzz", "leave_heartbeat", b"\x01" + master(2, []) + b"\x01" + master(7, []))
