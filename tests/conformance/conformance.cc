#include "tests/conformance/conformance.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "algorithms/algorithm_catalog.h"
#include "algorithms/algorithm_table.h"
#include "frontend/dispatch/init.h"
#include "gtest/gtest.h"
#include "tests/testing/mpirun.h"
#include "tests/testing/subprocess.h"
#ifdef PLEXUS_TEST_CUDA
#include "tests/testing/cuda_memory.h"
#endif

namespace plexus::conformance {
namespace {

std::string& Backend() {
  static auto* backend = new std::string("cpu:tcp");
  return *backend;
}

DeviceType& DeviceTypeSlot() {
  static DeviceType type = DeviceType::kCpu;
  return type;
}

Device& RankDevice() {
  static Device device;
  return device;
}

int& RanksPerHostSlot() {
  static int ranks = 0;
  return ranks;
}

}  // namespace

int RanksPerHost() { return RanksPerHostSlot(); }
void SetRanksPerHost(int ranks) { RanksPerHostSlot() = ranks; }

namespace {
int& LargestWorldSlot() {
  static int largest = [] {
    const char* value = std::getenv("CONFORMANCE_LARGEST_WORLD");
    return value == nullptr ? 0 : std::atoi(value);
  }();
  return largest;
}
}  // namespace

void SetLargestWorld(int largest) { LargestWorldSlot() = largest; }

const std::vector<int>& WorldSizes() {
  static const std::vector<int> sizes = [] {
    std::vector<int> chosen;
    for (int world : {1, 2, 3, 4, 8}) {
      if (LargestWorldSlot() <= 0 || world <= LargestWorldSlot()) chosen.push_back(world);
    }
    return chosen;
  }();
  return sizes;
}

DeviceType DeviceTypeUnderTest() { return DeviceTypeSlot(); }
void SetDeviceTypeUnderTest(DeviceType type) { DeviceTypeSlot() = type; }
Device DeviceUnderTest() { return RankDevice(); }

bool ReceivesFromAnySource(const ProcessGroup& group) {
  auto backend = group.BackendFor(DeviceTypeUnderTest());
  return backend.ok() && (*backend)->capabilities().recv_any_source;
}

namespace {

// How many CUDA devices ranks can spread over, asked once in a child process (the test process
// must not start CUDA before it forks ranks); the error says why there are none.
absl::StatusOr<int> CudaDevices() {
#ifdef PLEXUS_TEST_CUDA
  static const absl::StatusOr<int>* devices =
      new absl::StatusOr<int>(testing::CudaDeviceCountInChild());
  return *devices;
#else
  return absl::FailedPreconditionError("no CUDA device: this build has no CUDA toolkit");
#endif
}

// Puts this rank on its device: rank % devices, buffers in its memory.
absl::Status EnterDevice([[maybe_unused]] int rank) {
  if (DeviceTypeUnderTest() == DeviceType::kCpu) return absl::OkStatus();
#ifdef PLEXUS_TEST_CUDA
  absl::StatusOr<int> devices = CudaDevices();
  if (!devices.ok()) return devices.status();
  RankDevice() = Device::Cuda(rank % *devices);
  return testing::UseDeviceBuffers(RankDevice().index);
#else
  return CudaDevices().status();
#endif
}

}  // namespace

const std::string& BackendUnderTest() { return Backend(); }
void SetBackendUnderTest(std::string backend) { Backend() = std::move(backend); }

bool Checker::Ran(const std::string& what, absl::StatusOr<WorkPtr> work) {
  if (!work.ok()) {
    Fail(what, ": rejected: ", work.status().ToString());
    return false;
  }
  absl::Status status = (*work)->Wait(absl::Seconds(60));
  if (!status.ok()) {
    Fail(what, ": ", status.ToString());
    return false;
  }
  return true;
}

int Checker::Report() const {
  for (const std::string& failure : failures_) fprintf(stderr, "%s\n", failure.c_str());
  return failures_.empty() ? 0 : 1;
}

namespace {

// One rank: join with `init_method` (rank and world size -1 when the launcher knows them), run
// `body`, leave. Returns the number of failures (0 = success), printing each.
int RunRank(const std::string& init_method, int rank, int world,
            const std::function<void(ProcessGroup&, Checker&)>& body) {
  InitOptions options;
  options.backend = BackendUnderTest();
  options.init_method = init_method;
  options.rank = rank;
  options.world_size = world;
  options.timeout = absl::Seconds(60);
  if (RanksPerHost() > 0 && rank >= 0) {
    // Ranks rank / N share a "host": the transport links them, TCP and hierarchies join hosts.
    setenv("PLEXUS_HOST_ID", absl::StrCat("conformance-host-", rank / RanksPerHost()).c_str(), 1);
  }
  absl::Status entered = EnterDevice(rank < 0 ? 0 : rank);
  auto group = entered.ok() ? InitProcessGroup(options) : entered;
  Checker checker(group.ok() ? (*group)->rank() : rank);
  if (!group.ok()) {
    checker.Fail("init: ", group.status().ToString());
    return checker.Report();
  }
  body(**group, checker);
  absl::Status shutdown = (*group)->Shutdown(absl::Seconds(60));
  if (!shutdown.ok()) checker.Fail("shutdown: ", shutdown.ToString());
  return checker.Report();
}

}  // namespace

void RunWorld(int world, const std::function<void(ProcessGroup&, Checker&)>& body) {
  if (const int launched = testing::MpirunWorldSize(); launched > 0) {
    // Under mpirun: this process is one rank of the world mpirun made.
    if (launched != world) GTEST_SKIP() << "mpirun started " << launched << " ranks";
    EXPECT_EQ(RunRank("mpi://", -1, -1, body), 0)
        << "backend " << BackendUnderTest() << ", world " << world;
    return;
  }
  if (DeviceTypeUnderTest() == DeviceType::kCuda) {
    absl::StatusOr<int> devices = CudaDevices();
    if (!devices.ok()) GTEST_SKIP() << devices.status().message();
    // NCCL refuses two ranks on one device; staging through a cpu backend does not care.
    if (BackendUnderTest().find("nccl") != std::string::npos && world > *devices) {
      GTEST_SKIP() << "nccl needs a CUDA device per rank; " << *devices << " visible";
    }
  }
  const std::string url = "file://" + testing::TempPath("conformance");
  absl::Status status = testing::RunInChildren(
      world, [&](int rank) { return RunRank(url, rank, world, body); }, absl::Seconds(240));
  EXPECT_TRUE(status.ok()) << "backend " << BackendUnderTest() << ", world " << world << ": "
                           << status;
}

namespace {

// PLEXUS_ALGO specs that force each algorithm of `collective` and of its "_same_host" and
// "_multi_host" ranges, in every set of ranges that has it (so a flat schedule also runs where
// the group would take a variant's ranges); one per distinct algorithm name.
std::vector<std::string> ForcingSpecs(const std::string& collective) {
  std::vector<std::string> sets;
  for (const std::string& name : algorithms::KnownCollectives()) {
    if (name == collective || name == collective + "_same_host" ||
        name == collective + "_multi_host") {
      sets.push_back(name);
    }
  }
  std::vector<std::string> algorithms_seen, specs;
  for (const std::string& set : sets) {
    for (const std::string& algorithm : algorithms::KnownAlgorithms(set)) {
      if (std::find(algorithms_seen.begin(), algorithms_seen.end(), algorithm) !=
          algorithms_seen.end()) {
        continue;
      }
      algorithms_seen.push_back(algorithm);
      std::string spec;
      for (const std::string& other : sets) {
        if (algorithms::FindAlgorithm(other, algorithm) != nullptr) {
          absl::StrAppend(&spec, spec.empty() ? "" : ";", other, ":0-:", algorithm);
        }
      }
      specs.push_back(spec);
    }
  }
  return specs;
}

}  // namespace

void WithEveryAlgorithm(ProcessGroup& group, Checker& check, const std::string& collective,
                        const std::function<void(ProcessGroup&, Checker&)>& checks) {
  const std::vector<std::string> specs = ForcingSpecs(collective);
  if (specs.size() < 2) return;  // The default run is the only schedule's run.
  std::vector<int> everyone;
  for (int r = 0; r < group.size(); ++r) everyone.push_back(r);
  for (const std::string& spec : specs) {
    // The table is read when a group is made: force the rows for the new group only.
    setenv("PLEXUS_ALGO", spec.c_str(), 1);
    absl::StatusOr<std::shared_ptr<ProcessGroup>> forced = group.NewGroup(everyone);
    unsetenv("PLEXUS_ALGO");
    if (!forced.ok()) {
      check.Fail(spec, ": new_group: ", forced.status().ToString());
      continue;
    }
    Checker inner(group.rank());
    checks(**forced, inner);
    for (const std::string& failure : inner.failures()) check.Fail("with ", spec, ": ", failure);
    (void)(*forced)->Shutdown(absl::Seconds(60));
  }
}

}  // namespace plexus::conformance
