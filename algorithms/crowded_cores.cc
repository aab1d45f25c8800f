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

// Average shortfall, over the group's ranks, that counts as crowding. On the 2-core VM a
// 16 MiB all-reduce ran 0.92-0.94 of its share with the cores free (4 and 8 ranks: shortfall
// 0.06-0.08), and 0.28-0.38 of it beside two busy loops (shortfall 0.6-0.7).
constexpr double kCrowdedShortfall = 0.3;
// Weight of the newest collective in the running average: one odd sample does not flip it.
constexpr double kNewestWeight = 0.5;

// In thousandths plus 1001; 0 before any measurement.
std::atomic<uint64_t> recent_shortfall_word{0};

constexpr uint64_t kWordOffset = 1001;

}  // namespace

ThreadSchedule ThreadScheduleSoFar() {
  // "<on-cpu ns> <run-queue delay ns> <time slices>".
  const int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char text[96];
  const ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (n <= 0) return {};
  text[n] = '\0';
  char* end = nullptr;
  const unsigned long long on_cpu = std::strtoull(text, &end, 10);
  if (end == text) return {};
  const char* delay_text = end;
  const unsigned long long delay = std::strtoull(delay_text, &end, 10);
  if (end == delay_text) return {};
  return {absl::Nanoseconds(static_cast<int64_t>(on_cpu)),
          absl::Nanoseconds(static_cast<int64_t>(delay))};
}

double RunShortfall(absl::Duration on_cpu, absl::Duration wall, int ranks_on_host, int cores) {
  if (wall <= absl::ZeroDuration()) return 0;
  const double share = ranks_on_host > cores ? static_cast<double>(cores) / ranks_on_host : 1.0;
  return std::clamp(1.0 - absl::FDivDuration(on_cpu, wall) / share, -1.0, 1.0);
}

CrowdingProbe::CrowdingProbe(int ranks_on_host)
    : ranks_on_host_(ranks_on_host),
      start_(absl::Now()),
      start_on_cpu_(ThreadScheduleSoFar().on_cpu) {}

void CrowdingProbe::Finish() {
  NoteRunShortfall(RunShortfall(ThreadScheduleSoFar().on_cpu - start_on_cpu_, absl::Now() - start_,
                                ranks_on_host_, UsableCores()));
}

void NoteRunShortfall(double shortfall) {
  shortfall = std::clamp(shortfall, -1.0, 1.0);
  const uint64_t word = recent_shortfall_word.load(std::memory_order_relaxed);
  const double average =
      word == 0 ? shortfall
                : kNewestWeight * shortfall +
                      (1 - kNewestWeight) * (static_cast<double>(word) - kWordOffset) / 1000;
  recent_shortfall_word.store(static_cast<uint64_t>(std::lround(average * 1000) + kWordOffset),
                              std::memory_order_relaxed);
}

uint64_t RecentShortfallWord() { return recent_shortfall_word.load(std::memory_order_relaxed); }

bool WordsShowCrowding(const std::vector<uint64_t>& words) {
  int64_t sum = 0;
  int counted = 0;
  for (uint64_t word : words) {
    if (word == 0) continue;
    sum += static_cast<int64_t>(word) - static_cast<int64_t>(kWordOffset);
    ++counted;
  }
  return counted > 0 && static_cast<double>(sum) / counted > kCrowdedShortfall * 1000;
}

int UsableCores() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return 1;
  return std::max(1, CPU_COUNT(&cpus));
}

}  // namespace plexus::algorithms
