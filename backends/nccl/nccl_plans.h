// The NCCL calls each collective kind launches, planned from the call as a value
// (base/core/collective.h). NcclBackend checks a plan's tensors, picks the communicator and
// hands the plan's launch the communicator's stream.
#ifndef PLEXUS_BACKENDS_NCCL_NCCL_PLANS_H_
#define PLEXUS_BACKENDS_NCCL_NCCL_PLANS_H_

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "backends/common/native_plan.h"
#include "backends/common/nominal_traffic.h"
#include "backends/interface/backend.h"
#include "backends/nccl/nccl_api.h"
#include "backends/nccl/nccl_communicator.h"
#include "base/core/collective.h"
#include "devices/cuda/cuda_api.h"

namespace plexus::nccl {

// What a launch reads once the CUDA runtime and NCCL are loaded.
struct NcclLaunch {
  const NcclApi& nccl;
  const cuda::CudaApi& cuda;
  int rank;
  int size;

  // A device-to-device copy on `stream`: NCCL has no self send for arbitrary layouts.
  absl::Status Copy(void* to, const void* from, size_t bytes, cudaStream_t stream) const;
};

// What an NCCL plan runs: its tensors (checked to be on one device, which picks the
// communicator) and its launch on the communicator's stream. The launch refers to the caller's
// tensors, so it runs before the backend's Run returns.
struct NcclRun {
  std::vector<const Tensor*> tensors;  // Every tensor the call reads or writes.
  std::function<absl::Status(const NcclLaunch&, NcclCommunicator::Scope&)> launch;
};
using NcclPlan = NativePlan<NcclRun>;

// The plan for `call` on `rank` of a group of `size` (backends/common/native_plan.h);
// InvalidArgument for a reduction NCCL cannot run, NotRunError for recv_any_source (NCCL
// matches by source rank).
absl::StatusOr<NcclPlan> PlanNcclCall(const Collective& call, int rank, int size);
// `ops` in one ncclGroupStart/End, so exchanges between ranks cannot deadlock on stream order.
NcclPlan PlanPointToPointBatch(absl::Span<const PointToPointOp> ops, absl::Duration timeout);

}  // namespace plexus::nccl

#endif  // PLEXUS_BACKENDS_NCCL_NCCL_PLANS_H_
