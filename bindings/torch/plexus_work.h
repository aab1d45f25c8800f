// PlexusWork: torch's c10d::Work over a plexus Work.
//
// The plexus Work is the source of truth. wait() waits on it (so a small collective still runs
// in the waiting thread, as on plexus's own API) and throws its error; the torch Future of
// getFuture() is completed by plexus's completion callback, in C++, with the output tensors or
// the error, with no Python and no GIL, just after it tells the group's completion hooks
// (completion_hooks.h), also when it failed. The tensors the operation reads and writes are held
// until it completes, even when the caller drops the Work.
#ifndef PLEXUS_BINDINGS_TORCH_PLEXUS_WORK_H_
#define PLEXUS_BINDINGS_TORCH_PLEXUS_WORK_H_

#include <ATen/core/ivalue.h>

#include <chrono>
#include <exception>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "absl/time/time.h"
#include "base/work/work.h"
#include "bindings/torch/completion_hooks.h"
#include "bindings/torch/torch_types.h"

namespace plexus::torch_backend {

class PlexusWork : public c10d::Work {
 public:
  struct Spec {
    Origin origin;  // The rank and group, for error messages.
    c10d::OpType type = c10d::OpType::UNKNOWN;
    const char* profiling_title = nullptr;          // "plexus:all_reduce": torch's profiler event.
    std::vector<at::Tensor> outputs;                // result(), and the future's value.
    std::vector<at::Tensor> inputs;                 // Held until completion.
    absl::Duration timeout;                         // The operation's own (resolved) deadline.
    int cuda_device = -1;                           // The tensors' CUDA device, if any.
    uint64_t sequence = 0;                          // The group's number for it.
    std::chrono::steady_clock::time_point started;  // When it was issued.
    std::shared_ptr<CompletionHooks> completions;   // Told when it ends (may be null).
  };

  // Wraps `work` and registers the completion that finishes this Work and its future.
  static c10::intrusive_ptr<PlexusWork> Create(WorkPtr work, Spec spec);
  PlexusWork(WorkPtr work, Spec spec);  // Use Create.

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  // CUDA tensors: orders the caller's current stream after the operation.
  void synchronize() override;
  // Waits for the operation: `timeout` (0: torch's "no timeout", bounded here by the
  // operation's own deadline) and throws its error, or a "Timed out" error naming the op when
  // it is still running at `timeout` (the operation goes on; waiting again is allowed).
  bool wait(std::chrono::milliseconds timeout = ::kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  const WorkPtr& plexus_work() const { return work_; }

 private:
  void Completed(const absl::Status& status);

  const WorkPtr work_;
  const Origin origin_;
  const std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> inputs_;  // Released at completion.
  const absl::Duration timeout_;
  const int cuda_device_;
  const c10d::OpType type_;
  const uint64_t sequence_;
  const std::chrono::steady_clock::time_point started_;
  const std::shared_ptr<CompletionHooks> completions_;
  const c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// A torch Work that is already done, with no tensors: what a call returns that finished before
// it returned (reconfigure, an empty coalescing region).
c10::intrusive_ptr<c10d::Work> CompletedWork();

}  // namespace plexus::torch_backend

#endif  // PLEXUS_BINDINGS_TORCH_PLEXUS_WORK_H_
