#include "backends/cuda_staging/staging_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/interface/backend_registry.h"
#include "base/core/status_macros.h"
#include "devices/cuda/current_stream.h"
#include "devices/cuda/device_tensors.h"

namespace plexus::cuda_staging {

// The pinned host twins of one call's tensors: reads are copied in on the caller's stream
// (AwaitCaller waits for them), writes are remembered and copied back after the host call.
class StagingBackend::Twins {
 public:
  struct Write {
    void* device;
    void* host;
    size_t bytes;
  };

  Twins(const cuda::CudaApi& api, cuda::PinnedPool& pool, cuda::Stream caller, int device)
      : api_(api), pool_(pool), caller_(caller), device_(device) {}

  // The twin of `tensor`: the same shape and dtype on the host.
  Tensor Of(const Tensor& tensor, bool read, bool write) {
    if (!status_.ok()) return Tensor();
    const size_t bytes = tensor.nbytes();
    auto buffer = pool_.Get(bytes);
    if (!buffer.ok()) {
      status_ = buffer.status();
      return Tensor();
    }
    buffers_.push_back(*buffer);
    void* host = buffer->get();
    if (read && bytes > 0) {
      status_ = cuda::CudaStatus(
          api_, api_.MemcpyAsync(host, tensor.data(), bytes, cudaMemcpyDeviceToHost, caller_),
          "staging a CUDA tensor to the host");
      reads_ = true;
    }
    if (write && bytes > 0) writes_.push_back({tensor.data(), host, bytes});
    return Tensor(host, tensor.dtype(), tensor.shape(), tensor.strides(), Device::Cpu());
  }

  std::vector<Tensor> Of(absl::Span<const Tensor> tensors, bool read, bool write) {
    std::vector<Tensor> twins;
    for (const Tensor& tensor : tensors) twins.push_back(Of(tensor, read, write));
    return twins;
  }

  // Waits for the caller's stream to reach the end of the copies in (and so the end of the
  // work queued before the call, which produced the tensors). Without copies in, marks where
  // the caller's stream stands instead: the results must land after that work too (a fill
  // queued just before a broadcast would otherwise overwrite what the broadcast received).
  absl::Status AwaitCaller() {
    if (!status_.ok()) return status_;
    if (reads_) {
      return cuda::CudaStatus(api_, api_.StreamSynchronize(caller_), "waiting for staged inputs");
    }
    if (writes_.empty()) return status_;
    auto mark = cuda::CudaEvent::Create(api_, device_);
    if (!mark.ok()) return status_ = mark.status();
    status_ = (*mark)->Record(caller_);
    if (status_.ok()) caller_position_ = *mark;
    return status_;
  }

  // Makes `stream` wait for the work the caller's stream held when the call was made, where
  // AwaitCaller did not already wait for it on the host.
  absl::Status OrderAfterCaller(cudaStream_t stream) const {
    if (caller_position_ == nullptr) return absl::OkStatus();
    return caller_position_->BlockStream(stream);
  }

  const std::vector<Write>& writes() const { return writes_; }
  std::vector<std::shared_ptr<void>>& buffers() { return buffers_; }

 private:
  const cuda::CudaApi& api_;
  cuda::PinnedPool& pool_;
  const cuda::Stream caller_;
  const int device_;
  absl::Status status_;
  std::shared_ptr<cuda::CudaEvent> caller_position_;
  bool reads_ = false;
  std::vector<Write> writes_;
  std::vector<std::shared_ptr<void>> buffers_;
};

absl::StatusOr<std::shared_ptr<Backend>> StagingBackend::Create(std::shared_ptr<Backend> host,
                                                                const BackendContext& context) {
  return std::shared_ptr<Backend>(new StagingBackend(std::move(host), context));
}

// What copies results back: the runtime, pinned pool, watcher and per-device streams. Shared
// with calls in flight, so their completion (on the host backend's thread) never holds the
// last reference to the backend - whose destruction would join that very thread.
class StagingBackend::Copier {
 public:
  explicit Copier(const cuda::CudaApi& api)
      : api(api), pool(cuda::PinnedPool::Create(api)), watcher(api) {}
  ~Copier() {
    for (auto& [device, stream] : streams_) {
      cuda::DeviceGuard guard(api, device);
      api.StreamDestroy(stream);
    }
  }

  // The stream results go back to `device` on, made on first use.
  absl::StatusOr<cudaStream_t> StreamFor(int device) {
    MutexLock lock(mu_);
    auto it = streams_.find(device);
    if (it != streams_.end()) return it->second;
    cuda::DeviceGuard guard(api, device);
    cudaStream_t stream = nullptr;
    RETURN_IF_ERROR(
        cuda::CudaStatus(api, api.StreamCreateWithPriority(&stream, cudaStreamNonBlocking, 0),
                         "creating the staging stream"));
    streams_[device] = stream;
    return stream;
  }

  // Copies the written twins back on `stream`; `work` completes once they have landed.
  void CopyBack(const WorkPtr& work, const std::shared_ptr<Twins>& twins, int device,
                cudaStream_t stream, const char* op) {
    cuda::DeviceGuard guard(api, device);
    absl::Status copied = twins->OrderAfterCaller(stream);
    for (const Twins::Write& write : twins->writes()) {
      if (!copied.ok()) break;
      copied = cuda::CudaStatus(
          api,
          api.MemcpyAsync(write.device, write.host, write.bytes, cudaMemcpyHostToDevice, stream),
          "copying a staged result back to the device");
    }
    auto done = copied.ok() ? cuda::CudaEvent::Create(api, device)
                            : absl::StatusOr<std::shared_ptr<cuda::CudaEvent>>(copied);
    if (done.ok()) copied = (*done)->Record(stream);
    if (!copied.ok()) {
      work->Complete(copied);
      return;
    }
    cuda::EventWatcher::Entry entry;
    entry.work = work;
    entry.done = *done;
    entry.description = absl::StrCat(op, " (staged) on cuda:", device);
    entry.keepalive = twins;
    watcher.Watch(std::move(entry));
  }

  const cuda::CudaApi& api;
  const std::shared_ptr<cuda::PinnedPool> pool;
  cuda::EventWatcher watcher;

 private:
  Mutex mu_;
  std::map<int, cudaStream_t> streams_;
};

StagingBackend::StagingBackend(std::shared_ptr<Backend> host, const BackendContext& context)
    : host_(std::move(host)), context_(context) {}

StagingBackend::~StagingBackend() = default;

absl::StatusOr<std::shared_ptr<StagingBackend::Copier>> StagingBackend::Load() {
  MutexLock lock(mu_);
  if (loaded_) {
    if (!load_error_.ok()) return load_error_;
    return copier_;
  }
  loaded_ = true;
  // At the first CUDA call: every group with a cpu backend has a stager, most never use it.
  auto api = cuda::LoadCudaApi();
  if (!api.ok()) return load_error_ = api.status();
  copier_ = std::make_shared<Copier>(**api);
  return copier_;
}

std::string StagingBackend::name() const { return absl::StrCat(host_->name(), "+staging"); }

BackendCapabilities StagingBackend::capabilities() const {
  BackendCapabilities capabilities = host_->capabilities();
  capabilities.devices = {DeviceType::kCuda};
  // The host collective runs between two copies on the stream: never in the caller's thread.
  capabilities.runs_blocking_in_place = false;
  return capabilities;
}

WorkPtr StagingBackend::Stage(const char* op, const std::vector<const Tensor*>& tensors,
                              const std::function<WorkPtr(Twins&)>& issue) {
  int device = -1;
  auto copier = Load();
  absl::Status checked = copier.ok() ? cuda::CheckDeviceTensors(op, context_.rank, tensors, &device)
                                     : absl::Status(copier.status().code(),
                                                    absl::StrCat(op, " on rank ", context_.rank,
                                                                 ": ", copier.status().message()));
  if (!checked.ok()) return Work::Finished(checked, op, context_.size);
  auto stream = (*copier)->StreamFor(device);
  if (!stream.ok()) return Work::Finished(stream.status(), op, context_.size);

  const cuda::CudaApi& api = (*copier)->api;
  auto twins = std::make_shared<Twins>(api, *(*copier)->pool, cuda::CurrentStream(device), device);
  WorkPtr host_work;
  {
    cuda::DeviceGuard guard(api, device);
    host_work = issue(*twins);  // `issue` declares its twins, awaits the caller, then issues.
  }
  auto work = std::make_shared<Work>(op, context_.size, host_work->sequence());
  // A host wait drives the host operation (a backend may run it in the waiting thread); its
  // completion queues the copy back, whose watcher installs the next hook, which this same
  // wait then runs (Work::Wait). Set first: a host operation done already replaces it at once.
  work->SetWaitHook([weak = std::weak_ptr<Work>(host_work)](absl::Duration timeout) {
    if (WorkPtr host = weak.lock()) (void)host->Wait(timeout);
  });
  host_work->OnComplete([copier = *copier, work, host_work, twins, device, stream = *stream,
                         op](const absl::Status& status) {
    const Work::Stats stats = host_work->stats();
    work->AddBytesSent(stats.bytes_sent);
    work->AddBytesReceived(stats.bytes_received);
    if (host_work->source_rank() >= 0) work->SetSourceRank(host_work->source_rank());
    if (!status.ok() || twins->writes().empty()) {
      work->Complete(status);
      return;
    }
    copier->CopyBack(work, twins, device, stream, op);
  });
  return work;
}

WorkPtr StagingBackend::Issue(Twins& twins, const char* op, int size,
                              const std::function<WorkPtr()>& call) {
  absl::Status ready = twins.AwaitCaller();
  if (!ready.ok()) return Work::Finished(ready, op, size);
  return call();
}

namespace {

std::vector<const Tensor*> Pointers(absl::Span<const Tensor> tensors,
                                    std::vector<const Tensor*> more = {}) {
  for (const Tensor& tensor : tensors) more.push_back(&tensor);
  return more;
}

}  // namespace

WorkPtr StagingBackend::Broadcast(const Tensor& tensor, const BroadcastOptions& options) {
  const bool root = context_.rank == options.root_rank;
  return Stage("broadcast", {&tensor}, [&](Twins& t) {
    Tensor twin = t.Of(tensor, root, !root);
    return Issue(t, "broadcast", context_.size, [&] { return host_->Broadcast(twin, options); });
  });
}

WorkPtr StagingBackend::Reduce(const Tensor& tensor, const ReduceOptions& options) {
  const bool root = context_.rank == options.root_rank;
  return Stage("reduce", {&tensor}, [&](Twins& t) {
    Tensor twin = t.Of(tensor, true, root);
    return Issue(t, "reduce", context_.size, [&] { return host_->Reduce(twin, options); });
  });
}

WorkPtr StagingBackend::AllReduce(const Tensor& tensor, const AllReduceOptions& options) {
  return Stage("all_reduce", {&tensor}, [&](Twins& t) {
    Tensor twin = t.Of(tensor, true, true);
    return Issue(t, "all_reduce", context_.size, [&] { return host_->AllReduce(twin, options); });
  });
}

WorkPtr StagingBackend::AllReduceCoalesced(absl::Span<const Tensor> tensors,
                                           const AllReduceCoalescedOptions& options) {
  return Stage("all_reduce_coalesced", Pointers(tensors), [&](Twins& t) {
    std::vector<Tensor> twins = t.Of(tensors, true, true);
    return Issue(t, "all_reduce_coalesced", context_.size,
                 [&] { return host_->AllReduceCoalesced(twins, options); });
  });
}

WorkPtr StagingBackend::AllGather(absl::Span<const Tensor> outputs, const Tensor& input,
                                  const AllGatherOptions& options) {
  return Stage("all_gather", Pointers(outputs, {&input}), [&](Twins& t) {
    Tensor in = t.Of(input, true, false);
    std::vector<Tensor> out = t.Of(outputs, false, true);
    return Issue(t, "all_gather", context_.size,
                 [&] { return host_->AllGather(out, in, options); });
  });
}

WorkPtr StagingBackend::AllGatherIntoTensor(const Tensor& output, const Tensor& input,
                                            const AllGatherOptions& options) {
  return Stage("all_gather_into_tensor", {&output, &input}, [&](Twins& t) {
    Tensor in = t.Of(input, true, false);
    Tensor out = t.Of(output, false, true);
    return Issue(t, "all_gather_into_tensor", context_.size,
                 [&] { return host_->AllGatherIntoTensor(out, in, options); });
  });
}

WorkPtr StagingBackend::Gather(absl::Span<const Tensor> outputs, const Tensor& input,
                               const GatherOptions& options) {
  return Stage("gather", Pointers(outputs, {&input}), [&](Twins& t) {
    Tensor in = t.Of(input, true, false);
    std::vector<Tensor> out = t.Of(outputs, false, true);  // Empty off the root.
    return Issue(t, "gather", context_.size, [&] { return host_->Gather(out, in, options); });
  });
}

WorkPtr StagingBackend::Scatter(const Tensor& output, absl::Span<const Tensor> inputs,
                                const ScatterOptions& options) {
  return Stage("scatter", Pointers(inputs, {&output}), [&](Twins& t) {
    std::vector<Tensor> in = t.Of(inputs, true, false);  // Empty off the root.
    Tensor out = t.Of(output, false, true);
    return Issue(t, "scatter", context_.size, [&] { return host_->Scatter(out, in, options); });
  });
}

WorkPtr StagingBackend::ReduceScatter(const Tensor& output, absl::Span<const Tensor> inputs,
                                      const ReduceScatterOptions& options) {
  return Stage("reduce_scatter", Pointers(inputs, {&output}), [&](Twins& t) {
    std::vector<Tensor> in = t.Of(inputs, true, false);
    Tensor out = t.Of(output, false, true);
    return Issue(t, "reduce_scatter", context_.size,
                 [&] { return host_->ReduceScatter(out, in, options); });
  });
}

WorkPtr StagingBackend::ReduceScatterTensor(const Tensor& output, const Tensor& input,
                                            const ReduceScatterOptions& options) {
  return Stage("reduce_scatter_tensor", {&output, &input}, [&](Twins& t) {
    Tensor in = t.Of(input, true, false);
    Tensor out = t.Of(output, false, true);
    return Issue(t, "reduce_scatter_tensor", context_.size,
                 [&] { return host_->ReduceScatterTensor(out, in, options); });
  });
}

WorkPtr StagingBackend::AllToAll(absl::Span<const Tensor> outputs, absl::Span<const Tensor> inputs,
                                 const AllToAllOptions& options) {
  return Stage("all_to_all", Pointers(outputs, Pointers(inputs)), [&](Twins& t) {
    std::vector<Tensor> in = t.Of(inputs, true, false);
    std::vector<Tensor> out = t.Of(outputs, false, true);
    return Issue(t, "all_to_all", context_.size, [&] { return host_->AllToAll(out, in, options); });
  });
}

WorkPtr StagingBackend::AllToAllSingle(const Tensor& output, const Tensor& input,
                                       absl::Span<const int64_t> output_split_sizes,
                                       absl::Span<const int64_t> input_split_sizes,
                                       const AllToAllOptions& options) {
  return Stage("all_to_all_single", {&output, &input}, [&](Twins& t) {
    Tensor in = t.Of(input, true, false);
    Tensor out = t.Of(output, false, true);
    return Issue(t, "all_to_all_single", context_.size, [&] {
      return host_->AllToAllSingle(out, in, output_split_sizes, input_split_sizes, options);
    });
  });
}

WorkPtr StagingBackend::Barrier(const BarrierOptions& options) { return host_->Barrier(options); }

WorkPtr StagingBackend::Send(const Tensor& tensor, int dst_rank, const SendOptions& options) {
  return Stage("send", {&tensor}, [&](Twins& t) {
    Tensor twin = t.Of(tensor, true, false);
    return Issue(t, "send", context_.size, [&] { return host_->Send(twin, dst_rank, options); });
  });
}

WorkPtr StagingBackend::Recv(const Tensor& tensor, int src_rank, const RecvOptions& options) {
  return Stage("recv", {&tensor}, [&](Twins& t) {
    Tensor twin = t.Of(tensor, false, true);
    return Issue(t, "recv", context_.size, [&] { return host_->Recv(twin, src_rank, options); });
  });
}

WorkPtr StagingBackend::RecvAnySource(const Tensor& tensor, const RecvOptions& options) {
  return Stage("recv_any_source", {&tensor}, [&](Twins& t) {
    Tensor twin = t.Of(tensor, false, true);
    return Issue(t, "recv_any_source", context_.size,
                 [&] { return host_->RecvAnySource(twin, options); });
  });
}

WorkPtr StagingBackend::BatchPointToPoint(absl::Span<const PointToPointOp> ops,
                                          const BatchOptions& options) {
  std::vector<const Tensor*> tensors;
  for (const PointToPointOp& op : ops) tensors.push_back(&op.tensor);
  return Stage("batch_isend_irecv", tensors, [&](Twins& t) {
    std::vector<PointToPointOp> twins(ops.begin(), ops.end());
    for (PointToPointOp& op : twins) {
      const bool send = op.kind == PointToPointOp::Kind::kSend;
      op.tensor = t.Of(op.tensor, send, !send);
    }
    return Issue(t, "batch_isend_irecv", context_.size,
                 [&] { return host_->BatchPointToPoint(twins, options); });
  });
}

namespace {

const StagingRegisterer kRegisterCudaStaging(DeviceType::kCuda, &StagingBackend::Create);

}  // namespace
}  // namespace plexus::cuda_staging
