// Crowded cores: the run-queue delay the kernel reports grows when threads share a CPU, the
// ranks' own share of the cores is not counted as crowding, and a group decides from the
// average of what its ranks report.
#include "algorithms/crowded_cores.h"

#include <sched.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace plexus::algorithms {
namespace {

// The word a rank with `excess` as its running average sends.
uint64_t WordFor(double excess) {
  for (int i = 0; i < 20; ++i) NoteExcessDelay(excess);
  return RecentExcessWord();
}

TEST(CrowdedCoresTest, TheRanksOwnShareOfTheCoresIsNotExcess) {
  const absl::Duration wall = absl::Milliseconds(100);
  // Two ranks with a core each: any wait is excess.
  EXPECT_DOUBLE_EQ(ExcessDelay(absl::Milliseconds(30), wall, 2, 2), 0.3);
  // Four ranks on two cores wait half the time by themselves.
  EXPECT_NEAR(ExcessDelay(absl::Milliseconds(50), wall, 4, 2), 0.0, 1e-9);
  EXPECT_NEAR(ExcessDelay(absl::Milliseconds(75), wall, 4, 2), 0.25, 1e-9);
  EXPECT_NEAR(ExcessDelay(absl::Milliseconds(10), wall, 4, 2), -0.4, 1e-9);
  EXPECT_EQ(ExcessDelay(absl::Milliseconds(10), absl::ZeroDuration(), 4, 2), 0.0);
}

TEST(CrowdedCoresTest, AGroupDecidesFromTheAverageOfItsRanks) {
  const uint64_t crowded = WordFor(0.3);
  const uint64_t quiet = WordFor(0.0);
  const uint64_t waited_less = WordFor(-0.4);
  EXPECT_TRUE(WordsShowCrowding({crowded, crowded}));
  EXPECT_FALSE(WordsShowCrowding({quiet, quiet, quiet}));
  // One rank that waited more and one that waited less than their share: a quiet host.
  EXPECT_FALSE(WordsShowCrowding({crowded, waited_less}));
  EXPECT_TRUE(WordsShowCrowding({crowded, quiet, crowded}));
  // Ranks that have not measured yet (word 0) do not count either way.
  EXPECT_TRUE(WordsShowCrowding({0, crowded}));
  EXPECT_FALSE(WordsShowCrowding({0, 0}));
  EXPECT_FALSE(WordsShowCrowding({}));
}

TEST(CrowdedCoresTest, OneOddCollectiveDoesNotFlipTheAverage) {
  WordFor(0.0);
  NoteExcessDelay(0.15);
  EXPECT_FALSE(WordsShowCrowding({RecentExcessWord()}));
  NoteExcessDelay(0.3);
  NoteExcessDelay(0.3);
  EXPECT_TRUE(WordsShowCrowding({RecentExcessWord()}));
}

// Two busy threads on one CPU each wait for it about half the time; the kernel says so.
TEST(CrowdedCoresTest, ThreadsSharingACpuSeeTheirRunQueueDelayGrow) {
  if (ThreadRunQueueDelay() == absl::ZeroDuration()) {
    GTEST_SKIP() << "this kernel reports no run-queue delay (/proc/thread-self/schedstat)";
  }
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &allowed)) ++cpu;
  constexpr absl::Duration kBusy = absl::Milliseconds(200);
  std::vector<absl::Duration> delays(2);
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
      const absl::Duration before = ThreadRunQueueDelay();
      const absl::Time until = absl::Now() + kBusy;
      while (absl::Now() < until) {
      }
      delays[t] = ThreadRunQueueDelay() - before;
    });
  }
  for (auto& thread : threads) thread.join();
  // Each ran about half of the 200 ms and waited the other half; a busy machine only adds.
  EXPECT_GT(delays[0] + delays[1], kBusy / 4);
}

}  // namespace
}  // namespace plexus::algorithms
