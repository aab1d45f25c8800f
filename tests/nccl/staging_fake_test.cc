// CUDA tensors on a cpu-only backend string (backends/cuda_staging), over the host-only fake
// CUDA runtime: the call waits for the caller's stream before reading, results land after the
// work queued on it before the call, a failed collective leaves the device tensors as they
// were, and the results land on the device. The conformance
// suite's *_staged_fake_test targets cover every collective.

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "devices/cuda/cuda_api.h"
#include "devices/cuda/current_stream.h"
#include "frontend/dispatch/init.h"
#include "gtest/gtest.h"
#include "tests/testing/cuda_memory.h"
#include "tests/testing/subprocess.h"

namespace plexus {
namespace {

int Fail(int rank, const std::string& what) {
  fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
  return 1;
}

std::shared_ptr<ProcessGroup> Join(const std::string& url, int rank, int world) {
  InitOptions options;
  options.backend = "tcp";  // Serves cpu only: CUDA tensors are staged.
  options.init_method = url;
  options.rank = rank;
  options.world_size = world;
  options.timeout = absl::Seconds(30);
  auto group = InitProcessGroup(options);
  return group.ok() ? *group : nullptr;
}

TEST(StagingFakeTest, ReadsAfterTheCallersStreamAndLeavesTensorsAloneOnFailure) {
  const std::string url = "file://" + testing::TempPath("staging");
  absl::Status status = testing::RunInChildren(
      2,
      [&](int rank) {
        auto group = Join(url, rank, 2);
        if (group == nullptr) return Fail(rank, "init");
        const cuda::CudaApi& api = **cuda::LoadCudaApi();
        api.SetDevice(rank);
        if (group->backend_string() != "cpu:tcp") return Fail(rank, group->backend_string());
        // A write queued on the caller's stream before the call is what the call reads.
        cudaStream_t stream = nullptr;
        api.StreamCreateWithPriority(&stream, cudaStreamNonBlocking, 0);
        float* data = testing::DeviceFloats({1, 1, 1});
        float* update = testing::DeviceFloats({5.0f * (rank + 1), 1, 1});
        api.MemcpyAsync(data, update, sizeof(float), cudaMemcpyDeviceToDevice, stream);
        {
          cuda::StreamGuard current(rank, stream);
          auto work = group->AllReduce(Tensor::Flat(data, DType::kFloat32, 3, Device::Cuda(rank)));
          if (!work.ok() || !(*work)->Wait(absl::Seconds(30)).ok()) return Fail(rank, "all_reduce");
        }
        if (testing::ReadFloats(data, 3) != std::vector<float>{15, 2, 2})
          return Fail(rank, "all_reduce result");
        // Ranks disagree (the tcp backend notices): the error comes back, the tensor is intact.
        const int64_t count = rank == 0 ? 2 : 3;
        auto bad = group->AllReduce(Tensor::Flat(data, DType::kFloat32, count, Device::Cuda(rank)));
        absl::Status outcome = bad.ok() ? (*bad)->Wait(absl::Seconds(30)) : bad.status();
        if (!absl::IsFailedPrecondition(outcome)) return Fail(rank, outcome.ToString());
        if (testing::ReadFloats(data, 3) != std::vector<float>{15, 2, 2})
          return Fail(rank, "tensor changed");
        return group->Shutdown(absl::Seconds(30)).ok() ? 0 : Fail(rank, "shutdown");
      },
      absl::Seconds(120));
  EXPECT_TRUE(status.ok()) << status;
}

// A receiving rank reads nothing in, so nothing makes it wait for its stream on the host; its
// results must still land after the writes queued on that stream before the call (found on an
// H200: torch.full then broadcast left the fill's values).
TEST(StagingFakeTest, ResultsLandAfterTheCallersEarlierWritesWhenNothingIsReadIn) {
  const std::string url = "file://" + testing::TempPath("staging_order");
  absl::Status status = testing::RunInChildren(
      2,
      [&](int rank) {
        auto group = Join(url, rank, 2);
        if (group == nullptr) return Fail(rank, "init");
        const cuda::CudaApi& api = **cuda::LoadCudaApi();
        api.SetDevice(rank);
        auto hold =
            reinterpret_cast<void* (*)(cudaStream_t)>(testing::FakeCudaHook("fakeCudaHoldStream"));
        auto release =
            reinterpret_cast<void (*)(void*)>(testing::FakeCudaHook("fakeCudaReleaseStream"));
        if (hold == nullptr || release == nullptr) return Fail(rank, "the fake's test hooks");
        cudaStream_t stream = nullptr;
        api.StreamCreateWithPriority(&stream, cudaStreamNonBlocking, 0);
        float* data = testing::DeviceFloats({0, 0, 0});
        float* fill =
            testing::DeviceFloats({7.0f * (rank + 1), 7.0f * (rank + 1), 7.0f * (rank + 1)});
        // Rank 1's fill is queued behind a held gate, so it is still pending when the broadcast's
        // result comes back.
        void* gate = rank == 1 ? hold(stream) : nullptr;
        api.MemcpyAsync(data, fill, 3 * sizeof(float), cudaMemcpyDeviceToDevice, stream);
        WorkPtr work;
        {
          cuda::StreamGuard current(rank, stream);
          auto issued =
              group->Broadcast(Tensor::Flat(data, DType::kFloat32, 3, Device::Cuda(rank)));
          if (!issued.ok()) return Fail(rank, issued.status().ToString());
          work = *issued;
        }
        // The host side of the broadcast is over once a later host collective completes.
        auto barrier = group->Barrier();
        if (!barrier.ok() || !(*barrier)->Wait(absl::Seconds(30)).ok())
          return Fail(rank, "barrier");
        if (gate != nullptr) release(gate);
        if (!work->Wait(absl::Seconds(30)).ok()) return Fail(rank, "broadcast");
        api.StreamSynchronize(stream);
        const std::vector<float> got = testing::ReadFloats(data, 3);
        if (got != std::vector<float>{7, 7, 7}) {
          return Fail(rank, absl::StrCat("broadcast result ", got[0], ", ", got[1], ", ", got[2]));
        }
        return group->Shutdown(absl::Seconds(30)).ok() ? 0 : Fail(rank, "shutdown");
      },
      absl::Seconds(120));
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace plexus
