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
      if (ResultOf(failure) != Result::kMasterConnectionFailed) _exit(Fail(peer, "failure", failure));
      if (x[0] != 1.0f) _exit(Fail(peer, "buffer not restored after the master's loss"));
      int64_t killed_at = 0;
      if (read(killed[0], &killed_at, sizeof(killed_at)) != sizeof(killed_at)) _exit(Fail(peer, "pipe"));
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
      if (!info.ok() || x[0] != kWorld) _exit(Fail(peer, "all_reduce after the restart", info.status()));
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
  absl::Status status = testing::RunInChildren(kWorld, [&](int peer) {
    auto comm = MakePeer(port);
    if (absl::Status s = JoinWorld(*comm, kWorld); !s.ok()) return Fail(peer, "join", s);
    std::vector<float> x(1000, 1.0f);
    auto info = comm->AllReduce(x.data(), x.data(), Floats(x.size()));
    if (!info.ok() || info->local_world_size != kWorld) return Fail(peer, "together", info.status());
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
        if (absl::Now() - start > absl::Seconds(2)) return Fail(peer, "the leave took too long");
        return failures <= 1 ? 0 : Fail(peer, absl::StrCat(failures, " failed calls"));
      }
    }
    return Fail(peer, "the peer that left is still in the group");
  }, absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace plexus::elastic
