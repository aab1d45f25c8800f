// main() for conformance tests: --backend=STRING selects the backend under test, --device=cuda
// puts the tensors in CUDA memory, --ranks_per_host=N splits the forked ranks into "hosts". With
// --launch=mpirun the binary starts itself under mpirun once per world size (each rank then
// runs the suite in-process, skipping the other sizes) - the way MPI backends get their ranks.
// --largest_world=N runs only the world sizes up to N.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/conformance/conformance.h"
#include "tests/testing/mpirun.h"

int main(int argc, char** argv) {
  // Before gtest instantiates the suites over the world sizes.
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--largest_world=", 16) == 0) {
      plexus::conformance::SetLargestWorld(std::atoi(argv[i] + 16));
    }
  }
  ::testing::InitGoogleTest(&argc, argv);
  bool launch_mpirun = false;
  std::vector<std::string> passed_on;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--backend=", 10) == 0) {
      plexus::conformance::SetBackendUnderTest(argv[i] + 10);
    }
    if (std::strcmp(argv[i], "--device=cuda") == 0) {
      plexus::conformance::SetDeviceTypeUnderTest(plexus::DeviceType::kCuda);
    }
    if (std::strncmp(argv[i], "--ranks_per_host=", 17) == 0) {
      plexus::conformance::SetRanksPerHost(std::atoi(argv[i] + 17));
    }
    if (std::strcmp(argv[i], "--launch=mpirun") == 0) {
      launch_mpirun = true;
      continue;
    }
    passed_on.push_back(argv[i]);
  }
  if (!launch_mpirun || plexus::testing::MpirunWorldSize() > 0) return RUN_ALL_TESTS();
  // gtest consumed its own flags; hand the filter on so each world runs the same selection.
  passed_on.push_back("--gtest_filter=" + ::testing::GTEST_FLAG(filter));
  int failures = 0;
  for (int world : plexus::conformance::WorldSizes()) {
    absl::Status status =
        plexus::testing::RunUnderMpirun(world, argv[0], passed_on, absl::Seconds(600));
    fprintf(stderr, "[conformance] mpirun world %d: %s\n", world, status.ToString().c_str());
    if (!status.ok()) ++failures;
  }
  return failures == 0 ? 0 : 1;
}
