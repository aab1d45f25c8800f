// Process-group lifecycle after a failure, with forked ranks: abort fails pending and later
// operations at once on the aborting rank; split builds groups by colour (MPI_Comm_split);
// after a SIGKILL the survivors shrink and run every kind of collective with right answers.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/core/status_macros.h"
#include "frontend/dispatch/init.h"
#include "frontend/dispatch/process_group.h"
#include "gtest/gtest.h"
#include "tests/fault/forked_ranks.h"

namespace plexus {
namespace {

using testing::ForkRanks;
using testing::JoinGroup;
using testing::Outcome;

constexpr absl::Duration kTimeout = absl::Seconds(30);

// A fresh FileStore for each group formed in this process.
std::string StoreUrl(const std::string& name) {
  static std::atomic<int> next{0};
  return absl::StrCat("file://", std::getenv("TEST_TMPDIR"), "/", name, "-", next++);
}

absl::Status Wait(absl::StatusOr<WorkPtr> work) {
  if (!work.ok()) return work.status();
  return (*work)->Wait(kTimeout);
}

absl::Status Check(bool right, absl::string_view what, int round, const ProcessGroup& group) {
  if (right) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(what, " gave a wrong answer in round ", round,
                                          " on rank ", group.rank(), " of ", group.size()));
}

// One round of eight collective kinds, each checked against values computed here.
absl::Status EveryKind(ProcessGroup& g, int round) {
  const int r = g.rank(), n = g.size(), root = round % n;
  std::vector<float> x(256, static_cast<float>(r + round));
  RETURN_IF_ERROR(Wait(g.AllReduce(Tensor::Flat(x.data(), DType::kFloat32, x.size()))));
  RETURN_IF_ERROR(Check(x[255] == n * round + n * (n - 1) / 2, "all_reduce", round, g));

  std::vector<int32_t> b(64, r == root ? round * 7 : -1);
  BroadcastOptions broadcast;
  broadcast.root_rank = root;
  RETURN_IF_ERROR(Wait(g.Broadcast(Tensor::Flat(b.data(), DType::kInt32, b.size()), broadcast)));
  RETURN_IF_ERROR(Check(b[63] == round * 7, "broadcast", round, g));

  std::vector<int64_t> mine(16, r * 1000 + round), all(16 * n);
  RETURN_IF_ERROR(Wait(g.AllGatherIntoTensor(Tensor::Flat(all.data(), DType::kInt64, all.size()),
                                             Tensor::Flat(mine.data(), DType::kInt64, 16))));
  bool gathered = true;
  for (int p = 0; p < n; ++p) gathered &= all[16 * p + 15] == p * 1000 + round;
  RETURN_IF_ERROR(Check(gathered, "all_gather_into_tensor", round, g));

  std::vector<float> chunks(16 * n), own(16);
  for (int p = 0; p < n; ++p) std::fill_n(chunks.begin() + 16 * p, 16, static_cast<float>(r + p));
  RETURN_IF_ERROR(
      Wait(g.ReduceScatterTensor(Tensor::Flat(own.data(), DType::kFloat32, 16),
                                 Tensor::Flat(chunks.data(), DType::kFloat32, chunks.size()))));
  RETURN_IF_ERROR(Check(own[0] == n * r + n * (n - 1) / 2, "reduce_scatter_tensor", round, g));

  std::vector<int32_t> out(8 * n), in(8 * n);
  for (int p = 0; p < n; ++p) std::fill_n(in.begin() + 8 * p, 8, r * 100 + p);
  RETURN_IF_ERROR(Wait(g.AllToAllSingle(Tensor::Flat(out.data(), DType::kInt32, out.size()),
                                        Tensor::Flat(in.data(), DType::kInt32, in.size()))));
  bool exchanged = true;
  for (int p = 0; p < n; ++p) exchanged &= out[8 * p] == p * 100 + r;
  RETURN_IF_ERROR(Check(exchanged, "all_to_all_single", round, g));

  std::vector<double> value(4, r + 0.5);
  std::vector<std::vector<double>> at_root(n, std::vector<double>(4));
  std::vector<Tensor> outputs;
  if (r == root) {
    for (auto& slot : at_root) outputs.push_back(Tensor::Flat(slot.data(), DType::kFloat64, 4));
  }
  GatherOptions gather;
  gather.root_rank = root;
  RETURN_IF_ERROR(Wait(g.Gather(outputs, Tensor::Flat(value.data(), DType::kFloat64, 4), gather)));
  bool collected = true;
  for (int p = 0; r == root && p < n; ++p) collected &= at_root[p][3] == p + 0.5;
  RETURN_IF_ERROR(Check(collected, "gather", round, g));

  std::vector<int64_t> top(8, r * 3 + round);
  ReduceOptions reduce;
  reduce.root_rank = root;
  reduce.op = ReduceOpKind::kMax;
  RETURN_IF_ERROR(Wait(g.Reduce(Tensor::Flat(top.data(), DType::kInt64, 8), reduce)));
  RETURN_IF_ERROR(Check(r != root || top[7] == (n - 1) * 3 + round, "reduce", round, g));

  return Wait(g.Barrier());
}

class LifecycleTest : public ::testing::TestWithParam<std::string> {};

// A rank aborts while its all_reduce waits for a peer that never joins: the wait ends at once
// with Aborted and the reason (with gloo, a native Gloo collective already running cannot be
// interrupted and ends at its own deadline, here 3 s), later calls fail at once with Aborted,
// and the process goes on.
TEST_P(LifecycleTest, AbortEndsPendingAndLaterOperationsOnThisRank) {
  const std::string url = StoreUrl("abort");
  const bool interrupts_running = GetParam() == "cpu:tcp";
  auto ranks = ForkRanks(2, [&](int rank) -> absl::Status {
    ASSIGN_OR_RETURN(auto group, JoinGroup(url, rank, 2, kTimeout, GetParam()));
    if (rank == 1) return group->store()->Wait({"rank0_done"}, kTimeout);
    std::vector<float> x(1000, 1.0f);
    AllReduceOptions options;
    options.timeout = absl::Seconds(3);
    ASSIGN_OR_RETURN(WorkPtr pending,
                     group->AllReduce(Tensor::Flat(x.data(), DType::kFloat32, x.size()), options));
    std::thread aborter([&] {
      absl::SleepFor(absl::Milliseconds(300));
      (void)group->Abort("the training loop gave up");
    });
    const absl::Time start = absl::Now();
    absl::Status waited = pending->Wait(kTimeout);
    const absl::Duration took = absl::Now() - start;
    aborter.join();
    RETURN_IF_ERROR(group->store()->Set("rank0_done", "1"));
    const bool aborted = absl::IsAborted(waited) &&
                         waited.message().find("the training loop gave up") != std::string::npos;
    if (!aborted && (interrupts_running || !absl::IsDeadlineExceeded(waited))) {
      return absl::InternalError(
          absl::StrCat("pending all_reduce ended with: ", waited.ToString()));
    }
    if (took > (interrupts_running ? absl::Seconds(2) : absl::Seconds(5))) {
      return absl::InternalError(absl::StrCat("abort took ", absl::FormatDuration(took)));
    }
    absl::StatusOr<WorkPtr> later =
        group->AllReduce(Tensor::Flat(x.data(), DType::kFloat32, x.size()));
    if (!absl::IsAborted(later.status())) {
      return absl::InternalError(
          absl::StrCat("a later all_reduce gave: ", later.status().ToString()));
    }
    return absl::OkStatus();
  });
  for (const Outcome& outcome : testing::CollectOutcomes(ranks.fds)) {
    EXPECT_EQ(outcome.code, absl::StatusCode::kOk) << outcome.message;
  }
  testing::ReapRanks(ranks);
}

// MPI_Comm_split: colours {0: ranks 0 and 2, 1: rank 1}, rank 3 in none; keys reverse the
// order, so rank 2 becomes rank 0 of its group.
TEST_P(LifecycleTest, SplitMakesGroupsByColourOrderedByKey) {
  const std::string url = StoreUrl("split");
  auto ranks = ForkRanks(4, [&](int rank) -> absl::Status {
    ASSIGN_OR_RETURN(auto world, JoinGroup(url, rank, 4, kTimeout, GetParam()));
    const int color = rank == 3 ? ProcessGroup::kNoColor : rank % 2;
    ASSIGN_OR_RETURN(auto group, world->Split(color, -rank));
    if (rank == 3) {
      return group == nullptr ? absl::OkStatus() : absl::InternalError("rank 3 got a group");
    }
    const int size = color == 0 ? 2 : 1;
    const int expected_rank = rank == 0 ? 1 : 0;
    if (group == nullptr || group->size() != size || group->rank() != expected_rank) {
      return absl::InternalError(absl::StrCat("rank ", rank, ": wrong group"));
    }
    for (int round = 0; round < 5; ++round) RETURN_IF_ERROR(EveryKind(*group, round));
    std::vector<float> x(10, static_cast<float>(rank));
    RETURN_IF_ERROR(Wait(group->AllReduce(Tensor::Flat(x.data(), DType::kFloat32, 10))));
    return Check(x[0] == (color == 0 ? 2.0f : 1.0f), "split all_reduce", 0, *group);
  });
  for (const Outcome& outcome : testing::CollectOutcomes(ranks.fds)) {
    EXPECT_EQ(outcome.code, absl::StatusCode::kOk) << outcome.message;
  }
  testing::ReapRanks(ranks);
}

// 4 ranks loop over all_reduces; rank 2 is SIGKILLed mid-run; the survivors shrink (tcp finds
// the lost rank itself; with gloo they name it) and run 100 rounds of eight collective kinds.
TEST_P(LifecycleTest, SurvivorsOfASigkillShrinkAndKeepComputingRightAnswers) {
  const int runs = testing::RunsFromEnvironment("LIFECYCLE_RUNS", 6);
  const bool finds_lost = GetParam() == "cpu:tcp";
  for (int run = 0; run < runs; ++run) {
    const std::string url = StoreUrl(absl::StrCat("shrink", run));
    int ready = 0;
    auto ranks = testing::ForkRanksLoopingAllReduce(
        4, url, GetParam(), 1 << 16, kTimeout, &ready,
        [&](int rank, ProcessGroup& world, const absl::Status&) -> absl::Status {
          ASSIGN_OR_RETURN(auto group, finds_lost ? world.ShrinkLost() : world.Shrink({2}));
          if (group == nullptr || group->size() != 3 || group->rank() != (rank < 2 ? rank : 2)) {
            return absl::InternalError(absl::StrCat("rank ", rank, ": wrong shrunk group"));
          }
          for (int round = 0; round < 100; ++round) RETURN_IF_ERROR(EveryKind(*group, round));
          return absl::OkStatus();
        });
    ASSERT_EQ(ready, 4);
    kill(ranks.pids[2], SIGKILL);
    const std::vector<Outcome> outcomes = testing::CollectOutcomes(ranks.fds);
    testing::ReapRanks(ranks);
    for (int rank : {0, 1, 3}) {
      EXPECT_EQ(outcomes[rank].code, absl::StatusCode::kOk)
          << "run " << run << ", rank " << rank << ": " << outcomes[rank].message;
    }
    if (HasFailure()) break;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, LifecycleTest, ::testing::Values("cpu:tcp", "cpu:gloo"),
                         [](const auto& info) { return testing::BackendTestName(info.param); });

}  // namespace
}  // namespace plexus
