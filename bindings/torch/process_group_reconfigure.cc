// ProcessGroupPlexus in torch's reconfigure regime (c10d's fault-tolerance API, torch 2.14+):
// handles, reconfigure, the error kind, abort as a revoke, abort hooks; and shrink_group. The
// membership itself is frontend/dispatch's (reconfigure.h, ProcessGroup::Shrink), which forms
// groups as init_process_group does.
#include <memory>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bindings/torch/gil.h"
#include "bindings/torch/process_group_plexus.h"

#ifdef C10D_BACKEND_HAS_RECONFIGURE

namespace plexus::torch_backend {

c10d::ReconfigureHandle ProcessGroupPlexus::get_reconfigure_handle() const {
  if (reconfigurer_ == nullptr) {
    Throw(absl::FailedPreconditionError(
              "get_reconfigure_handle: this group was not created with enable_reconfigure=True"),
          origin_);
  }
  return reconfigurer_->handle();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::reconfigure(
    const c10d::ReconfigureOptions& opts) {
  if (reconfigurer_ == nullptr) {
    Throw(absl::FailedPreconditionError(
              "reconfigure: this group was not created with enable_reconfigure=True"),
          origin_);
  }
  Reconfigurer::Request request;
  request.uuid = opts.uuid;
  std::visit([&](const auto& handles) { request.handles.assign(handles.begin(), handles.end()); },
             opts.handles);
  request.ordered = std::holds_alternative<std::vector<c10d::ReconfigureHandle>>(opts.handles);
  if (opts.timeout.has_value()) request.timeout = absl::Milliseconds(opts.timeout->count());
  absl::StatusOr<std::shared_ptr<plexus::ProcessGroup>> formed;
  {
    // Forming waits for the other members; Python callbacks elsewhere may need the GIL.
    WithoutGil released;
    formed = reconfigurer_->Reconfigure(std::move(request));
  }
  std::shared_ptr<plexus::ProcessGroup> group = ValueOrThrow(std::move(formed), origin_);
  std::shared_ptr<plexus::ProcessGroup> old = std::move(group_);
  group_ = std::move(group);
  rank_ = group_->rank();
  size_ = group_->size();
  origin_ = Origin{rank_, group_->name()};
  hooks_->user_aborted.store(false, std::memory_order_release);
  WatchFailures(*group_);
  {
    MutexLock lock(sparse_mu_);
    sparse_.reset();
  }
  if (old != nullptr) {
    old->OnFirstFailure(nullptr);  // Its failures are no longer this group's.
    (void)old->Abort(absl::StrCat("replaced by reconfigure(uuid ", opts.uuid, ")"));
  }
  return CompletedWork();  // Formed before it returns, as gloo's.
}

c10d::ErrorType ProcessGroupPlexus::getError() {
  if (group_ == nullptr) return c10d::ErrorType::SUCCESS;
  const absl::Status failure = group_->first_failure();
  if (failure.ok() || hooks_->user_aborted.load(std::memory_order_acquire)) {
    return c10d::ErrorType::SUCCESS;
  }
  switch (failure.code()) {
    case absl::StatusCode::kDeadlineExceeded:
      return c10d::ErrorType::TIMEOUT;
    case absl::StatusCode::kUnavailable:  // A peer lost, or silent past the heartbeat window.
      return c10d::ErrorType::REMOTE_ERROR;
    default:
      return c10d::ErrorType::COMM_ERROR;
  }
}

void ProcessGroupPlexus::abort() { (void)Abort("abort() was called"); }

void ProcessGroupPlexus::setTimeout(std::chrono::milliseconds timeout) {
  timeout_ms_.store(timeout.count() > 0 ? timeout.count() : 0, std::memory_order_relaxed);
}

}  // namespace plexus::torch_backend

#endif  // C10D_BACKEND_HAS_RECONFIGURE

#ifdef C10D_BACKEND_HAS_HOOKS
namespace plexus::torch_backend {

void ProcessGroupPlexus::registerAbortHook(int64_t hook_id, c10d::AbortHook hook) {
  hooks_->Set(hook_id, std::move(hook));
}

void ProcessGroupPlexus::unregisterAbortHook(int64_t hook_id) { hooks_->Remove(hook_id); }

}  // namespace plexus::torch_backend
#endif  // C10D_BACKEND_HAS_HOOKS

#if PLEXUS_TORCH_SHRINK
namespace plexus::torch_backend {

namespace {

// Whether the backend string ("cpu:gloo,cuda:nccl", "mpi") names mpi, which cannot shrink:
// Open MPI ends the job when a rank dies (ProcessGroup::Shrink refuses it, saying so).
bool RunsOnMpi(absl::string_view backend_string) {
  for (absl::string_view entry : absl::StrSplit(backend_string, ',')) {
    const size_t colon = entry.find(':');
    if ((colon == absl::string_view::npos ? entry : entry.substr(colon + 1)) == "mpi") return true;
  }
  return false;
}

}  // namespace

bool ProcessGroupPlexus::supportsShrinking() const {
  return reconfigurer_ == nullptr && group_ != nullptr && !RunsOnMpi(group_->backend_string());
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupPlexus::shrink(
    const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
    const c10::intrusive_ptr<Options>& opts_override) {
  if (reconfigurer_ != nullptr) {
    Throw(absl::FailedPreconditionError(
              "shrink: a group created with enable_reconfigure=True changes its members by "
              "reconfigure(), not shrink_group()"),
          origin_);
  }
  constexpr int kKnownFlags = 0x01;  // SHRINK_ABORT; SHRINK_DEFAULT is 0.
  if ((shrink_flags & ~kKnownFlags) != 0) {
    Throw(absl::InvalidArgumentError(absl::StrCat("shrink: unknown shrink_flags ", shrink_flags,
                                                  " (SHRINK_DEFAULT 0 or SHRINK_ABORT 1)")),
          origin_);
  }
  std::vector<int> excluded;
  for (int64_t rank : ranks_to_exclude) {
    if (rank < 0 || rank >= size_) {
      Throw(absl::InvalidArgumentError(
                absl::StrCat("shrink: rank ", rank, " is not a rank of this group of ", size_)),
            origin_);
    }
    excluded.push_back(static_cast<int>(rank));
  }
  absl::StatusOr<std::shared_ptr<plexus::ProcessGroup>> shrunk;
  {
    // The survivors meet on the store; Python callbacks elsewhere may need the GIL.
    WithoutGil released;
    shrunk = group_->Shrink(std::move(excluded));
  }
  auto made = c10::make_intrusive<ProcessGroupPlexus>(ValueOrThrow(std::move(shrunk), origin_));
  if (opts_override && opts_override->timeout.count() > 0) made->setTimeout(opts_override->timeout);
  return made;
}

}  // namespace plexus::torch_backend
#endif  // PLEXUS_TORCH_SHRINK
