// Communicator's all-reduces: launching one (or a round of all_reduce_multiple_with_retry's),
// the vote with the master around it, and the data phase over the rings or in shared-memory
// turns.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "algorithms/algorithm_table.h"
#include "algorithms/algorithms.h"
#include "algorithms/arena_slots.h"
#include "algorithms/collective_context.h"
#include "algorithms/keep_originals.h"
#include "base/core/deadline.h"
#include "base/core/logging.h"
#include "base/core/status_macros.h"
#include "base/transport/transport.h"
#include "frontend/elastic/backup_pool.h"
#include "frontend/elastic/communicator.h"
#include "frontend/elastic/communicator_op.h"
#include "frontend/elastic/master_link.h"
#include "frontend/elastic/op_runner.h"

namespace plexus::elastic {

using algorithms::AlgorithmTable;
using algorithms::AllReduceInPlace;
using algorithms::ArenaSlots;
using algorithms::CollectiveContext;
using algorithms::CollectiveKind;
using algorithms::CopyAside;
using algorithms::KeepRemainingOriginals;
using algorithms::MakeSignature;
using algorithms::QuantizedRingAllReduce;
using algorithms::SaveThenOverwrite;
using algorithms::ScratchArena;

namespace {

// The transport operation id of (tag, instance): below 2^39, unique for 2^19 uses of a tag per
// epoch (each epoch has a fresh transport).
uint64_t OperationId(const OpKey& key) {
  return ((static_cast<uint64_t>(key.instance) & ((1u << 19) - 1)) << 20) |
         static_cast<uint64_t>(key.tag);
}

const AlgorithmTable& ElasticAlgorithmTable() {
  static const AlgorithmTable table = [] {
    auto from_env = AlgorithmTable::FromEnvironment();
    return from_env.ok() ? *from_env : AlgorithmTable::Default();
  }();
  return table;
}

// Below this an operation runs over the rings: waiting for the master's turn would cost more
// than the arena saves.
constexpr size_t kArenaTurnMinBytes = 256 << 10;

// A round's tag at the master: above every user tag, and apart for rounds launched at once
// from several threads (their tags differ, so do their smallest).
int64_t RoundTag(const std::vector<ReduceDescriptor>& descriptors) {
  uint64_t smallest = kMaxTag;
  for (const ReduceDescriptor& d : descriptors) smallest = std::min(smallest, d.tag);
  return static_cast<int64_t>(kMaxTag + smallest);
}

std::string DescribeRound(const std::vector<ReduceDescriptor>& descriptors) {
  int64_t bytes = 0;
  std::string tags;
  for (const ReduceDescriptor& d : descriptors) {
    bytes += d.count * static_cast<int64_t>(DTypeSize(d.dtype));
    absl::StrAppend(&tags, tags.empty() ? "" : ",", d.tag);
  }
  return absl::StrCat("a round of ", descriptors.size(), " all-reduces, ", bytes,
                      " bytes in all (tags ", tags, ")");
}

}  // namespace

bool Communicator::SuitsArena(const OpPart& part) {
  if (part.bytes < kArenaTurnMinBytes ||
      part.descriptor.quantization.algorithm != QuantizationAlgorithm::kNone) {
    return false;
  }
  return ElasticAlgorithmTable().Select("all_reduce_same_host", part.bytes).needs_arena;
}

bool Communicator::RunsAsRound(int64_t epoch, size_t parts) {
  if (parts < 2) return false;
  auto mesh = mesh_.Get(epoch);
  if (!mesh.ok()) return true;
  return *mesh != nullptr && (*mesh)->shared_arena() != nullptr;
}

std::vector<uint64_t> Communicator::RingOperations(const Op& op) {
  if (op.turn < 0) return {OperationId(op.key)};
  std::vector<uint64_t> operations;
  for (size_t p = 0; p < op.parts.size(); ++p) {
    operations.push_back(TurnRingOperation(op.turn + static_cast<int64_t>(p)));
  }
  return operations;
}

absl::Status Communicator::MoveData(const std::shared_ptr<Op>& op, OpPart& part, Transport& mesh,
                                    absl::Time deadline, int64_t turn, absl::Status earlier) {
  SharedArena* arena = mesh.shared_arena();
  // In the arena, the part is the arena's alone: numbered by its turn, as every member does.
  const bool in_arena =
      turn >= 0 && arena != nullptr && ArenaSlots::Usable(*arena, static_cast<uint64_t>(turn) + 1);
  const uint64_t sequence = in_arena    ? static_cast<uint64_t>(turn) + 1
                            : turn >= 0 ? TurnRingOperation(turn)
                                        : OperationId(op->key);
  const uint64_t instance =
      turn >= 0 ? static_cast<uint64_t>(turn) + 1 : static_cast<uint64_t>(op->key.instance);
  // Each runner thread runs one operation at a time: its scratch is reused, not refaulted.
  thread_local ScratchArena scratch;
  CollectiveContext ctx(mesh, CollectiveKind::kAllReduce, sequence,
                        MakeSignature(CollectiveKind::kAllReduce, part.descriptor.dtype, instance,
                                      part.descriptor.count),
                        std::max(deadline - absl::Now(), absl::ZeroDuration()), op->work.get(),
                        &scratch);
  if (turn >= 0 && earlier.ok()) {
    MutexLock lock(mu_);
    if (op->decided) earlier = op->outcome.ok() ? absl::AbortedError("decided") : op->outcome;
  }
  if (in_arena) {
    arena->Announce(ctx.signature());  // Peers waiting there can tell which one this runs.
    ctx.UseSharedArena(arena);
    // Failed before this turn came: members already in the arena for it stop too.
    if (!earlier.ok()) return ArenaSlots(ctx, *arena).Fail(earlier);
  } else if (!earlier.ok()) {
    mesh.AbortOperation(sequence, earlier);
    return earlier;
  }
  // The algorithms wait on their own sends: the transport leaves a send the kernel could not
  // take at once to this thread's wait instead of waking a thread of its own for it.
  const ScopedSendsAwaited awaited;
  // recv's input is kept as the schedule overwrites it, for a failure to put back.
  ctx.KeepOriginals(part.originals, part.originals_kept);
  const QuantizationOptions& quantization = part.descriptor.quantization;
  absl::Status status;
  if (quantization.algorithm == QuantizationAlgorithm::kNone) {
    status = AllReduceInPlace(ctx, ElasticAlgorithmTable(), part.recv, part.descriptor.count,
                              part.descriptor.dtype, ReduceOp(part.descriptor.op));
  } else {
    KeepRemainingOriginals(ctx, part.recv, part.bytes);
    status = QuantizedRingAllReduce(ctx, part.recv, part.descriptor.count, part.descriptor.dtype,
                                    ReduceOp(part.descriptor.op),
                                    {quantization.algorithm, quantization.quantized_dtype});
  }
  part.originals_kept = ctx.originals_kept();
  return status;
}

absl::Status Communicator::MoveDataInTurn(const std::shared_ptr<Op>& op, Transport& mesh,
                                          absl::Time deadline) {
  int64_t turn;
  {
    UniqueLock lock(mu_);
    while (op->turn < 0 && !op->decided && absl::Now() < deadline) {
      changed_.wait_until(lock, SteadyDeadline(std::min(deadline - absl::Now(), absl::Seconds(1))));
    }
    if (op->turn < 0) {
      if (op->decided) return absl::AbortedError("decided before the data moved");
      return absl::DeadlineExceededError(
          "the master gave no shared-memory turn in time: not every member started it");
    }
    turn = op->turn;
  }
  const int64_t epoch = op->key.epoch;
  auto abandoned = [this, epoch] {
    MutexLock lock(mu_);
    return !lost_.ok() || topology_.epoch() != epoch;
  };
  // Runs on whichever thread holds the arena when this turn comes (see ArenaOrder). After a
  // part failed, the round's later parts fail their turns, so nobody waits in them.
  std::function<absl::Status()> body = [&] {
    absl::Status status;
    for (size_t p = 0; p < op->parts.size(); ++p) {
      absl::Status moved =
          MoveData(op, op->parts[p], mesh, deadline, turn + static_cast<int64_t>(p), status);
      if (status.ok()) status = std::move(moved);
    }
    return status;
  };
  return arena_order_.Run(epoch, turn, deadline, abandoned, body,
                          static_cast<int64_t>(op->parts.size()));
}

void Communicator::OnTurn(uint64_t generation, const OpKey& key, int64_t turn) {
  {
    MutexLock lock(mu_);
    if (generation != generation_) return;
    const std::shared_ptr<Op> op = in_flight_.Find(key);
    if (!op) return;
    op->turn = turn;
  }
  changed_.notify_all();
}

void Communicator::OnOutcome(uint64_t generation, const OpKey& key, const absl::Status& outcome) {
  std::shared_ptr<Transport> mesh;
  std::vector<uint64_t> operations;
  {
    MutexLock lock(mu_);
    if (generation != generation_) return;
    const std::shared_ptr<Op> found = in_flight_.Find(key);
    if (!found) return;
    Op& op = *found;
    op.decided = true;
    op.outcome = outcome;
    if (!outcome.ok()) {
      mesh = op.mesh;
      operations = RingOperations(op);
    }
  }
  changed_.notify_all();
  // Decided early: stop moving data.
  for (uint64_t operation : operations) {
    if (mesh) mesh->AbortOperation(operation, outcome);
  }
}

WorkPtr Communicator::AllReduceAsync(const void* send, void* recv,
                                     const ReduceDescriptor& descriptor) {
  std::vector<OpPart> parts(1);
  parts[0].descriptor = descriptor;
  parts[0].send = send;
  parts[0].recv = recv;
  return Launch(std::move(parts), -1, nullptr);
}

absl::StatusOr<ReduceInfo> Communicator::AllReduce(const void* send, void* recv,
                                                   const ReduceDescriptor& descriptor) {
  WorkPtr work = AllReduceAsync(send, recv, descriptor);
  RETURN_IF_ERROR(work->Wait(operation_timeout_ + absl::Seconds(30)));
  const Work::Stats stats = work->stats();
  return ReduceInfo{stats.world_size, stats.bytes_sent, stats.bytes_received};
}

absl::Status Communicator::CheckPart(OpPart& part) {
  const ReduceDescriptor& descriptor = part.descriptor;
  RETURN_IF_ERROR(ValidateReduce(descriptor));
  part.bytes = static_cast<size_t>(descriptor.count) * DTypeSize(descriptor.dtype);
  if (part.bytes > 0 && (part.send == nullptr || part.recv == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("all_reduce ", DescribeReduce(descriptor), ": null send or receive buffer"));
  }
  const auto* s = static_cast<const uint8_t*>(part.send);
  const auto* r = static_cast<const uint8_t*>(part.recv);
  if (s != r && s < r + part.bytes && r < s + part.bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("all_reduce ", DescribeReduce(descriptor),
                     ": send and receive buffers overlap without being the same buffer"));
  }
  return absl::OkStatus();
}

absl::Status Communicator::Register(const std::shared_ptr<Op>& op,
                                    const std::vector<ReduceDescriptor>& descriptors,
                                    int64_t required_epoch) {
  const bool round = descriptors.size() > 1;
  MutexLock lock(mu_);
  // Checked again under the lock that registers the op: a link lost since Usable() has
  // already decided every op it found, and would never decide this one.
  RETURN_IF_ERROR(lost_);
  for (const ReduceDescriptor& descriptor : descriptors) {
    if (in_flight_.Contains(descriptor.tag)) {
      return WithResult(absl::InvalidArgumentError(absl::StrCat(
                            "all_reduce ", DescribeReduce(descriptor), ": an all-reduce with tag ",
                            descriptor.tag, " is already in flight")),
                        Result::kInvalidUsage);
    }
  }
  if (required_epoch >= 0 && required_epoch != topology_.epoch()) {
    return WithResult(absl::UnavailableError(
                          absl::StrCat("all_reduce ", op->description, ": epoch ", required_epoch,
                                       " of the peer group is over (now ", topology_.epoch(), ")")),
                      Result::kRankConnectionLost);
  }
  topology_.Adopt();  // Launching is the caller's call: its view moves to this epoch.
  op->key.group = topology_.latest().group;
  op->key.epoch = topology_.epoch();
  op->key.tag = round ? RoundTag(descriptors) : static_cast<int64_t>(descriptors[0].tag);
  op->key.instance = in_flight_.NextInstance(static_cast<uint64_t>(op->key.tag), op->key.epoch);
  op->work = std::make_shared<Work>(
      "elastic all_reduce", static_cast<int>(topology_.latest().ring.size()), op->key.instance);
  in_flight_.Add(static_cast<uint64_t>(op->key.tag), op);
  if (round) {
    for (const ReduceDescriptor& descriptor : descriptors) in_flight_.Add(descriptor.tag, op);
  }
  return absl::OkStatus();
}

void Communicator::StageInputs(std::vector<OpPart>& parts) {
  for (OpPart& part : parts) {
    part.caller_originals = part.originals != nullptr;
    if (part.originals == nullptr) {
      part.originals_kept = 0;
      if (part.bytes > 0) {
        part.backup = backups_->Take(part.bytes);
        part.originals = part.backup.data.get();
      }
    }
    if (part.send == part.recv || part.bytes == 0) continue;
    if (part.originals_kept < part.bytes) {
      SaveThenOverwrite(static_cast<uint8_t*>(part.recv), static_cast<const uint8_t*>(part.send),
                        part.originals, part.bytes);
      part.originals_kept = part.bytes;
    } else {
      std::memcpy(part.recv, part.send, part.bytes);
    }
  }
}

WorkPtr Communicator::Launch(std::vector<OpPart> parts, int64_t required_epoch,
                             std::function<void()> on_data_done) {
  std::vector<ReduceDescriptor> descriptors;
  for (const OpPart& part : parts) descriptors.push_back(part.descriptor);
  auto refuse = [&](absl::Status status) {
    return Work::Finished(std::move(status), "elastic all_reduce");
  };
  for (OpPart& part : parts) {
    if (absl::Status status = CheckPart(part); !status.ok()) return refuse(status);
  }
  if (absl::Status status = Usable(); !status.ok()) return refuse(status);
  auto op = std::make_shared<Op>();
  op->description =
      parts.size() > 1 ? DescribeRound(descriptors) : DescribeReduce(descriptors.at(0));
  op->on_data_done = std::move(on_data_done);
  if (absl::Status status = Register(op, descriptors, required_epoch); !status.ok()) {
    return refuse(status);
  }
  StageInputs(parts);
  op->parts = std::move(parts);
  WorkPtr work = op->work;
  runner_->Submit([this, op] { Run(op); });
  return work;
}

void Communicator::Run(const std::shared_ptr<Op>& op) {
  const absl::Time deadline = absl::Now() + operation_timeout_;
  std::shared_ptr<MasterLink> master = link();
  absl::Status local;
  auto mesh = mesh_.Get(op->key.epoch);
  if (!mesh.ok()) local = mesh.status();
  // Turns for every part, or none: a round runs only in turns (RunsAsRound chose so).
  bool in_turns = local.ok() && *mesh != nullptr && (*mesh)->shared_arena() != nullptr;
  for (const OpPart& part : op->parts) in_turns = in_turns && SuitsArena(part);
  if (local.ok() && *mesh != nullptr && op->round() && !in_turns) {
    local = absl::InternalError("a round of all-reduces found no shared-memory arena to run in");
  }
  // A peer that cannot move data reports that in its kOpDone alone: a start it could not keep
  // would only make the peers disagree about the operation instead.
  if (master && local.ok()) {
    Message start{MessageType::kOpStart, {}, op->description};
    AppendOpKey(op->key, start.ints);
    for (const OpPart& part : op->parts) {
      const std::vector<int64_t> signature = OpSignatureInts(part.descriptor);
      start.ints.insert(start.ints.end(), signature.begin(), signature.end());
    }
    start.ints.push_back(in_turns ? static_cast<int64_t>(op->parts.size()) : 0);
    if (absl::Status sent = master->Send(start); !sent.ok()) local = sent;
  }
  if (local.ok() && *mesh != nullptr) {
    bool decided;
    {
      MutexLock lock(mu_);
      op->mesh = *mesh;
      decided = op->decided;
    }
    if (decided) {
      local = absl::AbortedError("decided before the data moved");
    } else if (in_turns) {
      local = MoveDataInTurn(op, **mesh, deadline);
    } else {
      local = MoveData(op, op->parts[0], **mesh, deadline, -1, absl::OkStatus());
    }
  }
  if (LogEnabled(LogLevel::kDebug)) {
    Log(LogLevel::kDebug, absl::StrCat("elastic: peer ", master ? master->peer_id() : 0, " tag ",
                                       op->key.tag, " #", op->key.instance, " epoch ",
                                       op->key.epoch, " moved its data: ", local.ToString()));
  }
  if (op->on_data_done) op->on_data_done();
  Message done{MessageType::kOpDone, {}, std::string(local.message())};
  AppendOpKey(op->key, done.ints);
  done.ints.push_back(static_cast<int64_t>(local.code()));
  if (master) (void)master->Send(done);
  Finish(op, local, AwaitDecision(op, deadline));
}

absl::Status Communicator::AwaitDecision(const std::shared_ptr<Op>& op, absl::Time deadline) {
  UniqueLock lock(mu_);
  const absl::Time decide_by = deadline + absl::Seconds(10);
  while (!op->decided && lost_.ok() && absl::Now() < decide_by) {
    changed_.wait_until(lock, SteadyDeadline(std::min(decide_by - absl::Now(), absl::Seconds(1))));
  }
  if (!op->decided) {
    op->decided = true;
    op->outcome =
        lost_.ok() ? absl::DeadlineExceededError("the master did not decide in time") : lost_;
  }
  op->mesh.reset();
  return op->outcome;
}

void Communicator::Finish(const std::shared_ptr<Op>& op, const absl::Status& local,
                          absl::Status outcome) {
  if (!outcome.ok()) {
    if (IsRetryableFailure(outcome)) AdoptTopology();  // The peers changed: the caller sees it.
    // The kept prefix was overwritten; recv still holds the rest.
    for (OpPart& part : op->parts) {
      if (part.originals_kept > 0) std::memcpy(part.recv, part.originals, part.originals_kept);
    }
    if (!local.ok() && local.code() != outcome.code()) {
      outcome = WithResult(
          absl::Status(outcome.code(),
                       absl::StrCat(outcome.message(), " (here: ", local.message(), ")")),
          ResultOf(outcome));
    }
    outcome = WithResult(
        absl::Status(outcome.code(), absl::StrCat("all_reduce ", op->description, " in epoch ",
                                                  op->key.epoch, ": ", outcome.message())),
        ResultOf(outcome));
  }
  for (OpPart& part : op->parts) {
    if (part.caller_originals && part.originals_kept < part.bytes) {
      // A later attempt re-runs from the originals: recv's untouched rest completes them.
      CopyAside(part.originals + part.originals_kept,
                static_cast<const uint8_t*>(part.recv) + part.originals_kept,
                part.bytes - part.originals_kept);
    }
    backups_->Give(std::move(part.backup));
  }
  {
    MutexLock lock(mu_);
    in_flight_.Remove(static_cast<uint64_t>(op->key.tag), op);
    if (op->round()) {
      for (const OpPart& part : op->parts) in_flight_.Remove(part.descriptor.tag, op);
    }
  }
  changed_.notify_all();
  op->work->Complete(outcome);
}

}  // namespace plexus::elastic
