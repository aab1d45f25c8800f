"""TLS as users configure it: PLEXUS_TLS_CERT, PLEXUS_TLS_KEY and PLEXUS_TLS_CA in every
process's environment. A process group whose store and data connections are all TLS gives right
answers; a rank without TLS is refused; the standalone store server (tools/tcp_store_server)
speaks TLS to the job and refuses a client without it; the elastic master and its peers run over
TLS and a peer without it is refused."""
import os
import subprocess
import sys

import numpy as np
import pytest

from multiproc import job_on_store_server, run_world

MAKE_CERTIFICATES = os.path.join(os.getcwd(), "tests", "testing", "make_tls_certificates")
STORE_SERVER = os.path.join(os.getcwd(), "tools", "tcp_store_server")
TLS_VARIABLES = ("PLEXUS_TLS_CERT", "PLEXUS_TLS_KEY", "PLEXUS_TLS_CA")


@pytest.fixture(scope="module")
def tls_environment(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("certificates"))
    subprocess.run([MAKE_CERTIFICATES, directory, "node"], check=True)
    values = {"PLEXUS_TLS_CERT": os.path.join(directory, "node.pem"),
              "PLEXUS_TLS_KEY": os.path.join(directory, "node.key"),
              "PLEXUS_TLS_CA": os.path.join(directory, "ca.pem")}
    saved = {name: os.environ.get(name) for name in TLS_VARIABLES + ("PLEXUS_TRANSPORT",)}
    os.environ.update(values)
    os.environ["PLEXUS_TRANSPORT"] = "tcp"  # Same-host ranks would otherwise share memory.
    yield values
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def collectives(rank, world):
    import plexus as dist
    x = np.arange(1 << 20, dtype=np.float32) * (rank + 1)
    dist.all_reduce(x)
    gathered = [np.zeros(3, np.int64) for _ in range(world)]
    dist.all_gather(gathered, np.full(3, rank, np.int64))
    return float(x[12345]), [int(g[0]) for g in gathered]


def test_a_process_group_over_tls_gives_right_answers(tls_environment):
    results = run_world(collectives, 3, init="plexus")
    assert results == [(12345.0 * 6, [0, 1, 2])] * 3


def _without_tls_on_rank_one(rank, world):
    if rank == 1:
        for name in TLS_VARIABLES:
            os.environ.pop(name, None)


def test_a_rank_without_tls_is_refused(tls_environment):
    with pytest.raises(AssertionError) as failure:
        run_world(collectives, 2, before_init=_without_tls_on_rank_one, op_timeout=3, timeout=60,
                  destroy=False)
    assert "TLS" in str(failure.value), failure.value


def test_the_standalone_store_server_speaks_tls_and_refuses_a_client_without(tls_environment):
    import plexus as dist
    server = subprocess.Popen([STORE_SERVER, "--host=127.0.0.1", "--port=0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = server.stdout.readline()
        assert "TLS 1.3" in banner, (banner, server.stderr.read() if server.poll() else "")
        port = int(banner.split("127.0.0.1:")[1].split()[0])
        store = dist.TCPStore("127.0.0.1", port, timeout=10)
        store.set("over", b"tls")
        assert store.get("over") == b"tls"
        # A job's ranks form their group on it (TLS from the environment, as the server's).
        assert job_on_store_server(port) == [3.0, 3.0]
        plain = {k: v for k, v in os.environ.items() if k not in TLS_VARIABLES}
        client = subprocess.run(
            [sys.executable, "-c", "import plexus; plexus.TCPStore('127.0.0.1', %d, timeout=5)"
             % port], env=plain, capture_output=True, text=True, timeout=60)
        assert client.returncode != 0
        assert "TLS" in client.stderr, client.stderr
    finally:
        server.terminate()
        server.wait(10)


PEER = r"""
import sys, time
import numpy as np
from plexus.elastic import Attribute, Communicator, ReduceOp
comm = Communicator(sys.argv[1], 0)
comm.connect(n_attempts=15)
deadline = time.time() + 60
while comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE) < 2:
    assert time.time() < deadline
    comm.update_topology()
    time.sleep(0.01)
x = np.full(1 << 18, float(sys.argv[2]), np.float32)
y = np.zeros_like(x)
comm.all_reduce(x, y, op=ReduceOp.SUM, tag=1)
print("SUM", float(y[0]), float(y[-1]), flush=True)
"""


def test_the_elastic_master_and_its_peers_run_over_tls(tls_environment):
    from plexus.elastic import Communicator, ElasticError, Result
    master = subprocess.Popen([sys.executable, "-m", "plexus.elastic.master", "--listen-address",
                               "127.0.0.1:0"], stdout=subprocess.PIPE, text=True)
    try:
        line = master.stdout.readline()
        assert "listening on" in line, line
        address = line.split()[-1]
        peers = [subprocess.Popen([sys.executable, "-c", PEER, address, str(v)],
                                  stdout=subprocess.PIPE, text=True) for v in (1, 2)]
        outputs = [peer.communicate(timeout=120)[0] for peer in peers]
        for output in outputs:
            assert "SUM 3.0 3.0" in output, output
        for name in TLS_VARIABLES:
            os.environ.pop(name)
        try:
            with pytest.raises(ElasticError) as refused:
                Communicator(address).connect(n_attempts=1)
            assert refused.value.result == Result.MASTER_CONNECTION_FAILED, refused.value
            assert "requires TLS" in str(refused.value), refused.value
            # A certificate from another CA: each side distrusts the other; the peer says so.
            foreign = os.path.join(os.path.dirname(tls_environment["PLEXUS_TLS_CA"]), "foreign")
            os.makedirs(foreign, exist_ok=True)
            subprocess.run([MAKE_CERTIFICATES, foreign, "node"], check=True)
            os.environ.update({"PLEXUS_TLS_CERT": os.path.join(foreign, "node.pem"),
                               "PLEXUS_TLS_KEY": os.path.join(foreign, "node.key"),
                               "PLEXUS_TLS_CA": os.path.join(foreign, "ca.pem")})
            with pytest.raises(ElasticError) as refused:
                Communicator(address).connect(n_attempts=1)
            assert refused.value.result == Result.MASTER_CONNECTION_FAILED, refused.value
            assert "certificate verify failed" in str(refused.value), refused.value
            assert "PLEXUS_TLS_CA" in str(refused.value), refused.value
            # Trusting the master's CA, but with its own certificate from another one.
            os.environ["PLEXUS_TLS_CA"] = tls_environment["PLEXUS_TLS_CA"]
            with pytest.raises(ElasticError) as refused:
                Communicator(address).connect(n_attempts=1)
            assert refused.value.result == Result.MASTER_CONNECTION_FAILED, refused.value
            assert "certificate" in str(refused.value), refused.value
            # The master's alert names the refusal; this side names the certificate refused.
            text = str(refused.value)
            # (Both test CAs are named alike: OpenSSL says "decrypt error" for the signature.)
            assert "alert unknown ca" in text or "alert decrypt error" in text, text
            assert "the peer refused this side's certificate %s (subject CN=node" % (
                os.path.join(foreign, "node.pem")) in text, text
            # The right CA, but a certificate that expired yesterday.
            trusted = os.path.dirname(tls_environment["PLEXUS_TLS_CA"])
            os.environ.update({"PLEXUS_TLS_CERT": os.path.join(trusted, "expired.pem"),
                               "PLEXUS_TLS_KEY": os.path.join(trusted, "expired.key")})
            with pytest.raises(ElasticError) as refused:
                Communicator(address).connect(n_attempts=1)
            assert refused.value.result == Result.MASTER_CONNECTION_FAILED, refused.value
            assert "alert certificate expired" in str(refused.value), refused.value
            assert "the peer refused this side's certificate %s (subject CN=expired" % (
                os.path.join(trusted, "expired.pem")) in str(refused.value), refused.value
        finally:
            os.environ.update(tls_environment)
    finally:
        master.terminate()
        master.wait(timeout=30)
