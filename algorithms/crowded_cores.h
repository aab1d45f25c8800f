// Whether the cores a rank runs on are crowded by other work: busy loops, a training step's
// compute threads, another job. The kernel counts how long a thread ran
// (/proc/thread-self/schedstat); ranks that outnumber the cores each expect their share of
// them, and a rank that ran for much less than its share over a collective was kept off its
// core by other work, or waited for peers kept off theirs. Shared-memory schedules then
// synchronise less often: each step waits for the slowest rank to be scheduled, and a rank
// that is off its core for a time slice (milliseconds) stalls every step it owes.
#ifndef PLEXUS_ALGORITHMS_CROWDED_CORES_H_
#define PLEXUS_ALGORITHMS_CROWDED_CORES_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace plexus::algorithms {

// What the kernel counted for this thread so far: time on a CPU, and time runnable without
// one (run-queue delay). Zeros where the kernel does not report them.
struct ThreadSchedule {
  absl::Duration on_cpu;
  absl::Duration waiting_for_cpu;
};
ThreadSchedule ThreadScheduleSoFar();

// How far short of its fair share of the cores a rank ran: 1 - (on_cpu / wall) / share, where
// share is 1, or cores / ranks where `ranks_on_host` outnumber `cores`. Near 0 on a quiet host
// (negative if it ran more than its share); toward 1 when other work holds the cores.
double RunShortfall(absl::Duration on_cpu, absl::Duration wall, int ranks_on_host, int cores);

// Watches one span of this thread's work (a large collective) from construction to Finish,
// which folds its run shortfall into this process's running average.
class CrowdingProbe {
 public:
  explicit CrowdingProbe(int ranks_on_host);
  void Finish();

 private:
  const int ranks_on_host_;
  const absl::Time start_;
  const absl::Duration start_on_cpu_;
};

// Folds one large collective's run shortfall into this process's running average.
void NoteRunShortfall(double shortfall);

// This process's running average of run shortfall over its recent large collectives, as a
// word for a collective's header: 0 before any, else the average in thousandths plus 1001
// (so every measured value, -1.0 to 1.0, is positive).
uint64_t RecentShortfallWord();
// Whether the words every rank of a group sent (RecentShortfallWord) say its cores are
// crowded: their average shortfall is above a margin. Each rank decides alike from the same
// words.
bool WordsShowCrowding(const std::vector<uint64_t>& words);

// The CPUs this process may run on (at least 1).
int UsableCores();

}  // namespace plexus::algorithms

#endif  // PLEXUS_ALGORITHMS_CROWDED_CORES_H_
