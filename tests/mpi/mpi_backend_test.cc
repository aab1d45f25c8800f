// The mpi backend's own behaviour: what happens outside mpirun, the default rendezvous under
// mpirun, subgroups, point-to-point, deadlines, and a rank killed mid-collective. Run directly,
// the binary checks the outside-mpirun behaviour and then starts itself under mpirun (3 ranks)
// for the Launched* tests, and once more for a job in which one rank kills itself.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/store/file_store.h"
#include "frontend/dispatch/init.h"
#include "gtest/gtest.h"
#include "tests/testing/mpirun.h"
#include "tests/testing/subprocess.h"

namespace plexus {
namespace {

constexpr int kLaunchedRanks = 3;
std::string* program = new std::string;  // argv[0], for starting this binary under mpirun.

bool Launched() { return testing::MpirunWorldSize() > 0; }

#define SKIP_UNLESS_LAUNCHED() \
  if (!Launched()) GTEST_SKIP() << "runs under mpirun (the binary launches itself)"
#define SKIP_IF_LAUNCHED() \
  if (Launched()) GTEST_SKIP() << "runs outside mpirun"

std::shared_ptr<ProcessGroup> InitDefault() {
  InitOptions options;
  options.backend = "mpi";  // No init_method, no MASTER_ADDR: mpirun provides everything.
  options.timeout = absl::Seconds(30);
  auto group = InitProcessGroup(options);
  EXPECT_TRUE(group.ok()) << group.status();
  return group.ok() ? *group : nullptr;
}

TEST(MpiBackendTest, OutsideMpirunIsAClearError) {
  SKIP_IF_LAUNCHED();
  InitOptions options;
  options.backend = "cpu:mpi";
  options.init_method = "file://" + testing::TempPath("outside");
  options.rank = 0;
  options.world_size = 1;
  auto group = InitProcessGroup(options);
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().code(), absl::StatusCode::kFailedPrecondition) << group.status();
  EXPECT_NE(group.status().message().find("mpirun"), absl::string_view::npos) << group.status();

  options.init_method = "mpi://";
  group = InitProcessGroup(options);
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().code(), absl::StatusCode::kFailedPrecondition) << group.status();
}

TEST(MpiBackendTest, LaunchedDefaultInitTakesRankFromMpirun) {
  SKIP_UNLESS_LAUNCHED();
  std::shared_ptr<ProcessGroup> group = InitDefault();
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->size(), testing::MpirunWorldSize());
  EXPECT_EQ(absl::StrCat(group->rank()), std::string(std::getenv("OMPI_COMM_WORLD_RANK")));
  std::vector<int64_t> data(1000);
  std::iota(data.begin(), data.end(), group->rank());
  auto work = group->AllReduce(Tensor::Flat(data.data(), DType::kInt64, data.size()));
  ASSERT_TRUE(work.ok()) << work.status();
  ASSERT_TRUE((*work)->Wait(absl::Seconds(30)).ok());
  const int n = group->size();
  for (int64_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(data[i], n * i + n * (n - 1) / 2) << "element " << i;
  }
  EXPECT_TRUE(group->Shutdown(absl::Seconds(30)).ok());
}

TEST(MpiBackendTest, LaunchedRankThatDisagreesWithMpirunIsRejected) {
  SKIP_UNLESS_LAUNCHED();
  InitOptions options;
  options.backend = "mpi";
  options.init_method = "mpi://";
  options.rank = (std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")) + 1) % kLaunchedRanks;
  auto group = InitProcessGroup(options);
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().code(), absl::StatusCode::kInvalidArgument) << group.status();
  EXPECT_NE(group.status().message().find("mpirun started this process"), absl::string_view::npos)
      << group.status();
}

TEST(MpiBackendTest, LaunchedSubgroupAndPointToPoint) {
  SKIP_UNLESS_LAUNCHED();
  std::shared_ptr<ProcessGroup> world = InitDefault();
  ASSERT_NE(world, nullptr);
  // Ranks 0 and 2 only (not contiguous in MPI_COMM_WORLD).
  auto pair = world->NewGroup({0, 2});
  ASSERT_TRUE(pair.ok()) << pair.status();
  if (*pair != nullptr) {
    float value = world->rank() == 0 ? 1.5f : 4.0f;
    auto work = (*pair)->AllReduce(Tensor::Flat(&value, DType::kFloat32, 1));
    ASSERT_TRUE(work.ok());
    ASSERT_TRUE((*work)->Wait(absl::Seconds(30)).ok());
    EXPECT_EQ(value, 5.5f);
    EXPECT_TRUE((*pair)->Shutdown(absl::Seconds(30)).ok());
  }
  // Everyone sends its rank to rank 0, which receives from any source.
  int32_t mine = world->rank() * 10;
  if (world->rank() == 0) {
    std::vector<int> seen;
    for (int i = 1; i < world->size(); ++i) {
      int32_t got = -1;
      auto work = world->RecvAnySource(Tensor::Flat(&got, DType::kInt32, 1));
      ASSERT_TRUE(work.ok());
      ASSERT_TRUE((*work)->Wait(absl::Seconds(30)).ok());
      EXPECT_EQ(got, (*work)->source_rank() * 10);
      seen.push_back((*work)->source_rank());
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, std::vector<int>({1, 2}));
  } else {
    auto work = world->Send(Tensor::Flat(&mine, DType::kInt32, 1), 0);
    ASSERT_TRUE(work.ok());
    ASSERT_TRUE((*work)->Wait(absl::Seconds(30)).ok());
  }
  EXPECT_TRUE(world->Shutdown(absl::Seconds(30)).ok());
}

TEST(MpiBackendTest, LaunchedDeadlineFailsAndBreaksTheGroup) {
  SKIP_UNLESS_LAUNCHED();
  std::shared_ptr<ProcessGroup> world = InitDefault();
  ASSERT_NE(world, nullptr);
  Store& store = *world->store();
  float value = 1;
  if (world->rank() == 0) {
    // Rank 0 arrives alone: its all_reduce must fail at its 1 s deadline.
    AllReduceOptions options;
    options.timeout = absl::Seconds(1);
    const absl::Time start = absl::Now();
    auto work = world->AllReduce(Tensor::Flat(&value, DType::kFloat32, 1), options);
    ASSERT_TRUE(work.ok());
    absl::Status status = (*work)->Wait(absl::Seconds(20));
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
    // The group is broken from now on, with the same reason.
    auto next = world->Barrier();
    ASSERT_TRUE(next.ok());
    EXPECT_EQ((*next)->Wait(absl::Seconds(20)).code(), absl::StatusCode::kDeadlineExceeded);
    ASSERT_TRUE(store.Set("rank0_timed_out", "1").ok());
  } else {
    // The others come late (so MPI can finish rank 0's abandoned request before exit).
    ASSERT_TRUE(store.Wait({"rank0_timed_out"}, absl::Seconds(30)).ok());
    auto work = world->AllReduce(Tensor::Flat(&value, DType::kFloat32, 1));
    ASSERT_TRUE(work.ok());
    (void)(*work)->Wait(absl::Seconds(30));
  }
  EXPECT_TRUE(world->Shutdown(absl::Seconds(30)).ok());
}

// Only in the job MpirunEndsAJobWithAKilledRank starts.
TEST(MpiBackendTest, KilledRankChild) {
  if (std::getenv("PLEXUS_MPI_KILL_TEST") == nullptr || !Launched()) GTEST_SKIP();
  std::shared_ptr<ProcessGroup> world = InitDefault();
  ASSERT_NE(world, nullptr);
  std::vector<float> data(1 << 16, 1.0f);
  for (int i = 0; i < 1000000; ++i) {
    if (world->rank() == 1 && i == 20) raise(SIGKILL);
    auto work = world->AllReduce(Tensor::Flat(data.data(), DType::kFloat32, data.size()));
    ASSERT_TRUE(work.ok());
    if (!(*work)->Wait(absl::Seconds(60)).ok()) return;
  }
}

TEST(MpiBackendTest, MpirunEndsAJobWithAKilledRank) {
  SKIP_IF_LAUNCHED();
  setenv("PLEXUS_MPI_KILL_TEST", "1", 1);
  const absl::Time start = absl::Now();
  absl::Status status = testing::RunUnderMpirun(
      kLaunchedRanks, *program, {"--gtest_filter=*KilledRankChild"}, absl::Seconds(60));
  unsetenv("PLEXUS_MPI_KILL_TEST");
  // Open MPI's launcher ends the whole job when a rank dies: the survivors do not hang.
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.message().find("still running"), absl::string_view::npos) << status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << status;
}

}  // namespace
}  // namespace plexus

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  *plexus::program = argv[0];
  const int result = RUN_ALL_TESTS();
  if (plexus::testing::MpirunWorldSize() > 0 || result != 0) return result;
  // Outside mpirun: run the Launched* tests in a real MPI job, with waiting threads driving
  // MPI themselves (the conformance suite covers the progress-thread mode at 3+ ranks here).
  setenv("PLEXUS_MPI_DIRECT", "1", 1);
  absl::Status launched = plexus::testing::RunUnderMpirun(
      plexus::kLaunchedRanks, argv[0], {"--gtest_filter=*Launched*"}, absl::Seconds(240));
  fprintf(stderr, "[mpi_backend_test] mpirun -np %d: %s\n", plexus::kLaunchedRanks,
          launched.ToString().c_str());
  return launched.ok() ? 0 : 1;
}
