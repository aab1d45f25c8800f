#include "backends/tcp/shm_arena.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "backends/tcp/wait_policy.h"
#include "base/core/deadline.h"

namespace plexus::tcp {
namespace {

// Polling the peer's value this long before sleeping.
constexpr absl::Duration kSpinBeforeSleep = absl::Microseconds(50);
// Of which this long without yielding the core, where every rank here has a core to itself.
constexpr absl::Duration kSpinWithoutYield = absl::Microseconds(5);
// A sleeper looks again at least this often; a lost peer also wakes it at once (Break).
constexpr absl::Duration kLongestSleep = absl::Milliseconds(100);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Not FUTEX_PRIVATE: the word lives in memory shared between processes.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, absl::Duration timeout) {
  const timespec ts = absl::ToTimespec(timeout);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Publishing must be ordered before the look at `sleepers`, or a waiter that counted itself
// there just then sleeps through the publish. A full fence on every publish stalls until the
// peer's core gives up the line; instead the (rare) sleeper makes every core running these
// processes fence, through membarrier(2), and publishers keep to plain stores.
bool RegisterAsymmetricFence() {
  static const bool registered = [] {
    const long commands = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (commands < 0 || (commands & MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0) return false;
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
  }();
  return registered;
}

// Where ranks outnumber the cores they may run on, a waiter yields at once: its peer may need
// the core it spins on.
bool CoresForEveryRank(int ranks) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return false;
  return CPU_COUNT(&cpus) >= ranks;
}

}  // namespace

ShmArena::ShmArena(int rank, std::vector<uint8_t*> areas, size_t region_bytes)
    : rank_(rank),
      areas_(std::move(areas)),
      region_bytes_(region_bytes),
      light_publish_(RegisterAsymmetricFence()),
      spin_without_yield_(CoresForEveryRank(static_cast<int>(areas_.size()))
                              ? kSpinWithoutYield
                              : absl::ZeroDuration()) {
  static_assert(sizeof(Control) <= kArenaControlBytes);
}

uint64_t ShmArena::Published(int rank) const {
  return control(rank).published.load(std::memory_order_acquire);
}

// The order is spelled out in each branch: given a variable, compilers fence as for seq_cst.
void ShmArena::Store(std::atomic<uint64_t>& word, uint64_t value) {
  if (light_publish_) {
    word.store(value, std::memory_order_release);
  } else {
    word.store(value, std::memory_order_seq_cst);
  }
  WakeSleepers();
}

void ShmArena::Publish(uint64_t value) { Store(control(rank_).published, value); }

void ShmArena::PublishFailure(absl::StatusCode code, uint64_t sequence) {
  control(rank_).failed_sequence.store(sequence, std::memory_order_relaxed);
  Publish(ArenaFailure(Published(rank_), code));  // Releases the sequence with the flag.
}

uint64_t ShmArena::FailedSequence(int rank) const {
  return control(rank).failed_sequence.load(std::memory_order_relaxed);
}

uint64_t ShmArena::Announced(int rank) const {
  return control(rank).announced.load(std::memory_order_acquire);
}

void ShmArena::Announce(uint64_t word) { Store(control(rank_).announced, word); }

// After a store of what a waiter looks at. A waiter counts itself in `sleepers`, fences (every
// core, with the membarrier; its own, without), then reads `wake` and looks again, so either
// it sees the store or this sees it and bumps `wake`, which makes its futex wait return at once.
void ShmArena::WakeSleepers() {
  Control& mine = control(rank_);
  // Program order suffices against the waiter's membarrier; the compiler must keep it too.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const uint32_t sleepers = light_publish_ ? mine.sleepers.load(std::memory_order_relaxed)
                                           : mine.sleepers.load(std::memory_order_seq_cst);
  if (sleepers == 0) return;
  mine.wake.fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(&mine.wake);
}

absl::Status ShmArena::BrokenStatus() {
  MutexLock lock(mu_);
  return broken_status_;
}

absl::StatusOr<uint64_t> ShmArena::WaitFor(int peer, uint64_t value, absl::Time deadline,
                                           absl::FunctionRef<bool(uint64_t)> stop) {
  Control& theirs = control(peer);
  absl::Time spin_until = absl::InfinitePast();  // Read the clock only once a wait is long.
  absl::Time yield_from;
  bool yielding = false;
  const bool core_per_rank = spin_without_yield_ > absl::ZeroDuration();
  WaitPolicy& policy = WaitPolicy::Shared();
  // Every wait counts, however it ends (wait_policy.h); a look at the clock costs ~25 ns.
  struct Counted {
    WaitPolicy& policy;
    ~Counted() { policy.WaitEnded(FastNow()); }
  } counted{policy};
  // Where ranks outnumber cores the peer waited for is often behind this rank on its core: a
  // few looks, then the clock and a yield.
  const int quick_looks = core_per_rank ? 64 : 4;
  while (true) {
    uint64_t seen = theirs.published.load(std::memory_order_acquire);
    // Look a few times before paying for the clock and a yield: a peer a step behind is
    // usually there within a fraction of a microsecond.
    for (int i = 0; i < quick_looks && seen < value && (seen & kArenaFailed) == 0; ++i) {
      CpuRelax();
      seen = theirs.published.load(std::memory_order_acquire);
    }
    if (seen >= value || (seen & kArenaFailed) != 0) return seen;
    if (stop(theirs.announced.load(std::memory_order_acquire))) return seen;
    if (broken_.load(std::memory_order_acquire)) return BrokenStatus();
    const absl::Time now = FastNow();
    if (spin_until == absl::InfinitePast()) {
      // Spin first unless sleeping at once has been faster (wait_policy.h).
      spin_until = policy.SpinNow(now) ? now + kSpinBeforeSleep : now;
      yield_from = now + spin_without_yield_;
    }
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank_, " waited in shared memory for rank ", peer,
                       " to reach step ", value, " (it is at ", seen, ")"));
    }
    if (now < spin_until && now >= yield_from && !yielding) {
      yielding = true;
      // Ranks that could each have a core but share one hand it back and forth at every step
      // (12 us a turn here instead of well under 1). Linux may leave two busy spinners together
      // for tens of ms (it treats them as cache-hot, and a wake-up need not look beyond the
      // waker's cache domain), so the waiter moves itself.
      if (core_per_rank) MoveIfSharingACoreWith(peer, now);
    }
    if (now < spin_until) {
      if (yielding) sched_yield();
      continue;
    }
    SleepOn(theirs, value, deadline, now, stop);
  }
}

void ShmArena::SleepOn(Control& theirs, uint64_t value, absl::Time deadline, absl::Time now,
                       absl::FunctionRef<bool(uint64_t)> stop) {
  // Announce the sleep, then look once more: a publish after the look changes `wake`, so the
  // futex wait returns at once instead of missing it.
  theirs.sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (light_publish_) syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0);
  const uint32_t wake = theirs.wake.load(std::memory_order_seq_cst);
  const uint64_t seen = theirs.published.load(std::memory_order_seq_cst);
  if (seen < value && (seen & kArenaFailed) == 0 && !broken_.load(std::memory_order_acquire) &&
      !stop(theirs.announced.load(std::memory_order_seq_cst))) {
    FutexWait(&theirs.wake, wake, std::min(deadline - now, kLongestSleep));
  }
  theirs.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

void ShmArena::MoveIfSharingACoreWith(int peer, absl::Time now) {
  const int cpu = sched_getcpu();
  if (cpu < 0) return;
  std::atomic<int32_t>& mine = control(rank_).cpu;
  // Stored plus one: 0, a fresh segment's zeros, is no CPU.
  if (mine.load(std::memory_order_relaxed) != cpu + 1) {
    mine.store(cpu + 1, std::memory_order_relaxed);
  }
  if (control(peer).cpu.load(std::memory_order_relaxed) != cpu + 1) return;
  if (now < next_move_) return;  // At most one move a millisecond, should it not help.
  next_move_ = now + absl::Milliseconds(1);
  // Off this CPU and straight back to the caller's own affinity: the kernel migrates the thread
  // at once and then has no reason to move it back.
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) < 2 ||
      !CPU_ISSET(cpu, &allowed)) {
    return;
  }
  cpu_set_t others = allowed;
  CPU_CLR(cpu, &others);
  if (sched_setaffinity(0, sizeof(others), &others) != 0) return;
  sched_setaffinity(0, sizeof(allowed), &allowed);
  moves_.fetch_add(1, std::memory_order_relaxed);
  const int moved_to = sched_getcpu();
  if (moved_to >= 0) mine.store(moved_to + 1, std::memory_order_relaxed);
}

void ShmArena::Leave() {
  const uint64_t last = Published(rank_);
  if ((last & kArenaFailed) == 0) PublishFailure(absl::StatusCode::kUnavailable, kArenaLeft);
}

void ShmArena::Break(const absl::Status& status) {
  {
    MutexLock lock(mu_);
    if (!broken_status_.ok()) return;
    broken_status_ = status.ok() ? absl::AbortedError("shared-memory arena closed") : status;
  }
  broken_.store(true, std::memory_order_release);
  for (int r = 0; r < size(); ++r) {
    // Wakes our own sleepers on that word (and, harmlessly, anyone else's).
    control(r).wake.fetch_add(1, std::memory_order_seq_cst);
    FutexWakeAll(&control(r).wake);
  }
}

}  // namespace plexus::tcp
