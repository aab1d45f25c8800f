"""torch without libuv: torch 2.4 and later make every TCPStore with libuv unless told otherwise,
and Debian's torch 2.6 is built without it. USE_LIBUV=0 reaches only the stores env:// and
tcp:// make for a rank of its own; torchrun's agent store, and the client a worker makes of it
(TORCHELASTIC_USE_AGENT_STORE), ask for libuv regardless, so on such a torch torchrun stops
before any collective, for every backend: "use_libuv was requested but PyTorch was build
without libuv support". Imported by plexus.torch and plexus.torchrun (docs/python.md)."""
import datetime
import importlib
import os

# TCPStore's parameters before use_libuv, in torch 2.x's order.
_USE_LIBUV_POSITION = 8


def torch_lacks_libuv():
    """Whether this torch refuses a libuv TCPStore (False where it has no such option)."""
    import torch.distributed as dist
    try:
        dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                      timeout=datetime.timedelta(seconds=5), use_libuv=True)
    except TypeError:  # torch 1.13: neither libuv nor the argument.
        return False
    except RuntimeError as error:
        return "libuv" in str(error)
    return False


def stores_without_libuv():
    """Where this torch has no libuv (so a libuv store can never be made): USE_LIBUV=0 for this
    process and its children unless set, and torch.distributed.TCPStore made without libuv
    unless a caller asks for it (code that imports it by name later gets this one). Returns
    whether torch lacks libuv. Harmless to repeat."""
    import torch.distributed as dist
    if getattr(dist.TCPStore, "_plexus_without_libuv", False):
        return True
    if not torch_lacks_libuv():
        return False
    native = dist.TCPStore

    class TCPStore(native):
        """torch's TCPStore, made without libuv unless a caller asks for it."""

        def __init__(self, *args, **kwargs):
            if len(args) <= _USE_LIBUV_POSITION:
                kwargs.setdefault("use_libuv", False)
            super().__init__(*args, **kwargs)

    TCPStore._plexus_without_libuv = True
    TCPStore.__name__ = TCPStore.__qualname__ = native.__name__
    TCPStore.__module__ = native.__module__
    dist.TCPStore = TCPStore
    # By module name: torch.distributed.rendezvous as an attribute is a function.
    rendezvous = importlib.import_module("torch.distributed.rendezvous")
    if getattr(rendezvous, "TCPStore", None) is native:  # Imported there by name already.
        rendezvous.TCPStore = TCPStore
    os.environ.setdefault("USE_LIBUV", "0")
    return True
