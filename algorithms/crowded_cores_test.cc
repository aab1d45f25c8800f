// Crowded cores: the kernel's count of a thread's time on a CPU shows threads sharing one, a
// rank that gets its share of the cores falls no short, and a group decides from the average
// of what its ranks report.
#include "algorithms/crowded_cores.h"

#include <sched.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace plexus::algorithms {
namespace {

// The word a rank with `shortfall` as its running average sends.
uint64_t WordFor(double shortfall) {
  for (int i = 0; i < 20; ++i) NoteRunShortfall(shortfall);
  return RecentShortfallWord();
}

TEST(CrowdedCoresTest, RanksThatGetTheirShareOfTheCoresFallNoShort) {
  const absl::Duration wall = absl::Milliseconds(100);
  // Two ranks with a core each: their share is all of the time.
  EXPECT_NEAR(RunShortfall(absl::Milliseconds(90), wall, 2, 2), 0.1, 1e-9);
  // Four ranks on two cores run half the time by themselves.
  EXPECT_NEAR(RunShortfall(absl::Milliseconds(50), wall, 4, 2), 0.0, 1e-9);
  EXPECT_NEAR(RunShortfall(absl::Milliseconds(20), wall, 4, 2), 0.6, 1e-9);
  EXPECT_NEAR(RunShortfall(absl::Milliseconds(60), wall, 4, 2), -0.2, 1e-9);
  EXPECT_EQ(RunShortfall(absl::Milliseconds(10), absl::ZeroDuration(), 4, 2), 0.0);
}

TEST(CrowdedCoresTest, AGroupDecidesFromTheAverageOfItsRanks) {
  const uint64_t crowded = WordFor(0.6);
  const uint64_t quiet = WordFor(0.05);
  const uint64_t ran_more = WordFor(-0.4);
  EXPECT_TRUE(WordsShowCrowding({crowded, crowded}));
  EXPECT_FALSE(WordsShowCrowding({quiet, quiet, quiet}));
  // One rank short of its share and one beyond it: the ranks took turns on a quiet host.
  EXPECT_FALSE(WordsShowCrowding({crowded, ran_more}));
  EXPECT_TRUE(WordsShowCrowding({crowded, quiet, crowded}));
  // Ranks that have not measured yet (word 0) do not count either way.
  EXPECT_TRUE(WordsShowCrowding({0, crowded}));
  EXPECT_FALSE(WordsShowCrowding({0, 0}));
  EXPECT_FALSE(WordsShowCrowding({}));
}

TEST(CrowdedCoresTest, OneOddCollectiveDoesNotFlipTheAverage) {
  WordFor(0.0);
  NoteRunShortfall(0.5);
  EXPECT_FALSE(WordsShowCrowding({RecentShortfallWord()}));
  NoteRunShortfall(0.6);
  NoteRunShortfall(0.6);
  EXPECT_TRUE(WordsShowCrowding({RecentShortfallWord()}));
}

// Two busy threads on one CPU each run about half the time and wait the other half; the
// kernel says so.
TEST(CrowdedCoresTest, ThreadsSharingACpuRunForAboutHalfTheTime) {
  if (ThreadScheduleSoFar().on_cpu == absl::ZeroDuration()) {
    GTEST_SKIP() << "this kernel reports no thread schedule (/proc/thread-self/schedstat)";
  }
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &allowed)) ++cpu;
  constexpr absl::Duration kBusy = absl::Milliseconds(200);
  std::vector<ThreadSchedule> spent(2);
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
      started.fetch_add(1);
      while (started.load() < 2) {
      }
      const ThreadSchedule before = ThreadScheduleSoFar();
      const absl::Time until = absl::Now() + kBusy;
      while (absl::Now() < until) {
      }
      const ThreadSchedule after = ThreadScheduleSoFar();
      spent[t] = {after.on_cpu - before.on_cpu, after.waiting_for_cpu - before.waiting_for_cpu};
    });
  }
  for (auto& thread : threads) thread.join();
  // Together they ran no longer than the one CPU was there (a little slack for the clocks);
  // each waited for it a good part of its 200 ms (a busy machine only adds).
  EXPECT_LT(spent[0].on_cpu + spent[1].on_cpu, kBusy * 1.5);
  EXPECT_GT(spent[0].waiting_for_cpu + spent[1].waiting_for_cpu, kBusy / 4);
  for (const ThreadSchedule& thread : spent) {
    EXPECT_GT(RunShortfall(thread.on_cpu, kBusy, 1, 1), 0.1);
  }
}

}  // namespace
}  // namespace plexus::algorithms
