"""plexus.Backend: backend names, as torch.distributed.Backend, and registration of backends
written in Python."""
from plexus import _plexus


class Backend(str):
    """A backend name or backend string ("tcp", "gloo", "cpu:gloo,cuda:nccl").

    Backend("GLOO") == "gloo". Names registered with register_backend become attributes too.
    """

    UNDEFINED = "undefined"
    TCP = "tcp"
    GLOO = "gloo"
    MPI = "mpi"
    NCCL = "nccl"

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError("Backend name must be a string, got %r" % (name,))
        value = name.lower()
        if value != Backend.UNDEFINED:
            known = set(_plexus.registered_backends()) | {Backend.NCCL}
            for part in value.split(","):
                backend = part.split(":", 1)[-1].strip()
                if backend not in known:
                    raise ValueError("Invalid backend %r in %r; registered: %s"
                                     % (backend, name, ", ".join(sorted(known))))
        return str.__new__(cls, value)

    @classmethod
    def register_backend(cls, name, func, extended_api=False, devices=("cpu",)):
        """Registers a backend written in Python under `name`.

        `func(store, rank, world_size, timeout)` is called on each rank when a group using the
        backend is built, and returns an object with one method per collective; see
        docs/python.md ("Backends written in Python"). `devices` lists the device types its
        tensors may live on. torch's extended_api form is not supported.
        """
        if extended_api:
            raise NotImplementedError("plexus backends take (store, rank, world_size, timeout); "
                                      "extended_api=True is not supported")
        if not callable(func):
            raise ValueError("register_backend(%r): func must be callable" % (name,))
        _plexus.register_backend(name.lower(), func, list(devices))
        setattr(cls, name.upper(), name.lower())

    @classmethod
    def unregister_backend(cls, name):
        """Removes a backend registered from Python; returns whether one was."""
        removed = _plexus.unregister_backend(name.lower())
        if removed and getattr(cls, name.upper(), None) == name.lower():
            delattr(cls, name.upper())
        return removed
