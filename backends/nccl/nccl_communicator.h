// NcclCommunicator: one NCCL communicator of a process group on one CUDA device, with the
// stream its operations run on.
//
// Created collectively: rank 0 draws the unique id and publishes it in the group's store; every
// rank initialises a non-blocking communicator and polls it against the group's deadline, so a
// rank that never arrives is a DeadlineExceeded naming it, not a hang. Launches are serialised
// (NCCL calls on one communicator must not interleave) and ordered after the caller's stream.
// Once an error is seen (asynchronous NCCL error, deadline, abort) the communicator is aborted
// and every later launch fails with that first error.
#ifndef PLEXUS_BACKENDS_NCCL_NCCL_COMMUNICATOR_H_
#define PLEXUS_BACKENDS_NCCL_NCCL_COMMUNICATOR_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/nccl/nccl_api.h"
#include "base/core/mutex.h"
#include "base/store/store.h"
#include "devices/cuda/cuda_api.h"
#include "devices/cuda/event_watcher.h"

namespace plexus::nccl {

class NcclCommunicator {
 public:
  struct Config {
    std::string store_key;  // Where rank 0 publishes the unique id.
    std::string name;       // "group 'world' on cuda:0", for messages.
    int rank = 0;
    int size = 1;
    int device = 0;
    absl::Duration timeout;  // For the unique id and for every rank to join.
  };

  // Collective over the group. `store` is the backend's private store.
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(const NcclApi& nccl,
                                                                  const cuda::CudaApi& cuda,
                                                                  Store& store, Config config);
  // Aborts the communicator (never blocks on peers) and frees its stream.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // What an Enqueue sees: the communicator and stream to launch on, and cleanups to run once
  // NCCL has accepted the launch (e.g. destroying a PREMUL_SUM operator).
  struct Scope {
    ncclComm_t comm;
    cudaStream_t stream;
    void* scratch;  // 4 bytes of device memory, for barriers.
    std::vector<std::function<void()>> after_accepted;
  };
  using Enqueue = std::function<absl::Status(Scope& scope)>;

  // Makes this communicator's stream wait for what is queued on `caller` so far, runs
  // `enqueue` (NCCL calls and copies on the stream), waits until NCCL has accepted them (a
  // non-blocking communicator may answer "in progress") and records the returned event after
  // them. On any failure nothing further is launched and the error says what failed.
  absl::StatusOr<std::shared_ptr<cuda::CudaEvent>> Launch(absl::string_view what,
                                                          cuda::Stream caller,
                                                          const Enqueue& enqueue,
                                                          absl::Time deadline);

  // OK while healthy; the first error (asynchronous NCCL error, or why it was aborted) after.
  // Asking polls ncclCommGetAsyncError, and an error found aborts the communicator.
  absl::Status Health();
  // Aborts with `reason` unless already failed; in-flight kernels exit, later launches fail.
  void Abort(const absl::Status& reason);

  int device() const { return config_.device; }
  const std::string& name() const { return config_.name; }
  const NcclApi& nccl() const { return nccl_; }
  const cuda::CudaApi& cuda() const { return cuda_; }

 private:
  NcclCommunicator(const NcclApi& nccl, const cuda::CudaApi& cuda, Config config)
      : nccl_(nccl), cuda_(cuda), config_(std::move(config)) {}

  // Polls until NCCL has finished the non-blocking call in progress, or `deadline`.
  absl::Status AwaitReady(absl::string_view what, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the first failure.
  void Fail(absl::Status status);
  absl::Status failure() const;

  const NcclApi& nccl_;
  const cuda::CudaApi& cuda_;
  const Config config_;
  // Guards every use of comm_ (NCCL calls on one communicator must not interleave), and the
  // abort, which frees it.
  Mutex mu_;
  ncclComm_t comm_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
  std::shared_ptr<cuda::CudaEvent> caller_ready_ ABSL_GUARDED_BY(mu_);
  // Set by Abort before it takes mu_, so a launch polling NCCL gives way at once.
  std::atomic<bool> abort_requested_{false};

  mutable Mutex failure_mu_;
  absl::Status failure_ ABSL_GUARDED_BY(failure_mu_);
};

}  // namespace plexus::nccl

#endif  // PLEXUS_BACKENDS_NCCL_NCCL_COMMUNICATOR_H_
