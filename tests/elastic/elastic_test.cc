// The elastic communicator with peers as forked processes and the master in a child process:
// every op x dtype against a local reference, bit-identical results across peers, concurrent
// tags, a peer disagreeing on a tag, a peer SIGKILLed during a batch of concurrent all-reduces
// (20 runs: survivors' results must be the reduction over exactly the final peers), a frozen
// peer expelled by heartbeat that may connect again, and a lost master.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/elastic/communicator.h"
#include "frontend/elastic/master_node.h"
#include "frontend/elastic/shared_state.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/elastic/elastic_peers.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/typed_buffer.h"

namespace plexus::elastic {
namespace {

using ::testing::HasSubstr;

// Element i of peer p's input for (op, dtype): small integers, so every order of reduction is
// exact and the reference is computed here in double.
double Input(int peer, int64_t i, ReduceOpKind op) {
  if (op == ReduceOpKind::kProduct) return ((peer + i) % 3 == 0) ? 2.0 : 1.0;
  return static_cast<double>((peer * 7 + i * 3) % 11) - (op == ReduceOpKind::kMin ? 5 : 0);
}

double Reference(int world, int64_t i, ReduceOpKind op) {
  double acc = Input(0, i, op);
  for (int p = 1; p < world; ++p) {
    const double x = Input(p, i, op);
    switch (op) {
      case ReduceOpKind::kSum:
      case ReduceOpKind::kAvg:
        acc += x;
        break;
      case ReduceOpKind::kProduct:
        acc *= x;
        break;
      case ReduceOpKind::kMin:
        acc = std::min(acc, x);
        break;
      case ReduceOpKind::kMax:
        acc = std::max(acc, x);
        break;
      default:
        break;
    }
  }
  return op == ReduceOpKind::kAvg ? acc / world : acc;
}

TEST(ElasticTest, EveryOpAndDtypeMatchesTheReferenceBitIdenticallyOnEveryPeer) {
  constexpr int kWorld = 3;
  auto master = StartMaster();
  ASSERT_NE(master, nullptr);
  const std::string dir = testing::TempPath("digests");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const int port = master->port();
  absl::Status status = RunJoinedPeers(
      port, kWorld,
      [&](int peer, std::unique_ptr<Communicator>& comm) {
        std::ofstream digest(absl::StrCat(dir, "/", peer));
        const DType dtypes[] = {DType::kUInt8,    DType::kInt8,    DType::kInt16,
                                DType::kInt32,    DType::kInt64,   DType::kFloat16,
                                DType::kBFloat16, DType::kFloat32, DType::kFloat64};
        const ReduceOpKind ops[] = {ReduceOpKind::kSum, ReduceOpKind::kAvg, ReduceOpKind::kProduct,
                                    ReduceOpKind::kMin, ReduceOpKind::kMax};
        uint64_t tag = 0;
        for (DType dtype : dtypes) {
          for (ReduceOpKind op : ops) {
            const bool floating = IsFloatingPoint(dtype);
            if (op == ReduceOpKind::kAvg && !floating) continue;
            if (op == ReduceOpKind::kMin && dtype == DType::kUInt8) continue;
            for (int64_t count : {int64_t{1}, int64_t{1000}, int64_t{70001}}) {
              testing::TypedBuffer send(dtype, count), recv(dtype, count);
              for (int64_t i = 0; i < count; ++i) send.Set(i, Input(peer, i, op));
              ReduceDescriptor d;
              d.count = count;
              d.dtype = dtype;
              d.op = op;
              d.tag = tag++;
              auto info = comm->AllReduce(send.data(), recv.data(), d);
              if (!info.ok()) return Fail(peer, DescribeReduce(d), info.status());
              if (info->local_world_size != kWorld) return Fail(peer, "world size");
              for (int64_t i = 0; i < count; ++i) {
                const double want = Reference(kWorld, i, op);
                const double got = recv.Get(i);
                if (std::fabs(got - want) > (floating ? 1e-2 * std::fabs(want) + 1e-3 : 0)) {
                  return Fail(peer, absl::StrCat(DescribeReduce(d), " element ", i, ": ", got,
                                                 " != ", want));
                }
              }
              digest << ContentHash(recv.bytes(), recv.nbytes()) << "\n";
            }
          }
        }
        return 0;
      },
      absl::Seconds(240));
  ASSERT_TRUE(status.ok()) << status;
  ExpectSameOnEveryPeer(dir, kWorld);
}

TEST(ElasticTest, ConcurrentTagsInAnyOrderAndMismatchIsAnErrorOnEveryPeer) {
  constexpr int kWorld = 4;
  auto master = StartMaster();
  ASSERT_NE(master, nullptr);
  const int port = master->port();
  absl::Status status = RunJoinedPeers(
      port, kWorld,
      [&](int peer, std::unique_ptr<Communicator>& comm) {
        // 16 tags in flight, issued in a different order on every peer. The even ones are large
        // enough to take shared-memory turns (the peers share this host), the odd ones go over the
        // rings: both kinds interleave in every order.
        constexpr int kTags = 16;
        std::vector<std::vector<float>> data(kTags);
        for (int tag = 0; tag < kTags; ++tag) data[tag].resize(tag % 2 == 0 ? 150000 : 50000);
        std::vector<WorkPtr> works(kTags);
        std::vector<int> order(kTags);
        for (int k = 0; k < kTags; ++k) order[k] = (peer % 2 == 0) ? k : kTags - 1 - k;
        for (int tag : order) {
          for (size_t i = 0; i < data[tag].size(); ++i)
            data[tag][i] = static_cast<float>(peer + tag + i % 5);
          ReduceDescriptor d;
          d.count = static_cast<int64_t>(data[tag].size());
          d.tag = static_cast<uint64_t>(tag);
          works[tag] = comm->AllReduceAsync(data[tag].data(), data[tag].data(), d);
        }
        // Reusing a tag in flight is refused at once.
        ReduceDescriptor again;
        again.count = 1;
        again.tag = static_cast<uint64_t>(order.back());
        float one = 1;
        absl::Status reuse = comm->AllReduceAsync(&one, &one, again)->Wait(absl::Seconds(1));
        if (reuse.code() != absl::StatusCode::kInvalidArgument)
          return Fail(peer, "tag reuse", reuse);
        for (int tag = 0; tag < kTags; ++tag) {
          if (absl::Status s = works[tag]->Wait(absl::Seconds(60)); !s.ok())
            return Fail(peer, "op", s);
          for (size_t i = 0; i < data[tag].size(); ++i) {
            const float want = static_cast<float>(6 + 4 * (tag + i % 5));
            if (data[tag][i] != want) return Fail(peer, absl::StrCat("tag ", tag, " wrong"));
          }
        }
        // Peer 2 disagrees on the count of tag 99: every peer fails, and its buffer is intact.
        std::vector<float> x(peer == 2 ? 1001 : 1000, 3.0f);
        ReduceDescriptor d;
        d.count = static_cast<int64_t>(x.size());
        d.tag = 99;
        auto info = comm->AllReduce(x.data(), x.data(), d);
        if (info.ok()) return Fail(peer, "mismatch accepted");
        if (info.status().code() != absl::StatusCode::kFailedPrecondition ||
            std::string(info.status().message()).find("disagree") == std::string::npos) {
          return Fail(peer, "mismatch error", info.status());
        }
        for (float v : x) {
          if (v != 3.0f) return Fail(peer, "buffer changed by a failed all-reduce");
        }
        // Peer 1 disagrees on the op: no garbage either.
        d.count = 1000;
        d.tag = 100;
        d.op = peer == 1 ? ReduceOpKind::kMax : ReduceOpKind::kSum;
        x.assign(1000, 3.0f);
        info = comm->AllReduce(x.data(), x.data(), d);
        if (info.ok() || info.status().code() != absl::StatusCode::kFailedPrecondition) {
          return Fail(peer, "op mismatch", info.status());
        }
        for (float v : x) {
          if (v != 3.0f) return Fail(peer, "buffer changed by a failed all-reduce");
        }
        // And the communicator still works.
        d.op = ReduceOpKind::kSum;
        d.tag = 101;
        info = comm->AllReduce(x.data(), x.data(), d);
        if (!info.ok() || x[0] != 12.0f) return Fail(peer, "after mismatch", info.status());
        return 0;
      },
      absl::Seconds(120));
  EXPECT_TRUE(status.ok()) << status;
}

// Peers run batches of concurrent in-place all-reduces of ones; one peer is SIGKILLed at a random
// moment. Every result must equal the number of peers the batch finally ran over - a retry that
// re-added reduced data would show as 6 or 9 - and the survivors must go on.
TEST(ElasticTest, SigkillDuringConcurrentBatchesTwentyTimes) {
  constexpr int kWorld = 4;
  const int runs = getenv("ELASTIC_RUNS") ? atoi(getenv("ELASTIC_RUNS")) : 20;
  std::mt19937 random(12345);
  for (int run = 0; run < runs; ++run) {
    auto master = StartMaster();
    ASSERT_NE(master, nullptr);
    const int port = master->port();
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const int victim = 1 + run % (kWorld - 1);
    std::vector<pid_t> pids;
    for (int peer = 0; peer < kWorld; ++peer) {
      const pid_t pid = fork();
      if (pid == 0) {
        close(ready[0]);
        auto comm = MakePeer(port);
        if (!JoinWorld(*comm, kWorld).ok()) _exit(Fail(peer, "join"));
        [[maybe_unused]] ssize_t n = write(ready[1], "r", 1);
        close(ready[1]);
        // Two in three take shared-memory turns as one round; the rest run over the rings
        // beside it.
        constexpr int kTensors = 12;
        std::vector<std::vector<float>> tensors(kTensors);
        for (int t = 0; t < kTensors; ++t) tensors[t].resize(t % 3 == 2 ? 1 << 10 : 1 << 16);
        int after_loss = 0;
        const absl::Time deadline = absl::Now() + absl::Seconds(60);
        while (after_loss < 3 && absl::Now() < deadline) {
          std::vector<ReduceOpDescriptor> ops(kTensors);
          for (int t = 0; t < kTensors; ++t) {
            std::fill(tensors[t].begin(), tensors[t].end(), 1.0f);
            ops[t].send = ops[t].recv = tensors[t].data();
            ops[t].descriptor.count = static_cast<int64_t>(tensors[t].size());
            ops[t].descriptor.tag = static_cast<uint64_t>(t);
          }
          auto info = comm->AllReduceMultipleWithRetry(ops, 4);
          if (!info.ok()) _exit(Fail(peer, "batch", info.status()));
          const float want = static_cast<float>(info->local_world_size);
          for (int t = 0; t < kTensors; ++t) {
            for (float v : tensors[t]) {
              if (v != want) {
                _exit(Fail(peer, absl::StrCat("run ", run, " tensor ", t, ": ", v,
                                              " after a batch "
                                              "over ",
                                              info->local_world_size, " peers")));
              }
            }
          }
          if (info->local_world_size == kWorld - 1) ++after_loss;
        }
        _exit(after_loss == 3 ? 0 : Fail(peer, "never finished 3 batches without the victim"));
      }
      pids.push_back(pid);
    }
    close(ready[1]);
    char byte;
    for (int i = 0; i < kWorld; ++i) ASSERT_EQ(read(ready[0], &byte, 1), 1);
    close(ready[0]);
    usleep(std::uniform_int_distribution<int>(0, 400000)(random));  // A random point to kill at.
    kill(pids[victim], SIGKILL);
    for (int peer = 0; peer < kWorld; ++peer) {
      int wstatus = 0;
      waitpid(pids[peer], &wstatus, 0);
      if (peer == victim) continue;
      EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)
          << "run " << run << ": survivor " << peer << " failed";
    }
  }
}

// A SIGSTOPped peer is expelled after the heartbeat timeout; the others go on; when it resumes
// its operations fail with a clear error and it can connect again.
TEST(ElasticTest, FrozenPeerIsExpelledAndMayReconnect) {
  constexpr int kWorld = 3;
  auto master = StartMaster(absl::Seconds(2));
  ASSERT_NE(master, nullptr);
  const int port = master->port();
  int ready[2], resumed[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(resumed), 0);
  std::vector<pid_t> pids;
  for (int peer = 0; peer < kWorld; ++peer) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(ready[0]);
      close(resumed[1]);
      auto comm = MakePeer(port);
      if (!JoinWorld(*comm, kWorld).ok()) _exit(Fail(peer, "join"));
      [[maybe_unused]] ssize_t n = write(ready[1], "r", 1);
      if (peer == 2) {
        char byte;
        n = read(resumed[0], &byte, 1);  // Stopped and resumed by the parent meanwhile.
        std::vector<float> x(1000, 1.0f);
        ReduceDescriptor d;
        d.count = 1000;
        auto info = comm->AllReduce(x.data(), x.data(), d);
        if (info.ok()) _exit(Fail(peer, "an expelled peer's all_reduce succeeded"));
        if (ResultOf(info.status()) != Result::kMasterConnectionFailed) {
          _exit(Fail(peer, "expelled error", info.status()));
        }
        if (x[0] != 1.0f) _exit(Fail(peer, "buffer changed"));
        if (absl::Status s = comm->Connect(absl::Seconds(30)); !s.ok())
          _exit(Fail(peer, "reconnect", s));
        info = comm->AllReduce(x.data(), x.data(), d);  // Alone in... or with the others.
        _exit(info.ok() ? 0 : Fail(peer, "after reconnect", info.status()));
      }
      const absl::Time start = absl::Now();
      std::vector<float> x(1 << 20, 1.0f);
      ReduceDescriptor d;
      d.count = static_cast<int64_t>(x.size());
      while (absl::Now() - start < absl::Seconds(30)) {
        std::fill(x.begin(), x.end(), 1.0f);
        auto info = comm->AllReduce(x.data(), x.data(), d);
        if (!info.ok()) {
          if (x[0] != 1.0f) _exit(Fail(peer, "buffer not restored"));
          continue;  // The frozen peer's expulsion fails ops in flight: retry.
        }
        if (x[0] != static_cast<float>(info->local_world_size)) _exit(Fail(peer, "wrong sum"));
        if (info->local_world_size == kWorld - 1) {
          // Accept the resumed peer back if it is pending, then leave.
          _exit(0);
        }
      }
      _exit(Fail(peer, "the frozen peer was never expelled"));
    }
    pids.push_back(pid);
  }
  close(ready[1]);
  close(resumed[0]);
  char byte;
  for (int i = 0; i < kWorld; ++i) ASSERT_EQ(read(ready[0], &byte, 1), 1);
  kill(pids[2], SIGSTOP);
  const absl::Time stopped = absl::Now();
  for (int peer = 0; peer < 2; ++peer) {
    int wstatus = 0;
    waitpid(pids[peer], &wstatus, 0);
    EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "survivor " << peer;
  }
  EXPECT_LT(absl::Now() - stopped, absl::Seconds(2 + 3));
  kill(pids[2], SIGCONT);
  [[maybe_unused]] ssize_t n = write(resumed[1], "go", 1);
  close(resumed[1]);
  int wstatus = 0;
  waitpid(pids[2], &wstatus, 0);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "the resumed peer";
}

TEST(ElasticTest, UnreachableMasterAndBadInputAreClearErrors) {
  auto comm = MakePeer(1);  // Nothing listens on port 1.
  ASSERT_NE(comm, nullptr);
  absl::Status status = comm->Connect(absl::Seconds(1));
  EXPECT_EQ(ResultOf(status), Result::kMasterConnectionFailed) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("127.0.0.1:1"));
  float x = 0;
  ReduceDescriptor d;
  d.count = 1;
  EXPECT_EQ(ResultOf(comm->AllReduce(&x, &x, d).status()), Result::kNotInitialized);
  d.tag = kMaxTag;
  EXPECT_EQ(comm->AllReduce(&x, &x, d).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Communicator::Create({"no-port"}).ok());
}

}  // namespace
}  // namespace plexus::elastic
