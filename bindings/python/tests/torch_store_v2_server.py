"""A stand-in for torch 2.x's TCPStore server, written from its wire protocol, for testing
plexus's client where no torch 2.x is installed: a connection must open with VALIDATE (query 0)
and the magic 0x3C85F7CE or it is closed; queries are one byte (SET 1, COMPARE_SET 2, GET 3,
ADD 4, CHECK 5, WAIT 6, GETNUMKEYS 7, DELETE_KEY 8), strings are a little-endian uint64 length
and bytes. Prints its port, then serves until killed."""
import socket
import struct
import threading

MAGIC = 0x3C85F7CE
table = {}
changed = threading.Condition()


def recv_exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def recv_u64(conn):
    return struct.unpack("<Q", recv_exact(conn, 8))[0]


def recv_bytes(conn):
    return recv_exact(conn, recv_u64(conn))


def send_bytes(conn, value):
    conn.sendall(struct.pack("<Q", len(value)) + value)


def serve(conn):
    with conn:
        try:
            if recv_exact(conn, 1) != b"\x00" or struct.unpack("<I", recv_exact(conn, 4))[0] != MAGIC:
                return  # torch 2.x drops clients that do not validate first.
            while True:
                query = recv_exact(conn, 1)[0]
                if query == 1:
                    key, value = recv_bytes(conn), recv_bytes(conn)
                    with changed:
                        table[key] = value
                        changed.notify_all()
                elif query == 2:
                    key, expected, desired = recv_bytes(conn), recv_bytes(conn), recv_bytes(conn)
                    with changed:
                        current = table.get(key)
                        if (current is None and expected == b"") or current == expected:
                            table[key] = desired
                            changed.notify_all()
                            current = desired
                        elif current is None:
                            current = expected
                    send_bytes(conn, current)
                elif query == 3:
                    key = recv_bytes(conn)
                    with changed:
                        value = table[key]
                    send_bytes(conn, value)
                elif query == 4:
                    key, delta = recv_bytes(conn), struct.unpack("<q", recv_exact(conn, 8))[0]
                    with changed:
                        value = int(table.get(key, b"0")) + delta
                        table[key] = str(value).encode()
                        changed.notify_all()
                    conn.sendall(struct.pack("<q", value))
                elif query in (5, 6):
                    keys = [recv_bytes(conn) for _ in range(recv_u64(conn))]
                    with changed:
                        if query == 6:
                            changed.wait_for(lambda: all(k in table for k in keys))
                        ready = all(k in table for k in keys)
                    conn.sendall(b"\x00" if ready else b"\x01")
                elif query == 7:
                    with changed:
                        conn.sendall(struct.pack("<q", len(table)))
                elif query == 8:
                    key = recv_bytes(conn)
                    with changed:
                        deleted = 1 if table.pop(key, None) is not None else 0
                    conn.sendall(struct.pack("<q", deleted))
                else:
                    return
        except (ConnectionError, OSError):
            return


def main():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(listener.getsockname()[1], flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
