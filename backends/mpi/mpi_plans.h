// The MPI calls MpiBackend makes for each collective kind, planned from the call as a value
// (backends/common/native_plan.h). A call MPI cannot run (a dtype it lacks, a count past
// INT_MAX, point-to-point) is NotRunError, and algorithms/ runs it over MpiTransport.
#ifndef PLEXUS_BACKENDS_MPI_MPI_PLANS_H_
#define PLEXUS_BACKENDS_MPI_MPI_PLANS_H_

#include <mpi.h>

#include <functional>

#include "absl/status/statusor.h"
#include "algorithms/collective_context.h"
#include "backends/common/native_plan.h"
#include "backends/interface/backend.h"
#include "base/core/collective.h"

namespace plexus::mpi {

// What a native call does on the worker: prepare (pack, pre-scale) and return the MPI call to
// post on the group's native communicator; `after` runs once it completed (unpack, post-scale)
// and may be empty.
struct NativeCall {
  std::function<int(MPI_Comm, MPI_Request*)> post;
  std::function<void()> after;
};

// A plan's run: prepares the call on the worker, with the executor's context (scratch).
using MpiPlan =
    NativePlan<std::function<absl::StatusOr<NativeCall>(algorithms::CollectiveContext&)>>;

// The plan for `call` on `rank` of a group of `size`.
absl::StatusOr<MpiPlan> PlanMpiCall(const Collective& call, int rank, int size);

}  // namespace plexus::mpi

#endif  // PLEXUS_BACKENDS_MPI_MPI_PLANS_H_
