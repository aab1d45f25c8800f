// ArenaOrder: the order in which one peer's operations use its group's shared-memory arena.
// The arena serves one collective at a time, and peers may launch operations in any order,
// so the master hands each large operation a turn once every member started it (kOpTurn);
// each peer then runs them one at a time in turn order, one epoch after another.
//
// A thread that finishes a turn runs the next one itself when it is already waiting, as the
// process group's executor runs its queue: waking that turn's own thread instead costs a
// context switch on every member, in the arena's critical path.
#ifndef PLEXUS_FRONTEND_ELASTIC_ARENA_ORDER_H_
#define PLEXUS_FRONTEND_ELASTIC_ARENA_ORDER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/core/mutex.h"

namespace plexus::elastic {

class ArenaOrder {
 public:
  // Runs `body` as turns `turn` .. `turn + turns - 1` of `epoch` (a round of operations the
  // master gave consecutive turns) once every earlier turn of the epoch ran here (maybe on
  // another caller's thread), and returns its status. Unavailable once a later epoch has used
  // the arena or `abandoned()` holds (checked every few milliseconds), DeadlineExceeded at
  // `deadline`, without running `body`; then later turns of the epoch wait in vain (until
  // their own deadline or the epoch's end), as their peers in the arena would.
  absl::Status Run(int64_t epoch, int64_t turn, absl::Time deadline,
                   const std::function<bool()>& abandoned,
                   const std::function<absl::Status()>& body, int64_t turns = 1);

  // Forgets every epoch: a new connection to the master (a restarted one numbers its epochs
  // from the start again). Turns still waiting end as Unavailable.
  void Reset();

 private:
  struct Entry {
    const std::function<absl::Status()>* body;
    int64_t turns = 1;
    bool taken = false;  // A thread runs it: its caller waits for it, whatever else happens.
    bool done = false;
    absl::Status status;
  };
  // Runs the ready turns from next_ on, while this thread holds the runner role.
  void RunReady(UniqueLock& lock, int64_t own) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Mutex mu_;
  std::condition_variable advanced_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // Reset() calls so far.
  int64_t epoch_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t next_ ABSL_GUARDED_BY(mu_) = 0;      // The turn of epoch_ that may go now.
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // A thread runs a turn.
  // Turns of epoch_ whose callers wait, by turn.
  std::map<int64_t, Entry*> waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_ARENA_ORDER_H_
