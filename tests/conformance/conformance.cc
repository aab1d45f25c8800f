#include "tests/conformance/conformance.h"

#include <cstdio>

#include "frontend/dispatch/init.h"
#include "gtest/gtest.h"
#include "tests/testing/mpirun.h"
#include "tests/testing/subprocess.h"

namespace plexus::conformance {
namespace {

std::string& Backend() {
  static auto* backend = new std::string("cpu:tcp");
  return *backend;
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
  auto group = InitProcessGroup(options);
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
  const std::string url = "file://" + testing::TempPath("conformance");
  absl::Status status = testing::RunInChildren(
      world, [&](int rank) { return RunRank(url, rank, world, body); }, absl::Seconds(240));
  EXPECT_TRUE(status.ok()) << "backend " << BackendUnderTest() << ", world " << world << ": "
                           << status;
}

}  // namespace plexus::conformance
