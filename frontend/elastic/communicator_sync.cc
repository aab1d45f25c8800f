// Communicator::SyncSharedState: the peer's side of the shared-state vote (shared_state.h) and
// the transfers the master plans.
#include <cstring>
#include <map>
#include <memory>

#include "absl/strings/match.h"
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

// Transfers of sync number k use transport operation 2^39 + k mod 2^19, above every all-reduce's
// (communicator.cc), with the tensor index as the step.
uint64_t SyncOperationId(int64_t number) {
  return (uint64_t{1} << 39) | (static_cast<uint64_t>(number) & ((uint64_t{1} << 19) - 1));
}

// The master's plan: [_, sync number, then kSyncTransferInts per transfer].
absl::StatusOr<std::vector<SyncTransfer>> ParseTransfers(const std::vector<int64_t>& plan,
                                                         size_t n_tensors) {
  if (plan.size() < 2 || (plan.size() - 2) % kSyncTransferInts != 0) {
    return absl::InternalError("malformed shared-state plan from the master");
  }
  std::vector<SyncTransfer> transfers;
  for (size_t at = 2; at < plan.size(); at += kSyncTransferInts) {
    SyncTransfer t{plan[at], plan[at + 1], plan[at + 2] != 0, static_cast<uint64_t>(plan[at + 3])};
    if (t.tensor < 0 || t.tensor >= static_cast<int64_t>(n_tensors)) {
      return absl::InternalError("shared-state plan names an unknown tensor");
    }
    transfers.push_back(t);
  }
  return transfers;
}

size_t TensorBytes(const TensorInfo& tensor) {
  return static_cast<size_t>(tensor.count) * DTypeSize(tensor.dtype);
}

// Once every transfer completed: each received tensor checked against the popular hash, then
// written into the caller's buffer.
absl::Status AdoptReceived(const std::vector<SyncTransfer>& transfers,
                           const std::vector<std::unique_ptr<uint8_t[]>>& staging,
                           SharedState& state, SyncBallot& ballot) {
  for (size_t i = 0; i < transfers.size(); ++i) {
    const SyncTransfer& t = transfers[i];
    if (!t.receive) continue;
    TensorInfo& tensor = state.tensors[t.tensor];
    const size_t bytes = TensorBytes(tensor);
    const uint64_t hash = ContentHash(staging[i].get(), bytes);
    if (hash != t.hash) {
      return absl::DataLossError(absl::StrCat(
          "tensor '", tensor.name, "' received from peer ", t.peer,
          " does not hash to the popular content (did the sender change it during the sync?)"));
    }
    if (bytes > 0) std::memcpy(tensor.data, staging[i].get(), bytes);
    ballot.tensors[t.tensor].hash = hash;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SyncInfo> Communicator::SyncSharedState(SharedState& state, SyncStrategy strategy) {
  RETURN_IF_ERROR(ValidateSharedState(state));
  RETURN_IF_ERROR(Usable());
  RETURN_IF_ERROR(NoOpsInFlight("sync_shared_state"));
  SyncBallot ballot;
  ballot.revision = state.revision;
  ballot.strategy = strategy;
  for (const TensorInfo& t : state.tensors) {
    SyncBallot::Tensor entry;
    entry.name = t.name;
    entry.count = t.count;
    entry.dtype = static_cast<int64_t>(t.dtype);
    entry.hash = ContentHash(t.data, static_cast<size_t>(t.count) * DTypeSize(t.dtype));
    entry.allow_content_inequality = t.allow_content_inequality;
    ballot.tensors.push_back(std::move(entry));
  }
  const absl::Time deadline = absl::Now() + operation_timeout_;
  SyncInfo info;
  while (true) {
    RETURN_IF_ERROR(Usable());
    AdoptTopology();
    const int64_t epoch = CurrentEpoch();
    std::vector<int64_t> arguments = {epoch, MillisecondsLeft(deadline)};
    std::string names;
    AppendBallot(ballot, arguments, names);
    std::shared_ptr<MasterLink> master = link();
    absl::Status status;
    auto plan = master->Call(MessageType::kSyncState, std::move(arguments), std::move(names),
                             deadline + kMasterAnswerGrace);
    if (!plan.ok()) {
      status = plan.status();
    } else {
      status = RunSyncTransfers(state, *plan, epoch, deadline, ballot, info);
      auto done = master->Call(MessageType::kSyncDone, {epoch, static_cast<int64_t>(status.code())},
                               std::string(status.message()), deadline);
      if (status.ok() && !done.ok()) status = done.status();
      if (status.ok()) {
        state.revision = static_cast<uint64_t>((*plan)[0]);
        return info;
      }
    }
    if (!IsRetryableFailure(status) || absl::Now() >= deadline) {
      const Result result = ResultOf(status) == Result::kInternalError && IsRetryableFailure(status)
                                ? Result::kRankConnectionLost
                                : ResultOf(status);
      const bool named = absl::StartsWith(status.message(), "sync_shared_state");
      return WithResult(absl::Status(status.code(), absl::StrCat(named ? "" : "sync_shared_state: ",
                                                                 status.message())),
                        result);
    }
    AwaitEpochAfter(epoch);
  }
}

absl::Status Communicator::RunSyncTransfers(SharedState& state, const std::vector<int64_t>& plan,
                                            int64_t epoch, absl::Time deadline, SyncBallot& ballot,
                                            SyncInfo& info) {
  ASSIGN_OR_RETURN(std::vector<SyncTransfer> transfers, ParseTransfers(plan, state.tensors.size()));
  const int64_t number = plan[1];
  std::vector<int64_t> ring;
  {
    MutexLock lock(mu_);
    ring = topology_.latest().ring;
  }
  if (ring.size() < 2) return absl::OkStatus();
  // Every member builds the epoch's connections, transfers or not: building is collective.
  ASSIGN_OR_RETURN(std::shared_ptr<Transport> mesh, mesh_.Get(epoch));
  if (transfers.empty()) return absl::OkStatus();
  // Every peer resolved before anything is posted: a refusal leaves nothing in flight.
  std::map<int64_t, int> rank_of;
  for (size_t i = 0; i < ring.size(); ++i) rank_of[ring[i]] = static_cast<int>(i);
  std::vector<int> ranks;
  for (const SyncTransfer& t : transfers) {
    auto peer = rank_of.find(t.peer);
    if (peer == rank_of.end()) {
      return absl::UnavailableError(absl::StrCat("peer ", t.peer, " of the plan left the group"));
    }
    ranks.push_back(peer->second);
  }
  Work work("elastic sync_shared_state", static_cast<int>(ring.size()), number);
  CollectiveContext ctx(*mesh, CollectiveKind::kBroadcast, SyncOperationId(number),
                        /*signature=*/0, std::max(deadline - absl::Now(), absl::ZeroDuration()),
                        &work);
  std::vector<WorkPtr> works;
  std::vector<std::unique_ptr<uint8_t[]>> staging(transfers.size());
  for (size_t i = 0; i < transfers.size(); ++i) {
    const SyncTransfer& t = transfers[i];
    const TensorInfo& tensor = state.tensors[t.tensor];
    const size_t bytes = TensorBytes(tensor);
    const auto step = static_cast<uint32_t>(t.tensor);
    if (t.receive) {
      staging[i].reset(new uint8_t[std::max<size_t>(bytes, 1)]);
      works.push_back(ctx.Recv(ranks[i], step, staging[i].get(), bytes));
    } else {
      works.push_back(ctx.Send(ranks[i], step, tensor.data, bytes));
    }
  }
  const absl::Status moved = ctx.WaitAll(works);
  const Work::Stats stats = work.stats();
  info.tx_bytes += stats.bytes_sent;
  info.rx_bytes += stats.bytes_received;
  if (!moved.ok()) {
    mesh->AbortOperation(SyncOperationId(number), moved);
    return moved;
  }
  return AdoptReceived(transfers, staging, state, ballot);
}

}  // namespace plexus::elastic
