"""The elastic master as a program: python3 -m plexus.elastic.master --listen-address HOST:PORT"""
import argparse
import logging
import signal

from plexus.elastic import ElasticError, MasterNode


def main():
    parser = argparse.ArgumentParser(description="plexus elastic master node")
    parser.add_argument("--listen-address", default="0.0.0.0:48148",
                        help="host:port to listen on (port 0 picks one; it is printed)")
    parser.add_argument("--heartbeat-timeout", type=float, default=5.0,
                        help="seconds of silence after which a peer is dropped")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    master = MasterNode(listen_address=args.listen_address,
                        heartbeat_timeout=args.heartbeat_timeout)
    master.run()
    host = args.listen_address.rsplit(":", 1)[0]
    print(f"plexus elastic master listening on {host}:{master.port}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: master.interrupt())
    signal.signal(signal.SIGINT, lambda *_: master.interrupt())
    while True:  # Short waits, so the signal handlers above get to run.
        try:
            master.await_termination(timeout=0.2)
            return
        except ElasticError:
            continue


if __name__ == "__main__":
    main()
