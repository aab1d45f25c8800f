#include "frontend/elastic/arena_order.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/core/deadline.h"

namespace plexus::elastic {

namespace {

// How many turns after its own one thread runs before it returns to its own caller: each
// delays its own operation's report to the master.
constexpr int kMostTurnsRunForOthers = 8;

}  // namespace

void ArenaOrder::RunReady(UniqueLock& lock, int64_t own) {
  int for_others = 0;
  while (!running_) {
    auto it = waiting_.find(next_);
    if (it == waiting_.end()) return;
    if (it->first != own && for_others++ >= kMostTurnsRunForOthers) return;
    Entry* entry = it->second;
    waiting_.erase(it);
    entry->taken = true;
    running_ = true;
    const int64_t epoch = epoch_;
    const uint64_t generation = generation_;
    lock.unlock();
    absl::Status status = (*entry->body)();
    lock.lock();
    entry->status = std::move(status);
    entry->done = true;
    running_ = false;
    // A new epoch (or a Reset) began meanwhile: its count starts at 0.
    if (epoch_ == epoch && generation_ == generation) next_ += entry->turns;
    advanced_.notify_all();
  }
}

absl::Status ArenaOrder::Run(int64_t epoch, int64_t turn, absl::Time deadline,
                             const std::function<bool()>& abandoned,
                             const std::function<absl::Status()>& body, int64_t turns) {
  UniqueLock lock(mu_);
  const uint64_t generation = generation_;
  if (epoch > epoch_) {  // The first turn of a new epoch: the old one's turns are over.
    epoch_ = epoch;
    next_ = 0;
    waiting_.clear();  // Their callers see the epoch moved on.
  }
  if (epoch < epoch_) {
    return absl::UnavailableError(
        absl::StrCat("epoch ", epoch, " is over (the arena is in epoch ", epoch_, ")"));
  }
  Entry entry{&body, std::max<int64_t>(turns, 1)};
  waiting_[turn] = &entry;
  while (true) {
    RunReady(lock, turn);
    if (entry.done) return entry.status;
    const absl::Time now = absl::Now();
    const bool gone = epoch_ != epoch || generation_ != generation || now >= deadline || [&] {
      lock.unlock();
      const bool result = abandoned();
      lock.lock();
      return result;
    }();
    if (entry.done) return entry.status;
    if (gone && !entry.taken) {
      // Nobody runs it (a taken one is waited for: its body refers to this frame): withdraw.
      if (epoch_ == epoch && generation_ == generation) {
        auto it = waiting_.find(turn);
        if (it != waiting_.end() && it->second == &entry) waiting_.erase(it);
      }
      if (now >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("waited for shared-memory turn ", turn,
                                                        " of epoch ", epoch, "; turn ", next_,
                                                        " has not run here"));
      }
      return absl::UnavailableError(absl::StrCat("epoch ", epoch, " ended while turn ", turn,
                                                 " waited for the shared-memory arena"));
    }
    const absl::Duration slice =
        entry.taken ? absl::Milliseconds(20) : std::min(deadline - now, absl::Milliseconds(20));
    advanced_.wait_until(lock, SteadyDeadline(slice));
  }
}

void ArenaOrder::Reset() {
  MutexLock lock(mu_);
  ++generation_;
  epoch_ = -1;
  next_ = 0;
  waiting_.clear();  // Their callers see the generation moved on.
  advanced_.notify_all();
}

}  // namespace plexus::elastic
