#include "base/store/attempt_together.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "base/store/hash_store.h"
#include "gtest/gtest.h"

namespace plexus {
namespace {

constexpr int kRanks = 3;

using Step = std::function<absl::Status(int rank, Store& try_store, int try_index)>;

// Runs AttemptTogether on `ranks` threads over one store; returns each rank's result and fills
// `calls` with how many times each rank's step ran.
std::vector<absl::Status> RunTogether(int ranks, int size, const Step& step,
                                      std::vector<int>* calls,
                                      absl::Duration budget = absl::Seconds(20)) {
  auto store = std::make_shared<HashStore>(absl::Seconds(20));
  std::vector<absl::Status> results(ranks);
  calls->assign(ranks, 0);
  std::vector<std::thread> threads;
  const absl::Time deadline = absl::Now() + budget;
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      AttemptTogetherOptions options{
          .rank = rank, .size = size, .max_tries = 3, .deadline = deadline, .what = "test step"};
      results[rank] =
          AttemptTogether(store, options, [&](std::shared_ptr<Store> try_store, int index) {
            ++(*calls)[rank];
            return step(rank, *try_store, index);
          });
    });
  }
  for (std::thread& thread : threads) thread.join();
  return results;
}

TEST(AttemptTogetherTest, OneTryWhenEveryRankSucceeds) {
  std::vector<int> calls;
  auto succeed = [](int, Store&, int) { return absl::OkStatus(); };
  auto results = RunTogether(kRanks, kRanks, succeed, &calls);
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_TRUE(results[rank].ok()) << results[rank];
    EXPECT_EQ(calls[rank], 1) << "rank " << rank;
  }
}

TEST(AttemptTogetherTest, OneRankFailingMakesEveryRankTryAgainInAFreshKeySpace) {
  std::vector<int> calls;
  std::atomic<int> stale_keys{0};
  auto results = RunTogether(
      kRanks, kRanks,
      [&](int rank, Store& store, int index) -> absl::Status {
        // A key a previous try left must not be visible to the next one.
        auto seen = store.Check({"mine/" + std::to_string(rank)});
        if (!seen.ok() || *seen) ++stale_keys;
        if (!store.Set("mine/" + std::to_string(rank), "x").ok()) return absl::InternalError("set");
        if (rank == 1 && index == 0) return absl::UnavailableError("connection reset by peer");
        return absl::OkStatus();
      },
      &calls);
  EXPECT_EQ(stale_keys.load(), 0);
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_TRUE(results[rank].ok()) << results[rank];
    EXPECT_EQ(calls[rank], 2) << "rank " << rank << " should have tried twice";
  }
}

TEST(AttemptTogetherTest, ARankThatAlwaysFailsEndsEveryRankNamingIt) {
  std::vector<int> calls;
  auto results = RunTogether(
      kRanks, kRanks,
      [](int rank, Store&, int) {
        return rank == 2 ? absl::UnavailableError("connect refused") : absl::OkStatus();
      },
      &calls);
  for (int rank = 0; rank < kRanks; ++rank) EXPECT_EQ(calls[rank], 3) << "rank " << rank;
  EXPECT_EQ(results[2].code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(results[2].message(), "connect refused")) << results[2];
  for (int rank : {0, 1}) {
    EXPECT_EQ(results[rank].code(), absl::StatusCode::kUnavailable) << results[rank];
    EXPECT_TRUE(
        absl::StrContains(results[rank].message(), "test step: try 3 of 3 failed on rank(s) 2"))
        << results[rank];
    EXPECT_TRUE(absl::StrContains(results[rank].message(), "connect refused")) << results[rank];
  }
}

TEST(AttemptTogetherTest, ARankThatNeverVotesEndsTheOthersAtTheDeadline) {
  std::vector<int> calls;
  const absl::Time start = absl::Now();
  // Two of three ranks run: the third's vote never comes.
  auto results = RunTogether(
      2, kRanks, [](int, Store&, int) { return absl::OkStatus(); }, &calls,
      absl::Milliseconds(300));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(results[rank].code(), absl::StatusCode::kDeadlineExceeded) << results[rank];
    EXPECT_TRUE(absl::StrContains(results[rank].message(), "votes did not all arrive"))
        << results[rank];
    EXPECT_EQ(calls[rank], 1);
  }
}

TEST(AttemptTogetherTest, NoNewTryAfterTheDeadline) {
  std::vector<int> calls;
  auto results = RunTogether(
      kRanks, kRanks,
      [](int rank, Store&, int) {
        absl::SleepFor(absl::Milliseconds(400));
        return rank == 0 ? absl::UnavailableError("slow and failing") : absl::OkStatus();
      },
      &calls, absl::Milliseconds(200));
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_FALSE(results[rank].ok());
    EXPECT_EQ(calls[rank], 1) << "rank " << rank;
  }
}

}  // namespace
}  // namespace plexus
