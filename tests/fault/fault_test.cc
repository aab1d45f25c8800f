// Fault injection with ranks as forked processes: a rank killed mid all_reduce (tcp and gloo),
// and on tcp a rank that skips a collective, ranks that disagree on the count (also on gloo),
// and a rank that never arrives. Every survivor must fail with the right code, promptly, and never
// hang.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/dispatch/init.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fault/forked_ranks.h"
#include "tests/testing/subprocess.h"

namespace plexus {
namespace {

using ::testing::HasSubstr;

constexpr int kWorld = 4;

using testing::CollectOutcomes;
using testing::ForkedRanks;
using testing::Outcome;

absl::StatusOr<std::shared_ptr<ProcessGroup>> Join(const std::string& url, int rank,
                                                   absl::Duration timeout,
                                                   const std::string& backend = "cpu:tcp") {
  return testing::JoinGroup(url, rank, kWorld, timeout, backend);
}

ForkedRanks Fork(const std::function<absl::Status(int)>& body) {
  return testing::ForkRanks(kWorld, body);
}

// Kills rank 2 of 4 while all ranks loop over 16 MiB all_reduces; returns what the survivors
// ended with and how long after the kill the last of them reported.
std::vector<Outcome> KillMidAllReduce(const std::string& backend, absl::Duration timeout,
                                      absl::Duration* detection) {
  const std::string url = "file://" + testing::TempPath("fault_kill_" + backend.substr(4));
  // 16 MiB: long enough to be killed mid-way.
  int ready = 0;
  ForkedRanks world =
      testing::ForkRanksLoopingAllReduce(kWorld, url, backend, 4 << 20, timeout, &ready);
  EXPECT_EQ(ready, kWorld);
  const absl::Time killed = absl::Now();
  kill(world.pids[2], SIGKILL);
  // Returns when every survivor reported.
  std::vector<Outcome> outcomes = CollectOutcomes(world.fds);
  *detection = absl::Now() - killed;
  testing::ReapRanks(world);
  return outcomes;
}

TEST(FaultTest, KilledRankFailsEverySurvivorWithinTwoSeconds) {
  absl::Duration detection;
  std::vector<Outcome> outcomes = KillMidAllReduce("cpu:tcp", absl::Seconds(60), &detection);
  for (int rank : {0, 1, 3}) {
    EXPECT_EQ(outcomes[rank].code, absl::StatusCode::kUnavailable)
        << "rank " << rank << ": " << outcomes[rank].message;
    EXPECT_THAT(outcomes[rank].message, HasSubstr("lost rank"));
  }
  EXPECT_LT(detection, absl::Seconds(2));
}

// Gloo usually reports the closed connection to the ranks that talk to the dead one (and each
// survivor that fails closes its own connections, so the rest learn at once); when Gloo misses
// the close, its receive times out at the operation's deadline. Either way, never a hang.
TEST(FaultTest, KilledRankUnderGlooFailsEverySurvivorByTheTimeout) {
  absl::Duration detection;
  const absl::Duration timeout = absl::Seconds(10);
  std::vector<Outcome> outcomes = KillMidAllReduce("cpu:gloo", timeout, &detection);
  for (int rank : {0, 1, 3}) {
    EXPECT_THAT(outcomes[rank].code, ::testing::AnyOf(absl::StatusCode::kUnavailable,
                                                      absl::StatusCode::kDeadlineExceeded))
        << "rank " << rank << ": " << outcomes[rank].message;
  }
  EXPECT_LT(detection, timeout + absl::Seconds(2))
      << outcomes[0].message << " | " << outcomes[1].message << " | " << outcomes[3].message;
}

TEST(FaultTest, RankThatSkipsACollectiveIsAMismatchEverywhere) {
  const std::string url = "file://" + testing::TempPath("fault_skip");
  ForkedRanks world = Fork([&](int rank) -> absl::Status {
    auto group = Join(url, rank, absl::Seconds(30));
    if (!group.ok()) return group.status();
    std::vector<float> data(1000, 1.0f);
    if (rank != 3) {  // Rank 3 skips the all_reduce and goes straight to the barrier.
      auto work = (*group)->AllReduce(Tensor::Flat(data.data(), DType::kFloat32, data.size()));
      absl::Status status = work.ok() ? (*work)->Wait(absl::Seconds(30)) : work.status();
      if (!status.ok()) return status;
    }
    auto barrier = (*group)->Barrier();
    return barrier.ok() ? (*barrier)->Wait(absl::Seconds(30)) : barrier.status();
  });
  const absl::Time start = absl::Now();
  std::vector<Outcome> outcomes = CollectOutcomes(world.fds);
  testing::ReapRanks(world);
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_EQ(outcomes[rank].code, absl::StatusCode::kFailedPrecondition)
        << "rank " << rank << ": " << outcomes[rank].message;
  }
  // At least one rank names both sides.
  bool named = false;
  for (const Outcome& outcome : outcomes) {
    named |= outcome.message.find("all_reduce") != std::string::npos &&
             outcome.message.find("barrier") != std::string::npos;
  }
  EXPECT_TRUE(named) << outcomes[0].message;
}

TEST(FaultTest, MismatchedCountsFailEverywhereNamingBothSides) {
  const std::string url = "file://" + testing::TempPath("fault_count");
  ForkedRanks world = Fork([&](int rank) -> absl::Status {
    auto group = Join(url, rank, absl::Seconds(30));
    if (!group.ok()) return group.status();
    std::vector<float> data(rank == 1 ? 10 : 12, 1.0f);
    auto work = (*group)->AllReduce(Tensor::Flat(data.data(), DType::kFloat32, data.size()));
    return work.ok() ? (*work)->Wait(absl::Seconds(30)) : work.status();
  });
  std::vector<Outcome> outcomes = CollectOutcomes(world.fds);
  testing::ReapRanks(world);
  bool named = false;
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_EQ(outcomes[rank].code, absl::StatusCode::kFailedPrecondition)
        << "rank " << rank << ": " << outcomes[rank].message;
    named |= outcomes[rank].message.find("of 10 float32") != std::string::npos &&
             outcomes[rank].message.find("of 12 float32") != std::string::npos;
  }
  EXPECT_TRUE(named) << outcomes[0].message;
}

TEST(FaultTest, MismatchedCountsUnderGlooFailEverywhere) {
  // Gloo's native calls carry a tag derived from the signature: a rank never pairs with a peer
  // that made a different call, so every rank fails (at the timeout, or sooner when a peer's
  // failure closes the connections) instead of completing with mixed data. (As after any
  // failed collective, the buffers' contents are unspecified: ranks that agree may have
  // exchanged part of theirs.)
  const std::string url = "file://" + testing::TempPath("fault_gloo_count");
  ForkedRanks world = Fork([&](int rank) -> absl::Status {
    auto group = Join(url, rank, absl::Seconds(30), "cpu:gloo");
    if (!group.ok()) return group.status();
    std::vector<float> data(rank == 1 ? 10 : 12, 1.0f);
    AllReduceOptions options;
    options.timeout = absl::Seconds(2);
    auto work =
        (*group)->AllReduce(Tensor::Flat(data.data(), DType::kFloat32, data.size()), options);
    return work.ok() ? (*work)->Wait(absl::Seconds(30)) : work.status();
  });
  std::vector<Outcome> outcomes = CollectOutcomes(world.fds);
  testing::ReapRanks(world);
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_THAT(outcomes[rank].code, ::testing::AnyOf(absl::StatusCode::kDeadlineExceeded,
                                                      absl::StatusCode::kUnavailable))
        << "rank " << rank << ": " << outcomes[rank].message;
  }
}

TEST(FaultTest, RankThatNeverArrivesGivesDeadlineExceededAtTheTimeout) {
  const std::string url = "file://" + testing::TempPath("fault_absent");
  int release[2];
  ASSERT_EQ(pipe(release), 0);
  ForkedRanks world = Fork([&](int rank) -> absl::Status {
    close(release[1]);
    auto group = Join(url, rank, absl::Seconds(30));
    if (!group.ok()) return group.status();
    if (rank == 3) {  // Alive but absent: waits until the others are done.
      char byte;
      [[maybe_unused]] ssize_t n = read(release[0], &byte, 1);
      return absl::OkStatus();
    }
    std::vector<float> data(100, 1.0f);
    AllReduceOptions options;
    options.timeout = absl::Milliseconds(500);
    const absl::Time start = absl::Now();
    auto work =
        (*group)->AllReduce(Tensor::Flat(data.data(), DType::kFloat32, data.size()), options);
    absl::Status status = work.ok() ? (*work)->Wait(absl::Seconds(30)) : work.status();
    if (absl::Now() - start > absl::Seconds(3)) {
      return absl::InternalError(absl::StrCat("took ", absl::FormatDuration(absl::Now() - start)));
    }
    return status;
  });
  close(release[0]);
  std::vector<Outcome> outcomes(kWorld);
  std::vector<int> survivors(world.fds.begin(), world.fds.begin() + 3);
  std::vector<Outcome> first = CollectOutcomes(survivors);
  close(release[1]);  // Let rank 3 go.
  CollectOutcomes({world.fds[3]});
  testing::ReapRanks(world);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(first[rank].code, absl::StatusCode::kDeadlineExceeded)
        << "rank " << rank << ": " << first[rank].message;
  }
}

}  // namespace
}  // namespace plexus
