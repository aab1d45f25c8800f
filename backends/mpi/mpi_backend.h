// MpiBackend: registered as "mpi" (cpu tensors), over Open MPI. Runs under an MPI launcher
// (mpirun); rank and world size come from MPI_COMM_WORLD, and init_process_group("mpi") needs
// no MASTER_ADDR (the "mpi://" rendezvous: rank 0 hosts the group's store and MPI broadcasts
// its address). A group's communicators come from MPI_Comm_create_group over its members.
//
// MPI's own non-blocking collectives (MPI_Iallreduce, MPI_Ibcast, MPI_Ireduce,
// MPI_Iallgather, MPI_Igather, MPI_Iscatter, MPI_Ireduce_scatter_block, MPI_Ialltoallv,
// MPI_Ibarrier) run every collective whose dtype MPI has (integers, float32, float64; AVG and
// PREMUL_SUM as SUM with scaling); bool, float16 and bfloat16 reductions run algorithms/ over
// MPI point-to-point. All MPI calls are made by one progress thread (MpiEngine), in issue
// order per group. See docs/backends.md.
#ifndef PLEXUS_BACKENDS_MPI_MPI_BACKEND_H_
#define PLEXUS_BACKENDS_MPI_MPI_BACKEND_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "backends/common/collectives_backend.h"
#include "backends/common/nominal_traffic.h"
#include "backends/interface/backend.h"
#include "backends/mpi/mpi_plans.h"
#include "backends/mpi/mpi_transport.h"
#include "base/rendezvous/rendezvous.h"

namespace plexus::mpi {

inline constexpr char kMpiBackendName[] = "mpi";

class MpiBackend : public CollectivesBackend {
 public:
  // Maps the group's ranks to MPI ranks through the store and creates its communicators.
  static absl::StatusOr<std::shared_ptr<Backend>> Create(const BackendContext& context);

  std::string name() const override { return kMpiBackendName; }
  BackendCapabilities capabilities() const override;

 private:
  WorkPtr RunNatively(const Collective& call) override;

  MpiBackend(std::unique_ptr<executor::Collectives> collectives, std::shared_ptr<MpiGroup> group)
      : CollectivesBackend(std::move(collectives)), group_(std::move(group)) {}

  // Queues the collective `plan` describes; the worker prepares it, hands the MPI call to the
  // engine and waits for it within the deadline. On success the Work's stats get its traffic.
  WorkPtr SubmitNative(MpiPlan plan);

  const std::shared_ptr<MpiGroup> group_;
};

}  // namespace plexus::mpi

#endif  // PLEXUS_BACKENDS_MPI_MPI_BACKEND_H_
