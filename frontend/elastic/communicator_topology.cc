// Communicator::OptimizeTopology: pairwise bandwidth probes over the epoch's connections, and
// the vote the master turns into a ring order (ring_order.h).
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "algorithms/collective_context.h"
#include "base/core/deadline.h"
#include "base/core/status_macros.h"
#include "frontend/elastic/communicator.h"
#include "frontend/elastic/master_link.h"

namespace plexus::elastic {

using algorithms::CollectiveContext;
using algorithms::CollectiveKind;

namespace {

// Probes of optimization k use transport operation 2^39 + 2^38 + k mod 2^19, apart from the
// all-reduces (below 2^39) and the shared-state transfers (2^39 + k mod 2^19).
uint64_t ProbeOperationId(int64_t number) {
  return (uint64_t{3} << 38) | (static_cast<uint64_t>(number) & ((uint64_t{1} << 19) - 1));
}

// Round `round` of a round-robin tournament over `n` positions (the circle method; a bye for
// odd n): the partner of `position`, or -1.
int Partner(int position, int round, int n) {
  const int m = n % 2 == 0 ? n : n + 1;
  const int fixed = m - 1;
  int partner;
  if (position == fixed) {
    partner = round;
  } else if (position == round) {
    partner = fixed;
  } else {
    partner = ((2 * round - position) % (m - 1) + (m - 1)) % (m - 1);
  }
  return partner < n ? partner : -1;
}

}  // namespace

int64_t Communicator::CurrentEpoch() const {
  MutexLock lock(mu_);
  return topology_.epoch();
}

void Communicator::AwaitEpochAfter(int64_t epoch) {
  // The master pushes a new topology before it fails what the change interrupted, so it is
  // normally here already; wait a little for it otherwise.
  UniqueLock lock(mu_);
  changed_.wait_until(lock, SteadyDeadline(absl::Seconds(1)),
                      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                        return topology_.epoch() != epoch || !lost_.ok();
                      });
}

std::vector<int64_t> Communicator::Ring() const {
  MutexLock lock(mu_);
  return topology_.Ring();
}

int Communicator::SharedMemoryPeers() {
  MutexLock lock(mu_);
  mesh_.OwnerHeld();
  return mesh_.SharedMemoryPeers();
}

absl::Status Communicator::NoOpsInFlight(const char* what) const {
  MutexLock lock(mu_);
  if (in_flight_.empty()) return absl::OkStatus();
  return WithResult(absl::FailedPreconditionError(absl::StrCat(
                        what, " with ", in_flight_.size(), " all-reduces in flight: wait first")),
                    Result::kPendingAsyncOps);
}

absl::StatusOr<bool> Communicator::OptimizeTopology() {
  RETURN_IF_ERROR(Usable());
  RETURN_IF_ERROR(NoOpsInFlight("optimize_topology"));
  const absl::Time deadline = absl::Now() + operation_timeout_;
  while (true) {
    RETURN_IF_ERROR(Usable());
    int64_t epoch;
    size_t members;
    {
      MutexLock lock(mu_);
      epoch = topology_.epoch();
      members = topology_.latest().ring.size();
    }
    if (members < 3) return false;  // Two peers (or one) have only one ring.
    std::shared_ptr<MasterLink> master = link();
    absl::Status status;
    auto started = master->Call(MessageType::kOptimizeStart, {epoch, MillisecondsLeft(deadline)},
                                "", deadline + kMasterAnswerGrace);
    if (!started.ok()) {
      status = started.status();
    } else {
      auto row = MeasureLinks(epoch, (*started)[0], deadline);
      std::vector<int64_t> report = {epoch,
                                     row.ok() ? 0 : static_cast<int64_t>(row.status().code())};
      if (row.ok()) report.insert(report.end(), row->begin(), row->end());
      auto decided = master->Call(MessageType::kOptimizeReport, std::move(report),
                                  row.ok() ? "" : std::string(row.status().message()), deadline);
      status = row.ok() ? decided.status() : row.status();
      if (status.ok()) {
        if ((*decided)[0] == 0) return false;
        auto mesh =
            mesh_.Get(CurrentEpoch());  // Everyone connects the new ring now, as after a join.
        AdoptTopology();
        if (!mesh.ok() && !IsRetryableFailure(mesh.status())) {
          return WithResult(mesh.status(), Result::kTopologyOptimizationFailed);
        }
        return true;
      }
    }
    if (!IsRetryableFailure(status) || absl::Now() >= deadline) {
      return WithResult(
          absl::Status(status.code(), absl::StrCat("optimize_topology: ", status.message())),
          Result::kTopologyOptimizationFailed);
    }
    AwaitEpochAfter(epoch);
  }
}

absl::StatusOr<std::vector<int64_t>> Communicator::MeasureLinks(int64_t epoch, int64_t number,
                                                                absl::Time deadline) {
  ASSIGN_OR_RETURN(std::shared_ptr<Transport> mesh, mesh_.Get(epoch));
  const int n = mesh->size();
  const int me = mesh->rank();
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(options_.bandwidth_probe_bytes, 1));
  std::unique_ptr<uint8_t[]> outgoing(new uint8_t[bytes]), incoming(new uint8_t[bytes]);
  std::fill(outgoing.get(), outgoing.get() + bytes, uint8_t{0x5a});
  Work work("elastic optimize_topology", n, number);
  CollectiveContext ctx(*mesh, CollectiveKind::kBarrier, ProbeOperationId(number),
                        /*signature=*/0, std::max(deadline - absl::Now(), absl::ZeroDuration()),
                        &work);
  std::vector<int64_t> received_at(n, 0);
  const int rounds = n % 2 == 0 ? n - 1 : n;
  for (int round = 0; round < rounds; ++round) {
    const int partner = Partner(me, round, n);
    if (partner < 0) continue;
    // One direction at a time: with both at once, the acknowledgements of one direction queue
    // behind the data of the other, and a link slow one way measures slow both ways.
    for (int turn = 0; turn < 2; ++turn) {
      const bool receiving = (turn == 0) == (me > partner);  // The lower rank sends first.
      const uint32_t step = static_cast<uint32_t>(4 * round + 2 * turn);
      uint8_t token = 1, their_token = 0;
      // Meet first, so the receiver's clock starts when the sender starts.
      RETURN_IF_ERROR(ctx.WaitAll(
          {ctx.Send(partner, step, &token, 1), ctx.Recv(partner, step, &their_token, 1)}));
      if (!receiving) {
        RETURN_IF_ERROR(ctx.Wait(ctx.Send(partner, step + 1, outgoing.get(), bytes)));
        continue;
      }
      const absl::Time start = absl::Now();
      RETURN_IF_ERROR(ctx.Wait(ctx.Recv(partner, step + 1, incoming.get(), bytes)));
      const double seconds = std::max(absl::ToDoubleSeconds(absl::Now() - start), 1e-6);
      received_at[partner] = static_cast<int64_t>(static_cast<double>(bytes) / seconds);
    }
  }
  return received_at;
}

}  // namespace plexus::elastic
