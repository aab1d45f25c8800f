#include "bindings/torch/process_group_plexus.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bindings/torch/c10d_store.h"
#include "bindings/torch/gil.h"
#include "bindings/torch/torch_stream.h"
#include "devices/cuda/current_stream.h"
#include "frontend/dispatch/init.h"

namespace plexus::torch_backend {
namespace {

int CudaDeviceOf(const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& tensor : tensors) {
    if (tensor.defined() && tensor.is_cuda()) return tensor.get_device();
  }
  return -1;
}

std::vector<at::Tensor> Flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> flat;
  for (const std::vector<at::Tensor>& list : lists)
    flat.insert(flat.end(), list.begin(), list.end());
  return flat;
}

InitOptions GroupOptions(int rank, int size, std::chrono::milliseconds timeout,
                         const std::string& backend, const std::string& name) {
  InitOptions options;
  options.backend = backend;
  options.rank = rank;
  options.world_size = size;
  options.timeout =
      timeout.count() > 0 ? absl::Milliseconds(timeout.count()) : kDefaultGroupTimeout;
  options.group_name = name;
  return options;
}

}  // namespace

c10::intrusive_ptr<ProcessGroupPlexus> ProcessGroupPlexus::Create(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, const std::string& backend, const std::string& name) {
  InitOptions options = GroupOptions(rank, size, timeout, backend, name);
  options.store = std::make_shared<C10dStore>(store);
  return c10::make_intrusive<ProcessGroupPlexus>(
      ValueOrThrow(InitProcessGroup(std::move(options)), Origin{rank, name}));
}

c10::intrusive_ptr<ProcessGroupPlexus> ProcessGroupPlexus::CreateReconfigurable(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, const std::string& backend, const std::string& name) {
  const InitOptions init = GroupOptions(rank, size, timeout, backend, name);
  Reconfigurer::Options options;
  options.store = std::make_shared<C10dStore>(store);
  options.backend = init.backend;
  options.name = init.group_name;
  options.timeout = init.timeout;
  return c10::make_intrusive<ProcessGroupPlexus>(
      rank, size, name, std::make_unique<Reconfigurer>(std::move(options)));
}

ProcessGroupPlexus::ProcessGroupPlexus(std::shared_ptr<plexus::ProcessGroup> group)
    : TorchGroupBase(group->rank(), group->size()),
      origin_{group->rank(), group->name()},
      group_(std::move(group)),
      hooks_(std::make_shared<AbortHooks>()),
      completions_(std::make_shared<CompletionHooks>(origin_.group)) {
  WatchFailures(*group_);
#if !PLEXUS_TORCH_BACKEND_API
  init();  // torch's logging of the group.
#endif
}

ProcessGroupPlexus::ProcessGroupPlexus(int rank, int size, const std::string& name,
                                       std::unique_ptr<Reconfigurer> reconfigurer)
    : TorchGroupBase(rank, size),
      origin_{rank, name},
      reconfigurer_(std::move(reconfigurer)),
      hooks_(std::make_shared<AbortHooks>()),
      completions_(std::make_shared<CompletionHooks>(origin_.group)) {}

void ProcessGroupPlexus::WatchFailures(plexus::ProcessGroup& group) {
  group.OnFirstFailure([hooks = hooks_](const absl::Status&) { hooks->Fire(); });
}

const std::shared_ptr<plexus::ProcessGroup>& ProcessGroupPlexus::plexus_group() const {
  CheckRunnable();
  return group_;
}

void ProcessGroupPlexus::CheckRunnable() const {
  if (group_ != nullptr) return;
  Throw(absl::FailedPreconditionError(
            "this group was created with enable_reconfigure=True and has no members yet: call "
            "torch.distributed._reconfigure(uuid, handles) first"),
        origin_);
}

absl::Duration ProcessGroupPlexus::DefaultTimeout() const {
  const int64_t set = timeout_ms_.load(std::memory_order_relaxed);
  return set > 0 ? absl::Milliseconds(set) : group_->timeout();
}

ProcessGroupPlexus::~ProcessGroupPlexus() {
  // Dropping the group joins its threads, and one of them may be completing a future whose
  // Python callback (a DDP communication hook's then()) waits for the GIL: release it first.
  // The sparse reducer finishes what is queued (within its deadlines): no GIL then.
  WithoutGil released;
  std::unique_ptr<SparseAllReducer> sparse;
  {
    MutexLock lock(sparse_mu_);
    sparse = std::move(sparse_);
  }
  sparse.reset();
  group_.reset();
}

template <typename T>
const T& ProcessGroupPlexus::Single(const std::vector<T>& items, const char* op,
                                    const char* what) const {
  if (items.size() != 1) {
    Throw(absl::InvalidArgumentError(
              absl::StrCat(op, ": takes one ", what, " per process, got ", items.size())),
          origin_);
  }
  return items.front();
}

template <typename Issue>
c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::Run(c10d::OpType type, const char* title,
                                                       std::vector<at::Tensor> outputs,
                                                       std::vector<at::Tensor> inputs,
                                                       std::chrono::milliseconds timeout,
                                                       Issue&& issue) {
  CheckRunnable();
  if (reconfigurer_ != nullptr) {
    // A broken group is revoked, as torch's reconfigure regime wants: nothing runs on it again.
    absl::Status failure = group_->first_failure();
    if (!failure.ok()) {
      Throw(absl::Status(failure.code(), absl::StrCat(failure.message(),
                                                      " (the group is revoked: reconfigure it "
                                                      "with the survivors and a fresh uuid)")),
            origin_);
    }
  }
  absl::Duration requested = ToTimeout(timeout);
  if (requested == kDefaultTimeout && timeout_ms_.load(std::memory_order_relaxed) > 0) {
    requested = DefaultTimeout();
  }
  int cuda_device = CudaDeviceOf(outputs);
  if (cuda_device < 0) cuda_device = CudaDeviceOf(inputs);
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<WorkPtr> work;
  if (cuda_device >= 0) {
    // Ordered after what the caller queued on torch's current stream, as ProcessGroupNCCL.
    cuda::StreamGuard current(cuda_device, TorchCurrentStream(cuda_device));
    work = issue(requested);
  } else {
    work = issue(requested);
  }
  if (!work.ok()) Throw(work.status(), origin_);
  {
    MutexLock lock(coalescing_mu_);
    if (coalescing_) coalesced_.push_back(*work);
  }
  PlexusWork::Spec spec;
  spec.sequence = sequence_.fetch_add(1, std::memory_order_relaxed) + 1;
  spec.started = started;
  spec.completions = completions_;
  completions_->Issued();
  spec.origin = origin_;
  spec.type = type;
  spec.profiling_title = title;
  spec.outputs = std::move(outputs);
  spec.inputs = std::move(inputs);
  spec.timeout = ResolveTimeout(requested, DefaultTimeout());
  spec.cuda_device = cuda_device;
  return PlexusWork::Create(*std::move(work), std::move(spec));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::RunCollective(
    c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
    std::vector<at::Tensor> inputs, std::chrono::milliseconds timeout, Collective call) {
  return Run(type, title, std::move(outputs), std::move(inputs), timeout,
             [&](absl::Duration resolved) {
               call.timeout = resolved;
               return group_->Run(call);
             });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::RunCollectives(
    c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
    std::vector<at::Tensor> inputs, std::chrono::milliseconds timeout,
    std::vector<Collective> calls, const char* op) {
  return Run(type, title, std::move(outputs), std::move(inputs), timeout,
             [&](absl::Duration resolved) -> absl::StatusOr<WorkPtr> {
               std::vector<WorkPtr> works;
               for (Collective& call : calls) {
                 call.timeout = resolved;
                 absl::StatusOr<WorkPtr> work = group_->Run(call);
                 if (!work.ok()) return work.status();
                 works.push_back(*std::move(work));
               }
               return WhenAll(std::move(works), op, size_);
             });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  const at::Tensor& tensor = Single(tensors, "broadcast", "tensor");
  Tensor view = ValueOrThrow(View(tensor, "broadcast", "tensor"), origin_);
  Collective call = Collective::InPlace(CollectiveKind::kBroadcast, {&view, 1});
  call.root = static_cast<int>(opts.rootRank);
  return RunCollective(c10d::OpType::BROADCAST, "plexus:broadcast", tensors, {}, opts.timeout,
                       call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  const at::Tensor& tensor = Single(tensors, "all_reduce", "tensor");
  if (tensor.is_sparse()) return SparseAllReduce(tensors, opts);
  Tensor view = ValueOrThrow(View(tensor, "all_reduce", "tensor"), origin_);
  Collective call = Collective::InPlace(CollectiveKind::kAllReduce, {&view, 1});
  call.op = ValueOrThrow(ToReduceOp(opts.reduceOp, "all_reduce"), origin_);
  return RunCollective(c10d::OpType::ALLREDUCE, "plexus:all_reduce", tensors, {}, opts.timeout,
                       call);
}

absl::Status ProcessGroupPlexus::Abort(absl::string_view reason) {
  if (group_ == nullptr) return absl::OkStatus();  // Nothing formed yet: nothing to stop.
  hooks_->user_aborted.store(true, std::memory_order_release);
  absl::Status status = group_->Abort(reason);
  MutexLock lock(sparse_mu_);
  if (sparse_ != nullptr) sparse_->Abort(group_->aborted());
  return status;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::SparseAllReduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const at::Tensor& tensor = tensors.front();
  if (opts.reduceOp.op_ != c10d::ReduceOp::SUM) {
    Throw(absl::InvalidArgumentError(
              absl::StrCat(kSparseAllReduce, ": only SUM reduces sparse tensors (got reduce op ",
                           static_cast<int>(opts.reduceOp.op_), ")")),
          origin_);
  }
  if (!tensor.is_cpu()) {
    Throw(absl::InvalidArgumentError(absl::StrCat(kSparseAllReduce, ": the tensor is on ",
                                                  tensor.device().str(),
                                                  "; sparse tensors are reduced on the CPU only")),
          origin_);
  }
  return Run(c10d::OpType::ALLREDUCE, "plexus:all_reduce", tensors, {}, opts.timeout,
             [&](absl::Duration timeout) -> absl::StatusOr<WorkPtr> {
               MutexLock lock(sparse_mu_);
               if (sparse_ == nullptr) sparse_ = std::make_unique<SparseAllReducer>(group_);
               return sparse_->Submit(tensor, ResolveTimeout(timeout, DefaultTimeout()),
                                      static_cast<int64_t>(sequence_.load()) + 1);
             });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  std::vector<Tensor> views =
      ValueOrThrow(Views(tensors, "all_reduce_coalesced", "tensor"), origin_);
  Collective call = Collective::InPlace(CollectiveKind::kAllReduceCoalesced, views);
  call.op = ValueOrThrow(ToReduceOp(opts.reduceOp, "all_reduce_coalesced"), origin_);
  return RunCollective(c10d::OpType::ALLREDUCE_COALESCED, "plexus:all_reduce_coalesced", tensors,
                       {}, opts.timeout, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  const at::Tensor& tensor = Single(tensors, "reduce", "tensor");
  Tensor view = ValueOrThrow(View(tensor, "reduce", "tensor"), origin_);
  Collective call = Collective::InPlace(CollectiveKind::kReduce, {&view, 1});
  call.op = ValueOrThrow(ToReduceOp(opts.reduceOp, "reduce"), origin_);
  call.root = static_cast<int>(opts.rootRank);
  return RunCollective(c10d::OpType::REDUCE, "plexus:reduce", tensors, {}, opts.timeout, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const at::Tensor& input = Single(inputs, "all_gather", "input tensor");
  const std::vector<at::Tensor>& output_list = Single(outputs, "all_gather", "output list");
  std::vector<Tensor> output_views =
      ValueOrThrow(Views(output_list, "all_gather", "output"), origin_);
  Tensor input_view = ValueOrThrow(View(input, "all_gather", "input"), origin_);
  return RunCollective(c10d::OpType::ALLGATHER, "plexus:all_gather", output_list, inputs,
                       opts.timeout,
                       Collective::Of(CollectiveKind::kAllGather, output_views, {&input_view, 1}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  Tensor output_view = ValueOrThrow(View(output, "all_gather_into_tensor", "output"), origin_);
  Tensor input_view = ValueOrThrow(View(input, "all_gather_into_tensor", "input"), origin_);
  return RunCollective(
      c10d::OpType::_ALLGATHER_BASE, "plexus:all_gather_into_tensor", {output}, {input},
      opts.timeout,
      Collective::Of(CollectiveKind::kAllGatherIntoTensor, {&output_view, 1}, {&input_view, 1}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  constexpr const char* kOp = "all_gather_coalesced";
  if (static_cast<int>(outputs.size()) != size_) {
    Throw(absl::InvalidArgumentError(absl::StrCat(kOp, ": the output holds ", outputs.size(),
                                                  " lists; it needs one per rank (", size_,
                                                  "), each as long as the input list")),
          origin_);
  }
  // outputs[rank][i] receives rank's inputs[i]: per input, the column of outputs.
  std::vector<std::vector<Tensor>> columns(inputs.size());
  for (int rank = 0; rank < size_; ++rank) {
    if (outputs[rank].size() != inputs.size()) {
      Throw(absl::InvalidArgumentError(
                absl::StrCat(kOp, ": output list ", rank, " holds ", outputs[rank].size(),
                             " tensors and the input list ", inputs.size(), "; they must match")),
            origin_);
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      columns[i].push_back(ValueOrThrow(
          View(outputs[rank][i], kOp, absl::StrCat("output [", rank, "][", i, "]")), origin_));
    }
  }
  std::vector<Tensor> input_views = ValueOrThrow(Views(inputs, kOp, "input"), origin_);
  std::vector<Collective> calls;
  for (size_t i = 0; i < inputs.size(); ++i) {
    calls.push_back(Collective::Of(CollectiveKind::kAllGather, columns[i], {&input_views[i], 1}));
  }
  return RunCollectives(c10d::OpType::ALLGATHER_COALESCED, "plexus:all_gather_coalesced",
                        Flatten(outputs), inputs, opts.timeout, std::move(calls), kOp);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const at::Tensor& input = Single(inputs, "gather", "input tensor");
  Tensor input_view = ValueOrThrow(View(input, "gather", "input"), origin_);
  // Only the root passes outputs.
  std::vector<at::Tensor> output_list;
  if (!outputs.empty()) output_list = Single(outputs, "gather", "output list");
  std::vector<Tensor> output_views = ValueOrThrow(Views(output_list, "gather", "output"), origin_);
  Collective call = Collective::Of(CollectiveKind::kGather, output_views, {&input_view, 1});
  call.root = static_cast<int>(opts.rootRank);
  return RunCollective(c10d::OpType::GATHER, "plexus:gather", output_list, inputs, opts.timeout,
                       call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const at::Tensor& output = Single(outputs, "scatter", "output tensor");
  Tensor output_view = ValueOrThrow(View(output, "scatter", "output"), origin_);
  // Only the root passes inputs.
  std::vector<at::Tensor> input_list;
  if (!inputs.empty()) input_list = Single(inputs, "scatter", "input list");
  std::vector<Tensor> input_views = ValueOrThrow(Views(input_list, "scatter", "input"), origin_);
  Collective call = Collective::Of(CollectiveKind::kScatter, {&output_view, 1}, input_views);
  call.root = static_cast<int>(opts.rootRank);
  return RunCollective(c10d::OpType::SCATTER, "plexus:scatter", outputs, input_list, opts.timeout,
                       call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& output = Single(outputs, "reduce_scatter", "output tensor");
  const std::vector<at::Tensor>& input_list = Single(inputs, "reduce_scatter", "input list");
  Tensor output_view = ValueOrThrow(View(output, "reduce_scatter", "output"), origin_);
  std::vector<Tensor> input_views =
      ValueOrThrow(Views(input_list, "reduce_scatter", "input"), origin_);
  Collective call = Collective::Of(CollectiveKind::kReduceScatter, {&output_view, 1}, input_views);
  call.op = ValueOrThrow(ToReduceOp(opts.reduceOp, "reduce_scatter"), origin_);
  return RunCollective(c10d::OpType::REDUCE_SCATTER, "plexus:reduce_scatter", outputs, input_list,
                       opts.timeout, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  Tensor output_view = ValueOrThrow(View(output, "reduce_scatter_tensor", "output"), origin_);
  Tensor input_view = ValueOrThrow(View(input, "reduce_scatter_tensor", "input"), origin_);
  Collective call =
      Collective::Of(CollectiveKind::kReduceScatterTensor, {&output_view, 1}, {&input_view, 1});
  call.op = ValueOrThrow(ToReduceOp(opts.reduceOp, "reduce_scatter_tensor"), origin_);
  return RunCollective(c10d::OpType::_REDUCE_SCATTER_BASE, "plexus:reduce_scatter_tensor", {output},
                       {input}, opts.timeout, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  Tensor output_view = ValueOrThrow(View(output, "all_to_all_single", "output"), origin_);
  Tensor input_view = ValueOrThrow(View(input, "all_to_all_single", "input"), origin_);
  Collective call =
      Collective::Of(CollectiveKind::kAllToAllSingle, {&output_view, 1}, {&input_view, 1});
  call.output_splits = output_split_sizes;
  call.input_splits = input_split_sizes;
  return RunCollective(c10d::OpType::ALLTOALL_BASE, "plexus:all_to_all_single", {output}, {input},
                       opts.timeout, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  std::vector<Tensor> output_views = ValueOrThrow(Views(outputs, "all_to_all", "output"), origin_);
  std::vector<Tensor> input_views = ValueOrThrow(Views(inputs, "all_to_all", "input"), origin_);
  return RunCollective(c10d::OpType::ALLTOALL, "plexus:all_to_all", outputs, inputs, opts.timeout,
                       Collective::Of(CollectiveKind::kAllToAll, output_views, input_views));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::send(std::vector<at::Tensor>& tensors,
                                                        int dst_rank, int tag) {
  const at::Tensor& tensor = Single(tensors, "send", "tensor");
  Tensor view = ValueOrThrow(View(tensor, "send", "tensor"), origin_);
  Collective call = Collective::Of(CollectiveKind::kSend, {}, {&view, 1});
  call.peer = dst_rank;
  call.tag = tag;
  return RunCollective(c10d::OpType::SEND, "plexus:send", {}, tensors, c10d::kUnsetTimeout, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::recv(std::vector<at::Tensor>& tensors,
                                                        int src_rank, int tag) {
  const at::Tensor& tensor = Single(tensors, "recv", "tensor");
  Tensor view = ValueOrThrow(View(tensor, "recv", "tensor"), origin_);
  Collective call = Collective::Of(CollectiveKind::kRecv, {&view, 1}, {});
  call.peer = src_rank;
  call.tag = tag;
  return RunCollective(c10d::OpType::RECV, "plexus:recv", tensors, {}, c10d::kUnsetTimeout, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                 int tag) {
  const at::Tensor& tensor = Single(tensors, "recv", "tensor");
  Tensor view = ValueOrThrow(View(tensor, "recv", "tensor"), origin_);
  Collective call = Collective::Of(CollectiveKind::kRecvAnySource, {&view, 1}, {});
  call.tag = tag;
  return RunCollective(c10d::OpType::RECVANYSOURCE, "plexus:recv_anysource", tensors, {},
                       c10d::kUnsetTimeout, call);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::barrier(const c10d::BarrierOptions& opts) {
  return RunCollective(c10d::OpType::BARRIER, "plexus:barrier", {}, {}, opts.timeout, Collective());
}

void ProcessGroupPlexus::setSequenceNumberForGroup() {
  sequence_.store(0, std::memory_order_relaxed);
}

uint64_t ProcessGroupPlexus::getSequenceNumberForGroup() {
  return sequence_.load(std::memory_order_relaxed);
}

#if PLEXUS_TORCH_BACKEND_API
void ProcessGroupPlexus::startCoalescing() {
  MutexLock lock(coalescing_mu_);
  if (coalescing_) {
    Throw(absl::FailedPreconditionError(
              "startCoalescing: a coalescing region is open already (regions do not nest)"),
          origin_);
  }
  coalescing_ = true;
  coalesced_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::endCoalescing() {
  std::vector<WorkPtr> works;
  {
    MutexLock lock(coalescing_mu_);
    if (!coalescing_) {
      Throw(absl::FailedPreconditionError("endCoalescing: no coalescing region is open"), origin_);
    }
    coalescing_ = false;
    works.swap(coalesced_);
  }
  // Nothing to wait for: done, also on a group that is aborted, broken or not yet formed
  // (torch's _abort_process_group() opens an empty region around its aborts).
  if (works.empty()) return CompletedWork();
  const size_t count = works.size();
  return Run(c10d::OpType::COALESCED, "plexus:coalesced", {}, {}, c10d::kUnsetTimeout,
             [&](absl::Duration) -> absl::StatusOr<WorkPtr> {
               return WhenAll(std::move(works), absl::StrCat("coalesced(", count, " ops)"), size_);
             });
}

void ProcessGroupPlexus::registerOnCompletionHook(
    std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) {
  absl::Status registered =
      completions_->Register([hook = std::move(hook)](const CompletionHooks::Finished& ended) {
        const std::chrono::duration<float> active = ended.finished - ended.started;
        hook(std::make_shared<c10d::WorkInfo>(ended.type, ended.sequence,
                                              compat::AsWorkInfoTime(ended.started),
                                              compat::AsWorkInfoTime(ended.finished), active));
      });
  if (!registered.ok()) Throw(registered, origin_);
  // What torch's hasHooks() reads (destroy_process_group then waits for pending hooks); the
  // hook itself runs from completions_.
  onCompletionHook_ = [](std::shared_ptr<c10d::WorkInfo>) {};
}

void ProcessGroupPlexus::waitForPendingWorks() {
  absl::Status done;
  {
    WithoutGil released;  // The hooks' thread may need it.
    done = completions_->WaitForPending(DefaultTimeout());
  }
  if (!done.ok()) Throw(done, origin_);
}
#endif

#if PLEXUS_TORCH_BACKEND_API
// torch 2.x's coalesced tensor collectives (1.13's ProcessGroup has none), what its
// _coalescing_manager issues for grouped all_gather_into_tensor and reduce_scatter_tensor calls:
// pair i runs as its own plexus collective, in list order, and one Work covers them all.
namespace {

// Both lists as views, pair by pair, after checking they pair up.
void PairViews(const char* op, const std::vector<at::Tensor>& outputs,
               const std::vector<at::Tensor>& inputs, const Origin& origin,
               std::vector<Tensor>& output_views, std::vector<Tensor>& input_views) {
  if (outputs.size() != inputs.size() || inputs.empty()) {
    Throw(absl::InvalidArgumentError(absl::StrCat(op, ": ", outputs.size(), " outputs and ",
                                                  inputs.size(),
                                                  " inputs; it takes one output per input")),
          origin);
  }
  output_views = ValueOrThrow(Views(outputs, op, "output"), origin);
  input_views = ValueOrThrow(Views(inputs, op, "input"), origin);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  constexpr const char* kOp = "all_gather_into_tensor_coalesced";
  std::vector<Tensor> output_views, input_views;
  PairViews(kOp, outputs, inputs, origin_, output_views, input_views);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (output_views[i].numel() != input_views[i].numel() * size_) {
      Throw(absl::InvalidArgumentError(absl::StrCat(
                kOp, ": output ", i, " holds ", output_views[i].numel(), " elements; input ", i,
                " has ", input_views[i].numel(), " and the group ", size_, " ranks")),
            origin_);
    }
  }
  std::vector<Collective> calls;
  for (size_t i = 0; i < inputs.size(); ++i) {
    calls.push_back(Collective::Of(CollectiveKind::kAllGatherIntoTensor, {&output_views[i], 1},
                                   {&input_views[i], 1}));
  }
  return RunCollectives(c10d::OpType::COALESCED, "plexus:all_gather_into_tensor_coalesced", outputs,
                        inputs, opts.timeout, std::move(calls), kOp);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  constexpr const char* kOp = "reduce_scatter_tensor_coalesced";
  std::vector<Tensor> output_views, input_views;
  PairViews(kOp, outputs, inputs, origin_, output_views, input_views);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (input_views[i].numel() != output_views[i].numel() * size_) {
      Throw(absl::InvalidArgumentError(absl::StrCat(
                kOp, ": input ", i, " holds ", input_views[i].numel(), " elements; output ", i,
                " has ", output_views[i].numel(), " and the group ", size_, " ranks")),
            origin_);
    }
  }
  const ReduceOp op = ValueOrThrow(ToReduceOp(opts.reduceOp, kOp), origin_);
  std::vector<Collective> calls;
  for (size_t i = 0; i < inputs.size(); ++i) {
    calls.push_back(Collective::Of(CollectiveKind::kReduceScatterTensor, {&output_views[i], 1},
                                   {&input_views[i], 1}));
    calls.back().op = op;
  }
  return RunCollectives(c10d::OpType::COALESCED, "plexus:reduce_scatter_tensor_coalesced", outputs,
                        inputs, opts.timeout, std::move(calls), kOp);
}

#endif

#if PLEXUS_TORCH_BACKEND_API
NamedProcessGroup::NamedProcessGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                     const c10::intrusive_ptr<ProcessGroupPlexus>& backend)
    : SequenceNumberForwarding(store, backend->getRank(), backend->getSize()) {
  setDefaultBackend(BackendType::CUSTOM);
  for (c10::DeviceType device : {c10::DeviceType::CPU, c10::DeviceType::CUDA}) {
    setBackend(device, BackendType::CUSTOM, backend);
  }
}

uint64_t NamedProcessGroup::getSequenceNumberForGroup() {
  return getDefaultBackend()->getSequenceNumberForGroup();
}
#endif

}  // namespace plexus::torch_backend
