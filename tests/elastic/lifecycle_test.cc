// Peers and masters coming and going: a master that dies fails every peer's calls at once with
// MASTER_CONNECTION_FAILED (buffers intact) and a master restarted at the same address can be
// joined again; a peer that leaves gracefully is gone from the others' next all-reduce at once.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "frontend/elastic/communicator.h"
#include "frontend/elastic/shared_state.h"
#include "gtest/gtest.h"
#include "tests/elastic/elastic_peers.h"
#include "tests/testing/subprocess.h"

namespace plexus::elastic {
namespace {

ReduceDescriptor Floats(size_t count) {
  ReduceDescriptor d;
  d.count = static_cast<int64_t>(count);
  return d;
}

TEST(LifecycleTest, LostMasterFailsCallsAtOnceAndARestartedMasterCanBeJoined) {
  constexpr int kWorld = 2;
  auto master = StartMaster(absl::Seconds(2));
  ASSERT_NE(master, nullptr);
  const int port = master->port();
  int ready[2], killed[2], restarted[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(killed), 0);
  ASSERT_EQ(pipe(restarted), 0);
  std::vector<pid_t> pids;
  for (int peer = 0; peer < kWorld; ++peer) {
    const pid_t pid = fork();
    if (pid == 0) {
      auto comm = MakePeer(port);
      if (!JoinWorld(*comm, kWorld).ok()) _exit(Fail(peer, "join"));
      [[maybe_unused]] ssize_t n = write(ready[1], "r", 1);
      std::vector<float> x(1 << 16);
      absl::Status failure;
      const absl::Time give_up = absl::Now() + absl::Seconds(30);
      while (failure.ok() && absl::Now() < give_up) {
        std::fill(x.begin(), x.end(), 1.0f);
        auto info = comm->AllReduce(x.data(), x.data(), Floats(x.size()));
        failure = info.status();
        if (info.ok() && x[0] != kWorld) _exit(Fail(peer, "wrong sum"));
      }
      const int64_t failed_at = absl::ToUnixNanos(absl::Now());
      if (ResultOf(failure) != Result::kMasterConnectionFailed)
        _exit(Fail(peer, "failure", failure));
      if (x[0] != 1.0f) _exit(Fail(peer, "buffer not restored after the master's loss"));
      int64_t killed_at = 0;
      if (read(killed[0], &killed_at, sizeof(killed_at)) != sizeof(killed_at))
        _exit(Fail(peer, "pipe"));
      if (failed_at - killed_at > 1'000'000'000) {
        _exit(Fail(peer, absl::StrCat("noticed the master's loss after ",
                                      (failed_at - killed_at) / 1e6, " ms")));
      }
      // Every call now says what happened, at once.
      const absl::Time start = absl::Now();
      auto again = comm->AllReduce(x.data(), x.data(), Floats(x.size()));
      if (again.ok() || ResultOf(again.status()) != Result::kMasterConnectionFailed ||
          absl::Now() - start > absl::Seconds(1)) {
        _exit(Fail(peer, "a call after the loss", again.status()));
      }
      char byte;
      if (read(restarted[0], &byte, 1) != 1) _exit(Fail(peer, "pipe"));
      if (absl::Status s = JoinWorld(*comm, kWorld); !s.ok()) _exit(Fail(peer, "rejoin", s));
      std::fill(x.begin(), x.end(), 1.0f);
      auto info = comm->AllReduce(x.data(), x.data(), Floats(x.size()));
      if (!info.ok() || x[0] != kWorld)
        _exit(Fail(peer, "all_reduce after the restart", info.status()));
      _exit(0);
    }
    pids.push_back(pid);
  }
  char byte;
  for (int i = 0; i < kWorld; ++i) ASSERT_EQ(read(ready[0], &byte, 1), 1);
  master.reset();  // SIGKILL.
  const int64_t now = absl::ToUnixNanos(absl::Now());
  for (int i = 0; i < kWorld; ++i) ASSERT_EQ(write(killed[1], &now, sizeof(now)), sizeof(now));
  auto again = StartMaster(absl::Seconds(2), absl::StrCat("127.0.0.1:", port));
  ASSERT_NE(again, nullptr);
  ASSERT_EQ(again->port(), port);
  for (int i = 0; i < kWorld; ++i) ASSERT_EQ(write(restarted[1], "g", 1), 1);
  for (int peer = 0; peer < kWorld; ++peer) {
    int wstatus = 0;
    waitpid(pids[peer], &wstatus, 0);
    EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "peer " << peer;
  }
}

TEST(LifecycleTest, GracefulLeaveShrinksTheGroupForTheNextCall) {
  constexpr int kWorld = 3;
  auto master = StartMaster();
  ASSERT_NE(master, nullptr);
  const int port = master->port();
  absl::Status status = RunJoinedPeers(
      port, kWorld,
      [&](int peer, std::unique_ptr<Communicator>& comm) {
        std::vector<float> x(1000, 1.0f);
        auto info = comm->AllReduce(x.data(), x.data(), Floats(x.size()));
        if (!info.ok() || info->local_world_size != kWorld)
          return Fail(peer, "together", info.status());
        if (peer == 2) {
          comm.reset();  // Leaves: the master drops it now, not at a heartbeat timeout.
          return 0;
        }
        const absl::Time start = absl::Now();
        int failures = 0;
        while (absl::Now() - start < absl::Seconds(10)) {
          std::fill(x.begin(), x.end(), 1.0f);
          info = comm->AllReduce(x.data(), x.data(), Floats(x.size()));
          if (!info.ok()) {
            if (info.status().code() != absl::StatusCode::kUnavailable || x[0] != 1.0f) {
              return Fail(peer, "an op the leave interrupted", info.status());
            }
            ++failures;
            continue;
          }
          if (info->local_world_size == kWorld - 1) {
            if (x[0] != kWorld - 1) return Fail(peer, "wrong sum after the leave");
            if (absl::Now() - start > absl::Seconds(2))
              return Fail(peer, "the leave took too long");
            return failures <= 1 ? 0 : Fail(peer, absl::StrCat(failures, " failed calls"));
          }
        }
        return Fail(peer, "the peer that left is still in the group");
      },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

// Two peer groups of two under one master: all-reduces and shared state stay within a group,
// the same tags are used by both at once, and the attributes count both.
TEST(LifecycleTest, PeerGroupsReduceAndSyncSeparately) {
  constexpr int kWorld = 4;
  auto master = StartMaster();
  ASSERT_NE(master, nullptr);
  const int port = master->port();
  // Nobody leaves before everyone checked (a leave changes the global attributes).
  int arrive[2], release[2];
  ASSERT_EQ(pipe(arrive), 0);
  ASSERT_EQ(pipe(release), 0);
  auto barrier = [&](int peer) {
    char byte = 'x';
    if (write(arrive[1], &byte, 1) != 1) return false;
    if (peer != 0) return read(release[0], &byte, 1) == 1;
    for (int i = 0; i < kWorld; ++i) {
      if (read(arrive[0], &byte, 1) != 1) return false;
    }
    for (int i = 1; i < kWorld; ++i) {
      if (write(release[1], &byte, 1) != 1) return false;
    }
    return true;
  };
  absl::Status status = testing::RunInChildren(
      kWorld,
      [&](int peer) {
        const int group = peer % 2;
        CommunicatorOptions options;
        options.master_address = absl::StrCat("127.0.0.1:", port);
        options.peer_group = group;
        options.operation_timeout = absl::Seconds(60);
        options.accept_timeout = absl::Seconds(60);
        auto comm = Communicator::Create(options);
        if (!comm.ok()) return Fail(peer, "create", comm.status());
        if (absl::Status s = JoinWorld(**comm, kWorld); !s.ok()) return Fail(peer, "join", s);
        const std::pair<Attribute, int64_t> want[] = {{Attribute::kGlobalWorldSize, 4},
                                                      {Attribute::kLocalWorldSize, 2},
                                                      {Attribute::kNumDistinctPeerGroups, 2},
                                                      {Attribute::kLargestPeerGroupWorldSize, 2}};
        for (const auto& [attribute, value] : want) {
          auto got = (*comm)->GetAttribute(attribute);
          if (!got.ok() || *got != value) {
            return Fail(peer, absl::StrCat("attribute ", static_cast<int>(attribute), " is ",
                                           got.ok() ? *got : -1, ", want ", value));
          }
        }
        // Group g's peers contribute 10 g + 1: a sum over the group is 20 g + 2.
        std::vector<float> x(5000, 10.0f * group + 1);
        auto info = (*comm)->AllReduce(x.data(), x.data(), Floats(x.size()));
        if (!info.ok() || info->local_world_size != 2 || x[0] != 20.0f * group + 2) {
          return Fail(peer, absl::StrCat("group all_reduce gave ", x[0]), info.status());
        }
        // Each group keeps its own state: the lower peer of the group holds revision 3 + group.
        std::vector<float> weights(100, peer < 2 ? 7.0f + group : 0.0f);
        SharedState state;
        state.revision = peer < 2 ? 3 + group : 0;
        state.tensors = {{"w", weights.data(), 100, DType::kFloat32, false}};
        auto synced = (*comm)->SyncSharedState(
            state, peer < 2 ? SyncStrategy::kEnforcePopular : SyncStrategy::kReceiveOnly);
        if (!synced.ok()) return Fail(peer, "sync", synced.status());
        if (state.revision != static_cast<uint64_t>(3 + group) || weights[99] != 7.0f + group) {
          return Fail(peer, absl::StrCat("group ", group, " state: revision ", state.revision));
        }
        return barrier(peer) ? 0 : Fail(peer, "barrier");
      },
      absl::Seconds(120));
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace plexus::elastic
