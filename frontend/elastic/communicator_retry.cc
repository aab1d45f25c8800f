// Communicator::AllReduceMultipleWithRetry: rounds of launches pinned to one epoch, drained
// after a failure and re-run from the kept inputs until every operation committed in one epoch.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/core/mutex.h"
#include "base/core/status_macros.h"
#include "frontend/elastic/backup_pool.h"
#include "frontend/elastic/communicator.h"
#include "frontend/elastic/communicator_op.h"

namespace plexus::elastic {
namespace {

// Data phases one AllReduceMultipleWithRetry runs at once: the cores, at least 2.
int MaxMovingOps() {
  static const int cap = std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  return cap;
}

// Signals from one round's units: a unit holds one of the max_in_flight slots while it moves
// data; its decision by the master is awaited without holding one (the round trip would
// otherwise idle the links).
struct RoundEvents {
  explicit RoundEvents(size_t units) : data_done(units, false), decided(units, false) {}
  Mutex mu;
  std::condition_variable cv;
  std::vector<bool> data_done ABSL_GUARDED_BY(mu);
  std::vector<bool> decided ABSL_GUARDED_BY(mu);
};

}  // namespace

// all_reduce_multiple_with_retry's operations across rounds: their kept inputs, which epoch
// each committed in, and one round's launches and drain.
class Communicator::RetryBatch {
 public:
  RetryBatch(Communicator& comm, absl::Span<const ReduceOpDescriptor> ops)
      : comm_(comm),
        ops_(ops),
        originals_(ops.size()),
        bytes_(ops.size()),
        backed_up_(ops.size(), false),
        committed_(ops.size(), -1),
        fresh_(ops.size(), true) {
    for (size_t i = 0; i < ops.size(); ++i) {
      bytes_[i] = static_cast<size_t>(ops[i].descriptor.count) * DTypeSize(ops[i].descriptor.dtype);
      originals_[i] = comm_.backups_->Take(bytes_[i]);
    }
  }
  ~RetryBatch() {
    for (auto& buffer : originals_) comm_.backups_->Give(std::move(buffer));
  }

  // The ops still to run: every op not committed in the latest epoch any op committed in.
  std::vector<size_t> Todo() const {
    int64_t target = -1;
    for (int64_t epoch : committed_) target = std::max(target, epoch);
    std::vector<size_t> todo;
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (committed_[i] < 0 || committed_[i] != target) todo.push_back(i);
    }
    return todo;
  }

  // Every recv back to its op's input (where the input was kept).
  void RestoreAll() {
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (backed_up_[i] && bytes_[i] > 0) {
        std::memcpy(ops_[i].recv, originals_[i].data.get(), bytes_[i]);
      }
    }
  }

  // Launches `todo` in order in the current epoch, at most `moving_cap` moving data at once.
  // After a failure it launches nothing more and drains: then every peer starts the next round
  // from the same place, in the same order (peers holding different windows of tags could
  // otherwise wait on each other forever). Every launch runs in the epoch the round started in
  // (an op of a later epoch would make this peer's view of what committed where differ from the
  // others'). Returns a failure that retrying cannot mend; retryable ones leave ops to do.
  absl::Status RunRound(const std::vector<size_t>& todo, int moving_cap, ReduceInfo& info) {
    Round round;
    round.epoch = comm_.CurrentEpoch();
    round.units = Units(todo, round.epoch);
    round.events = std::make_shared<RoundEvents>(round.units.size());
    round.works.resize(round.units.size());
    while ((!round.failed && round.next < round.units.size()) || !round.undecided.empty()) {
      while (!round.failed && round.next < round.units.size() &&
             static_cast<int>(round.moving.size()) < moving_cap) {
        LaunchUnit(round, round.next++);
      }
      for (size_t u : AwaitProgress(round)) Decide(round, u, info);
    }
    // A unit that ran (rather than being refused at launch) left its originals whole.
    MutexLock lock(round.events->mu);
    for (size_t u = 0; u < round.units.size(); ++u) {
      if (!round.events->data_done[u]) continue;
      for (size_t i : round.units[u]) backed_up_[i] = true;
    }
    return round.fatal;
  }

 private:
  struct Round {
    int64_t epoch = -1;
    std::vector<std::vector<size_t>> units;  // What launches as one operation, in order.
    std::shared_ptr<RoundEvents> events;
    std::vector<WorkPtr> works;
    size_t next = 0;                     // The next unit to launch.
    std::set<size_t> moving, undecided;  // Units moving data; units not decided yet.
    bool failed = false;
    absl::Status fatal;
  };

  // Op i as a part of an operation: its inputs are kept in originals_[i] across attempts.
  OpPart PartOf(size_t i) const {
    OpPart part;
    part.descriptor = ops_[i].descriptor;
    part.send = ops_[i].send;
    part.recv = ops_[i].recv;
    part.bytes = bytes_[i];
    part.originals = originals_[i].data.get();
    part.originals_kept = backed_up_[i] ? bytes_[i] : 0;
    return part;
  }

  // The large all-reduces among peers of one host go first, together, back to back in
  // consecutive shared-memory turns with one exchange with the master for all of them
  // (RunsAsRound decides alike on every peer); every other op alone, over the rings beside them.
  std::vector<std::vector<size_t>> Units(const std::vector<size_t>& todo, int64_t epoch) const {
    std::vector<std::vector<size_t>> units;
    std::vector<size_t> in_round;
    for (size_t i : todo) {
      if (SuitsArena(PartOf(i))) in_round.push_back(i);
    }
    if (!comm_.RunsAsRound(epoch, in_round.size())) in_round.clear();
    if (!in_round.empty()) units.push_back(in_round);
    for (size_t i : todo) {
      if (std::find(in_round.begin(), in_round.end(), i) == in_round.end()) units.push_back({i});
    }
    return units;
  }

  void LaunchUnit(Round& round, size_t u) {
    std::vector<OpPart> parts;
    for (size_t i : round.units[u]) {
      // A failed attempt changed recv: back to the input first.
      if (!fresh_[i] && bytes_[i] > 0)
        std::memcpy(ops_[i].recv, originals_[i].data.get(), bytes_[i]);
      parts.push_back(PartOf(i));
      fresh_[i] = false;
    }
    round.moving.insert(u);
    round.undecided.insert(u);
    std::shared_ptr<RoundEvents> events = round.events;
    round.works[u] = comm_.Launch(std::move(parts), round.epoch, [events, u] {
      MutexLock lock(events->mu);
      events->data_done[u] = true;
      events->cv.notify_all();
    });
    round.works[u]->OnComplete([events, u](const absl::Status&) {
      MutexLock lock(events->mu);
      events->decided[u] = true;
      events->cv.notify_all();
    });
  }

  // Waits until a unit's data moved or its outcome came (each has its own deadline); frees
  // the slots of the units done moving and returns those decided since.
  std::vector<size_t> AwaitProgress(Round& round) {
    RoundEvents& events = *round.events;
    UniqueLock lock(events.mu);
    while (true) {
      bool progress = false;
      for (size_t r : round.moving) progress |= events.data_done[r] || events.decided[r];
      for (size_t r : round.undecided) progress |= events.decided[r];
      if (progress) break;
      events.cv.wait(lock);
    }
    for (auto it = round.moving.begin(); it != round.moving.end();) {
      it = events.data_done[*it] || events.decided[*it] ? round.moving.erase(it) : std::next(it);
    }
    std::vector<size_t> decided;
    for (size_t r : round.undecided) {
      if (events.decided[r]) decided.push_back(r);
    }
    return decided;
  }

  void Decide(Round& round, size_t u, ReduceInfo& info) {
    round.undecided.erase(u);
    const absl::Status status = round.works[u]->status();
    const Work::Stats stats = round.works[u]->stats();
    info.tx_bytes += stats.bytes_sent;
    info.rx_bytes += stats.bytes_received;
    if (status.ok()) info.local_world_size = stats.world_size;
    for (size_t i : round.units[u]) {
      committed_[i] = status.ok() ? round.epoch : -1;
      if (!status.ok()) fresh_[i] = true;  // The op restored recv itself.
    }
    if (status.ok()) return;
    round.failed = true;
    if (!IsRetryableFailure(status) && round.fatal.ok()) round.fatal = status;
  }

  Communicator& comm_;
  const absl::Span<const ReduceOpDescriptor> ops_;
  // The inputs of every attempt: recv as it was (in place), which also restores on failure.
  std::vector<BackupPool::Buffer> originals_;
  std::vector<size_t> bytes_;
  // Whether originals_[i] holds op i's input: filled by its first run as its data phase
  // overwrites recv (keep_originals.h), whole when that run ends.
  std::vector<bool> backed_up_;
  std::vector<int64_t> committed_;  // Epoch each op last succeeded in.
  std::vector<bool> fresh_;         // recv still holds the original contents.
};

absl::StatusOr<ReduceInfo> Communicator::AllReduceMultipleWithRetry(
    absl::Span<const ReduceOpDescriptor> ops, int max_in_flight) {
  if (max_in_flight < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("all_reduce_multiple_with_retry: max_in_flight ", max_in_flight, " < 1"));
  }
  std::set<uint64_t> tags;
  for (const ReduceOpDescriptor& op : ops) {
    RETURN_IF_ERROR(ValidateReduce(op.descriptor));
    if (!tags.insert(op.descriptor.tag).second) {
      return WithResult(
          absl::InvalidArgumentError(absl::StrCat("all_reduce_multiple_with_retry: tag ",
                                                  op.descriptor.tag, " appears twice")),
          Result::kInvalidArgument);
    }
  }
  RETURN_IF_ERROR(Usable());
  RetryBatch batch(*this, ops);
  // More data phases at once than cores only thrash (each reduces and copies); beyond that,
  // further units wait for a slot in launch order - the same order on every peer.
  const int moving_cap = std::min(max_in_flight, MaxMovingOps());
  ReduceInfo info;
  const absl::Time deadline = absl::Now() + operation_timeout_;
  while (true) {
    const std::vector<size_t> todo = batch.Todo();
    if (todo.empty()) return info;
    if (absl::Now() >= deadline) {
      batch.RestoreAll();
      return absl::DeadlineExceededError(absl::StrCat(
          "all_reduce_multiple_with_retry: ", todo.size(), " of ", ops.size(),
          " operations did not succeed on one set of peers within the operation timeout"));
    }
    if (absl::Status fatal = batch.RunRound(todo, moving_cap, info); !fatal.ok()) {
      batch.RestoreAll();
      return fatal;
    }
    RETURN_IF_ERROR(Usable());
  }
}

}  // namespace plexus::elastic
