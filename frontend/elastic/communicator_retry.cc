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

}  // namespace

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
  const size_t n = ops.size();
  // The inputs of every attempt: recv as it was (in place), which also restores on failure.
  std::vector<BackupPool::Buffer> originals(n);
  std::vector<size_t> bytes(n);
  for (size_t i = 0; i < n; ++i) {
    bytes[i] = static_cast<size_t>(ops[i].descriptor.count) * DTypeSize(ops[i].descriptor.dtype);
    originals[i] = backups_->Take(bytes[i]);
  }
  struct ReturnToPool {
    BackupPool& pool;
    std::vector<BackupPool::Buffer>& buffers;
    ~ReturnToPool() {
      for (auto& buffer : buffers) pool.Give(std::move(buffer));
    }
  } return_to_pool{*backups_, originals};
  // Whether originals[i] holds op i's input: filled by its first run as its data phase
  // overwrites recv (keep_originals.h), whole when that run ends.
  std::vector<bool> backed_up(n, false);
  auto restore_all = [&] {
    for (size_t i = 0; i < n; ++i) {
      if (backed_up[i] && bytes[i] > 0) std::memcpy(ops[i].recv, originals[i].data.get(), bytes[i]);
    }
  };
  // Op i as a part of an operation: its inputs are kept in originals[i] across attempts.
  auto part_of = [&](size_t i) {
    OpPart part;
    part.descriptor = ops[i].descriptor;
    part.send = ops[i].send;
    part.recv = ops[i].recv;
    part.bytes = bytes[i];
    part.originals = originals[i].data.get();
    part.originals_kept = backed_up[i] ? bytes[i] : 0;
    return part;
  };
  std::vector<int64_t> committed(n, -1);  // Epoch each op last succeeded in.
  std::vector<bool> fresh(n, true);       // recv still holds the original contents.
  ReduceInfo info;
  const absl::Time deadline = absl::Now() + operation_timeout_;
  while (true) {
    int64_t target = -1;
    for (int64_t epoch : committed) target = std::max(target, epoch);
    std::vector<size_t> todo;
    for (size_t i = 0; i < n; ++i) {
      if (committed[i] < 0 || committed[i] != target) todo.push_back(i);
    }
    if (todo.empty()) return info;
    if (absl::Now() >= deadline) {
      restore_all();
      return absl::DeadlineExceededError(absl::StrCat(
          "all_reduce_multiple_with_retry: ", todo.size(), " of ", n,
          " operations did not succeed on one set of peers within the operation timeout"));
    }
    // Launch in todo order, at most max_in_flight at once. After a failure launch nothing more
    // and drain: then every peer starts the next round from the same place, in the same order
    // (peers holding different windows of tags could otherwise wait on each other forever).
    // Every launch of a round runs in the epoch the round started in (an op of a later epoch
    // would make this peer's view of what committed where differ from the others').
    const int64_t round_epoch = CurrentEpoch();
    // What is launched as one operation: the large all-reduces among peers of one host go
    // first, together, back to back in consecutive shared-memory turns with one exchange with
    // the master for all of them (RunsAsRound decides alike on every peer); every other op
    // alone, over the rings beside them.
    std::vector<std::vector<size_t>> units;
    {
      std::vector<size_t> in_round;
      for (size_t i : todo) {
        if (SuitsArena(part_of(i))) in_round.push_back(i);
      }
      if (!RunsAsRound(round_epoch, in_round.size())) in_round.clear();
      if (!in_round.empty()) units.push_back(in_round);
      for (size_t i : todo) {
        if (std::find(in_round.begin(), in_round.end(), i) == in_round.end()) units.push_back({i});
      }
    }
    // More data phases at once than cores only thrash (each reduces and copies); beyond that,
    // further units wait for a slot in launch order - the same order on every peer.
    const int moving_cap = std::min(max_in_flight, MaxMovingOps());
    // A unit holds one of the max_in_flight slots while it moves data; its decision by the
    // master is awaited without holding one (the round trip would otherwise idle the links).
    struct Events {
      explicit Events(size_t units) : data_done(units, false), decided(units, false) {}
      Mutex mu;
      std::condition_variable cv;
      std::vector<bool> data_done ABSL_GUARDED_BY(mu);
      std::vector<bool> decided ABSL_GUARDED_BY(mu);
    };
    auto events = std::make_shared<Events>(units.size());
    std::vector<WorkPtr> works(units.size());
    size_t next = 0;
    std::set<size_t> moving, undecided;
    bool failed = false;
    absl::Status fatal;
    while ((!failed && next < units.size()) || !undecided.empty()) {
      while (!failed && next < units.size() && static_cast<int>(moving.size()) < moving_cap) {
        const size_t u = next++;
        std::vector<OpPart> parts;
        for (size_t i : units[u]) {
          if (!fresh[i] && bytes[i] > 0) {
            std::memcpy(ops[i].recv, originals[i].data.get(), bytes[i]);
          }
          parts.push_back(part_of(i));
          fresh[i] = false;
        }
        moving.insert(u);
        undecided.insert(u);
        works[u] = Launch(std::move(parts), round_epoch, [events, u] {
          MutexLock lock(events->mu);
          events->data_done[u] = true;
          events->cv.notify_all();
        });
        works[u]->OnComplete([events, u](const absl::Status&) {
          MutexLock lock(events->mu);
          events->decided[u] = true;
          events->cv.notify_all();
        });
      }
      std::vector<size_t> decided_now;
      {
        UniqueLock lock(events->mu);
        // Until a unit's data moved or its outcome came (each has its own deadline).
        while (true) {
          bool progress = false;
          for (size_t r : moving) progress |= events->data_done[r] || events->decided[r];
          for (size_t r : undecided) progress |= events->decided[r];
          if (progress) break;
          events->cv.wait(lock);
        }
        for (auto it = moving.begin(); it != moving.end();) {
          it = events->data_done[*it] || events->decided[*it] ? moving.erase(it) : std::next(it);
        }
        for (size_t r : undecided) {
          if (events->decided[r]) decided_now.push_back(r);
        }
      }
      for (size_t u : decided_now) {
        undecided.erase(u);
        const absl::Status status = works[u]->status();
        const Work::Stats stats = works[u]->stats();
        info.tx_bytes += stats.bytes_sent;
        info.rx_bytes += stats.bytes_received;
        if (status.ok()) info.local_world_size = stats.world_size;
        for (size_t i : units[u]) {
          committed[i] = status.ok() ? round_epoch : -1;
          if (!status.ok()) fresh[i] = true;  // The op restored recv itself.
        }
        if (!status.ok()) {
          failed = true;
          if (!IsRetryableFailure(status) && fatal.ok()) fatal = status;
        }
      }
    }
    {
      // A unit that ran (rather than being refused at launch) left its originals whole.
      MutexLock lock(events->mu);
      for (size_t u = 0; u < units.size(); ++u) {
        if (!events->data_done[u]) continue;
        for (size_t i : units[u]) backed_up[i] = true;
      }
    }
    if (!fatal.ok()) {
      restore_all();
      return fatal;
    }
    RETURN_IF_ERROR(Usable());
  }
}

}  // namespace plexus::elastic
