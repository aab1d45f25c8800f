#include "algorithms/crowded_cores.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>

#include "absl/time/clock.h"

namespace plexus::algorithms {
namespace {

// Average excess delay, over the group's ranks, that counts as crowding. On the 2-core VM a
// 4-rank 16 MiB all-reduce measured single ranks at -0.45 to +0.2 with the cores free (the
// group's average within 0.05 of 0), and +0.15 to +0.35 beside two busy loops (2 ranks: +0.8).
constexpr double kCrowdedExcess = 0.1;
// Weight of the newest collective in the running average: one odd sample does not flip it.
constexpr double kNewestWeight = 0.5;

// In thousandths plus 1001; 0 before any measurement.
std::atomic<uint64_t> recent_excess_word{0};

constexpr uint64_t kWordOffset = 1001;

}  // namespace

absl::Duration ThreadRunQueueDelay() {
  // "<on-cpu ns> <run-queue delay ns> <time slices>".
  const int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ZeroDuration();
  char text[96];
  const ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (n <= 0) return absl::ZeroDuration();
  text[n] = '\0';
  char* end = nullptr;
  std::strtoull(text, &end, 10);
  if (end == text) return absl::ZeroDuration();
  const char* delay_text = end;
  const unsigned long long delay = std::strtoull(delay_text, &end, 10);
  if (end == delay_text) return absl::ZeroDuration();
  return absl::Nanoseconds(static_cast<int64_t>(delay));
}

double ExcessDelay(absl::Duration delay, absl::Duration wall, int ranks_on_host, int cores) {
  if (wall <= absl::ZeroDuration()) return 0;
  const double share =
      ranks_on_host > cores ? 1.0 - static_cast<double>(cores) / ranks_on_host : 0.0;
  return std::clamp(absl::FDivDuration(delay, wall) - share, -1.0, 1.0);
}

CrowdingProbe::CrowdingProbe(int ranks_on_host)
    : ranks_on_host_(ranks_on_host), start_(absl::Now()), start_delay_(ThreadRunQueueDelay()) {}

void CrowdingProbe::Finish() {
  NoteExcessDelay(ExcessDelay(ThreadRunQueueDelay() - start_delay_, absl::Now() - start_,
                              ranks_on_host_, UsableCores()));
}

void NoteExcessDelay(double excess) {
  excess = std::clamp(excess, -1.0, 1.0);
  const uint64_t word = recent_excess_word.load(std::memory_order_relaxed);
  const double average =
      word == 0 ? excess
                : kNewestWeight * excess +
                      (1 - kNewestWeight) * (static_cast<double>(word) - kWordOffset) / 1000;
  recent_excess_word.store(static_cast<uint64_t>(std::lround(average * 1000) + kWordOffset),
                           std::memory_order_relaxed);
}

uint64_t RecentExcessWord() { return recent_excess_word.load(std::memory_order_relaxed); }

bool WordsShowCrowding(const std::vector<uint64_t>& words) {
  int64_t sum = 0;
  int counted = 0;
  for (uint64_t word : words) {
    if (word == 0) continue;
    sum += static_cast<int64_t>(word) - static_cast<int64_t>(kWordOffset);
    ++counted;
  }
  return counted > 0 && static_cast<double>(sum) / counted > kCrowdedExcess * 1000;
}

int UsableCores() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return 1;
  return std::max(1, CPU_COUNT(&cpus));
}

}  // namespace plexus::algorithms
