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
#include "backends/interface/backend.h"
#include "backends/nccl/nccl_communicator.h"
#include "backends/nccl/nccl_plans.h"
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

  // Plans the call (nccl_plans.h) and launches it.
  WorkPtr Run(const Collective& call) override;
  // One ncclGroupStart/End: exchanges between ranks cannot deadlock on stream order.
  WorkPtr BatchPointToPoint(absl::Span<const PointToPointOp> ops,
                            const BatchOptions& options) override;

 private:
  explicit NcclBackend(const BackendContext& context);

  // Checks the plan's tensors (device_tensors.h), finds or creates the communicator,
  // launches and hands the Work to the watcher. Errors become a failed Work.
  WorkPtr Launch(const NcclPlan& plan);
  absl::StatusOr<std::shared_ptr<NcclCommunicator>> CommunicatorFor(int device)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(issue_mu_);

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
