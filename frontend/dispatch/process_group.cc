#include "frontend/dispatch/process_group.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/core/status_macros.h"
#include "base/rendezvous/rendezvous.h"
#include "base/store/prefix_store.h"
#include "frontend/dispatch/advertise_address.h"
#include "frontend/dispatch/validate.h"

namespace plexus {
namespace {

// The reduction as a collective description carries it.
int Kind(const ReduceOp& op) { return static_cast<int>(op.kind); }

int64_t TotalElements(absl::Span<const Tensor> tensors) {
  int64_t total = 0;
  for (const Tensor& tensor : tensors) total += tensor.numel();
  return total;
}

// Creates each backend the string names once, serving every device the string gives it
// natively, and the stagers that copy another device's tensors through a host backend.
class BackendMaker {
 public:
  BackendMaker(const ProcessGroup::Config& config, const BackendRegistry& registry,
               const std::vector<DeviceBackend>& mapping)
      : config_(config), registry_(registry), mapping_(mapping) {}

  absl::StatusOr<std::shared_ptr<Backend>> Instance(const std::string& name) {
    for (const auto& [existing, backend] : created_) {
      if (existing == name) return backend;
    }
    BackendContext context = ContextFor(name);
    for (const DeviceBackend& other : mapping_) {
      if (other.backend != name) continue;
      const DeviceType served = other.staged ? DeviceType::kCpu : other.device;
      if (std::find(context.devices.begin(), context.devices.end(), served) ==
          context.devices.end()) {
        context.devices.push_back(served);
      }
    }
    ASSIGN_OR_RETURN(BackendRegistration registration, registry_.Find(name));
    auto backend = registration.factory(context);
    if (!backend.ok()) {
      return absl::Status(
          backend.status().code(),
          absl::StrCat("creating backend '", name, "' for group '", config_.name, "' on rank ",
                       config_.rank, ": ", backend.status().message()));
    }
    created_.emplace_back(name, *backend);
    return *backend;
  }

  absl::StatusOr<std::shared_ptr<Backend>> Staged(DeviceType device,
                                                  const std::shared_ptr<Backend>& host) const {
    BackendContext context = ContextFor(absl::StrCat(host->name(), ".staged"));
    context.devices = {device};
    return registry_.FindStaging(device)(host, context);
  }

  // A device the string does not name, which a stager can carry through the cpu backend.
  bool StagesUnnamed(DeviceType device) const {
    for (const DeviceBackend& entry : mapping_) {
      if (entry.device == device) return false;
    }
    return registry_.FindStaging(device) != nullptr;
  }

 private:
  BackendContext ContextFor(const std::string& name) const {
    BackendContext context;
    context.store = std::make_shared<PrefixStore>(absl::StrCat("backend.", name), config_.store);
    context.rank = config_.rank;
    context.size = config_.size;
    context.global_ranks = config_.global_ranks;
    context.group_name = config_.name;
    context.timeout = config_.timeout;
    context.address = config_.address;
    context.secret = config_.secret;
    return context;
  }

  const ProcessGroup::Config& config_;
  const BackendRegistry& registry_;
  const std::vector<DeviceBackend>& mapping_;
  std::vector<std::pair<std::string, std::shared_ptr<Backend>>> created_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<ProcessGroup>> ProcessGroup::Create(
    Config config, const BackendRegistry& registry) {
  if (config.size < 1 || config.rank < 0 || config.rank >= config.size) {
    return absl::InvalidArgumentError(absl::StrCat("process group '", config.name, "': rank ",
                                                   config.rank, " is outside [0, ", config.size,
                                                   ")"));
  }
  if (config.global_ranks.empty()) {
    for (int r = 0; r < config.size; ++r) config.global_ranks.push_back(r);
  }
  ASSIGN_OR_RETURN(std::vector<DeviceBackend> mapping,
                   ParseBackendString(config.backend, registry));
  if (config.address.empty()) {
    AdvertiseAddressOptions address_options;
    address_options.rank = config.rank;
    address_options.size = config.size;
    address_options.timeout = config.timeout;
    ASSIGN_OR_RETURN(config.address, ResolveAdvertiseAddress(*config.store, address_options));
  }
  BackendMaker maker(config, registry, mapping);
  std::vector<Served> backends;
  std::shared_ptr<Backend> cpu;
  for (const DeviceBackend& entry : mapping) {
    ASSIGN_OR_RETURN(std::shared_ptr<Backend> backend, maker.Instance(entry.backend));
    if (entry.staged) {
      ASSIGN_OR_RETURN(backend, maker.Staged(entry.device, backend));
    }
    if (entry.device == DeviceType::kCpu) cpu = backend;
    // Capabilities are asked once here, not on every call.
    backends.push_back({entry.device, backend, backend->capabilities()});
  }
  // A device nobody named goes through the cpu backend when a stager exists for it: CUDA
  // tensors on "tcp" or "gloo" are copied through pinned host memory instead of refused.
  for (DeviceType device : kAllDeviceTypes) {
    if (cpu == nullptr || !maker.StagesUnnamed(device)) continue;
    ASSIGN_OR_RETURN(std::shared_ptr<Backend> backend, maker.Staged(device, cpu));
    backends.push_back({device, backend, backend->capabilities()});
  }
  return std::shared_ptr<ProcessGroup>(
      new ProcessGroup(std::move(config), registry, std::move(mapping), std::move(backends)));
}

class ProcessGroup::Outcomes : public Work::Listener {
 public:
  explicit Outcomes(std::shared_ptr<FlightRecorder> recorder) : recorder_(std::move(recorder)) {}

  void WorkCompleted(uint64_t token, const absl::Status& status) override {
    if (!status.ok() && BreaksTheGroup(status)) Broke(status);
    if (recorder_ != nullptr) recorder_->Finish(token, status);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  absl::Status first_failure() const {
    MutexLock lock(mu_);
    return first_failure_;
  }
  void OnFirstFailure(std::function<void(const absl::Status&)> callback) {
    absl::Status failure;
    {
      MutexLock lock(mu_);
      callback_ = callback;
      failure = first_failure_;
    }
    if (!failure.ok() && callback) callback(failure);
  }

  // Refusals of bad input leave the group as it was; anything else may have left a peer
  // mid-exchange (a gloo context that timed out is unusable).
  static bool BreaksTheGroup(const absl::Status& status) {
    switch (status.code()) {
      case absl::StatusCode::kInvalidArgument:
      case absl::StatusCode::kFailedPrecondition:
      case absl::StatusCode::kOutOfRange:
      case absl::StatusCode::kUnimplemented:
      case absl::StatusCode::kCancelled:
        return false;
      default:
        return true;
    }
  }

 private:
  void Broke(const absl::Status& status) {
    failed_.store(true, std::memory_order_relaxed);
    std::function<void(const absl::Status&)> callback;
    {
      MutexLock lock(mu_);
      if (!first_failure_.ok()) return;
      first_failure_ = status;
      callback = callback_;
    }
    if (callback) callback(status);
  }

  const std::shared_ptr<FlightRecorder> recorder_;
  std::atomic<bool> failed_{false};
  mutable Mutex mu_;
  absl::Status first_failure_ ABSL_GUARDED_BY(mu_);
  std::function<void(const absl::Status&)> callback_ ABSL_GUARDED_BY(mu_);
};

ProcessGroup::ProcessGroup(Config config, const BackendRegistry& registry,
                           std::vector<DeviceBackend> mapping, std::vector<Served> backends)
    : config_(std::move(config)),
      registry_(registry),
      mapping_(std::move(mapping)),
      backends_(std::move(backends)),
      recorder_(FlightRecorder::Create({config_.name, config_.rank, config_.size,
                                        config_.global_ranks, BackendString(mapping_)})),
      outcomes_(std::make_shared<Outcomes>(recorder_)) {
  bool needed = false;
  std::shared_ptr<Backend> host;
  for (const Served& served : backends_) {
    if (!served.capabilities.detects_mismatch) needed = true;
    if (served.device == DeviceType::kCpu && served.capabilities.detects_mismatch) {
      host = served.backend;
    }
  }
  // One rank has no one to disagree with: the check would only cost a store round trip per call.
  if (needed && config_.size > 1 && CollectiveCheck::EnabledByEnvironment()) {
    check_ = std::make_unique<CollectiveCheck>(
        host, std::make_shared<PrefixStore>("collective_check", config_.store), config_.rank,
        config_.size, config_.timeout);
  }
}

absl::StatusOr<WorkPtr> ProcessGroup::Launch(const Served& served,
                                             const CollectiveDescription& description,
                                             absl::Duration timeout, bool& blocking,
                                             absl::FunctionRef<absl::StatusOr<WorkPtr>()> call) {
  if (is_aborted_.load(std::memory_order_acquire)) return aborted();
  RETURN_IF_ERROR(CheckAgreement(served, description));
  // The backend sees the flag only if it runs blocking collectives itself; Track waits for
  // the others.
  const bool wait = blocking;
  blocking = wait && served.capabilities.runs_blocking_in_place;
  return Track(
      {description.op, description.dtype, description.count, description.root, -1,
       description.reduce_op >= 0 ? ReduceOpName(static_cast<ReduceOpKind>(description.reduce_op))
                                  : absl::string_view(),
       timeout},
      /*point_to_point=*/false, wait, call);
}

absl::Status ProcessGroup::first_failure() const { return outcomes_->first_failure(); }

void ProcessGroup::OnFirstFailure(std::function<void(const absl::Status&)> callback) {
  outcomes_->OnFirstFailure(std::move(callback));
}

absl::StatusOr<WorkPtr> ProcessGroup::Track(const FlightRecorder::Operation& operation,
                                            bool point_to_point, bool blocking,
                                            absl::FunctionRef<absl::StatusOr<WorkPtr>()> call) {
  if (is_aborted_.load(std::memory_order_acquire)) return aborted();
  const uint64_t handle = recorder_ != nullptr ? recorder_->Record(operation, point_to_point) : 0;
  absl::StatusOr<WorkPtr> work = call();
  if (!work.ok()) {
    outcomes_->WorkCompleted(handle, work.status());
    return work;
  }
  (*work)->Listen(outcomes_, handle);
  if (blocking && !(*work)->IsCompleted()) {
    // The operation ends by its own deadline; the second only covers a late completion.
    absl::Status waited = (*work)->Wait(operation.timeout + absl::Seconds(1));
    if (!(*work)->IsCompleted()) return waited;
  }
  return work;
}

absl::Status ProcessGroup::CheckAgreement(const Served& served,
                                          const CollectiveDescription& description) {
  if (check_ == nullptr || served.capabilities.detects_mismatch) return absl::OkStatus();
  return check_->Verify(description);
}

absl::StatusOr<const ProcessGroup::Served*> ProcessGroup::FindServed(DeviceType device) const {
  for (const Served& served : backends_) {
    if (served.device == device) return &served;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("no backend serves device ", DeviceTypeName(device), " in process group '",
                   config_.name, "' (backends '", backend_string(), "'); name one, e.g. \"",
                   DeviceTypeName(device), device == DeviceType::kCuda ? ":nccl\"" : ":tcp\""));
}

absl::StatusOr<std::shared_ptr<Backend>> ProcessGroup::BackendFor(DeviceType device) const {
  ASSIGN_OR_RETURN(const Served* served, FindServed(device));
  return served->backend;
}

absl::StatusOr<const ProcessGroup::Served*> ProcessGroup::Route(absl::string_view op,
                                                                const Tensor& tensor,
                                                                const ReduceOp* reduction) const {
  auto served = FindServed(tensor.device().type);
  if (!served.ok()) {
    return absl::Status(served.status().code(), absl::StrCat(op, " on rank ", config_.rank, ": ",
                                                             served.status().message()));
  }
  const std::vector<DType>& dtypes = (*served)->capabilities.dtypes;
  if (std::find(dtypes.begin(), dtypes.end(), tensor.dtype()) == dtypes.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, " on rank ", config_.rank, ": backend '", (*served)->backend->name(),
                     "' does not support dtype ", DTypeName(tensor.dtype())));
  }
  if (reduction != nullptr) {
    for (const auto& unsupported : (*served)->capabilities.unsupported_reductions) {
      if (unsupported.op == reduction->kind && unsupported.dtype == tensor.dtype()) {
        return absl::InvalidArgumentError(absl::StrCat(
            op, " on rank ", config_.rank, ": backend '", (*served)->backend->name(),
            "' cannot reduce ", DTypeName(tensor.dtype()), " with ", ReduceOpName(*reduction)));
      }
    }
  }
  return served;
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> ProcessGroup::NewGroup(std::vector<int> ranks,
                                                                     std::string backend) {
  // Every rank takes an id, members or not, so ids agree across the parent group.
  const int64_t id = next_subgroup_id_.fetch_add(1);
  const std::string name = absl::StrCat(config_.name, ".", id);
  std::sort(ranks.begin(), ranks.end());
  if (ranks.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("new_group '", name, "': no ranks given"));
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= config_.size) {
      return absl::InvalidArgumentError(absl::StrCat("new_group '", name, "': rank ", ranks[i],
                                                     " is outside [0, ", config_.size, ")"));
    }
    if (i > 0 && ranks[i] == ranks[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("new_group '", name, "': rank ", ranks[i], " is listed twice"));
    }
  }
  return Child(name, absl::StrCat("group.", id), ranks, "new_group", std::move(backend));
}

bool ProcessGroup::MayLeaveAlone() const {
  for (const Served& served : backends_) {
    if (!served.capabilities.may_leave_after_failure) return false;
  }
  return is_aborted_.load(std::memory_order_acquire) || outcomes_->failed() || !LostRanks().empty();
}

absl::Status ProcessGroup::Shutdown(absl::Duration timeout) {
  if (MayLeaveAlone()) {
    // Counted, so a healthy rank's barrier still opens; the store may be gone with the peers.
    absl::StatusOr<int64_t> departed = config_.store->Add("departed", 1);
    if (departed.ok() && *departed == config_.size) (void)config_.store->Set("all_departed", "1");
    return absl::OkStatus();
  }
  // A barrier: a rank that leaves while a peer still reads what it sent may reset that
  // connection and lose the data in flight. Once every rank is here, every rank's last
  // operation has completed, so nothing is in flight.
  ASSIGN_OR_RETURN(int64_t departed, config_.store->Add("departed", 1));
  if (departed == config_.size) RETURN_IF_ERROR(config_.store->Set("all_departed", "1"));
  absl::Status waited = config_.store->Wait({"all_departed"}, timeout);
  if (absl::IsDeadlineExceeded(waited)) {
    auto now = config_.store->Add("departed", 0);
    return absl::DeadlineExceededError(absl::StrCat(
        "shutdown of group '", config_.name, "': timed out after ", absl::FormatDuration(timeout),
        "; ", now.ok() ? *now : -1, "/", config_.size, " ranks departed"));
  }
  RETURN_IF_ERROR(waited);
  // Rank 0 may host the store: it leaves last, once everyone has seen the barrier open.
  if (config_.rank != 0) {
    ASSIGN_OR_RETURN(int64_t released, config_.store->Add("released", 1));
    if (released == config_.size - 1) RETURN_IF_ERROR(config_.store->Set("all_released", "1"));
    return absl::OkStatus();
  }
  if (config_.size == 1) return absl::OkStatus();
  absl::Status released = config_.store->Wait({"all_released"}, timeout);
  if (absl::IsDeadlineExceeded(released)) {
    return absl::DeadlineExceededError(absl::StrCat("shutdown of group '", config_.name,
                                                    "': not every rank confirmed leaving within ",
                                                    absl::FormatDuration(timeout)));
  }
  return released;
}

namespace {

// The elements every rank must agree on for `call` (-1 where ranks may differ), for the
// agreement check and the flight recorder.
int64_t CheckedElements(const Collective& call) {
  switch (call.kind) {
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kAllToAllSingle:
    case CollectiveKind::kBarrier:
      return -1;
    case CollectiveKind::kScatter:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kReduceScatterTensor:
    case CollectiveKind::kRecv:
    case CollectiveKind::kRecvAnySource:
      return call.output().numel();
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kAllReduceCoalesced:
      return TotalElements(call.outputs);
    case CollectiveKind::kAllGather:
    case CollectiveKind::kAllGatherIntoTensor:
    case CollectiveKind::kGather:
    case CollectiveKind::kSend:
      return call.input().numel();
  }
  return -1;  // Not a kind (no default above: the compiler names a kind left out).
}

}  // namespace

absl::StatusOr<WorkPtr> ProcessGroup::Run(Collective call) {
  call.timeout = ResolveTimeout(call.timeout, config_.timeout);
  FilledSplits filled;
  RETURN_IF_ERROR(ValidateCollective(position(), call, filled));
  const CollectiveTraits& traits = call.traits();
  if (call.kind == CollectiveKind::kBarrier) {
    // On the cpu backend when there is one, otherwise on the first in the backend string.
    const Served* chosen = &backends_.front();
    for (const Served& served : backends_) {
      if (served.device == DeviceType::kCpu) chosen = &served;
    }
    return Launch(*chosen, {traits.name, DType::kUInt8}, call.timeout, call.blocking,
                  [&] { return chosen->backend->Run(call); });
  }
  const Tensor& subject = call.inputs.empty() ? call.outputs[0] : call.inputs[0];
  ASSIGN_OR_RETURN(const Served* served,
                   Route(traits.name, subject, traits.reduces() ? &call.op : nullptr));
  if (traits.point_to_point()) {
    if (call.kind == CollectiveKind::kRecvAnySource && !served->capabilities.recv_any_source) {
      return absl::UnimplementedError(absl::StrCat("recv_any_source: backend '",
                                                   served->backend->name(),
                                                   "' cannot receive from any source"));
    }
    const int peer = call.kind == CollectiveKind::kRecvAnySource ? -1 : call.peer;
    return Track({traits.name, subject.dtype(), subject.numel(), -1, peer, "", call.timeout},
                 /*point_to_point=*/true, /*blocking=*/false,
                 [&] { return served->backend->Run(call); });
  }
  return Launch(*served,
                {traits.name, subject.dtype(), CheckedElements(call),
                 traits.rooted() ? call.root : -1, traits.reduces() ? Kind(call.op) : -1},
                call.timeout, call.blocking, [&] { return served->backend->Run(call); });
}

absl::StatusOr<WorkPtr> ProcessGroup::Broadcast(const Tensor& tensor, BroadcastOptions options) {
  return Run(Collective::InPlace(CollectiveKind::kBroadcast, {&tensor, 1}).With(options));
}

absl::StatusOr<WorkPtr> ProcessGroup::Reduce(const Tensor& tensor, ReduceOptions options) {
  return Run(Collective::InPlace(CollectiveKind::kReduce, {&tensor, 1}).With(options));
}

absl::StatusOr<WorkPtr> ProcessGroup::AllReduce(const Tensor& tensor, AllReduceOptions options) {
  return Run(Collective::InPlace(CollectiveKind::kAllReduce, {&tensor, 1}).With(options));
}

absl::StatusOr<WorkPtr> ProcessGroup::AllReduceCoalesced(absl::Span<const Tensor> tensors,
                                                         AllReduceCoalescedOptions options) {
  return Run(Collective::InPlace(CollectiveKind::kAllReduceCoalesced, tensors).With(options));
}

absl::StatusOr<WorkPtr> ProcessGroup::AllGather(absl::Span<const Tensor> outputs,
                                                const Tensor& input, AllGatherOptions options) {
  return Run(Collective::Of(CollectiveKind::kAllGather, outputs, {&input, 1}).With(options));
}

absl::StatusOr<WorkPtr> ProcessGroup::AllGatherIntoTensor(const Tensor& output, const Tensor& input,
                                                          AllGatherOptions options) {
  return Run(Collective::Of(CollectiveKind::kAllGatherIntoTensor, {&output, 1}, {&input, 1})
                 .With(options));
}

absl::StatusOr<WorkPtr> ProcessGroup::Gather(absl::Span<const Tensor> outputs, const Tensor& input,
                                             GatherOptions options) {
  return Run(Collective::Of(CollectiveKind::kGather, outputs, {&input, 1}).With(options));
}

absl::StatusOr<WorkPtr> ProcessGroup::Scatter(const Tensor& output, absl::Span<const Tensor> inputs,
                                              ScatterOptions options) {
  return Run(Collective::Of(CollectiveKind::kScatter, {&output, 1}, inputs).With(options));
}

absl::StatusOr<WorkPtr> ProcessGroup::ReduceScatter(const Tensor& output,
                                                    absl::Span<const Tensor> inputs,
                                                    ReduceScatterOptions options) {
  return Run(Collective::Of(CollectiveKind::kReduceScatter, {&output, 1}, inputs).With(options));
}

absl::StatusOr<WorkPtr> ProcessGroup::ReduceScatterTensor(const Tensor& output, const Tensor& input,
                                                          ReduceScatterOptions options) {
  return Run(Collective::Of(CollectiveKind::kReduceScatterTensor, {&output, 1}, {&input, 1})
                 .With(options));
}

absl::StatusOr<WorkPtr> ProcessGroup::AllToAll(absl::Span<const Tensor> outputs,
                                               absl::Span<const Tensor> inputs,
                                               AllToAllOptions options) {
  return Run(Collective::Of(CollectiveKind::kAllToAll, outputs, inputs).With(options));
}

absl::StatusOr<WorkPtr> ProcessGroup::AllToAllSingle(const Tensor& output, const Tensor& input,
                                                     std::vector<int64_t> output_split_sizes,
                                                     std::vector<int64_t> input_split_sizes,
                                                     AllToAllOptions options) {
  Collective call =
      Collective::Of(CollectiveKind::kAllToAllSingle, {&output, 1}, {&input, 1}).With(options);
  call.output_splits = output_split_sizes;
  call.input_splits = input_split_sizes;
  return Run(call);
}

absl::StatusOr<WorkPtr> ProcessGroup::Barrier(BarrierOptions options) {
  return Run(Collective().With(options));
}

absl::StatusOr<WorkPtr> ProcessGroup::Send(const Tensor& tensor, int dst_rank,
                                           SendOptions options) {
  Collective call = Collective::Of(CollectiveKind::kSend, {}, {&tensor, 1}).With(options);
  call.peer = dst_rank;
  return Run(call);
}

absl::StatusOr<WorkPtr> ProcessGroup::Recv(const Tensor& tensor, int src_rank,
                                           RecvOptions options) {
  Collective call = Collective::Of(CollectiveKind::kRecv, {&tensor, 1}, {}).With(options);
  call.peer = src_rank;
  return Run(call);
}

absl::StatusOr<WorkPtr> ProcessGroup::RecvAnySource(const Tensor& tensor, RecvOptions options) {
  return Run(Collective::Of(CollectiveKind::kRecvAnySource, {&tensor, 1}, {}).With(options));
}

absl::StatusOr<WorkPtr> ProcessGroup::BatchPointToPoint(std::vector<PointToPointOp> ops,
                                                        BatchOptions options) {
  options.timeout = ResolveTimeout(options.timeout, config_.timeout);
  if (ops.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_isend_irecv on rank ", config_.rank, ": no operations given"));
  }
  for (const PointToPointOp& op : ops) {
    const bool send = op.kind == PointToPointOp::Kind::kSend;
    RETURN_IF_ERROR(ValidatePointToPoint(position(),
                                         send ? "batch_isend_irecv send" : "batch_isend_irecv recv",
                                         op.tensor, op.peer, op.tag));
    if (op.tensor.device().type != ops[0].tensor.device().type) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch_isend_irecv on rank ", config_.rank, ": tensors on ",
                       ops[0].tensor.device().ToString(), " and ", op.tensor.device().ToString(),
                       "; one batch uses one device type"));
    }
  }
  ASSIGN_OR_RETURN(const Served* served, Route("batch_isend_irecv", ops[0].tensor));
  int64_t elements = 0;
  for (const PointToPointOp& op : ops) elements += op.tensor.numel();
  return Track({"batch_isend_irecv", ops[0].tensor.dtype(), elements, -1,
                ops.size() == 1 ? ops[0].peer : -1, "", options.timeout},
               /*point_to_point=*/true, /*blocking=*/false,
               [&] { return served->backend->BatchPointToPoint(ops, options); });
}

}  // namespace plexus
