"""The stores from Python, with c10d's methods: TCPStore (server and client), FileStore,
HashStore, PrefixStore; and a torch store used by plexus for rendezvous."""
import datetime
import os
import tempfile
import threading

import pytest

import plexus as dist


def tmp_path_for(name):
    directory = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
    return os.path.join(directory, name + "-" + str(os.getpid()))


def make_tcp():
    server = dist.TCPStore("127.0.0.1", 0, world_size=2, is_master=True,
                           timeout=datetime.timedelta(seconds=30), wait_for_workers=False)
    client = dist.TCPStore("127.0.0.1", server.port, world_size=2, is_master=False,
                           timeout=datetime.timedelta(seconds=30))
    return server, client


def make_file():
    path = tmp_path_for("file-store")
    return dist.FileStore(path, 2), dist.FileStore(path, 2)


def make_hash():
    store = dist.HashStore()
    return store, store


def make_prefix():
    base = dist.HashStore()
    return dist.PrefixStore("ns", base), dist.PrefixStore("ns", base)


@pytest.mark.parametrize("make", [make_tcp, make_file, make_hash, make_prefix],
                         ids=["tcp", "file", "hash", "prefix"])
def test_store_methods(make):
    a, b = make()
    a.set("key", "value")
    assert b.get("key") == b"value"
    a.set("bytes", b"\x00\xff")
    assert b.get("bytes") == b"\x00\xff"
    assert a.add("counter", 5) == 5 and b.add("counter", -2) == 3
    assert b.get("counter") == b"3"
    assert a.compare_set("cas", "", "first") == b"first"
    assert b.compare_set("cas", "wrong", "second") == b"first"
    assert b.compare_set("cas", "first", "second") == b"second"
    assert a.check(["key", "counter"]) and not a.check(["key", "absent"])
    a.wait(["key"])
    a.wait(["key"], datetime.timedelta(seconds=1))
    a.multi_set(["m1", "m2"], ["x", b"y"])
    assert b.multi_get(["m1", "m2"]) == [b"x", b"y"]
    a.append("log", "ab")
    b.append("log", "cd")
    assert a.get("log") == b"abcd"
    assert a.delete_key("key") and not a.delete_key("key")
    assert a.num_keys() >= 6
    # A waiter is released by another handle's set.
    got = []
    waiter = threading.Thread(target=lambda: got.append(a.get("late")))
    waiter.start()
    b.set("late", "now")
    waiter.join(30)
    assert got == [b"now"]
    a.set_timeout(datetime.timedelta(milliseconds=200))
    assert a.timeout == datetime.timedelta(milliseconds=200)
    with pytest.raises(dist.DeadlineExceededError, match="absent"):
        a.get("absent")
    with pytest.raises(dist.DeadlineExceededError):
        a.wait(["absent"], datetime.timedelta(milliseconds=100))


def test_tcp_store_errors_are_clear():
    server, _ = make_tcp()
    with pytest.raises(dist.InvalidArgumentError, match="integer"):
        server.set("text", "abc")
        server.add("text", 1)
    with pytest.raises(dist.PlexusError):  # Nothing listens there.
        dist.TCPStore("127.0.0.1", 1, timeout=datetime.timedelta(milliseconds=300))
    assert isinstance(server.port, int) and server.port > 0 and server.host == "127.0.0.1"


def test_rendezvous_through_a_torch_store():
    torch_dist = pytest.importorskip("torch.distributed")
    store = torch_dist.HashStore()
    dist.init_process_group("tcp", store=store, rank=0, world_size=1)
    try:
        value = __import__("numpy").ones(3)
        dist.all_reduce(value)
        assert value.tolist() == [1.0, 1.0, 1.0]
    finally:
        dist.destroy_process_group()
