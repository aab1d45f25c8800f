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

WorkPtr StagingBackend::Run(const Collective& call) {
  if (call.kind == CollectiveKind::kBarrier) return host_->Run(call);
  const char* op = call.name().data();  // Null-terminated: the names are literals.
  const bool in_place = call.traits().in_place();
  // An in-place tensor is read and written back, except where the rank's data goes only one
  // way: a broadcast's root only sends, its other ranks only receive; only a reduce's root
  // receives the result.
  const bool root = context_.rank == call.root;
  bool read = true;
  bool write = true;
  if (call.kind == CollectiveKind::kBroadcast) {
    read = root;
    write = !root;
  } else if (call.kind == CollectiveKind::kReduce) {
    write = root;
  }
  return Stage(
      op, Pointers(call.outputs, in_place ? std::vector<const Tensor*>{} : Pointers(call.inputs)),
      [&](Twins& t) {
        std::vector<Tensor> inputs =
            t.Of(in_place ? absl::Span<const Tensor>() : call.inputs, true, false);
        std::vector<Tensor> outputs = t.Of(call.outputs, in_place && read, write);
        Collective twin = call;
        twin.outputs = outputs;
        twin.inputs = in_place ? twin.outputs : absl::Span<const Tensor>(inputs);
        return Issue(t, op, context_.size, [&] { return host_->Run(twin); });
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
