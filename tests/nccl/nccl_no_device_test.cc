// With the real CUDA runtime and no GPU (CI), a CUDA call is FailedPrecondition "no CUDA
// device", never a crash or a hang, and the group's cpu side keeps working. On a machine with a
// GPU this test skips: the GPU suites run there instead.
#include <vector>

#include "absl/strings/match.h"
#include "frontend/dispatch/init.h"
#include "gtest/gtest.h"
#include "tests/testing/cuda_memory.h"
#include "tests/testing/subprocess.h"

namespace plexus {
namespace {

TEST(NcclNoDeviceTest, CudaCallsFailWithNoCudaDeviceAndTheCpuSideWorks) {
  absl::StatusOr<int> devices = testing::CudaDeviceCountInChild();
  if (devices.ok()) GTEST_SKIP() << *devices << " CUDA device(s) present";
  EXPECT_TRUE(absl::StartsWith(devices.status().message(), "no CUDA device")) << devices.status();
  const std::string url = "file://" + testing::TempPath("no_device");
  absl::Status status = testing::RunInChildren(
      1,
      [&](int) {
        InitOptions options;
        options.backend = "cpu:tcp,cuda:nccl";
        options.init_method = url;
        options.rank = 0;
        options.world_size = 1;
        auto group = InitProcessGroup(options);
        if (!group.ok()) return 2;
        std::vector<float> data(4, 1.0f);
        auto work =
            (*group)->AllReduce(Tensor::Flat(data.data(), DType::kFloat32, 4, Device::Cuda(0)));
        absl::Status outcome = work.ok() ? (*work)->Wait(absl::Seconds(10)) : work.status();
        if (!absl::IsFailedPrecondition(outcome) ||
            !absl::StrContains(outcome.message(), "all_reduce on rank 0: no CUDA device")) {
          fprintf(stderr, "got %s\n", outcome.ToString().c_str());
          return 3;
        }
        auto cpu = (*group)->AllReduce(Tensor::Flat(data.data(), DType::kFloat32, 4));
        if (!cpu.ok() || !(*cpu)->Wait(absl::Seconds(10)).ok()) return 4;
        return (*group)->Shutdown(absl::Seconds(10)).ok() ? 0 : 5;
      },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace plexus
