#include "base/work/work.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/core/deadline.h"
#include "base/work/callback_runner.h"

namespace plexus {

Work::Work(std::string op_name, int world_size, int64_t sequence, absl::Time start)
    : op_name_(std::move(op_name)),
      world_size_(world_size),
      sequence_(sequence),
      start_(start == absl::InfinitePast() ? FastNow() : start) {}

std::shared_ptr<Work> Work::Finished(absl::Status status, std::string op_name, int world_size) {
  auto work = std::make_shared<Work>(std::move(op_name), world_size);
  work->Complete(std::move(status));
  return work;
}

void Work::SetWaitHook(std::function<void(absl::Duration)> hook) {
  MutexLock lock(mu_);
  wait_hook_ = std::move(hook);
}

Work::~Work() = default;

absl::Status Work::Wait(absl::Duration timeout) {
  if (completed_.load(std::memory_order_acquire)) return status_;
  OfferToWaiter(timeout);
  if (completed_.load(std::memory_order_acquire)) return status_;
  // Borrowed, not copied (a copy allocates): a waiter arriving meanwhile waits without it,
  // and it goes back for later waits while the Work is still unfinished. A hook installed
  // while one ran (a producer's next stage) supersedes it and runs next, while time is left.
  std::function<void(absl::Duration)> hook;
  // A hook may block until the wait's own timeout: the deadline counts from before it.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  UniqueLock lock(mu_);
  while (!completed_.load(std::memory_order_relaxed) && wait_hook_) {
    if (deadline && std::chrono::steady_clock::now() >= *deadline) break;
    auto superseded = std::exchange(hook, std::exchange(wait_hook_, nullptr));
    if (!deadline) deadline = SteadyDeadline(timeout);
    lock.unlock();
    superseded = nullptr;  // What it holds is released outside the lock.
    hook(timeout);
    lock.lock();
  }
  if (completed_.load(std::memory_order_relaxed)) return status_;
  if (hook && !wait_hook_) wait_hook_.swap(hook);
  if (!deadline) deadline = SteadyDeadline(timeout);
  ++blocked_waiters_;
  const bool completed = completed_cv_.wait_until(
      lock, *deadline, [this] { return completed_.load(std::memory_order_relaxed); });
  --blocked_waiters_;
  if (!completed) {
    std::string sequence =
        sequence_ >= 0 ? absl::StrCat(" (sequence ", sequence_, ")") : std::string();
    return absl::DeadlineExceededError(absl::StrCat(
        op_name_.empty() ? "operation" : op_name_, sequence, " did not complete within ",
        absl::FormatDuration(timeout), " over ", world_size_, " ranks"));
  }
  return status_;
}

void Work::SetStreamWaitHook(std::function<absl::Status(int, void*)> hook) {
  MutexLock lock(mu_);
  if (!completed_.load(std::memory_order_relaxed)) stream_wait_hook_ = std::move(hook);
}

absl::Status Work::WaitOnStream(int device, void* stream) {
  std::function<absl::Status(int, void*)> hook;
  {
    MutexLock lock(mu_);
    if (completed_.load(std::memory_order_relaxed)) return status_;
    hook = stream_wait_hook_;
  }
  if (hook) return hook(device, stream);
  return Wait(absl::InfiniteDuration());  // Every operation completes by its own deadline.
}

bool Work::IsCompleted() const { return completed_.load(std::memory_order_acquire); }

absl::Status Work::status() const {
  if (!completed_.load(std::memory_order_acquire)) {
    return absl::UnknownError(absl::StrCat(op_name_, " is still running"));
  }
  return status_;
}

void Work::OnComplete(Callback callback) { AddCallback(std::move(callback), false); }

void Work::OnCompleteMayBlock(Callback callback) { AddCallback(std::move(callback), true); }

void Work::AddCallback(Callback callback, bool may_block) {
  if (!completed_.load(std::memory_order_acquire)) {
    MutexLock lock(mu_);
    if (!completed_.load(std::memory_order_relaxed)) {
      callbacks_.push_back({std::move(callback), may_block});
      return;
    }
  }
  if (may_block && ProgressScope::Active()) {
    RunOnCallbackThread([callback = std::move(callback), status = status_] { callback(status); });
    return;
  }
  callback(status_);
}

void Work::RunCallbacks(absl::InlinedVector<PendingCallback, 1> callbacks,
                        const absl::Status& status) {
  if (!ProgressScope::Active()) {
    for (PendingCallback& callback : callbacks) callback.run(status);
    return;
  }
  std::vector<Callback> deferred;
  for (PendingCallback& callback : callbacks) {
    if (callback.may_block) {
      deferred.push_back(std::move(callback.run));
    } else {
      callback.run(status);
    }
  }
  if (deferred.empty()) return;
  RunOnCallbackThread([deferred = std::move(deferred), status] {
    for (const Callback& callback : deferred) callback(status);
  });
}

void Work::Listen(std::shared_ptr<Listener> listener, uint64_t token) {
  if (!completed_.load(std::memory_order_acquire)) {
    UniqueLock lock(mu_);
    if (!completed_.load(std::memory_order_relaxed)) {
      if (listener_ == nullptr) {
        listener_ = std::move(listener);
        listener_token_ = token;
        return;
      }
      lock.unlock();
      OnComplete([listener = std::move(listener), token](const absl::Status& status) {
        listener->WorkCompleted(token, status);
      });
      return;
    }
  }
  listener->WorkCompleted(token, status_);
}

Work::Stats Work::stats() const {
  Stats stats;
  stats.bytes_sent = bytes_sent_.load(std::memory_order_relaxed);
  stats.bytes_received = bytes_received_.load(std::memory_order_relaxed);
  stats.world_size = world_size_;
  stats.duration = (completed_.load(std::memory_order_acquire) ? end_ : FastNow()) - start_;
  return stats;
}

bool Work::Complete(absl::Status status) {
  absl::InlinedVector<PendingCallback, 1> callbacks;
  std::shared_ptr<Listener> listener;
  uint64_t token;
  bool notify;
  {
    MutexLock lock(mu_);
    if (completed_.load(std::memory_order_relaxed)) return false;
    status_ = std::move(status);
    end_ = FastNow();
    completed_.store(true, std::memory_order_release);
    if (!callbacks_.empty()) callbacks.swap(callbacks_);  // Swapping even empty ones costs.
    listener.swap(listener_);
    token = listener_token_;
    wait_hook_ = nullptr;  // May hold references the producer wants released.
    stream_wait_hook_ = nullptr;
    notify = blocked_waiters_ > 0;
  }
  if (notify) completed_cv_.notify_all();
  if (listener == nullptr && callbacks.empty()) return true;
  // Run outside the lock: a callback may wait on or complete other Works. They get a copy of
  // the status, which stays valid even should one of them let go of this Work's last owner.
  const absl::Status final_status = status_;
  if (listener != nullptr) listener->WorkCompleted(token, final_status);
  if (!callbacks.empty()) RunCallbacks(std::move(callbacks), final_status);
  return true;
}

absl::Status WaitAll(const std::vector<WorkPtr>& works, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status first_error;
  for (const WorkPtr& work : works) {
    absl::Status status = work->Wait(std::max(deadline - absl::Now(), absl::ZeroDuration()));
    if (!status.ok() && first_error.ok()) first_error = status;
  }
  return first_error;
}

WorkPtr WhenAll(std::vector<WorkPtr> works, std::string op_name, int world_size) {
  auto all = std::make_shared<Work>(std::move(op_name), world_size);
  struct State {
    explicit State(size_t parts) : remaining(parts), outcomes(parts) {}
    Mutex mu;
    size_t remaining ABSL_GUARDED_BY(mu);
    std::vector<absl::Status> outcomes ABSL_GUARDED_BY(mu);
  };
  auto state = std::make_shared<State>(works.size());
  if (works.empty()) all->Complete(absl::OkStatus());
  for (size_t i = 0; i < works.size(); ++i) {
    WorkPtr part = works[i];
    part->OnComplete([all, state, part, i](const absl::Status& status) {
      const Work::Stats stats = part->stats();
      all->AddBytesSent(stats.bytes_sent);
      all->AddBytesReceived(stats.bytes_received);
      absl::Status first;
      {
        MutexLock lock(state->mu);
        state->outcomes[i] = status;
        if (--state->remaining > 0) return;
        for (const absl::Status& outcome : state->outcomes) {
          if (!outcome.ok()) {
            first = outcome;
            break;
          }
        }
      }
      all->Complete(first);
    });
  }
  return all;
}

}  // namespace plexus
