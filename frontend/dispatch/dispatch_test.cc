// Backend strings, the registry, routing and validation in ProcessGroup.
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/interface/backend_registry.h"
#include "base/store/hash_store.h"
#include "frontend/dispatch/backend_string.h"
#include "frontend/dispatch/process_group.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/store_backend.h"

namespace plexus {
namespace {

using ::plexus::testing::RecordingBackend;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

BackendCapabilities Caps(std::vector<DeviceType> devices) {
  BackendCapabilities caps;
  caps.devices = std::move(devices);
  caps.dtypes = {DType::kFloat32, DType::kInt64};
  return caps;
}

class DispatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Add("alpha", {DeviceType::kCpu}, &alpha_);
    Add("beta", {DeviceType::kCpu, DeviceType::kCuda}, &beta_);
  }

  // Registers a recording backend `name` whose instance lands in *slot; `adjust` may change
  // its capabilities.
  void Add(const std::string& name, std::vector<DeviceType> devices,
           std::shared_ptr<RecordingBackend>* slot,
           std::function<void(BackendCapabilities&)> adjust = nullptr) {
    ASSERT_TRUE(
        registry_
            .Register(
                {name, devices,
                 [=](const BackendContext& context) -> absl::StatusOr<std::shared_ptr<Backend>> {
                   EXPECT_NE(context.store, nullptr);
                   BackendCapabilities caps = Caps(devices);
                   if (adjust) adjust(caps);
                   *slot = std::make_shared<RecordingBackend>(name, caps);
                   return std::static_pointer_cast<Backend>(*slot);
                 }})
            .ok());
  }

  std::shared_ptr<ProcessGroup> Group(const std::string& backend, int rank = 0, int size = 4) {
    ProcessGroup::Config config;
    config.name = "test";
    config.rank = rank;
    config.size = size;
    config.store = std::make_shared<HashStore>(absl::Seconds(5));
    config.backend = backend;
    config.address = "127.0.0.1";  // One rank of a pretend world: nothing to agree with.
    auto group = ProcessGroup::Create(config, registry_);
    EXPECT_TRUE(group.ok()) << group.status();
    return group.ok() ? *group : nullptr;
  }

  BackendRegistry registry_;
  std::shared_ptr<RecordingBackend> alpha_;
  std::shared_ptr<RecordingBackend> beta_;
  std::vector<float> data_ = std::vector<float>(16, 1.0f);
  Tensor cpu_ = Tensor::Flat(data_.data(), DType::kFloat32, 16);
  // Never dereferenced: the recording backends move no data.
  Tensor cuda_ = Tensor::Flat(data_.data(), DType::kFloat32, 16, Device::Cuda(0));
};

TEST_F(DispatchTest, ParsesBackendStrings) {
  auto single = ParseBackendString("alpha", registry_);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(BackendString(*single), "cpu:alpha");
  EXPECT_EQ(BackendString(*ParseBackendString("beta", registry_)), "cpu:beta,cuda:beta");
  EXPECT_EQ(BackendString(*ParseBackendString(" CPU:alpha , cuda:beta ", registry_)),
            "cpu:alpha,cuda:beta");
}

TEST_F(DispatchTest, BadBackendStringsAreClearErrors) {
  auto unknown = ParseBackendString("cpu:gamma", registry_);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown backend 'gamma'"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("registered backends: alpha, beta"));

  auto device = ParseBackendString("tpu:alpha", registry_);
  EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(device.status().message(), HasSubstr("unknown device 'tpu'"));

  auto unserved = ParseBackendString("cuda:alpha", registry_);
  EXPECT_THAT(unserved.status().message(), HasSubstr("does not serve device cuda"));

  EXPECT_THAT(ParseBackendString("cpu:alpha,cpu:beta", registry_).status().message(),
              HasSubstr("twice"));
  EXPECT_FALSE(ParseBackendString("", registry_).ok());
  EXPECT_FALSE(ParseBackendString("alpha,,beta", registry_).ok());
}

TEST_F(DispatchTest, RegistryRejectsDuplicatesAndBadNames) {
  BackendFactory factory = [](const BackendContext&) -> absl::StatusOr<std::shared_ptr<Backend>> {
    return absl::InternalError("unused");
  };
  EXPECT_EQ(registry_.Register({"alpha", {DeviceType::kCpu}, factory}).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry_.Register({"Bad:Name", {DeviceType::kCpu}, factory}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_.Register({"nodevices", {}, factory}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(registry_.Names(), ElementsAre("alpha", "beta"));
  EXPECT_TRUE(registry_.Unregister("alpha"));
  EXPECT_FALSE(registry_.Unregister("alpha"));
}

TEST_F(DispatchTest, RoutesByTensorDevice) {
  auto group = Group("cpu:alpha,cuda:beta");
  ASSERT_NE(group, nullptr);
  EXPECT_TRUE((*group->AllReduce(cpu_))->Wait(absl::Seconds(1)).ok());
  EXPECT_TRUE((*group->Broadcast(cuda_))->Wait(absl::Seconds(1)).ok());
  EXPECT_THAT(alpha_->calls(), ElementsAre("all_reduce"));
  EXPECT_THAT(beta_->calls(), ElementsAre("broadcast"));
  ASSERT_TRUE(group->Barrier().ok());
  EXPECT_THAT(alpha_->calls(), ElementsAre("all_reduce", "barrier"));  // Barrier prefers cpu.
}

TEST_F(DispatchTest, OneInstanceServesAllItsDevices) {
  auto group = Group("beta");
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(*group->BackendFor(DeviceType::kCpu), *group->BackendFor(DeviceType::kCuda));
  ASSERT_TRUE(group->AllReduce(cpu_).ok());
  ASSERT_TRUE(group->AllReduce(cuda_).ok());
  EXPECT_THAT(beta_->calls(), ElementsAre("all_reduce", "all_reduce"));
}

TEST_F(DispatchTest, DeviceWithoutBackendIsAnError) {
  auto group = Group("alpha");
  ASSERT_NE(group, nullptr);
  auto work = group->AllReduce(cuda_);
  EXPECT_EQ(work.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(work.status().message(), HasSubstr("no backend serves device cuda"));
  EXPECT_THAT(work.status().message(), HasSubstr("cpu:alpha"));
}

TEST_F(DispatchTest, BadInputNeverReachesTheBackend) {
  auto group = Group("alpha", /*rank=*/2, /*size=*/4);
  ASSERT_NE(group, nullptr);
  AllReduceOptions bxor;
  bxor.op = ReduceOpKind::kBxor;
  auto status = group->AllReduce(cpu_, bxor).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("all_reduce on rank 2 of 4"));
  EXPECT_THAT(status.message(), HasSubstr("BXOR"));
  EXPECT_THAT(status.message(), HasSubstr("float32"));

  Tensor strided(data_.data(), DType::kFloat32, Shape{4, 2}, Shape{4, 1}, Device::Cpu());
  EXPECT_THAT(group->Broadcast(strided).status().message(), HasSubstr("not contiguous"));

  BroadcastOptions root;
  root.root_rank = 4;
  EXPECT_THAT(group->Broadcast(cpu_, root).status().message(),
              HasSubstr("root rank 4 is outside [0, 4)"));

  std::vector<Tensor> three(3, cpu_);
  EXPECT_THAT(group->AllGather(three, cpu_).status().message(),
              HasSubstr("outputs has 3 tensors; expected 4"));

  std::vector<Tensor> mixed(4, cpu_);
  mixed[1] = Tensor::Flat(data_.data(), DType::kFloat32, 8);
  EXPECT_THAT(group->AllGather(mixed, cpu_).status().message(),
              HasSubstr("outputs[1] has 8 elements but the input has 16"));

  Tensor small = Tensor::Flat(data_.data(), DType::kFloat32, 8);
  EXPECT_THAT(group->AllGatherIntoTensor(small, cpu_).status().message(),
              HasSubstr("expected 4 x 16 = 64"));

  std::vector<int16_t> shorts(4);
  Tensor int16 = Tensor::Flat(shorts.data(), DType::kInt16, 4);
  EXPECT_THAT(group->AllReduce(int16).status().message(),
              HasSubstr("does not support dtype int16"));

  EXPECT_THAT(group->Send(cpu_, 2).status().message(), HasSubstr("peer rank is this rank"));
  EXPECT_THAT(group->Recv(cpu_, 7).status().message(), HasSubstr("peer rank 7"));
  EXPECT_THAT(group->AllToAllSingle(cpu_, cpu_, {}, {1, 2, 3, 4}).status().message(),
              HasSubstr("input split sizes sum to 10 but it has 16 rows"));
  EXPECT_TRUE(alpha_->calls().empty());
}

TEST_F(DispatchTest, AllToAllSingleFillsEqualSplits) {
  auto group = Group("alpha");
  ASSERT_NE(group, nullptr);
  ASSERT_TRUE(group->AllToAllSingle(cpu_, cpu_).ok());
  EXPECT_THAT(alpha_->last_output_splits(), ElementsAre(4, 4, 4, 4));
  Tensor odd = Tensor::Flat(data_.data(), DType::kFloat32, 10);
  EXPECT_THAT(group->AllToAllSingle(odd, odd).status().message(),
              HasSubstr("not divisible by 4 ranks"));
}

TEST_F(DispatchTest, RootOnlyListsAreCheckedPerRank) {
  auto root = Group("alpha", 0, 2);
  auto other = Group("alpha", 1, 2);
  std::vector<Tensor> two(2, cpu_);
  EXPECT_TRUE(root->Gather(two, cpu_).ok());
  EXPECT_THAT(other->Gather(two, cpu_).status().message(),
              HasSubstr("outputs has 2 tensors; expected 0"));
  EXPECT_TRUE(other->Scatter(cpu_, {}).ok());
}

TEST_F(DispatchTest, FactoryErrorsNameBackendGroupAndRank) {
  ASSERT_TRUE(registry_
                  .Register({"broken",
                             {DeviceType::kCpu},
                             [](const BackendContext&) -> absl::StatusOr<std::shared_ptr<Backend>> {
                               return absl::UnavailableError("no network");
                             }})
                  .ok());
  ProcessGroup::Config config;
  config.name = "g";
  config.rank = 1;
  config.size = 2;
  config.store = std::make_shared<HashStore>();
  config.backend = "broken";
  config.address = "127.0.0.1";
  auto group = ProcessGroup::Create(config, registry_);
  EXPECT_EQ(group.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(group.status().message(),
              HasSubstr("creating backend 'broken' for group 'g' on rank 1: no network"));
}

TEST_F(DispatchTest, AbsentBackendsSayWhyTheyAreMissing) {
  registry_.RegisterAbsent("nccl", "built without the CUDA toolkit");
  auto parsed = ParseBackendString("cpu:alpha,cuda:nccl", registry_);
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("backend 'nccl' is not in this build: built without the CUDA toolkit"));
  EXPECT_THAT(ParseBackendString("gamma", registry_).status().message(),
              HasSubstr("registered backends: alpha, beta; not built: nccl"));
  EXPECT_THAT(registry_.Names(), ElementsAre("alpha", "beta"));
  ASSERT_EQ(registry_.Absent().size(), 1u);
}

// A stager for cuda: records which host backend it wraps and what it was asked.
class StagingDispatchTest : public DispatchTest {
 protected:
  void SetUp() override {
    DispatchTest::SetUp();
    ASSERT_TRUE(registry_
                    .RegisterStaging(DeviceType::kCuda,
                                     [this](std::shared_ptr<Backend> host, const BackendContext&)
                                         -> absl::StatusOr<std::shared_ptr<Backend>> {
                                       staged_host_ = host;
                                       staged_ = std::make_shared<RecordingBackend>(
                                           host->name() + "+staging", Caps({DeviceType::kCuda}));
                                       return std::static_pointer_cast<Backend>(staged_);
                                     })
                    .ok());
  }

  std::shared_ptr<Backend> staged_host_;
  std::shared_ptr<RecordingBackend> staged_;
};

TEST_F(StagingDispatchTest, UnnamedDevicesGoThroughTheCpuBackend) {
  auto group = Group("alpha");
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->backend_string(), "cpu:alpha");
  ASSERT_TRUE(group->AllReduce(cuda_).ok());
  ASSERT_TRUE(group->AllReduce(cpu_).ok());
  EXPECT_EQ(staged_host_, std::static_pointer_cast<Backend>(alpha_));
  EXPECT_THAT(staged_->calls(), ElementsAre("all_reduce"));
  EXPECT_THAT(alpha_->calls(), ElementsAre("all_reduce"));
}

TEST_F(StagingDispatchTest, CudaMayNameACpuBackendWhenAStagerExists) {
  auto parsed = ParseBackendString("cuda:alpha", registry_);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE((*parsed)[0].staged);
  auto group = Group("cuda:alpha");  // One alpha instance, serving cuda through the stager.
  ASSERT_NE(group, nullptr);
  ASSERT_TRUE(group->Broadcast(cuda_).ok());
  EXPECT_THAT(staged_->calls(), ElementsAre("broadcast"));
  // A backend that serves cuda itself is used as it is.
  auto native = Group("cpu:alpha,cuda:beta");
  ASSERT_TRUE(native->AllReduce(cuda_).ok());
  EXPECT_THAT(beta_->calls(), ElementsAre("all_reduce"));
}

TEST_F(DispatchTest, DeclaredUnsupportedReductionIsRefusedBeforeTheBackend) {
  std::shared_ptr<RecordingBackend> gamma;
  Add("gamma", {DeviceType::kCuda}, &gamma, [](BackendCapabilities& caps) {
    caps.unsupported_reductions = {{ReduceOpKind::kMax, DType::kFloat32}};
  });
  auto group = Group("cpu:alpha,cuda:gamma");
  ASSERT_NE(group, nullptr);
  AllReduceOptions max;
  max.op = ReduceOpKind::kMax;
  auto refused = group->AllReduce(cuda_, max);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("backend 'gamma' cannot reduce float32 with MAX"));
  EXPECT_TRUE(gamma->calls().empty());
  ASSERT_TRUE(group->AllReduce(cuda_).ok());  // SUM is fine.
  EXPECT_THAT(gamma->calls(), ElementsAre("all_reduce"));
}

TEST_F(DispatchTest, AgreementIsCheckedBeforeABackendThatCannotDetectMismatchUnlessAlone) {
  std::shared_ptr<RecordingBackend> blind;
  Add("blind", {DeviceType::kCuda}, &blind,
      [](BackendCapabilities& caps) { caps.detects_mismatch = false; });
  // One rank: nothing to compare, so no host all-gather per call.
  auto alone = Group("cpu:alpha,cuda:blind", /*rank=*/0, /*size=*/1);
  ASSERT_NE(alone, nullptr);
  ASSERT_TRUE(alone->AllReduce(cuda_).ok());
  EXPECT_TRUE(alpha_->calls().empty());
  EXPECT_THAT(blind->calls(), ElementsAre("all_reduce"));
  // Four ranks: the descriptions are all-gathered over the cpu backend first (the recording
  // backend gathers nothing, so the others' zeros disagree and nothing is launched).
  auto four = Group("cpu:alpha,cuda:blind", /*rank=*/0, /*size=*/4);
  ASSERT_NE(four, nullptr);
  auto refused = four->AllReduce(cuda_);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(alpha_->calls(), ElementsAre("all_gather_into_tensor"));
  EXPECT_TRUE(blind->calls().empty());
}

TEST_F(DispatchTest, BatchPointToPointIsValidatedAndRouted) {
  auto group = Group("cpu:alpha,cuda:beta", /*rank=*/1, /*size=*/4);
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->BatchPointToPoint({}).status().code(), absl::StatusCode::kInvalidArgument);
  using Kind = PointToPointOp::Kind;
  auto bad_peer = group->BatchPointToPoint({{Kind::kSend, cpu_, 7, 0}});
  EXPECT_EQ(bad_peer.status().code(), absl::StatusCode::kInvalidArgument);
  auto mixed = group->BatchPointToPoint({{Kind::kSend, cpu_, 0, 0}, {Kind::kRecv, cuda_, 2, 0}});
  EXPECT_THAT(mixed.status().message(), HasSubstr("one batch uses one device type"));
  // The default implementation issues each op on the backend, in order.
  auto batch = group->BatchPointToPoint({{Kind::kRecv, cuda_, 0, 0}, {Kind::kSend, cuda_, 2, 0}});
  ASSERT_TRUE(batch.ok());
  EXPECT_TRUE((*batch)->Wait(absl::Seconds(1)).ok());
  EXPECT_THAT(beta_->calls(), ElementsAre("recv", "send"));
}

// All-reduces complete `delay` after the call, on a thread of their own (never, when infinite);
// records what each call's `blocking` said.
class LateBackend : public RecordingBackend {
 public:
  LateBackend(BackendCapabilities caps, absl::Duration delay)
      : RecordingBackend("late", std::move(caps)), delay_(delay) {}
  ~LateBackend() override {
    for (std::thread& thread : threads_) thread.join();
  }
  WorkPtr Run(const Collective& call) override {
    if (call.kind != CollectiveKind::kAllReduce) return RecordingBackend::Run(call);
    blocking_seen.push_back(call.blocking);
    auto work = std::make_shared<Work>("all_reduce", 4);
    if (delay_ != absl::InfiniteDuration()) {
      threads_.emplace_back([work, delay = delay_] {
        absl::SleepFor(delay);
        work->Complete(absl::OkStatus());
      });
    }
    return work;
  }
  std::vector<bool> blocking_seen;

 private:
  const absl::Duration delay_;
  std::vector<std::thread> threads_;
};

// A blocking call returns a finished Work. The flag reaches only a backend that runs blocking
// collectives in place; the process group waits on the others, within the call's timeout.
TEST_F(DispatchTest, BlockingCallsReturnFinishedWorkWhicheverBackendRunsThem) {
  std::shared_ptr<LateBackend> backend;
  auto register_late = [&](const std::string& name, bool in_place, absl::Duration delay) {
    ASSERT_TRUE(registry_
                    .Register({name,
                               {DeviceType::kCpu},
                               [&, in_place, delay](const BackendContext&)
                                   -> absl::StatusOr<std::shared_ptr<Backend>> {
                                 BackendCapabilities caps = Caps({DeviceType::kCpu});
                                 caps.runs_blocking_in_place = in_place;
                                 backend = std::make_shared<LateBackend>(caps, delay);
                                 return std::static_pointer_cast<Backend>(backend);
                               }})
                    .ok());
  };
  register_late("waited", false, absl::Milliseconds(50));
  register_late("in_place", true, absl::Milliseconds(50));
  register_late("stuck", false, absl::InfiniteDuration());
  AllReduceOptions blocking;
  blocking.blocking = true;

  auto waited = Group("waited");
  auto work = waited->AllReduce(cpu_, blocking);
  ASSERT_TRUE(work.ok()) << work.status();
  EXPECT_TRUE((*work)->IsCompleted());
  EXPECT_TRUE((*work)->status().ok());
  work = waited->AllReduce(cpu_);
  ASSERT_TRUE(work.ok());
  EXPECT_FALSE((*work)->IsCompleted()) << "a call that does not block returns at once";
  EXPECT_TRUE((*work)->Wait(absl::Seconds(10)).ok());
  EXPECT_THAT(backend->blocking_seen, ElementsAre(false, false));

  auto in_place = Group("in_place");
  work = in_place->AllReduce(cpu_, blocking);
  ASSERT_TRUE(work.ok());
  EXPECT_TRUE((*work)->IsCompleted());
  EXPECT_THAT(backend->blocking_seen, ElementsAre(true));

  auto stuck = Group("stuck");
  blocking.timeout = absl::Milliseconds(100);
  const absl::Time start = absl::Now();
  work = stuck->AllReduce(cpu_, blocking);
  EXPECT_EQ(work.status().code(), absl::StatusCode::kDeadlineExceeded) << work.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace plexus
