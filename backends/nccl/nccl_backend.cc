#include "backends/nccl/nccl_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/interface/backend_registry.h"
#include "backends/nccl/nccl_types.h"
#include "base/core/status_macros.h"
#include "devices/cuda/current_stream.h"
#include "devices/cuda/device_tensors.h"

namespace plexus::nccl {

absl::StatusOr<std::shared_ptr<Backend>> NcclBackend::Create(const BackendContext& context) {
  return std::shared_ptr<Backend>(new NcclBackend(context));
}

NcclBackend::NcclBackend(const BackendContext& context) : context_(context) {}

absl::Status NcclBackend::Load() {
  if (loaded_) return load_error_;
  loaded_ = true;
  // Loaded at the first CUDA call, not with the group: "cpu:tcp,cuda:nccl" must cost nothing
  // on hosts that never pass a CUDA tensor, and must form where there is no GPU at all.
  auto cuda = cuda::LoadCudaApi();
  if (!cuda.ok()) return load_error_ = cuda.status();
  cuda_ = *cuda;
  auto nccl = LoadNcclApi();
  if (!nccl.ok()) return load_error_ = nccl.status();
  nccl_ = *nccl;
  watcher_ = std::make_unique<cuda::EventWatcher>(*cuda_);
  return absl::OkStatus();
}

absl::Status NcclBackend::ConnectEagerly(const Device& device) {
  MutexLock lock(issue_mu_);
  RETURN_IF_ERROR(Load());
  RETURN_IF_ERROR(cuda::RequireDevice(device.index));
  absl::Status made = CommunicatorFor(device.index).status();
  if (made.ok()) last_device_ = device.index;
  return made;
}

absl::Status NcclBackend::Abort(const absl::Status& reason) {
  MutexLock lock(issue_mu_);
  for (auto& [device, communicator] : communicators_) {
    if (communicator.ok()) (*communicator)->Abort(reason);
  }
  return absl::OkStatus();
}

NcclBackend::~NcclBackend() {
  // Abort first, so kernels waiting on peers exit; then the watcher fails what was pending.
  {
    MutexLock lock(issue_mu_);
    for (auto& [device, communicator] : communicators_) {
      if (communicator.ok()) {
        (*communicator)
            ->Abort(absl::AbortedError(absl::StrCat("the nccl backend of group '",
                                                    context_.group_name, "' was destroyed")));
      }
    }
  }
  watcher_.reset();
}

BackendCapabilities NcclBackend::capabilities() const {
  BackendCapabilities capabilities;
  capabilities.devices = {DeviceType::kCuda};
  // Any dtype moves (as bytes where NCCL has no type); reductions are checked per call.
  for (DType dtype : kAllDTypes) capabilities.dtypes.push_back(dtype);
  for (ReduceOpKind op : kAllReduceOpKinds) {
    for (DType dtype : kAllDTypes) {
      const ReduceOp reduce_op = op == ReduceOpKind::kPremulSum ? ReduceOp::PremulSum(1.0) : op;
      if (ValidateReduceOp(reduce_op, dtype).ok() && !ReductionFor("", reduce_op, dtype).ok()) {
        capabilities.unsupported_reductions.push_back({op, dtype});
      }
    }
  }
  capabilities.recv_any_source = false;
  capabilities.survives_peer_loss = false;
  capabilities.detects_mismatch = false;  // NCCL reduces whatever it is given.
  return capabilities;
}

absl::StatusOr<std::shared_ptr<NcclCommunicator>> NcclBackend::CommunicatorFor(int device) {
  auto found = communicators_.find(device);
  if (found != communicators_.end()) return found->second;
  NcclCommunicator::Config config;
  // The n-th communicator of this backend is matched across ranks by n, as ranks may use
  // different device indices.
  config.store_key = absl::StrCat("nccl_comm.", communicators_created_++);
  config.name = absl::StrCat("group '", context_.group_name, "' on cuda:", device);
  config.rank = context_.rank;
  config.size = context_.size;
  config.device = device;
  config.timeout = context_.timeout;
  absl::StatusOr<std::shared_ptr<NcclCommunicator>> made =
      NcclCommunicator::Create(*nccl_, *cuda_, *context_.store, std::move(config));
  communicators_.emplace(device, made);
  return made;
}

WorkPtr NcclBackend::Run(const Collective& call) {
  absl::StatusOr<NcclPlan> plan = PlanNcclCall(call, context_.rank, context_.size);
  if (!plan.ok()) return Work::Finished(plan.status(), std::string(call.name()), context_.size);
  return Launch(*plan);
}

WorkPtr NcclBackend::BatchPointToPoint(absl::Span<const PointToPointOp> ops,
                                       const BatchOptions& options) {
  return Launch(PlanPointToPointBatch(ops, options.timeout));
}

WorkPtr NcclBackend::Launch(const NcclPlan& plan) {
  UniqueLock lock(issue_mu_);
  const int64_t sequence = next_sequence_++;
  // A call without tensors (barrier) runs where the last one ran, else on the current device.
  int device = plan.run.tensors.empty() ? last_device_ : -1;
  absl::Status loaded = Load();
  absl::Status checked =
      loaded.ok() ? cuda::CheckDeviceTensors(plan.op, context_.rank, plan.run.tensors, &device)
                  : absl::Status(loaded.code(), absl::StrCat(plan.op, " on rank ", context_.rank,
                                                             ": ", loaded.message()));
  if (!checked.ok()) return Work::Finished(checked, plan.op, context_.size);
  auto communicator = CommunicatorFor(device);
  if (!communicator.ok()) {
    return Work::Finished(
        absl::Status(communicator.status().code(),
                     absl::StrCat(plan.op, " #", sequence, " on rank ", context_.rank, ": ",
                                  communicator.status().message())),
        plan.op, context_.size);
  }
  last_device_ = device;
  std::shared_ptr<NcclCommunicator> comm = *communicator;
  const std::string description =
      absl::StrCat(plan.op, " #", sequence, " on rank ", context_.rank, " (", comm->name(), ")");
  const absl::Time deadline = absl::Now() + plan.timeout;
  const NcclLaunch launch{*nccl_, *cuda_, context_.rank, context_.size};
  auto done = comm->Launch(
      description, cuda::CurrentStream(device),
      [&](NcclCommunicator::Scope& scope) { return plan.run.launch(launch, scope); }, deadline);
  lock.unlock();
  if (!done.ok()) return Work::Finished(done.status(), plan.op, context_.size);

  auto work = std::make_shared<Work>(plan.op, context_.size, sequence);
  work->AddBytesSent(plan.traffic.sent);
  work->AddBytesReceived(plan.traffic.received);
  std::shared_ptr<cuda::CudaEvent> event = *done;
  work->SetStreamWaitHook([event](int stream_device, void* stream) {
    if (stream_device != event->device()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "wait: the operation ran on cuda:", event->device(), ", not cuda:", stream_device));
    }
    return event->BlockStream(static_cast<cuda::Stream>(stream));
  });
  cuda::EventWatcher::Entry entry;
  entry.work = work;
  entry.done = std::move(event);
  entry.deadline = deadline;
  entry.description = description;
  entry.health = [comm] { return comm->Health(); };
  entry.on_failure = [comm](const absl::Status& why) { comm->Abort(why); };
  entry.keepalive = comm;
  watcher_->Watch(std::move(entry));
  return work;
}

namespace {

const BackendRegisterer kRegisterNccl({kNcclBackendName,
                                       {DeviceType::kCuda},
                                       &NcclBackend::Create});

}  // namespace
}  // namespace plexus::nccl
