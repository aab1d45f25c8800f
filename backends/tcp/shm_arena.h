// The SharedArena of a tcp transport whose peers all share this host: one area per rank in the
// rank's shared-memory segment (shm_link.h), a control block - the published value and a
// futex word for sleepers - then the region the algorithms use.
#ifndef PLEXUS_BACKENDS_TCP_SHM_ARENA_H_
#define PLEXUS_BACKENDS_TCP_SHM_ARENA_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "base/core/mutex.h"
#include "base/transport/shared_arena.h"

namespace plexus::tcp {

inline constexpr size_t kArenaControlBytes = 4096;
inline size_t ArenaAreaBytes(size_t region_bytes) { return kArenaControlBytes + region_bytes; }

class ShmArena : public SharedArena {
 public:
  // areas[r]: rank r's area (ArenaAreaBytes(region_bytes) long) as mapped in this process.
  ShmArena(int rank, std::vector<uint8_t*> areas, size_t region_bytes);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(areas_.size()); }
  size_t region_bytes() const override { return region_bytes_; }
  uint8_t* region(int rank) const override { return areas_[rank] + kArenaControlBytes; }
  uint64_t Published(int rank) const override;
  void Publish(uint64_t value) override;
  void PublishFailure(absl::StatusCode code, uint64_t sequence) override;
  uint64_t FailedSequence(int rank) const override;
  uint64_t Announced(int rank) const override;
  void Announce(uint64_t word) override;
  absl::StatusOr<uint64_t> WaitFor(int peer, uint64_t value, absl::Time deadline,
                                   absl::FunctionRef<bool(uint64_t)> stop) override;

  // Ends every present and future wait with `status` (a lost peer, an aborted transport).
  void Break(const absl::Status& status);
  // Marks this rank as gone (failed with Unavailable) before it shuts down, so a peer still
  // waiting on it stops at once.
  void Leave();

  // How often a waiter found it shared its CPU with the peer it waited for and moved.
  int64_t moves() const { return moves_.load(std::memory_order_relaxed); }

 private:
  // Each on its own cache line: peers spin on `published` while the owner announces.
  struct Control {
    alignas(64) std::atomic<uint64_t> published;
    alignas(64) std::atomic<uint64_t> announced;
    // 0 until this rank fails; written before the failure is published, and only then, so
    // peers that look at it before every collective keep it cached without taking it away.
    alignas(64) std::atomic<uint64_t> failed_sequence;
    alignas(64) std::atomic<uint32_t> wake;  // Futex word: bumped when a sleeper must wake.
    std::atomic<uint32_t> sleepers;          // Waiters asleep (or about to be) on `wake`.
    // 1 + the CPU this rank last waited on (written when a wait outlasts the plain spin).
    alignas(64) std::atomic<int32_t> cpu;
  };
  Control& control(int rank) const { return *reinterpret_cast<Control*>(areas_[rank]); }
  absl::Status BrokenStatus();
  // Stores `value` into this rank's `word` and wakes the peers asleep on this rank.
  void Store(std::atomic<uint64_t>& word, uint64_t value);
  void WakeSleepers();
  // Records the CPU this rank waits on; if `peer` last waited on the same one, moves the
  // calling thread to another CPU it may run on (its affinity is left as it was).
  void MoveIfSharingACoreWith(int peer, absl::Time now);
  // WaitFor past its spin: sleeps on `theirs` until a publish, a failure, `stop` or the
  // deadline (at most kLongestSleep at a time).
  void SleepOn(Control& theirs, uint64_t value, absl::Time deadline, absl::Time now,
               absl::FunctionRef<bool(uint64_t)> stop);

  const int rank_;
  const std::vector<uint8_t*> areas_;
  const size_t region_bytes_;
  const bool light_publish_;  // Release stores; sleepers fence every core (membarrier).
  const absl::Duration spin_without_yield_;
  absl::Time next_move_ = absl::InfinitePast();  // Waits run one at a time.
  std::atomic<int64_t> moves_{0};
  std::atomic<bool> broken_{false};
  Mutex mu_;
  absl::Status broken_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace plexus::tcp

#endif  // PLEXUS_BACKENDS_TCP_SHM_ARENA_H_
