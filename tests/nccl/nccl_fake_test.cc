// The nccl backend's own semantics, over the host-only fake CUDA runtime and NCCL
// (tests/fake_cuda): stream order, WaitOnStream, disagreement refused before launch, a lost peer
// turned into Unavailable, a deadline that aborts the communicator, a rank that never arrives,
// survivors that shrink or reconfigure to a new communicator, and bad input. The conformance suite
// covers the collectives themselves (nccl_fake targets).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
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

// Reports a failed expectation from a rank and makes it exit 1.
#define RANK_EXPECT(condition, ...)                                            \
  do {                                                                         \
    if (!(condition)) {                                                        \
      fprintf(stderr, "rank %d: %s:%d: %s\n", rank, __FILE__, __LINE__,        \
              absl::StrCat("expected " #condition ": ", __VA_ARGS__).c_str()); \
      return 1;                                                                \
    }                                                                          \
  } while (0)

std::shared_ptr<ProcessGroup> Join(const std::string& url, int rank, int world,
                                   const std::string& backend, absl::Duration timeout) {
  InitOptions options;
  options.backend = backend;
  options.init_method = url;
  options.rank = rank;
  options.world_size = world;
  options.timeout = timeout;
  auto group = InitProcessGroup(options);
  if (!group.ok()) {
    fprintf(stderr, "rank %d: init: %s\n", rank, group.status().ToString().c_str());
    return nullptr;
  }
  return *group;
}

Tensor OnDevice(float* pointer, int64_t count, int device) {
  return Tensor::Flat(pointer, DType::kFloat32, count, Device::Cuda(device));
}

const cuda::CudaApi& Cuda(int device) {
  const cuda::CudaApi* api = *cuda::LoadCudaApi();
  api->SetDevice(device);
  return *api;
}

std::string Url() { return "file://" + testing::TempPath("nccl"); }

// A test hook of the fake runtime (loaded RTLD_LOCAL by plexus, so asked of its handle).
TEST(NcclFakeTest, CollectiveWaitsForTheCallersStreamAndWaitOnStreamOrdersAfterIt) {
  const std::string url = Url();
  absl::Status status = testing::RunInChildren(
      2,
      [&](int rank) {
        auto group = Join(url, rank, 2, "cpu:tcp,cuda:nccl", absl::Seconds(30));
        if (group == nullptr) return 1;
        const cuda::CudaApi& api = Cuda(rank);
        cudaStream_t stream = nullptr;
        api.StreamCreateWithPriority(&stream, cudaStreamNonBlocking, 0);
        auto hold =
            reinterpret_cast<void* (*)(cudaStream_t)>(testing::FakeCudaHook("fakeCudaHoldStream"));
        auto release =
            reinterpret_cast<void (*)(void*)>(testing::FakeCudaHook("fakeCudaReleaseStream"));
        RANK_EXPECT(hold != nullptr && release != nullptr, "the fake's test hooks");
        float* data = testing::DeviceFloats({1, 1, 1, 1});
        float* update = testing::DeviceFloats({10.0f * (rank + 1), 0, 0, 0});
        float* copy = testing::DeviceFloats({0, 0, 0, 0});
        // On the caller's stream: held, then a write into `data` the all_reduce must see.
        void* gate = hold(stream);
        api.MemcpyAsync(data, update, sizeof(float), cudaMemcpyDeviceToDevice, stream);
        WorkPtr work;
        {
          cuda::StreamGuard current(rank, stream);
          auto issued = group->AllReduce(OnDevice(data, 4, rank));
          RANK_EXPECT(issued.ok(), issued.status().ToString());
          work = *issued;
          // Ordered after the all_reduce without blocking: the copy sees the reduced value.
          RANK_EXPECT(work->WaitOnStream(rank, stream).ok(), "WaitOnStream");
          api.MemcpyAsync(copy, data, 4 * sizeof(float), cudaMemcpyDeviceToDevice, stream);
        }
        absl::SleepFor(absl::Milliseconds(200));
        RANK_EXPECT(!work->IsCompleted(),
                    "the all_reduce ran before the caller's stream reached it");
        release(gate);
        RANK_EXPECT(work->Wait(absl::Seconds(30)).ok(), work->status().ToString());
        api.StreamSynchronize(stream);
        const std::vector<float> expected = {30, 2, 2, 2};
        RANK_EXPECT(testing::ReadFloats(data, 4) == expected, "all_reduce result");
        RANK_EXPECT(testing::ReadFloats(copy, 4) == expected, "the copy ordered after it");
        return group->Shutdown(absl::Seconds(30)).ok() ? 0 : 1;
      },
      absl::Seconds(120));
  EXPECT_TRUE(status.ok()) << status;
}

// NCCL would reduce mismatched buffers silently; plexus compares first, through the cpu
// backend or, with no cpu backend in the string, through the store.
TEST(NcclFakeTest, RanksThatDisagreeAreRefusedBeforeLaunch) {
  for (const char* backend : {"cpu:tcp,cuda:nccl", "cuda:nccl"}) {
    const std::string url = Url();
    absl::Status status = testing::RunInChildren(
        2,
        [&](int rank) {
          auto group = Join(url, rank, 2, backend, absl::Seconds(30));
          if (group == nullptr) return 1;
          Cuda(rank);  // Selects the rank's device.
          float* data = testing::DeviceFloats(std::vector<float>(11, 1.0f + rank));
          const int64_t count = rank == 0 ? 10 : 11;
          auto issued = group->AllReduce(OnDevice(data, count, rank));
          RANK_EXPECT(!issued.ok() && absl::IsFailedPrecondition(issued.status()),
                      issued.ok() ? "accepted" : issued.status().ToString());
          RANK_EXPECT(absl::StrContains(issued.status().message(), "x10") &&
                          absl::StrContains(issued.status().message(), "x11"),
                      issued.status().message());
          RANK_EXPECT(testing::ReadFloats(data, 11) == std::vector<float>(11, 1.0f + rank),
                      "buffer touched");
          // Agreement afterwards works as before.
          auto agreed = group->AllReduce(OnDevice(data, 11, rank));
          RANK_EXPECT(agreed.ok() && (*agreed)->Wait(absl::Seconds(30)).ok(), "agreed all_reduce");
          RANK_EXPECT(testing::ReadFloats(data, 11) == std::vector<float>(11, 3.0f),
                      "agreed result");
          return group->Shutdown(absl::Seconds(30)).ok() ? 0 : 1;
        },
        absl::Seconds(120));
    EXPECT_TRUE(status.ok()) << backend << ": " << status;
  }
}

TEST(NcclFakeTest, LostPeerIsUnavailableOnTheSurvivorsPromptly) {
  const std::string url = Url();
  absl::Status status = testing::RunInChildren(
      3,
      [&](int rank) {
        auto group = Join(url, rank, 3, "cpu:tcp,cuda:nccl", absl::Seconds(30));
        if (group == nullptr) return 1;
        const cuda::CudaApi& api = Cuda(rank);
        float* data = testing::DeviceFloats(std::vector<float>(1000, 1.0f));
        auto first = group->AllReduce(OnDevice(data, 1000, rank));
        RANK_EXPECT(first.ok() && (*first)->Wait(absl::Seconds(30)).ok(), "first all_reduce");
        // Rank 2 dies after the agreement check of the second collective: its peers are inside
        // the NCCL operation when it goes.
        if (rank == 2) {
          cudaStream_t stream = nullptr;
          api.StreamCreateWithPriority(&stream, cudaStreamNonBlocking, 0);
          auto hold = reinterpret_cast<void* (*)(cudaStream_t)>(
              testing::FakeCudaHook("fakeCudaHoldStream"));
          hold(stream);  // Its part never reaches the wire.
          cuda::StreamGuard current(rank, stream);
          (void)group->AllReduce(OnDevice(data, 1000, rank));
          raise(SIGKILL);
        }
        AllReduceOptions options;
        options.timeout = absl::Seconds(60);
        const absl::Time start = absl::Now();
        auto second = group->AllReduce(OnDevice(data, 1000, rank), options);
        absl::Status outcome = second.ok() ? (*second)->Wait(absl::Seconds(60)) : second.status();
        const absl::Duration took = absl::Now() - start;
        RANK_EXPECT(absl::IsUnavailable(outcome), outcome.ToString());
        RANK_EXPECT(took < absl::Seconds(10), "detected after ", absl::FormatDuration(took));
        // The communicator is aborted: later calls fail at once with the same cause.
        auto third = group->AllReduce(OnDevice(data, 1000, rank), options);
        absl::Status later = third.ok() ? (*third)->Wait(absl::Seconds(5)) : third.status();
        RANK_EXPECT(!later.ok() && !absl::IsDeadlineExceeded(later), later.ToString());
        return 0;
      },
      absl::Seconds(120));
  EXPECT_TRUE(absl::StrContains(status.ToString(), "child 2 killed by signal 9")) << status;
  EXPECT_FALSE(absl::StrContains(status.ToString(), "child 0")) << status;
  EXPECT_FALSE(absl::StrContains(status.ToString(), "child 1")) << status;
}

TEST(NcclFakeTest, DeadlineAbortsTheCommunicator) {
  const std::string url = Url();
  absl::Status status = testing::RunInChildren(
      2,
      [&](int rank) {
        auto group = Join(url, rank, 2, "cuda:nccl", absl::Seconds(30));
        if (group == nullptr) return 1;
        Cuda(rank);  // Selects the rank's device.
        float* data = testing::DeviceFloats(std::vector<float>(16, 1.0f));
        // Both create the communicator, then rank 1 stops taking part (alive, silent).
        auto warm = group->Broadcast(OnDevice(data, 16, rank));
        RANK_EXPECT(warm.ok() && (*warm)->Wait(absl::Seconds(30)).ok(), "broadcast");
        if (rank == 1) {
          (void)group->store()->Wait({"rank0.done"}, absl::Seconds(60));
          return 0;
        }
        // A receive goes straight to NCCL (point-to-point has no agreement check) and waits for a
        // message that never comes.
        const absl::Time start = absl::Now();
        auto received = group->Recv(OnDevice(data, 16, rank), 1, RecvOptions{0, absl::Seconds(1)});
        absl::Status outcome =
            received.ok() ? (*received)->Wait(absl::Seconds(30)) : received.status();
        const absl::Duration took = absl::Now() - start;
        RANK_EXPECT(absl::IsDeadlineExceeded(outcome), outcome.ToString());
        RANK_EXPECT(absl::StrContains(outcome.message(), "aborted"), outcome.message());
        RANK_EXPECT(took < absl::Seconds(5), "took ", absl::FormatDuration(took));
        auto later = group->Recv(OnDevice(data, 16, rank), 1, RecvOptions{0, absl::Seconds(1)});
        absl::Status again = later.ok() ? (*later)->Wait(absl::Seconds(5)) : later.status();
        RANK_EXPECT(absl::IsDeadlineExceeded(again), again.ToString());
        (void)group->store()->Set("rank0.done", "1");
        return 0;
      },
      absl::Seconds(120));
  EXPECT_TRUE(status.ok()) << status;
}

TEST(NcclFakeTest, CommunicatorNamesTheRankThatNeverArrived) {
  const std::string url = Url();
  absl::Status status = testing::RunInChildren(
      2,
      [&](int rank) {
        setenv("PLEXUS_CHECK_COLLECTIVES", "0", 1);  // Reach NCCL's own rendezvous.
        auto group = Join(url, rank, 2, "cpu:tcp,cuda:nccl", absl::Seconds(2));
        if (group == nullptr) return 1;
        if (rank == 1) {
          (void)group->store()->Wait({"rank0.done"}, absl::Seconds(30));
          return 0;
        }
        Cuda(rank);  // Selects the rank's device.
        float* data = testing::DeviceFloats(std::vector<float>(4, 1.0f));
        auto issued = group->AllReduce(OnDevice(data, 4, rank));
        absl::Status outcome = issued.ok() ? (*issued)->Wait(absl::Seconds(30)) : issued.status();
        (void)group->store()->Set("rank0.done", "1");
        RANK_EXPECT(absl::IsDeadlineExceeded(outcome), outcome.ToString());
        RANK_EXPECT(absl::StrContains(outcome.message(), "rank(s) 1 never arrived"),
                    outcome.message());
        return 0;
      },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

// Two ranks on "cpu:tcp,cuda:nccl", connecting NCCL at init when `device` is set.
InitOptions TwoRanks(const std::string& url, int rank, absl::Duration timeout,
                     std::optional<Device> device) {
  InitOptions options;
  options.backend = "cpu:tcp,cuda:nccl";
  options.init_method = url;
  options.rank = rank;
  options.world_size = 2;
  options.timeout = timeout;
  options.device_id = device;
  return options;
}

// init_process_group(device_id=...): the NCCL communicator is made before init returns, and
// a rank that never makes its own fails init itself, naming the rank - not the first
// collective, minutes later.
TEST(NcclFakeTest, EagerInitConnectsNcclBeforeReturningAndNamesAMissingRank) {
  const std::string url = Url();
  absl::Status status = testing::RunInChildren(
      2,
      [&](int rank) {
        auto group = InitProcessGroup(TwoRanks(url, rank, absl::Seconds(30), Device::Cuda(rank)));
        RANK_EXPECT(group.ok(), group.status().ToString());
        Cuda(rank);
        float* data = testing::DeviceFloats(std::vector<float>(4, 1.0f + rank));
        auto issued = (*group)->AllReduce(OnDevice(data, 4, rank));
        absl::Status outcome = issued.ok() ? (*issued)->Wait(absl::Seconds(30)) : issued.status();
        RANK_EXPECT(outcome.ok(), outcome.ToString());
        RANK_EXPECT(testing::ReadFloats(data, 4) == std::vector<float>(4, 3.0f), "wrong sum");
        return 0;
      },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;

  const std::string lazy_url = Url();
  status = testing::RunInChildren(
      2,
      [&](int rank) {
        setenv("PLEXUS_CHECK_COLLECTIVES", "0", 1);
        // Rank 1 stays lazy and idle.
        const std::optional<Device> device =
            rank == 0 ? std::optional<Device>(Device::Cuda(0)) : std::nullopt;
        const absl::Time start = absl::Now();
        auto group = InitProcessGroup(TwoRanks(lazy_url, rank, absl::Seconds(2), device));
        if (rank == 1) {  // Never makes its NCCL communicator.
          RANK_EXPECT(group.ok(), group.status().ToString());
          return 0;
        }
        RANK_EXPECT(absl::IsDeadlineExceeded(group.status()), group.status().ToString());
        RANK_EXPECT(absl::StrContains(group.status().message(), "device_id=cuda:0"),
                    group.status().message());
        RANK_EXPECT(absl::StrContains(group.status().message(), "rank(s) 1 never arrived"),
                    group.status().message());
        RANK_EXPECT(absl::Now() - start < absl::Seconds(10), "init took too long");
        return 0;
      },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

// After rank 2 dies mid all_reduce, the survivors shrink and their CUDA all_reduces run on a
// fresh NCCL communicator (a new unique id through the store); then they split by colour.
TEST(NcclFakeTest, SurvivorsShrinkToANewCommunicatorAndSplit) {
  const std::string url = Url();
  absl::Status status = testing::RunInChildren(
      4,
      [&](int rank) {
        setenv("PLEXUS_CHECK_COLLECTIVES", "0", 1);
        auto world = Join(url, rank, 4, "cpu:tcp,cuda:nccl", absl::Seconds(30));
        if (world == nullptr) return 1;
        Cuda(rank);
        float* data = testing::DeviceFloats(std::vector<float>(256, 1.0f));
        auto first = world->AllReduce(OnDevice(data, 256, rank));
        RANK_EXPECT(first.ok() && (*first)->Wait(absl::Seconds(30)).ok(), "first all_reduce");
        if (rank == 2) raise(SIGKILL);
        AllReduceOptions options;
        options.timeout = absl::Seconds(10);
        auto second = world->AllReduce(OnDevice(data, 256, rank), options);
        absl::Status failed = second.ok() ? (*second)->Wait(absl::Seconds(30)) : second.status();
        RANK_EXPECT(!failed.ok(), "the all_reduce without rank 2 succeeded");
        auto shrunk = world->Shrink({2});
        RANK_EXPECT(shrunk.ok() && *shrunk != nullptr, shrunk.status().ToString());
        const int rank3 = (*shrunk)->rank();
        float* values = testing::DeviceFloats(std::vector<float>(256, 1.0f + rank3));
        auto third = (*shrunk)->AllReduce(OnDevice(values, 256, rank));
        absl::Status outcome = third.ok() ? (*third)->Wait(absl::Seconds(30)) : third.status();
        RANK_EXPECT(outcome.ok(), outcome.ToString());
        RANK_EXPECT(testing::ReadFloats(values, 256) == std::vector<float>(256, 6.0f),
                    "shrunk sum");
        // Ranks 0 and 1 of the shrunk group together, rank 2 alone.
        auto split = (*shrunk)->Split(rank3 == 2 ? 1 : 0, rank3);
        RANK_EXPECT(split.ok() && *split != nullptr, split.status().ToString());
        float* part = testing::DeviceFloats(std::vector<float>(8, 1.0f));
        auto fourth = (*split)->AllReduce(OnDevice(part, 8, rank));
        outcome = fourth.ok() ? (*fourth)->Wait(absl::Seconds(30)) : fourth.status();
        RANK_EXPECT(outcome.ok(), outcome.ToString());
        RANK_EXPECT(testing::ReadFloats(part, 8) == std::vector<float>(8, rank3 == 2 ? 1.0f : 2.0f),
                    "split sum");
        return 0;
      },
      absl::Seconds(120));
  EXPECT_TRUE(absl::StrContains(status.ToString(), "child 2 killed by signal 9")) << status;
  EXPECT_FALSE(absl::StrContains(status.ToString(), "child 0")) << status;
  EXPECT_FALSE(absl::StrContains(status.ToString(), "child 1")) << status;
  EXPECT_FALSE(absl::StrContains(status.ToString(), "child 3")) << status;
}

// torch's reconfigure underneath (frontend/dispatch/reconfigure.h) on cpu:tcp,cuda:nccl: after
// a member is SIGKILLed the survivors form a new NCCL communicator of their own under a fresh
// uuid, and a process that starts forming only after the kill joins them by its handle.
TEST(NcclFakeTest, SurvivorsReconfigureToANewCommunicatorAndAReplacementJoins) {
  const std::string path = testing::TempPath("nccl_reconfigure");
  absl::Status status = testing::RunInChildren(
      4,
      [&](int rank) {
        const int id = rank;  // A process, not its rank in the groups it forms.
        setenv("PLEXUS_CHECK_COLLECTIVES", "0", 1);
        auto store = FileStore::Open(path, absl::Seconds(30));
        RANK_EXPECT(store.ok(), store.status().ToString());
        Reconfigurer::Options options;
        options.store = std::move(*store);
        options.backend = "cpu:tcp,cuda:nccl";
        options.timeout = absl::Seconds(30);
        Reconfigurer self(options);
        Store& shared = *options.store;
        // The replacement (id 3) starts only once member 2 is gone.
        if (id == 3) RANK_EXPECT(shared.Wait({"lost"}, absl::Seconds(60)).ok(), "no loss");
        RANK_EXPECT(shared.Set(absl::StrCat("handle/", id), self.handle()).ok(), "publish");
        std::vector<std::string> handles;
        for (int other = 0; other < 4; ++other) {
          if (id < 3 && other == 3) continue;
          if (id == 3 && other == 2) continue;
          auto handle = shared.Get(absl::StrCat("handle/", other));
          RANK_EXPECT(handle.ok(), handle.status().ToString());
          handles.push_back(*handle);
        }
        Cuda(id);
        float* data = testing::DeviceFloats(std::vector<float>(256, 1.0f));
        if (id < 3) {
          auto first = self.Reconfigure({1, handles});
          RANK_EXPECT(first.ok(), first.status().ToString());
          auto once = (*first)->AllReduce(OnDevice(data, 256, id));
          RANK_EXPECT(once.ok() && (*once)->Wait(absl::Seconds(30)).ok(), "first all_reduce");
          if (id == 2) {
            RANK_EXPECT(shared.Set("lost", "2").ok(), "announce");
            raise(SIGKILL);
          }
          AllReduceOptions short_wait;
          short_wait.timeout = absl::Seconds(10);
          auto second = (*first)->AllReduce(OnDevice(data, 256, id), short_wait);
          absl::Status failed = second.ok() ? (*second)->Wait(absl::Seconds(30)) : second.status();
          RANK_EXPECT(!failed.ok(), "the all_reduce without member 2 succeeded");
          auto survivors = self.Reconfigure({2, {handles[0], handles[1]}});
          RANK_EXPECT(survivors.ok(), survivors.status().ToString());
          float* pair = testing::DeviceFloats(std::vector<float>(64, 2.0f + id));
          auto two = (*survivors)->AllReduce(OnDevice(pair, 64, id));
          absl::Status outcome = two.ok() ? (*two)->Wait(absl::Seconds(30)) : two.status();
          RANK_EXPECT(outcome.ok(), outcome.ToString());
          RANK_EXPECT(testing::ReadFloats(pair, 64) == std::vector<float>(64, 5.0f), "pair sum");
          auto newcomer = shared.Get("handle/3");
          RANK_EXPECT(newcomer.ok(), newcomer.status().ToString());
          handles = {handles[0], handles[1], *newcomer};
        }
        auto grown = self.Reconfigure({3, handles});
        RANK_EXPECT(grown.ok(), grown.status().ToString());
        const int rank3 = (*grown)->rank();
        float* values = testing::DeviceFloats(std::vector<float>(128, 1.0f + rank3));
        auto three = (*grown)->AllReduce(OnDevice(values, 128, id));
        absl::Status outcome = three.ok() ? (*three)->Wait(absl::Seconds(30)) : three.status();
        RANK_EXPECT(outcome.ok(), outcome.ToString());
        RANK_EXPECT(testing::ReadFloats(values, 128) == std::vector<float>(128, 6.0f), "sum of 3");
        auto barrier = (*grown)->Barrier();
        RANK_EXPECT(barrier.ok() && (*barrier)->Wait(absl::Seconds(30)).ok(), "barrier");
        return 0;
      },
      absl::Seconds(120));
  EXPECT_TRUE(absl::StrContains(status.ToString(), "child 2 killed by signal 9")) << status;
  for (const char* survivor : {"child 0", "child 1", "child 3"}) {
    EXPECT_FALSE(absl::StrContains(status.ToString(), survivor)) << status;
  }
}

TEST(NcclFakeTest, BadInputIsRefusedWithItsReason) {
  const std::string url = Url();
  absl::Status status = testing::RunInChildren(
      1,
      [&](int rank) {
        auto group = Join(url, 0, 1, "cpu:tcp,cuda:nccl", absl::Seconds(30));
        if (group == nullptr) return 1;
        const cuda::CudaApi& api = Cuda(0);
        std::vector<float> host(4, 1.0f);
        auto outcome = [](absl::StatusOr<WorkPtr> work) {
          return work.ok() ? (*work)->Wait(absl::Seconds(10)) : work.status();
        };
        absl::Status host_memory = outcome(group->AllReduce(OnDevice(host.data(), 4, 0)));
        RANK_EXPECT(
            absl::IsInvalidArgument(host_memory) &&
                absl::StrContains(host_memory.message(), "does not point at memory of cuda:0"),
            host_memory.ToString());
        api.SetDevice(1);
        float* elsewhere = testing::DeviceFloats(std::vector<float>(4, 1.0f));
        api.SetDevice(0);
        float* here = testing::DeviceFloats(std::vector<float>(4, 1.0f));
        Tensor one = OnDevice(here, 4, 0), other = OnDevice(elsewhere, 4, 1);
        absl::Status mixed = outcome(group->AllGatherIntoTensor(one, other));
        RANK_EXPECT(absl::IsInvalidArgument(mixed), mixed.ToString());
        Tensor shorts = Tensor::Flat(here, DType::kInt16, 4, Device::Cuda(0));
        absl::Status int16_sum = outcome(group->AllReduce(shorts));
        RANK_EXPECT(absl::IsInvalidArgument(int16_sum) &&
                        absl::StrContains(int16_sum.message(), "cannot reduce int16 with SUM"),
                    int16_sum.ToString());
        absl::Status any_source = outcome(group->RecvAnySource(one));
        RANK_EXPECT(absl::IsUnimplemented(any_source), any_source.ToString());
        absl::Status out_of_range = outcome(group->AllReduce(OnDevice(here, 4, 9)));
        RANK_EXPECT(absl::IsInvalidArgument(out_of_range) &&
                        absl::StrContains(out_of_range.message(), "cuda:9 does not exist"),
                    out_of_range.ToString());
        (void)rank;
        return group->Shutdown(absl::Seconds(30)).ok() ? 0 : 1;
      },
      absl::Seconds(60));
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace plexus
