// Links each wrapped system library once, so a broken local repository fails here first.
#include <mpi.h>

#include <cstdio>

#include "gloo/config.h"
#include "gloo/context.h"
#include "pybind11/pybind11.h"

#ifdef PLEXUS_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

int main() {
  int mpi_version = 0, mpi_subversion = 0;
  MPI_Get_version(&mpi_version, &mpi_subversion);  // Callable before MPI_Init.
  gloo::Context context(0, 1);
  std::printf("MPI %d.%d, gloo %d.%d.%d, gloo context of size %d, pybind11 %d.%d\n", mpi_version,
              mpi_subversion, GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH,
              context.size, PYBIND11_VERSION_MAJOR, PYBIND11_VERSION_MINOR);
#ifdef PLEXUS_HAVE_NCCL
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  int devices = 0;
  cudaError_t error = cudaGetDeviceCount(&devices);
  std::printf("NCCL %d; CUDA devices: %d (%s)\n", nccl_version, devices,
              error == cudaSuccess ? "ok" : cudaGetErrorString(error));
#else
  std::printf("CUDA toolkit not found: the NCCL backend reports no CUDA at run time\n");
#endif
  return mpi_version >= 3 ? 0 : 1;
}
