"""The fake CUDA runtime and NCCL for tests: the library's label and the environment that makes
plexus load it (see fake_device.h)."""

FAKE_CUDA = "//tests/fake_cuda:libfake_cuda.so"

def fake_cuda_env(devices = 8, nccl = True):
    """Environment for a test that carries FAKE_CUDA in its data: `devices` fake GPUs."""
    env = {
        "FAKE_CUDA_DEVICES": str(devices),
        "PLEXUS_CUDART_LIBRARY": "$(rootpath %s)" % FAKE_CUDA,
    }
    if nccl:
        env["PLEXUS_NCCL_LIBRARY"] = "$(rootpath %s)" % FAKE_CUDA
    return env
