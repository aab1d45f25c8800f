"""`python3 -m plexus.torchrun ARGS` is `torchrun ARGS`, and works on a torch built without
libuv (Debian's 2.6), where torchrun itself stops before starting a worker (plexus/_libuv.py).
Workers that `import plexus.torch` get the same fix for their client of the agent's store."""
import sys

from plexus import _libuv


def main():
    _libuv.stores_without_libuv()
    from torch.distributed.run import main as torchrun_main
    sys.argv[0] = "torchrun"
    return torchrun_main()


if __name__ == "__main__":
    sys.exit(main())
