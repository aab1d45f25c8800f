// StagingBackend: CUDA tensors on a backend that serves cpu only ("tcp", "gloo", "mpi", or
// "cuda:tcp" explicitly), by copying them through pinned host memory.
//
// Per call: every tensor the collective reads is copied to a pinned host twin on the caller's
// current stream, and the calling thread waits until those copies are done (so the call returns
// once its inputs are read: the cost of staging, besides the copies themselves). The host
// backend then runs the collective on the twins, in issue order with the group's other calls.
// When it succeeds, the twins of the tensors it writes are copied back on a staging stream and
// the Work completes once those copies are done; when it fails, the device tensors are left
// untouched and the Work carries the host backend's error.
#ifndef PLEXUS_BACKENDS_CUDA_STAGING_STAGING_BACKEND_H_
#define PLEXUS_BACKENDS_CUDA_STAGING_STAGING_BACKEND_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "backends/interface/backend.h"
#include "base/core/mutex.h"
#include "devices/cuda/cuda_api.h"
#include "devices/cuda/event_watcher.h"
#include "devices/cuda/pinned_pool.h"

namespace plexus::cuda_staging {

class StagingBackend : public Backend {
 public:
  static absl::StatusOr<std::shared_ptr<Backend>> Create(std::shared_ptr<Backend> host,
                                                         const BackendContext& context);
  ~StagingBackend() override;

  std::string name() const override;
  BackendCapabilities capabilities() const override;
  // The host backend's: staging has nothing of its own in flight that outlives its calls.
  absl::Status Abort(const absl::Status& reason) override { return host_->Abort(reason); }
  std::vector<int> LostRanks() override { return host_->LostRanks(); }

  // Any kind: the host backend runs `call` on host twins of its tensors, copied from the
  // device before (inputs) and back after (outputs).
  WorkPtr Run(const Collective& call) override;
  WorkPtr BatchPointToPoint(absl::Span<const PointToPointOp> ops,
                            const BatchOptions& options) override;

 private:
  class Twins;  // The host twins of one call (staging_backend.cc).

  StagingBackend(std::shared_ptr<Backend> host, const BackendContext& context);

  // Checks the tensors, lets `issue` make their twins and run the host backend's call, and
  // completes the returned Work once the written twins are back on the device.
  WorkPtr Stage(const char* op, const std::vector<const Tensor*>& tensors,
                const std::function<WorkPtr(Twins&)>& issue);
  // Waits for the twins' reads, then runs `call` (the host backend's collective); a failed
  // twin or copy becomes a failed Work instead.
  static WorkPtr Issue(Twins& twins, const char* op, int size,
                       const std::function<WorkPtr()>& call);

  class Copier;  // Copies results back (staging_backend.cc); shared with calls in flight.

  // Loads the CUDA runtime and makes the Copier, once; the error stays.
  absl::StatusOr<std::shared_ptr<Copier>> Load();

  const std::shared_ptr<Backend> host_;
  const BackendContext context_;
  Mutex mu_;
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status load_error_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Copier> copier_ ABSL_GUARDED_BY(mu_);
};

}  // namespace plexus::cuda_staging

#endif  // PLEXUS_BACKENDS_CUDA_STAGING_STAGING_BACKEND_H_
