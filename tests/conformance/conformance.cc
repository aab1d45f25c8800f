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

// Under mpirun: this process is one rank of a world mpirun made; run `body` here.
void RunLaunchedRank(int world, const std::function<void(ProcessGroup&, Checker&)>& body) {
  InitOptions options;
  options.backend = BackendUnderTest();
  options.init_method = "mpi://";
  options.timeout = absl::Seconds(60);
  auto group = InitProcessGroup(options);
  ASSERT_TRUE(group.ok()) << "init: " << group.status();
  Checker checker((*group)->rank());
  body(**group, checker);
  absl::Status shutdown = (*group)->Shutdown(absl::Seconds(60));
  if (!shutdown.ok()) checker.Fail("shutdown: ", shutdown.ToString());
  EXPECT_EQ(checker.Report(), 0) << "backend " << BackendUnderTest() << ", world " << world;
}

}  // namespace

void RunWorld(int world, const std::function<void(ProcessGroup&, Checker&)>& body) {
  if (const int launched = testing::MpirunWorldSize(); launched > 0) {
    if (launched != world) GTEST_SKIP() << "mpirun started " << launched << " ranks";
    RunLaunchedRank(world, body);
    return;
  }
  const std::string url = "file://" + testing::TempPath("conformance");
  absl::Status status = testing::RunInChildren(
      world,
      [&](int rank) {
        InitOptions options;
        options.backend = BackendUnderTest();
        options.init_method = url;
        options.rank = rank;
        options.world_size = world;
        options.timeout = absl::Seconds(60);
        auto group = InitProcessGroup(options);
        Checker checker(rank);
        if (!group.ok()) {
          checker.Fail("init: ", group.status().ToString());
          return checker.Report();
        }
        body(**group, checker);
        absl::Status shutdown = (*group)->Shutdown(absl::Seconds(60));
        if (!shutdown.ok()) checker.Fail("shutdown: ", shutdown.ToString());
        return checker.Report();
      },
      absl::Seconds(240));
  EXPECT_TRUE(status.ok()) << "backend " << BackendUnderTest() << ", world " << world << ": "
                           << status;
}

}  // namespace plexus::conformance
