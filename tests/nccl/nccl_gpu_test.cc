// The nccl backend on a real GPU with the real CUDA runtime and NCCL: stream order, WaitOnStream
// and bad input at world size 1 (NCCL allows one rank per GPU), a new communicator per
// reconfigure (torch's regime without torch: the device's torch predates it), and a two-rank
// all_reduce where there are two GPUs. Without a GPU every test skips with the reason (CI); the
// conformance suites' *_nccl_gpu_test targets cover every collective.
#include <cstdio>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/store/file_store.h"
#include "devices/cuda/cuda_api.h"
#include "devices/cuda/current_stream.h"
#include "frontend/dispatch/init.h"
#include "frontend/dispatch/reconfigure.h"
#include "gtest/gtest.h"
#include "tests/testing/cuda_memory.h"
#include "tests/testing/subprocess.h"

namespace plexus {
namespace {

// Skips the test unless at least `needed` GPUs are visible.
#define REQUIRE_GPUS(needed)                                                          \
  do {                                                                                \
    absl::StatusOr<int> devices = testing::CudaDeviceCountInChild();                  \
    if (!devices.ok()) GTEST_SKIP() << devices.status().message();                    \
    if (*devices < (needed)) GTEST_SKIP() << *devices << " GPU(s); needs " << needed; \
  } while (0)

int Fail(int rank, const std::string& what) {
  fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
  return 1;
}

std::shared_ptr<ProcessGroup> Join(const std::string& url, int rank, int world) {
  InitOptions options;
  options.backend = "cpu:tcp,cuda:nccl";
  options.init_method = url;
  options.rank = rank;
  options.world_size = world;
  options.timeout = absl::Seconds(60);
  auto group = InitProcessGroup(options);
  return group.ok() ? *group : nullptr;
}

// Each rank: an all_reduce ordered after a copy on its own stream, then a copy ordered after
// the all_reduce through WaitOnStream; the result must hold the sum of every rank's copy.
int StreamOrderedAllReduce(const std::string& url, int rank, int world) {
  auto group = Join(url, rank, world);
  if (group == nullptr) return Fail(rank, "init failed");
  const cuda::CudaApi& api = **cuda::LoadCudaApi();
  api.SetDevice(rank);
  constexpr int kCount = 1 << 20;
  float *data = nullptr, *update = nullptr, *copy = nullptr;
  api.Malloc(reinterpret_cast<void**>(&data), kCount * sizeof(float));
  api.Malloc(reinterpret_cast<void**>(&update), kCount * sizeof(float));
  api.Malloc(reinterpret_cast<void**>(&copy), kCount * sizeof(float));
  std::vector<float> host(kCount, static_cast<float>(rank + 1));
  api.Memcpy(update, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice);
  cudaStream_t stream = nullptr;
  api.StreamCreateWithPriority(&stream, cudaStreamNonBlocking, 0);
  api.MemcpyAsync(data, update, kCount * sizeof(float), cudaMemcpyDeviceToDevice, stream);
  WorkPtr work;
  {
    cuda::StreamGuard current(rank, stream);
    auto issued = group->AllReduce(Tensor::Flat(data, DType::kFloat32, kCount, Device::Cuda(rank)));
    if (!issued.ok()) return Fail(rank, issued.status().ToString());
    work = *issued;
    absl::Status ordered = work->WaitOnStream(rank, stream);
    if (!ordered.ok()) return Fail(rank, ordered.ToString());
    api.MemcpyAsync(copy, data, kCount * sizeof(float), cudaMemcpyDeviceToDevice, stream);
  }
  absl::Status done = work->Wait(absl::Seconds(60));
  if (!done.ok()) return Fail(rank, done.ToString());
  api.StreamSynchronize(stream);
  const float expected = world * (world + 1) / 2.0f;
  api.Memcpy(host.data(), copy, kCount * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < kCount; i += 4099) {
    if (host[i] != expected) return Fail(rank, "copy after the all_reduce is wrong");
  }
  // Host memory labelled cuda is refused with its reason, before NCCL sees it.
  auto refused =
      group->AllReduce(Tensor::Flat(host.data(), DType::kFloat32, 4, Device::Cuda(rank)));
  absl::Status outcome = refused.ok() ? (*refused)->Wait(absl::Seconds(10)) : refused.status();
  if (!absl::IsInvalidArgument(outcome) ||
      !absl::StrContains(outcome.message(), "does not point at memory")) {
    return Fail(rank, "host memory: " + outcome.ToString());
  }
  return group->Shutdown(absl::Seconds(60)).ok() ? 0 : Fail(rank, "shutdown");
}

TEST(NcclGpuTest, OneRankStreamOrderAndBadInput) {
  REQUIRE_GPUS(1);
  const std::string url = "file://" + testing::TempPath("gpu1");
  absl::Status status = testing::RunInChildren(
      1, [&](int rank) { return StreamOrderedAllReduce(url, rank, 1); }, absl::Seconds(180));
  EXPECT_TRUE(status.ok()) << status;
}

// One process reconfigures twice on cpu:tcp,cuda:nccl: an all_reduce on the GPU in each
// configuration, the first group aborted in between (a revoke), so the second runs on a new
// NCCL communicator.
int ReconfigureTwiceOnTheGpu(const std::string& path) {
  auto store = FileStore::Open(path, absl::Seconds(60));
  if (!store.ok()) return Fail(0, store.status().ToString());
  Reconfigurer::Options options;
  options.store = std::move(*store);
  options.backend = "cpu:tcp,cuda:nccl";
  options.timeout = absl::Seconds(60);
  Reconfigurer self(options);
  const cuda::CudaApi& api = **cuda::LoadCudaApi();
  api.SetDevice(0);
  constexpr int kCount = 1 << 20;
  float* data = nullptr;
  api.Malloc(reinterpret_cast<void**>(&data), kCount * sizeof(float));
  std::vector<float> host(kCount, 2.5f);
  for (int64_t uuid : {1, 2}) {
    auto group = self.Reconfigure({uuid, {self.handle()}});
    if (!group.ok()) return Fail(0, group.status().ToString());
    api.Memcpy(data, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice);
    auto work = (*group)->AllReduce(Tensor::Flat(data, DType::kFloat32, kCount, Device::Cuda(0)));
    absl::Status done = work.ok() ? (*work)->Wait(absl::Seconds(60)) : work.status();
    if (!done.ok()) return Fail(0, absl::StrCat("uuid ", uuid, ": ", done.ToString()));
    std::vector<float> back(kCount);
    api.Memcpy(back.data(), data, kCount * sizeof(float), cudaMemcpyDeviceToHost);
    if (back != host) return Fail(0, absl::StrCat("uuid ", uuid, ": wrong sum"));
    if (uuid == 1) {
      (void)(*group)->Abort("revoked before the next reconfigure");
    } else if (!(*group)->Shutdown(absl::Seconds(60)).ok()) {
      return Fail(0, "shutdown");
    }
  }
  return 0;
}

TEST(NcclGpuTest, OneRankReconfiguresToANewCommunicator) {
  REQUIRE_GPUS(1);
  const std::string path = testing::TempPath("gpu_reconfigure");
  absl::Status status = testing::RunInChildren(
      1, [&](int) { return ReconfigureTwiceOnTheGpu(path); }, absl::Seconds(180));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(NcclGpuTest, TwoRanksOnTwoGpus) {
  REQUIRE_GPUS(2);
  const std::string url = "file://" + testing::TempPath("gpu2");
  absl::Status status = testing::RunInChildren(
      2, [&](int rank) { return StreamOrderedAllReduce(url, rank, 2); }, absl::Seconds(180));
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace plexus
