#include "bindings/torch/completion_hooks.h"

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/core/logging.h"
#include "bindings/torch/gil.h"

namespace plexus::torch_backend {

CompletionHooks::~CompletionHooks() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // A hook dropped the group's last reference: the thread ends by itself.
    return;
  }
  WithoutGil released;  // A queued Python hook needs it to finish.
  thread_.join();
}

absl::Status CompletionHooks::Register(Hook hook) {
  MutexLock lock(mu_);
  if (hook_) {
    return absl::FailedPreconditionError(absl::StrCat("registerOnCompletionHook: group '", group_,
                                                      "' has a completion hook already (one per "
                                                      "group, as torch's NCCL backend)"));
  }
  hook_ = std::move(hook);
  thread_ = std::thread([this] { RunHooks(); });
  return absl::OkStatus();
}

void CompletionHooks::Issued() {
  MutexLock lock(mu_);
  ++pending_;
}

void CompletionHooks::Ended(const Finished& finished) {
  {
    MutexLock lock(mu_);
    if (hook_ && !stopping_) {
      queue_.push_back(finished);
    } else {
      --pending_;
    }
  }
  changed_.notify_all();
}

absl::Status CompletionHooks::WaitForPending(absl::Duration timeout) {
  UniqueLock lock(mu_);
  const bool done =
      changed_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                        [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pending_ == 0; });
  if (done) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat(
      "waitForPendingWorks: group '", group_, "' still had ", pending_,
      " operation(s) running or in their completion hook after ", absl::FormatDuration(timeout)));
}

void CompletionHooks::RunHooks() {
  UniqueLock lock(mu_);
  for (;;) {
    changed_.wait(
        lock, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; });
    if (queue_.empty()) return;  // Stopping, with nothing left to run.
    const Finished finished = queue_.front();
    queue_.pop_front();
    Hook hook = hook_;
    lock.unlock();
    try {
      hook(finished);
    } catch (const std::exception& error) {
      Log(LogLevel::kWarning, absl::StrCat("group '", group_, "': a completion hook raised: ",
                                           error.what(), " (the operation was not affected)"));
    } catch (...) {
      Log(LogLevel::kWarning, absl::StrCat("group '", group_,
                                           "': a completion hook raised (the operation was not "
                                           "affected)"));
    }
    lock.lock();
    --pending_;
    changed_.notify_all();
  }
}

}  // namespace plexus::torch_backend
