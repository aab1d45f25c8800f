// NcclBackend: plexus over NCCL for CUDA tensors (registered as "nccl" for device cuda).
//
// Stream semantics are ProcessGroupNCCL's: each call is ordered after the work queued so far on
// the caller's current stream (devices/cuda/current_stream.h) and runs on the communicator's own
// stream; its Work completes when the event recorded after it fires; Work::WaitOnStream makes
// a stream wait for it without blocking the host, Work::Wait(timeout) waits on the host. The
// caller keeps the tensors' memory alive until the Work completes (the Python bindings do).
//
// One communicator per CUDA device the group uses, created on first use (rank 0 publishes the
// unique id in the group's store; non-blocking init bounded by the group's timeout). A call
// whose deadline passes, or an asynchronous NCCL error, aborts the communicator: pending work
// fails (Unavailable when a peer or the network was lost, DeadlineExceeded on timeout) and every
// later call on that device fails with the first error. No CUDA device, or no NCCL, is
// FailedPrecondition on the first CUDA call, never at group creation (nothing is loaded before).
#ifndef PLEXUS_BACKENDS_NCCL_NCCL_BACKEND_H_
#define PLEXUS_BACKENDS_NCCL_NCCL_BACKEND_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "backends/common/nominal_traffic.h"
#include "backends/interface/backend.h"
#include "backends/nccl/nccl_communicator.h"
#include "base/core/mutex.h"

namespace plexus::nccl {

inline constexpr char kNcclBackendName[] = "nccl";

class NcclBackend : public Backend {
 public:
  static absl::StatusOr<std::shared_ptr<Backend>> Create(const BackendContext& context);
  ~NcclBackend() override;
  // ncclCommAbort on every communicator: kernels waiting on peers end, pending work fails.
  absl::Status Abort(const absl::Status& reason) override;
  // Creates the communicator for `device` now (init_process_group(device_id=...)).
  absl::Status ConnectEagerly(const Device& device) override;

  std::string name() const override { return kNcclBackendName; }
  BackendCapabilities capabilities() const override;

  WorkPtr Run(const Collective& call) override {
    return CallPerKind(call, *this, [&] { return NotRun(call); });
  }
  // The calls Run makes, one per kind.
  WorkPtr Broadcast(const Tensor& tensor, const BroadcastOptions& options);
  WorkPtr Reduce(const Tensor& tensor, const ReduceOptions& options);
  WorkPtr AllReduce(const Tensor& tensor, const AllReduceOptions& options);
  WorkPtr AllReduceCoalesced(absl::Span<const Tensor> tensors,
                             const AllReduceCoalescedOptions& options);
  WorkPtr AllGather(absl::Span<const Tensor> outputs, const Tensor& input,
                    const AllGatherOptions& options);
  WorkPtr AllGatherIntoTensor(const Tensor& output, const Tensor& input,
                              const AllGatherOptions& options);
  WorkPtr Gather(absl::Span<const Tensor> outputs, const Tensor& input,
                 const GatherOptions& options);
  WorkPtr Scatter(const Tensor& output, absl::Span<const Tensor> inputs,
                  const ScatterOptions& options);
  WorkPtr ReduceScatter(const Tensor& output, absl::Span<const Tensor> inputs,
                        const ReduceScatterOptions& options);
  WorkPtr ReduceScatterTensor(const Tensor& output, const Tensor& input,
                              const ReduceScatterOptions& options);
  WorkPtr AllToAll(absl::Span<const Tensor> outputs, absl::Span<const Tensor> inputs,
                   const AllToAllOptions& options);
  WorkPtr AllToAllSingle(const Tensor& output, const Tensor& input,
                         absl::Span<const int64_t> output_split_sizes,
                         absl::Span<const int64_t> input_split_sizes,
                         const AllToAllOptions& options);
  WorkPtr Barrier(const BarrierOptions& options);
  WorkPtr Send(const Tensor& tensor, int dst_rank, const SendOptions& options);
  WorkPtr Recv(const Tensor& tensor, int src_rank, const RecvOptions& options);
  WorkPtr RecvAnySource(const Tensor& tensor, const RecvOptions& options);
  // One ncclGroupStart/End: exchanges between ranks cannot deadlock on stream order.
  WorkPtr BatchPointToPoint(absl::Span<const PointToPointOp> ops,
                            const BatchOptions& options) override;

 private:
  // What one call launches: NCCL calls (and device copies) on the communicator's stream.
  using Enqueue = NcclCommunicator::Enqueue;

  struct Call {
    const char* op;
    std::vector<const Tensor*> tensors;  // Every tensor the call reads or writes.
    absl::Duration timeout;
    nominal_traffic::Traffic traffic;
  };

  explicit NcclBackend(const BackendContext& context);

  // Checks the tensors (device_tensors.h), finds or creates the communicator,
  // launches and hands the Work to the watcher. Errors become a failed Work.
  WorkPtr Run(const Call& call, const Enqueue& enqueue);
  absl::StatusOr<std::shared_ptr<NcclCommunicator>> CommunicatorFor(int device)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mu_);
  // A device-to-device copy on `stream` (NCCL has no self send for arbitrary layouts).
  absl::Status CopyOnStream(void* to, const void* from, size_t bytes, cudaStream_t stream) const;

  // Loads the CUDA runtime and NCCL and starts the watcher, once; the error stays.
  absl::Status Load() ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mu_);

  const BackendContext context_;
  Mutex issue_mu_;  // Issue order = launch order = sequence order.
  bool loaded_ ABSL_GUARDED_BY(issue_mu_) = false;
  absl::Status load_error_ ABSL_GUARDED_BY(issue_mu_);
  const NcclApi* nccl_ = nullptr;  // Set by Load(); read only after it succeeded.
  const cuda::CudaApi* cuda_ = nullptr;
  int64_t next_sequence_ ABSL_GUARDED_BY(issue_mu_) = 0;
  int communicators_created_ ABSL_GUARDED_BY(issue_mu_) = 0;
  int last_device_ ABSL_GUARDED_BY(issue_mu_) = -1;
  // Per device: the communicator, or why it could not be made (kept: peers moved on).
  std::map<int, absl::StatusOr<std::shared_ptr<NcclCommunicator>>> communicators_
      ABSL_GUARDED_BY(issue_mu_);
  std::unique_ptr<cuda::EventWatcher> watcher_;  // Last: destroyed first.
};

}  // namespace plexus::nccl

#endif  // PLEXUS_BACKENDS_NCCL_NCCL_BACKEND_H_
