// Heartbeats on cpu:tcp, with ranks as forked processes: a SIGSTOPped rank (alive, sockets
// open, silent) fails every survivor with Unavailable within the heartbeat interval + 1 s, and
// a rank that computes for three intervals between collectives is not expelled.
// PLEXUS_HEARTBEAT comes from the BUILD file (2 s); PLEXUS_TRANSPORT picks rings or sockets.
#include "base/core/heartbeat.h"

#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fault/forked_ranks.h"
#include "tests/testing/subprocess.h"

namespace plexus {
namespace {

using testing::CollectOutcomes;
using testing::ForkedRanks;
using ::testing::HasSubstr;
using testing::Outcome;

constexpr int kWorld = 4;
constexpr int kStopped = 2;

absl::Duration Interval() {
  absl::StatusOr<absl::Duration> interval = HeartbeatFromEnvironment();
  return interval.ok() ? *interval : kDefaultHeartbeat;
}

// One run: every rank loops over 64 MiB all_reduces; after each has finished one, rank 2 is
// stopped. Returns the survivors' outcomes, the time from the stop to the last survivor's
// report, and what the stopped rank reports once it is continued.
struct StopRun {
  std::vector<Outcome> outcomes;
  Outcome resumed;
  absl::Duration detection;
};

StopRun StopMidAllReduce(int run) {
  const std::string url = "file://" + testing::TempPath(absl::StrCat("heartbeat_stop_", run));
  int ready = 0;
  ForkedRanks world = testing::ForkRanksLoopingAllReduce(kWorld, url, "cpu:tcp", 16 << 20,
                                                         absl::Seconds(120), &ready);  // 64 MiB.
  EXPECT_EQ(ready, kWorld);
  const absl::Time stopped = absl::Now();
  kill(world.pids[kStopped], SIGSTOP);
  std::vector<int> survivors;
  for (int rank = 0; rank < kWorld; ++rank) {
    if (rank != kStopped) survivors.push_back(world.fds[rank]);
  }
  StopRun result;
  result.outcomes = CollectOutcomes(survivors);  // Returns once every survivor reported.
  result.detection = absl::Now() - stopped;
  // Continued, the stopped rank finds its peers gone: it fails too, never hangs.
  kill(world.pids[kStopped], SIGCONT);
  result.resumed = CollectOutcomes({world.fds[kStopped]})[0];
  testing::ReapRanks(world);
  return result;
}

TEST(HeartbeatTest, AStoppedRankFailsEverySurvivorWithinTheIntervalPlusOneSecond) {
  const absl::Duration bound = Interval() + absl::Seconds(1);
  absl::Duration slowest;
  const int runs = testing::RunsFromEnvironment("HEARTBEAT_RUNS", 6);
  for (int run = 0; run < runs; ++run) {
    StopRun result = StopMidAllReduce(run);
    for (size_t i = 0; i < result.outcomes.size(); ++i) {
      const Outcome& outcome = result.outcomes[i];
      EXPECT_EQ(outcome.code, absl::StatusCode::kUnavailable)
          << "run " << run << ", survivor " << i << ": " << outcome.message;
      EXPECT_THAT(outcome.message, HasSubstr(absl::StrCat("lost rank ", kStopped)))
          << "run " << run;
    }
    EXPECT_LT(result.detection, bound) << "run " << run;
    EXPECT_EQ(result.resumed.code, absl::StatusCode::kUnavailable)
        << "run " << run << ", stopped rank once continued: " << result.resumed.message;
    slowest = std::max(slowest, result.detection);
    if (::testing::Test::HasFailure()) break;
  }
  std::printf("slowest detection over %d runs: %s (bound %s)\n", runs,
              absl::FormatDuration(slowest).c_str(), absl::FormatDuration(bound).c_str());
}

// Rank 1 computes (holding a core) for three intervals between two all_reduces; nobody is
// expelled and both give the right sum everywhere.
TEST(HeartbeatTest, ARankComputingForThreeIntervalsIsNotExpelled) {
  const std::string url = "file://" + testing::TempPath("heartbeat_compute");
  const absl::Duration compute = 3 * Interval();
  ForkedRanks world = testing::ForkRanks(kWorld, [&](int rank) -> absl::Status {
    auto group = testing::JoinGroup(url, rank, kWorld, absl::Seconds(120));
    if (!group.ok()) return group.status();
    for (int round = 0; round < 2; ++round) {
      if (round == 1 && rank == 1) {
        volatile uint64_t spin = 0;
        for (const absl::Time end = absl::Now() + compute; absl::Now() < end;) spin = spin + 1;
      }
      std::vector<float> data(1 << 20, static_cast<float>(rank + round));
      auto work = (*group)->AllReduce(Tensor::Flat(data.data(), DType::kFloat32, data.size()));
      if (!work.ok()) return work.status();
      if (absl::Status status = (*work)->Wait(absl::Seconds(60)); !status.ok()) return status;
      const float expected = static_cast<float>(0 + 1 + 2 + 3 + kWorld * round);
      for (float value : data) {
        if (value != expected) {
          return absl::InternalError(absl::StrCat("round ", round, ": ", value, " != ", expected));
        }
      }
    }
    return absl::OkStatus();
  });
  std::vector<Outcome> outcomes = CollectOutcomes(world.fds);
  testing::ReapRanks(world);
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_EQ(outcomes[rank].code, absl::StatusCode::kOk)
        << "rank " << rank << ": " << outcomes[rank].message;
  }
}

// A group aborted while a peer is stopped (alive, sockets open, reading nothing) goes away at
// once: shutting down, it neither waits for its goodbye to get past the stopped peer's full
// buffers nor for the heartbeat to give up on that peer.
TEST(HeartbeatTest, AGroupAbortedWithAStoppedPeerIsDestroyedPromptly) {
  const std::string url = "file://" + testing::TempPath("heartbeat_abort_stopped");
  constexpr int64_t kFloats = 16 << 20;  // 64 MiB: more than the socket buffers hold.
  ForkedRanks world = testing::ForkRanks(2, [&](int rank) -> absl::Status {
    auto group = testing::JoinGroup(url, rank, 2, absl::Seconds(120));
    if (!group.ok()) return group.status();
    std::vector<float> data(kFloats, 1.0f);
    const Tensor tensor = Tensor::Flat(data.data(), DType::kFloat32, kFloats);
    auto first = (*group)->AllReduce(tensor);
    if (!first.ok()) return first.status();
    if (absl::Status status = (*first)->Wait(absl::Seconds(60)); !status.ok()) return status;
    if (rank == 1) {
      raise(SIGSTOP);  // Continued by the parent once rank 0 reported.
      return absl::OkStatus();
    }
    auto second = (*group)->AllReduce(tensor);
    if (!second.ok()) return second.status();
    const absl::Status waited = (*second)->Wait(absl::Milliseconds(500));
    if (!absl::IsDeadlineExceeded(waited)) {
      return absl::InternalError(
          absl::StrCat("with rank 1 stopped the wait said ", waited.ToString()));
    }
    (void)(*group)->Abort("rank 1 stopped answering");
    const absl::Time start = absl::Now();
    group->reset();
    const absl::Duration took = absl::Now() - start;
    if (took > absl::Seconds(1)) {
      return absl::InternalError(
          absl::StrCat("destroying the aborted group took ", absl::FormatDuration(took)));
    }
    return absl::OkStatus();
  });
  const Outcome aborted = CollectOutcomes({world.fds[0]})[0];
  EXPECT_EQ(aborted.code, absl::StatusCode::kOk) << aborted.message;
  kill(world.pids[1], SIGCONT);
  CollectOutcomes({world.fds[1]});  // Whatever it says: it must not hang.
  testing::ReapRanks(world);
}

}  // namespace
}  // namespace plexus
