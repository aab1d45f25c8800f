// Whether the cores a rank runs on are crowded by other work: busy loops, a training step's
// compute threads, another job. The kernel counts how long a thread sat runnable without a CPU
// (its run-queue delay, /proc/thread-self/schedstat); sharing cores with the other ranks on the
// host explains part of that, and what is left over is other work. Shared-memory schedules
// then synchronise less often: each step waits for the slowest rank to be scheduled, and a rank
// that is off its core for a time slice (milliseconds) stalls every step it owes.
#ifndef PLEXUS_ALGORITHMS_CROWDED_CORES_H_
#define PLEXUS_ALGORITHMS_CROWDED_CORES_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace plexus::algorithms {

// This thread's run-queue delay so far; zero where the kernel does not report it.
absl::Duration ThreadRunQueueDelay();

// The part of `delay` out of `wall` that `ranks_on_host` ranks sharing `cores` do not explain:
// the fraction waited, less their fair share (1 - cores / ranks where they outnumber the
// cores). Near 0 on a quiet host; negative when this rank waited less than its share.
double ExcessDelay(absl::Duration delay, absl::Duration wall, int ranks_on_host, int cores);

// Watches one span of this thread's work (a large collective) from construction to Finish,
// which folds its excess delay into this process's running average.
class CrowdingProbe {
 public:
  explicit CrowdingProbe(int ranks_on_host);
  void Finish();

 private:
  const int ranks_on_host_;
  const absl::Time start_;
  const absl::Duration start_delay_;
};

// Folds one large collective's excess delay into this process's running average.
void NoteExcessDelay(double excess);

// This process's running average of excess delay over its recent large collectives, as a
// word for a collective's header: 0 before any, else the average in thousandths plus 1001
// (so every measured value, -1.0 to 1.0, is positive).
uint64_t RecentExcessWord();
// Whether the words every rank of a group sent (RecentExcessWord) say its cores are crowded:
// their average excess is above a margin. Each rank decides alike from the same words.
bool WordsShowCrowding(const std::vector<uint64_t>& words);

// The CPUs this process may run on (at least 1).
int UsableCores();

}  // namespace plexus::algorithms

#endif  // PLEXUS_ALGORITHMS_CROWDED_CORES_H_
