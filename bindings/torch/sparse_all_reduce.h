// SparseAllReducer: SUM of sparse COO tensors across a group, as Gloo offers it, without
// blocking the caller.
//
// Every rank all-gathers the others' (coalesced) indices and values, padded to the largest
// count, and sums them locally with torch's own sparse kernels, so every rank computes the same
// result from the same inputs in the same order. The entry counts are only known once the first
// gather is done, so the reduction takes three gathers that cannot all be issued at the call; on
// the group itself, later collectives of the caller would overtake the second and third, in a
// different order on each rank. So reductions run one after another on this object's thread,
// over a companion group of the same ranks (ProcessGroup::Companion, built at the first one),
// and the caller gets a Work at once.
#ifndef PLEXUS_BINDINGS_TORCH_SPARSE_ALL_REDUCE_H_
#define PLEXUS_BINDINGS_TORCH_SPARSE_ALL_REDUCE_H_

#include <ATen/ATen.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/core/mutex.h"
#include "base/work/work.h"
#include "frontend/dispatch/process_group.h"

namespace plexus::torch_backend {

inline constexpr char kSparseAllReduce[] = "all_reduce (sparse)";

class SparseAllReducer {
 public:
  // Reduces over ranks of `group` (it only builds the companion from it).
  explicit SparseAllReducer(std::shared_ptr<plexus::ProcessGroup> group);
  // Finishes the reductions already queued (each within its own timeout) and drops the
  // companion group.
  ~SparseAllReducer();
  SparseAllReducer(const SparseAllReducer&) = delete;
  SparseAllReducer& operator=(const SparseAllReducer&) = delete;

  // Queues the sum of `tensor` (sparse COO, on the CPU) over the group into `tensor` itself;
  // its entries are read now. The Work, numbered `sequence` in messages, completes when
  // `tensor` holds the sum, or with the error: DeadlineExceeded past `timeout`, InvalidArgument
  // when ranks' shapes differ, the companion group's error when it cannot be built.
  WorkPtr Submit(at::Tensor tensor, absl::Duration timeout, int64_t sequence);

  // As ProcessGroup::Abort, for the reductions: the running one, the queued ones and every
  // later one fail at once with `reason` (the parent group's Aborted status).
  void Abort(const absl::Status& reason);

 private:
  struct Job {
    at::Tensor input;   // Coalesced copy, read at Submit.
    at::Tensor output;  // The caller's tensor.
    absl::Time deadline;
    WorkPtr work;
  };

  void Serve();
  absl::Status Reduce(plexus::ProcessGroup& over, const Job& job);
  absl::Status Gather(plexus::ProcessGroup& over, const at::Tensor& output, const at::Tensor& input,
                      absl::Time deadline);

  const std::shared_ptr<plexus::ProcessGroup> group_;
  Mutex mu_;
  std::condition_variable changed_;
  // Built by the serving thread at its first reduction.
  std::shared_ptr<plexus::ProcessGroup> companion_ ABSL_GUARDED_BY(mu_);
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  WorkPtr running_ ABSL_GUARDED_BY(mu_);  // The reduction the thread works on, if any.
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Last: starts once the rest is built.
};

}  // namespace plexus::torch_backend

#endif  // PLEXUS_BINDINGS_TORCH_SPARSE_ALL_REDUCE_H_
