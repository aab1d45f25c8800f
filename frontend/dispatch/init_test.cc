// init_process_group with each init method, forming worlds of forked processes.
#include "frontend/dispatch/init.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/interface/backend_registry.h"
#include "base/net/socket_util.h"
#include "base/store/hash_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_env.h"
#include "tests/testing/store_backend.h"
#include "tests/testing/subprocess.h"

namespace plexus {
namespace {

using ::testing::HasSubstr;

constexpr int kWorld = 4;

int FreePort() {
  auto probe = ListenTcp("127.0.0.1", 0);
  return probe.ok() ? *LocalPort(probe->get()) : 0;
}

// In a child: the sum over ranks of (rank + 1) must reach every rank, and a broadcast from
// the last rank must arrive. Returns an exit code.
int CheckWorld(absl::StatusOr<std::shared_ptr<ProcessGroup>> group, int expected_rank) {
  if (!group.ok()) {
    fprintf(stderr, "rank %d: %s\n", expected_rank, std::string(group.status().message()).c_str());
    return 1;
  }
  ProcessGroup& pg = **group;
  if (pg.rank() != expected_rank || pg.size() != kWorld) return 2;
  std::vector<float> values(5, static_cast<float>(pg.rank() + 1));
  auto work = pg.AllReduce(Tensor::Flat(values.data(), DType::kFloat32, 5));
  if (!work.ok() || !(*work)->Wait(absl::Seconds(30)).ok()) return 3;
  for (float v : values) {
    if (v != kWorld * (kWorld + 1) / 2) return 4;
  }
  int64_t token = pg.rank() == kWorld - 1 ? 42 : -1;
  BroadcastOptions options;
  options.root_rank = kWorld - 1;
  auto broadcast = pg.Broadcast(Tensor::Flat(&token, DType::kInt64, 1), options);
  if (!broadcast.ok() || !(*broadcast)->Wait(absl::Seconds(30)).ok() || token != 42) return 5;
  // Rank 0 hosts the TCPStore: it must not exit while others still talk to it.
  return pg.Shutdown(absl::Seconds(30)).ok() ? 0 : 6;
}

InitOptions Options(const std::string& init_method, int rank) {
  InitOptions options;
  options.backend = testing::kStoreBackendName;
  options.init_method = init_method;
  options.rank = rank;
  options.world_size = kWorld;
  options.timeout = absl::Seconds(30);
  return options;
}

TEST(InitProcessGroupTest, FileInitMethodFormsAWorldOfFour) {
  const std::string url = "file://" + testing::TempPath("init_file");
  absl::Status status = testing::RunInChildren(
      kWorld, [&](int rank) { return CheckWorld(InitProcessGroup(Options(url, rank)), rank); },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(InitProcessGroupTest, TcpInitMethodFormsAWorldOfFour) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(FreePort());
  absl::Status status = testing::RunInChildren(
      kWorld, [&](int rank) { return CheckWorld(InitProcessGroup(Options(url, rank)), rank); },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

// Rank 1 knows another secret: the store rank 0 serves refuses it at once, and rank 0, left
// waiting, says so when it times out instead of only "rank 1 never arrived".
TEST(InitProcessGroupTest, ARankTheStoreRefusedIsNamedInTheTimeout) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(FreePort());
  absl::Status status = testing::RunInChildren(
      2,
      [&](int rank) {
        InitOptions options = Options(url, rank);
        options.world_size = 2;
        options.timeout = absl::Seconds(rank == 0 ? 4 : 2);
        options.secret = rank == 0 ? "the secret rank 0 and its store know"
                                   : "another secret, which rank 1 was given";
        auto group = InitProcessGroup(options);
        if (rank == 1) {
          if (group.status().code() == absl::StatusCode::kUnauthenticated) return 0;
          fprintf(stderr, "rank 1: %s\n", group.status().ToString().c_str());
          return 1;
        }
        const std::string message(group.status().message());
        if (group.status().code() == absl::StatusCode::kDeadlineExceeded &&
            message.find("never arrived: rank(s) 1") != std::string::npos &&
            message.find("meanwhile this rank's store server 1 connection(s) refused") !=
                std::string::npos) {
          return 0;
        }
        fprintf(stderr, "rank 0: %s\n", group.status().ToString().c_str());
        return 1;
      },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(InitProcessGroupTest, TcpInitMethodTakesRankFromTheUrl) {
  const int port = FreePort();
  absl::Status status = testing::RunInChildren(
      kWorld,
      [&](int rank) {
        InitOptions options =
            Options("tcp://127.0.0.1:" + std::to_string(port) + "?rank=" + std::to_string(rank) +
                        "&world_size=" + std::to_string(kWorld),
                    -1);
        options.world_size = -1;
        return CheckWorld(InitProcessGroup(options), rank);
      },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(InitProcessGroupTest, EnvInitMethodReadsTheEnvironment) {
  const std::string port = std::to_string(FreePort());
  absl::Status status = testing::RunInChildren(
      kWorld,
      [&](int rank) {
        // Each child is its own process, so its environment is its own.
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", port.c_str(), 1);
        setenv("RANK", std::to_string(rank).c_str(), 1);
        setenv("WORLD_SIZE", std::to_string(kWorld).c_str(), 1);
        return CheckWorld(InitProcessGroup(Options("env://", -1)), rank);
      },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(InitProcessGroupTest, EnvFallsBackToSlurmAndOpenMpiVariables) {
  for (const auto& [rank_var, size_var] : std::vector<std::pair<std::string, std::string>>{
           {"SLURM_PROCID", "SLURM_NTASKS"}, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}}) {
    const std::string port = std::to_string(FreePort());
    std::map<std::string, std::string> base = {
        {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}, {size_var, "4"}};
    absl::Status status = testing::RunInChildren(
        kWorld,
        [&](int rank) {
          std::map<std::string, std::string> env = base;
          env[rank_var] = std::to_string(rank);
          return CheckWorld(InitProcessGroup(Options("env://", -1), testing::FakeEnv(env)), rank);
        },
        absl::Seconds(60));
    EXPECT_TRUE(status.ok()) << rank_var << ": " << status;
  }
}

TEST(InitProcessGroupTest, MissingEnvironmentIsAClearError) {
  EnvLookup empty = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  auto group = InitProcessGroup(Options("env://", -1), empty);
  EXPECT_EQ(group.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(group.status().message(),
              HasSubstr("RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID"));

  EnvLookup no_master = [](const std::string& name) -> std::optional<std::string> {
    if (name == "RANK") return "0";
    if (name == "WORLD_SIZE") return "1";
    return std::nullopt;
  };
  group = InitProcessGroup(Options("env://", -1), no_master);
  EXPECT_THAT(group.status().message(), HasSubstr("MASTER_ADDR and MASTER_PORT"));

  EXPECT_THAT(InitProcessGroup(Options("udp://x:1", 0)).status().message(),
              HasSubstr("unknown scheme 'udp'"));
  EXPECT_THAT(InitProcessGroup(Options("tcp://nohost", 0)).status().message(),
              HasSubstr("host:port"));
  EXPECT_THAT(InitProcessGroup(Options("file://relative", 0)).status().message(),
              HasSubstr("absolute path"));
  EXPECT_THAT(InitProcessGroup(Options("file:///tmp/x", 5)).status().message(),
              HasSubstr("rank 5 is outside [0, 4)"));
}

TEST(InitProcessGroupTest, WrongBackendStringListsRegisteredBackends) {
  InitOptions options = Options("file://" + testing::TempPath("init_bad_backend"), 0);
  options.world_size = 1;
  options.backend = "cpu:nosuchbackend";
  auto group = InitProcessGroup(options);
  EXPECT_EQ(group.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(group.status().message(), HasSubstr("unknown backend 'nosuchbackend'"));
  EXPECT_THAT(group.status().message(), HasSubstr("registered backends: storetest"));
}

TEST(InitProcessGroupTest, MissingRankTimesOutNamingArrivals) {
  InitOptions options = Options("file://" + testing::TempPath("init_missing"), 0);
  options.world_size = 3;
  options.timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  auto group = InitProcessGroup(options);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_EQ(group.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(group.status().message(), HasSubstr("1/3 arrived"));
  EXPECT_THAT(group.status().message(), HasSubstr("never arrived: rank(s) 1, 2"));
}

TEST(InitProcessGroupTest, DuplicateRankIsRejected) {
  const std::string url = "file://" + testing::TempPath("init_duplicate");
  InitOptions options = Options(url, 1);
  options.world_size = 2;
  options.timeout = absl::Milliseconds(200);
  (void)InitProcessGroup(options);  // Claims rank 1, then times out waiting for rank 0.
  auto second = InitProcessGroup(options);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("rank 1 was already claimed"));
}

TEST(InitProcessGroupTest, LauncherSchemeServesTheDefaultInitMethod) {
  // A backend that names a launcher rendezvous (as mpi names mpi://) gets it when the caller
  // leaves init_method at env:// and no MASTER_ADDR is set.
  static int launches = 0;
  ASSERT_TRUE(
      RegisterRendezvousScheme("fakelaunch",
                               [](int, int, absl::Duration) -> absl::StatusOr<RendezvousResult> {
                                 ++launches;
                                 return RendezvousResult{std::make_shared<HashStore>(), 0, 1};
                               })
          .ok());
  EXPECT_EQ(RegisterRendezvousScheme("fakelaunch", nullptr).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(RegisterRendezvousScheme("env", nullptr).code(), absl::StatusCode::kAlreadyExists);
  auto storetest = BackendRegistry::Global().Find(testing::kStoreBackendName);
  ASSERT_TRUE(storetest.ok());
  ASSERT_TRUE(BackendRegistry::Global()
                  .Register({"launched", {DeviceType::kCpu}, storetest->factory, "fakelaunch://"})
                  .ok());
  InitOptions options;
  options.backend = "cpu:launched";
  options.timeout = absl::Seconds(10);
  auto no_env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  auto group = InitProcessGroup(options, no_env);
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(launches, 1);
  EXPECT_EQ((*group)->rank(), 0);
  EXPECT_EQ((*group)->size(), 1);
  EXPECT_TRUE((*group)->Shutdown(absl::Seconds(10)).ok());

  // With MASTER_ADDR set, env:// is what the caller asked for.
  auto master_only = [](const std::string& name) -> std::optional<std::string> {
    if (name == "MASTER_ADDR") return std::string("127.0.0.1");
    return std::nullopt;
  };
  EXPECT_FALSE(InitProcessGroup(options, master_only).ok());
  EXPECT_EQ(launches, 1);
  // A string mixing it with a backend that has no launcher keeps env:// too.
  ASSERT_TRUE(
      BackendRegistry::Global().Register({"plain", {DeviceType::kCuda}, storetest->factory}).ok());
  options.backend = "cpu:launched,cuda:plain";
  auto mixed = InitProcessGroup(options, no_env);
  ASSERT_FALSE(mixed.ok());
  EXPECT_THAT(std::string(mixed.status().message()), HasSubstr("rank is not known"));
  EXPECT_EQ(launches, 1);
  EXPECT_TRUE(BackendRegistry::Global().Unregister("launched"));
  EXPECT_TRUE(BackendRegistry::Global().Unregister("plain"));
}

TEST(NewGroupTest, SubgroupReducesAmongItsMembersOnly) {
  const std::string url = "file://" + testing::TempPath("new_group");
  absl::Status status = testing::RunInChildren(
      kWorld,
      [&](int rank) {
        auto world = InitProcessGroup(Options(url, rank));
        if (!world.ok()) return 1;
        auto pair = (*world)->NewGroup({1, 0});
        auto rest = (*world)->NewGroup({2, 3});
        if (!pair.ok() || !rest.ok()) return 2;
        auto mine = rank < 2 ? *pair : *rest;
        auto other = rank < 2 ? *rest : *pair;
        if (mine == nullptr || other != nullptr) return 3;
        if (mine->rank() != rank % 2 || mine->size() != 2) return 4;
        if (mine->global_ranks()[1] != (rank < 2 ? 1 : 3)) return 5;
        int64_t value = rank;
        auto work = mine->AllReduce(Tensor::Flat(&value, DType::kInt64, 1));
        if (!work.ok() || !(*work)->Wait(absl::Seconds(30)).ok()) return 6;
        if (value != (rank < 2 ? 0 + 1 : 2 + 3)) return 7;
        return (*world)->Shutdown(absl::Seconds(30)).ok() ? 0 : 8;
      },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(NewGroupTest, BadRanksAreRejected) {
  InitOptions options = Options("file://" + testing::TempPath("new_group_bad"), 0);
  options.world_size = 1;
  auto world = InitProcessGroup(options);
  ASSERT_TRUE(world.ok()) << world.status();
  EXPECT_THAT((*world)->NewGroup({0, 3}).status().message(), HasSubstr("rank 3 is outside"));
  EXPECT_THAT((*world)->NewGroup({0, 0}).status().message(), HasSubstr("listed twice"));
  EXPECT_THAT((*world)->NewGroup({}).status().message(), HasSubstr("no ranks"));
}

TEST(CompanionTest, RunsBesideItsGroupUnderItsOwnName) {
  const std::string url = "file://" + testing::TempPath("companion");
  absl::Status status = testing::RunInChildren(
      kWorld,
      [&](int rank) {
        auto world = InitProcessGroup(Options(url, rank));
        if (!world.ok()) return 1;
        // Built from another thread while this one issues on the group itself: the two
        // queues do not meet.
        absl::StatusOr<std::shared_ptr<ProcessGroup>> side;
        std::thread build([&] { side = (*world)->Companion("side"); });
        int64_t value = rank;
        auto main = (*world)->AllReduce(Tensor::Flat(&value, DType::kInt64, 1));
        build.join();
        if (!side.ok() || *side == nullptr) return 2;
        if ((*side)->name() != (*world)->name() + ".side" || (*side)->size() != kWorld) return 3;
        int64_t beside = 10 * rank;
        auto work = (*side)->AllReduce(Tensor::Flat(&beside, DType::kInt64, 1));
        if (!work.ok() || !(*work)->Wait(absl::Seconds(30)).ok()) return 4;
        if (!main.ok() || !(*main)->Wait(absl::Seconds(30)).ok()) return 5;
        if (value != 0 + 1 + 2 + 3 || beside != 10 * (0 + 1 + 2 + 3)) return 6;
        if (!(*side)->Shutdown(absl::Seconds(30)).ok()) return 7;
        return (*world)->Shutdown(absl::Seconds(30)).ok() ? 0 : 8;
      },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(CompanionTest, PurposeMustBeOneWord) {
  InitOptions options = Options("file://" + testing::TempPath("companion_bad"), 0);
  options.world_size = 1;
  auto world = InitProcessGroup(options);
  ASSERT_TRUE(world.ok()) << world.status();
  EXPECT_THAT((*world)->Companion("a.b").status().message(), HasSubstr("must be one word"));
  EXPECT_THAT((*world)->Companion("").status().message(), HasSubstr("must be one word"));
}

}  // namespace
}  // namespace plexus
