#include "backends/mpi/mpi_backend.h"

#include <unistd.h>

#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backends/interface/backend_registry.h"
#include "backends/mpi/mpi_plans.h"
#include "base/core/status_macros.h"
#include "base/rendezvous/rendezvous.h"
#include "base/store/tcp_store.h"

namespace plexus::mpi {

using algorithms::AlgorithmTable;
using algorithms::CollectiveContext;
using executor::Collectives;

namespace {

// Posts `post` on the group's native communicator from this thread and tests it until done
// (needs MPI_THREAD_MULTIPLE). At the deadline, or when the group breaks meanwhile, the request
// goes to the engine to be reaped and the group breaks.
absl::Status PostAndTest(MpiGroup& group, const std::string& what,
                         const std::function<int(MPI_Comm, MPI_Request*)>& post,
                         absl::Time deadline) {
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = post(group.native(), &request);
  if (rc != MPI_SUCCESS) {
    absl::Status status = MpiErrorToStatus(rc, what);
    group.Break(status);
    return status;
  }
  for (uint64_t round = 0;; ++round) {
    int done = 0;
    MPI_Status mpi_status;
    rc = MPI_Test(&request, &done, &mpi_status);
    if (rc != MPI_SUCCESS) {
      absl::Status status = MpiErrorToStatus(rc, what);
      group.Break(status);
      return status;
    }
    if (done) return absl::OkStatus();
    // Checking the clock and the group every round would cost more than the test itself.
    if (round % 64 == 63) {
      absl::Status status = group.broken();
      if (status.ok() && absl::Now() >= deadline) {
        status = absl::DeadlineExceededError(
            absl::StrCat(what,
                         ": not complete by its deadline (a peer did not make the "
                         "matching call in time)"));
      }
      if (!status.ok()) {
        group.engine()->Adopt(request, what);
        group.Break(status);
        return status;
      }
    }
    // Other ranks' processes may need this core (fewer cores than ranks).
    std::this_thread::yield();
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<Backend>> MpiBackend::Create(const BackendContext& context) {
  ASSIGN_OR_RETURN(MpiEngine * engine, MpiEngine::Get());
  ASSIGN_OR_RETURN(AlgorithmTable table, AlgorithmTable::FromEnvironment());
  // Group rank -> MPI_COMM_WORLD rank, through the group's store (plexus's ranks need not be
  // MPI's, e.g. with a file:// rendezvous).
  Store& store = *context.store;
  RETURN_IF_ERROR(
      store.Set(absl::StrCat("mpi_rank/", context.rank), absl::StrCat(engine->world_rank())));
  std::vector<std::string> keys;
  for (int r = 0; r < context.size; ++r) keys.push_back(absl::StrCat("mpi_rank/", r));
  RETURN_IF_ERROR(store.Wait(keys, context.timeout));
  std::vector<int> mpi_ranks;
  for (const std::string& key : keys) {
    ASSIGN_OR_RETURN(std::string text, store.Get(key));
    int mpi_rank = -1;
    if (!absl::SimpleAtoi(text, &mpi_rank) || mpi_rank < 0 || mpi_rank >= engine->world_size()) {
      return absl::InternalError(absl::StrCat(key, " is '", text, "'"));
    }
    for (size_t i = 0; i < mpi_ranks.size(); ++i) {
      if (mpi_ranks[i] == mpi_rank) {
        return absl::FailedPreconditionError(absl::StrCat(
            "group ranks ", i, " and ", mpi_ranks.size(), " are the same MPI process (rank ",
            mpi_rank, "); each plexus rank must be its own mpirun process"));
      }
    }
    mpi_ranks.push_back(mpi_rank);
  }
  ASSIGN_OR_RETURN(
      std::shared_ptr<MpiGroup> group,
      MpiGroup::Create(engine, context.group_name, mpi_ranks, context.rank, context.timeout));
  auto transport = std::make_shared<MpiTransport>(group);
  auto collectives = std::make_unique<Collectives>(std::move(transport), std::move(table));
  return std::shared_ptr<Backend>(new MpiBackend(std::move(collectives), std::move(group)));
}

BackendCapabilities MpiBackend::capabilities() const { return CpuTransportCapabilities(); }

WorkPtr MpiBackend::SubmitNative(MpiPlan plan) {
  return collectives().Submit(
      plan.kind, plan.dtype, plan.count, plan.timeout,
      [group = group_, traffic = plan.traffic,
       prepare = std::move(plan.run)](CollectiveContext& ctx) -> absl::Status {
        RETURN_IF_ERROR(group->broken());
        ASSIGN_OR_RETURN(NativeCall call, prepare(ctx));
        const std::string what =
            absl::StrCat("mpi ", CollectiveName(ctx.kind()), " #", ctx.sequence(), " in group '",
                         group->name(), "' on rank ", ctx.rank());
        if (group->engine()->direct_progress()) {
          RETURN_IF_ERROR(PostAndTest(*group, what, call.post, ctx.deadline()));
        } else {
          auto work = std::make_shared<Work>(std::string(CollectiveName(ctx.kind())), ctx.size());
          MpiEngine::Operation op;
          op.what = what;
          op.post = [comm = group->native(), post = std::move(call.post)](MPI_Request* request) {
            return post(comm, request);
          };
          op.on_failure = [group](const absl::Status& status) { group->Break(status); };
          op.deadline = ctx.deadline();
          op.owner = group.get();
          op.work = work;
          group->engine()->Start(std::move(op));
          RETURN_IF_ERROR(ctx.Wait(work));
        }
        if (call.after) call.after();
        ctx.CountBytes(traffic.sent, traffic.received);
        return absl::OkStatus();
      });
}

namespace {

const BackendRegisterer kRegisterMpi(
    {kMpiBackendName, {DeviceType::kCpu}, &MpiBackend::Create, "mpi://"});

}  // namespace
WorkPtr MpiBackend::RunNatively(const Collective& call) {
  // Point-to-point runs over MpiTransport with its tags, as do kinds added since.
  absl::StatusOr<MpiPlan> plan = PlanMpiCall(call, rank(), size());
  if (absl::IsUnimplemented(plan.status())) return nullptr;
  if (!plan.ok()) return Work::Finished(plan.status(), std::string(call.name()), size());
  return SubmitNative(*std::move(plan));
}

}  // namespace plexus::mpi
