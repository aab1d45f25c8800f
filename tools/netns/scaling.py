"""How the all_reduce scales across hosts: H network namespaces ("hosts", 2 ranks each) joined
through a bridge in a switch namespace, every host's link capped by tbf in both directions
(--rate). For each H, the flat ring (PLEXUS_ALGO=all_reduce_multi_host:0-:ring) and the default
(recursive doubling below 64 KiB, hierarchical above) are timed per size and set against the
link bound of each schedule: a host link carries 2(p-1)/p * n each way for the flat ring over p
ranks, 2(H-1)/H * n for the hierarchical one (the two flows of a host share its link), and
2 log2(H) * n for recursive doubling.

Run as root from the checkout, after building the package:
  bazel build //bindings/python:plexus_pkg
  /usr/bin/python3 tools/netns/scaling.py --hosts=4,8 --rate=400mbit [--sizes=1K,64K,1M,16M] [--iters=5]
Namespaces, links and /etc/netns files are removed on exit, also after a failure."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import uuid

CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKER = os.path.join(CHECKOUT, "tools", "netns", "scaling_worker.py")
PACKAGE = os.path.join(CHECKOUT, "bazel-bin", "bindings", "python", "plexus_pkg")
FLAT = "all_reduce_multi_host:0-:ring"


def ip(*args, check=True):
    return subprocess.run(["ip"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, check=check)


def parse_size(text):
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1].upper(), 1)
    return int(text[:-1] if scale > 1 else text) * scale


def parse_rate(text):
    """tc's rate ("400mbit", "1gbit") in bytes per second."""
    match = re.fullmatch(r"(\d+)(k|m|g)?bit", text.lower())
    if not match:
        raise SystemExit("--rate: write it as tc does, e.g. 400mbit")
    scale = {"k": 1e3, "m": 1e6, "g": 1e9, None: 1}[match.group(2)]
    return int(match.group(1)) * scale / 8


def human(nbytes):
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return "%d%s" % (nbytes // scale, unit)
    return str(nbytes)


class Network:
    """H hosts behind one switch; every host link capped at `rate` each way."""

    def __init__(self, hosts, rate):
        self.tag = uuid.uuid4().hex[:5]
        self.namespaces = []
        self.switch = "pxs%s" % self.tag
        self._add(self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        for h in range(hosts):
            name = "pxh%s%d" % (self.tag, h)
            self._add(name)
            inside, outside = "h%s%d" % (self.tag, h), "s%s%d" % (self.tag, h)
            ip("link", "add", inside, "type", "veth", "peer", "name", outside)
            ip("link", "set", inside, "netns", name)
            ip("link", "set", outside, "netns", self.switch)
            ip("-n", name, "addr", "add", self.address(h) + "/24", "dev", inside)
            ip("-n", name, "link", "set", inside, "up")
            ip("-n", self.switch, "link", "set", outside, "master", "br0")
            ip("-n", self.switch, "link", "set", outside, "up")
            for ns, dev in ((name, inside), (self.switch, outside)):  # Up and down.
                subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev,
                                "root", "tbf", "rate", rate, "burst", "256kb", "latency",
                                "100ms"], check=True)

    def _add(self, name):
        ip("netns", "add", name)
        self.namespaces.append(name)
        ip("-n", name, "link", "set", "lo", "up")
        os.makedirs("/etc/netns/" + name, exist_ok=True)
        with open("/etc/netns/%s/hosts" % name, "w") as f:
            f.write("127.0.0.1 localhost\n")

    @staticmethod
    def address(host):
        return "10.78.0.%d" % (host + 1)

    def host(self, h):
        return self.namespaces[h + 1]

    def close(self):
        for name in self.namespaces:
            ip("netns", "del", name, check=False)
            shutil.rmtree("/etc/netns/" + name, ignore_errors=True)


def run(net, hosts, algo, sizes, iters, timeout):
    port = subprocess.run(
        ["ip", "netns", "exec", net.host(0), sys.executable, "-c",
         "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])"],
        stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    world = 2 * hosts
    procs = []
    for rank in range(world):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": PACKAGE,
               "MASTER_ADDR": net.address(0), "MASTER_PORT": port, "RANK": str(rank),
               "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank % 2), "OMP_NUM_THREADS": "1"}
        if algo:
            env["PLEXUS_ALGO"] = algo
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", net.host(rank // 2), sys.executable, WORKER,
             "--sizes", ",".join(str(s) for s in sizes), "--iters", str(iters)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    for p in procs:
        try:
            outputs.append(p.communicate(timeout=timeout)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise SystemExit("a run of %d hosts did not finish in %d s" % (hosts, timeout))
    if any(p.returncode != 0 for p in procs):
        raise SystemExit("a rank failed:\n" + "\n".join(outputs)[-6000:])
    for line in outputs[0].splitlines():
        if line.startswith("RESULT "):
            return {int(k): v for k, v in json.loads(line[7:])["medians"].items()}
    raise SystemExit("rank 0 printed no result:\n" + outputs[0][-4000:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", default="4,8")
    parser.add_argument("--rate", default="400mbit")
    parser.add_argument("--sizes", default="1K,64K,1M,16M")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--timeout", type=int, default=900)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("scaling.py makes network namespaces: run it as root")
    if not os.path.isdir(PACKAGE):
        raise SystemExit("no %s: bazel build //bindings/python:plexus_pkg first" % PACKAGE)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    rate = parse_rate(args.rate)
    print("| hosts x ranks | size | flat ring | its link bound | default | its link bound "
          "| default / flat |")
    print("|---|---|---|---|---|---|---|")
    for hosts in (int(h) for h in args.hosts.split(",")):
        net = Network(hosts, args.rate)
        try:
            flat = run(net, hosts, FLAT, sizes, args.iters, args.timeout)
            default = run(net, hosts, "", sizes, args.iters, args.timeout)
        finally:
            net.close()
        p = 2 * hosts
        for n in sizes:
            flat_bound = 2 * (p - 1) / p * n / rate
            hier_bound = 2 * (hosts - 1) / hosts * n / rate
            # Below 64 KiB the default is recursive doubling: of its log2(p) whole-buffer
            # exchanges, log2(H) cross hosts, both ranks of a host at once.
            rounds = (hosts - 1).bit_length()
            default_bound = hier_bound if n >= 64 << 10 else 2 * rounds * n / rate
            print("| %d x 2 | %s | %.3f ms | %.3f ms | %.3f ms | %.3f ms | %.2f |" % (
                hosts, human(n), flat[n] * 1e3, flat_bound * 1e3, default[n] * 1e3,
                default_bound * 1e3, default[n] / flat[n]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
