"""How torch finds an installed plexus without `import plexus.torch`: the targets of the
package's entry points (plexus-VERSION.dist-info/entry_points.txt, in the .deb, the wheel and
bazel-bin's plexus_pkg alike).

- torch 2.14 and later look a backend name they do not know up in the entry-point group
  `torch.distributed.backends` (init_process_group, new_group, is_backend_available):
  `register` imports plexus.torch, which registers "plexus".
- torch 2.5 to 2.13 call every `torch.backends` entry point at `import torch` (unless
  TORCH_DEVICE_BACKEND_AUTOLOAD=0): `autoload` registers "plexus" with a creator that imports
  plexus.torch when the first "plexus" group is made, so a torch program that never asks for
  plexus loads none of it. This module stands outside the plexus package for the same reason:
  importing it loads no extension.
- torch 1.13 has neither: `import plexus.torch` before init_process_group.
"""
import warnings

BACKEND_NAME = "plexus"


def register():
    """The `torch.distributed.backends` registrar: registers "plexus" with torch."""
    import plexus.torch  # noqa: F401 - registers on import


def autoload():
    """The `torch.backends` hook, run inside `import torch`: never raises, since a failure here
    would fail every `import torch` on the machine; it warns instead."""
    try:
        import torch.distributed as torch_dist
        if not torch_dist.is_available():
            return
        if hasattr(torch_dist.Backend, "_ensure_backend_registered"):
            return  # torch 2.14+: finds register() when a "plexus" group is asked for.
        register_lazily(torch_dist)
    except Exception as error:  # pylint: disable=broad-except
        warnings.warn("plexus: \"plexus\" is not registered with torch.distributed at import "
                      "torch (%s: %s); `import plexus.torch` registers it"
                      % (type(error).__name__, error), RuntimeWarning)


def register_lazily(torch_dist):
    """Registers "plexus" with a creator that imports plexus.torch only when first called."""
    if BACKEND_NAME.upper() in torch_dist.Backend._plugins:  # pylint: disable=protected-access
        return
    torch_dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True,
                                        devices=["cpu", "cuda"])


def _create_backend(*args):
    import plexus.torch
    return plexus.torch._create_backend(*args)  # pylint: disable=protected-access
