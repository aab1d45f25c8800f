// Linked instead of the nccl backend where the build found no CUDA toolkit with NCCL: the
// registry then says why "nccl" is missing instead of calling it unknown.
#include "backends/interface/backend_registry.h"

#ifndef PLEXUS_CUDA_ROOT
#define PLEXUS_CUDA_ROOT "/usr/local/cuda"
#endif

namespace plexus::nccl {
namespace {

const AbsentBackendNote kNcclAbsent(
    "nccl", "built without the CUDA toolkit and NCCL (none at " PLEXUS_CUDA_ROOT
            "/include/nccl.h when Bazel ran; install it, or set PLEXUS_CUDA_ROOT, and rebuild)");

}  // namespace
}  // namespace plexus::nccl
