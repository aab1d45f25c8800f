"""Shared-secret authentication as users run it: a job whose ranks share PLEXUS_SECRET or
secret=, ranks with another secret refused, 10,000 wrong-secret connections against the store
of a running job, the standalone store server (tools/tcp_store_server) requiring the job's
secret, and the elastic master refusing a peer without the secret."""
import gc
import multiprocessing
import os
import socket
import subprocess

import numpy as np
import pytest

from multiproc import job_on_store_server, run_world

SECRET = "a shared secret long enough to use"
STORE_SERVER = os.path.join(os.getcwd(), "tools", "tcp_store_server")


def start_store_server(env, *flags):
    """tools/tcp_store_server on a free loopback port: (process, port, its banner line)."""
    server = subprocess.Popen([STORE_SERVER, "--host=127.0.0.1", "--port=0"] + list(flags),
                              env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    banner = server.stdout.readline()
    if not banner.startswith("TCPStore server listening on"):
        server.kill()
        raise AssertionError("store server did not start: %r %s" % (banner, server.stderr.read()))
    return server, int(banner.split("127.0.0.1:")[1].split()[0]), banner


def _secret_for(rank, world):
    os.environ["PLEXUS_SECRET"] = SECRET


def _wrong_secret_on_rank_one(rank, world):
    os.environ["PLEXUS_SECRET"] = SECRET if rank == 0 else "another secret entirely, also long"


def sums(rank, world):
    import plexus as dist
    x = np.full(1000, rank + 1, np.float32)
    dist.all_reduce(x)
    return float(x[0])


def test_ranks_sharing_the_secret_work_and_a_rank_with_another_is_refused():
    assert run_world(sums, 3, before_init=_secret_for) == [6.0, 6.0, 6.0]
    with pytest.raises(AssertionError) as failure:
        run_world(sums, 2, before_init=_wrong_secret_on_rank_one, op_timeout=3, timeout=60,
                  destroy=False)
    report = str(failure.value)
    assert "does not know the shared secret" in report or "refused this rank" in report, report


def test_the_standalone_store_server_requires_the_jobs_secret():
    import plexus as dist
    env = dict(os.environ, PLEXUS_SECRET=SECRET)
    server, port, banner = start_store_server(env, "--require=secret")
    try:
        assert "shared secret required" in banner, banner
        store = dist.TCPStore("127.0.0.1", port, secret=SECRET, timeout=10)
        store.set("written", b"by a client with the secret")
        assert store.get("written") == b"by a client with the secret"
        for secret in (None, "another secret entirely, also long"):
            with pytest.raises(dist.UnauthenticatedError):
                dist.TCPStore("127.0.0.1", port, secret=secret, timeout=10)
        # A job configured with the secret forms its group on it.
        assert job_on_store_server(port, SECRET) == [3.0, 3.0]
    finally:
        server.terminate()
        server.wait(10)
    # Without PLEXUS_SECRET, told to require one, it refuses to start, saying why.
    open_env = {k: v for k, v in os.environ.items()
                if not k.startswith("PLEXUS_SECRET") and not k.startswith("PLEXUS_TLS")}
    for required, named in (("secret", "PLEXUS_SECRET"), ("tls", "PLEXUS_TLS_CERT"),
                            ("secret,tls", "PLEXUS_SECRET")):
        refused = subprocess.run([STORE_SERVER, "--host=127.0.0.1", "--port=0",
                                  "--require=" + required], env=open_env, capture_output=True,
                                 text=True, timeout=30)
        assert refused.returncode == 2 and not refused.stdout, refused
        assert "--require=" in refused.stderr and named in refused.stderr, refused.stderr
    # Not told to, it says it is open, and takes anyone (the default, as before).
    server, port, banner = start_store_server(open_env)
    try:
        assert "no shared secret" in banner, banner
        dist.TCPStore("127.0.0.1", port, timeout=10).set("open", b"1")
    finally:
        server.terminate()
        server.wait(10)


def _resident_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _rank_loop(rank, port, results):
    import plexus as dist
    try:
        store = dist.TCPStore("127.0.0.1", port, secret=SECRET, timeout=60)
        dist.init_process_group("tcp", store=store, rank=rank, world_size=2, secret=SECRET)
        rounds = 0
        while True:
            # Rank 0 decides when to stop and the decision rides a collective, so both ranks
            # leave after the same round (one alone in destroy_process_group's barrier while
            # the other waits in an all_reduce would deadlock the test).
            stop = np.array([rank == 0 and store.check(["stop"])], np.float64)
            dist.all_reduce(stop)
            if stop[0]:
                break
            x = np.full(4096, rank + 1 + rounds, np.float64)
            dist.all_reduce(x)
            expected = 3 + 2 * rounds
            if not np.all(x == expected):
                raise AssertionError("round %d: %s != %s" % (rounds, x[0], expected))
            rounds += 1
            if rounds == 20:
                store.set("ready/%d" % rank, "1")
        dist.destroy_process_group()
        results.put((rank, rounds, None))
    except BaseException as error:  # Reported to the parent.
        results.put((rank, -1, repr(error)))


def _refused_attempt(port, kind):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        if kind == 0:  # A hello, then a proof made without the secret.
            s.sendall(b"PLXA\x01\x01\x00\x00" + os.urandom(32))
            challenge = b""
            while len(challenge) < 64:
                chunk = s.recv(64 - len(challenge))
                assert chunk, "closed before the challenge"
                challenge += chunk
            s.sendall(os.urandom(32))
        elif kind == 1:  # The store protocol without authenticating.
            s.sendall(b"PLXS\x02\x00\x00\x00")
            # A plexus peer hears one refusal byte (a verdict, not a shed connection), then EOF.
            return s.recv(16) == b"\x00" and s.recv(16) == b""
        else:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        return s.recv(16) == b""  # Closed, and nothing was answered.


def test_ten_thousand_wrong_secret_connections_leave_a_running_job_correct_and_small():
    import plexus as dist
    server = dist.TCPStore("127.0.0.1", 0, world_size=3, is_master=True, wait_for_workers=False,
                           secret=SECRET, timeout=60)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    ranks = [context.Process(target=_rank_loop, args=(r, server.port, results)) for r in range(2)]
    for process in ranks:
        process.start()
    try:
        server.wait(["ready/0", "ready/1"])
        gc.collect()
        before = _resident_kib()
        refused = sum(_refused_attempt(server.port, i % 3) for i in range(10000))
        gc.collect()
        grown = _resident_kib() - before
        server.set("stop", "1")
        outcomes = sorted(results.get(timeout=60) for _ in ranks)
    finally:
        for process in ranks:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    assert refused == 10000
    for rank, rounds, error in outcomes:
        assert error is None, "rank %d: %s" % (rank, error)
        assert rounds > 20, (rank, rounds)  # It kept working through the attempts.
    assert grown < 8 * 1024, "the store's process grew by %d KiB" % grown


def test_the_elastic_master_refuses_a_peer_without_the_secret():
    from plexus.elastic import Communicator, ElasticError, MasterNode, Result
    master = MasterNode("127.0.0.1:0", secret=SECRET)
    master.run()
    try:
        address = "127.0.0.1:%d" % master.port
        with pytest.raises(ElasticError) as refused:
            Communicator(address, secret="not the secret, but long enough").connect(n_attempts=1)
        assert "UNAUTHENTICATED" in str(refused.value), refused.value
        assert refused.value.result == Result.MASTER_CONNECTION_FAILED, refused.value
        assert "shared secret differs from the master's" in str(refused.value), refused.value
        with pytest.raises(ElasticError) as refused:
            Communicator(address, secret="").connect(n_attempts=1)  # None at all.
        assert refused.value.result == Result.MASTER_CONNECTION_FAILED, refused.value
        assert "requires a shared secret" in str(refused.value), refused.value
        comm = Communicator(address, secret=SECRET)
        comm.connect(n_attempts=1)
        assert comm.ring == [comm.peer_id]
    finally:
        master.interrupt()
        master.await_termination(10)
