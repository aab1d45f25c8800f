// CompletionHooks: torch's onCompletion hook and waitForPendingWorks for one group.
//
// Every operation the group issues is counted; when it ends, successfully or not, the hook (if
// one is registered) runs on this object's own thread, one operation at a time in completion
// order, never on the thread that completed it and never under a lock (a hook may call Python,
// or wait). waitForPendingWorks waits until every operation issued so far has ended and its
// hook has returned. torch-version-agnostic: the bindings turn a Finished into torch's
// WorkInfo (torch 2.x).
#ifndef PLEXUS_BINDINGS_TORCH_COMPLETION_HOOKS_H_
#define PLEXUS_BINDINGS_TORCH_COMPLETION_HOOKS_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/core/mutex.h"

namespace plexus::torch_backend {

class CompletionHooks {
 public:
  struct Finished {
    c10d::OpType type = c10d::OpType::UNKNOWN;
    uint64_t sequence = 0;                          // The group's sequence number of the operation.
    std::chrono::steady_clock::time_point started;  // Issued.
    std::chrono::steady_clock::time_point finished;  // Ended (also with an error).
  };
  using Hook = std::function<void(const Finished&)>;

  explicit CompletionHooks(std::string group) : group_(std::move(group)) {}
  // Waits for the hooks still queued to run (without the GIL), then stops the thread.
  ~CompletionHooks();
  CompletionHooks(const CompletionHooks&) = delete;
  CompletionHooks& operator=(const CompletionHooks&) = delete;

  // The hook every operation that ends from now on runs; FailedPrecondition when the group has
  // one already (as torch's NCCL backend: one per group).
  absl::Status Register(Hook hook);
  // An operation was issued; Ended must follow once for it.
  void Issued();
  void Ended(const Finished& finished);
  // Until every operation issued so far has ended and its hook returned; DeadlineExceeded
  // saying how many are left after `timeout`. Call it without the GIL.
  absl::Status WaitForPending(absl::Duration timeout);

 private:
  void RunHooks();

  const std::string group_;  // For the messages.
  Mutex mu_;
  std::condition_variable changed_;  // pending_, queue_ or stopping_ changed.
  Hook hook_ ABSL_GUARDED_BY(mu_);
  std::deque<Finished> queue_ ABSL_GUARDED_BY(mu_);  // Ended, hook not yet run.
  int64_t pending_ ABSL_GUARDED_BY(mu_) = 0;         // Issued, not ended or hook not returned.
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Started by Register.
};

}  // namespace plexus::torch_backend

#endif  // PLEXUS_BINDINGS_TORCH_COMPLETION_HOOKS_H_
