#include "frontend/work/work.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace plexus {

Work::Work(std::string op_name, int world_size, int64_t sequence)
    : op_name_(std::move(op_name)),
      world_size_(world_size),
      sequence_(sequence),
      start_(absl::Now()) {}

std::shared_ptr<Work> Work::Finished(absl::Status status, std::string op_name, int world_size) {
  auto work = std::make_shared<Work>(std::move(op_name), world_size);
  work->Complete(std::move(status));
  return work;
}

absl::Status Work::Wait(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(absl::Condition(&completed_), timeout)) {
    std::string sequence =
        sequence_ >= 0 ? absl::StrCat(" (sequence ", sequence_, ")") : std::string();
    return absl::DeadlineExceededError(absl::StrCat(
        op_name_.empty() ? "operation" : op_name_, sequence, " did not complete within ",
        absl::FormatDuration(timeout), " over ", world_size_, " ranks"));
  }
  return status_;
}

bool Work::IsCompleted() const {
  absl::MutexLock lock(&mu_);
  return completed_;
}

absl::Status Work::status() const {
  absl::MutexLock lock(&mu_);
  if (!completed_) return absl::UnknownError(absl::StrCat(op_name_, " is still running"));
  return status_;
}

void Work::OnComplete(Callback callback) {
  absl::Status final_status;
  {
    absl::MutexLock lock(&mu_);
    if (!completed_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
    final_status = status_;
  }
  callback(final_status);
}

Work::Stats Work::stats() const {
  Stats stats;
  stats.bytes_sent = bytes_sent_.load(std::memory_order_relaxed);
  stats.bytes_received = bytes_received_.load(std::memory_order_relaxed);
  stats.world_size = world_size_;
  absl::MutexLock lock(&mu_);
  stats.duration = (completed_ ? end_ : absl::Now()) - start_;
  return stats;
}

bool Work::Complete(absl::Status status) {
  std::vector<Callback> callbacks;
  {
    absl::MutexLock lock(&mu_);
    if (completed_) return false;
    completed_ = true;
    status_ = std::move(status);
    end_ = absl::Now();
    callbacks.swap(callbacks_);
  }
  // Run outside the lock: a callback may wait on or complete other Works.
  const absl::Status final_status = this->status();
  for (Callback& callback : callbacks) callback(final_status);
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

}  // namespace plexus
