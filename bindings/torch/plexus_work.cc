#include "bindings/torch/plexus_work.h"

#include <ATen/core/jit_type.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "bindings/torch/torch_stream.h"
#include "bindings/torch/torch_types.h"

namespace plexus::torch_backend {
namespace {

// Beyond the operation's own deadline, a wait "without timeout" allows this much for the
// failure to be delivered before it reports the wait itself as timed out.
constexpr absl::Duration kCompletionGrace = absl::Seconds(30);

c10::intrusive_ptr<c10::ivalue::Future> NewFuture(int cuda_device) {
  auto type = c10::ListType::create(c10::TensorType::get());
  if (cuda_device < 0) return c10::make_intrusive<c10::ivalue::Future>(std::move(type));
  return c10::make_intrusive<c10::ivalue::Future>(
      std::move(type), std::vector<c10::Device>{c10::Device(c10::kCUDA, cuda_device)});
}

}  // namespace

PlexusWork::PlexusWork(WorkPtr work, Spec spec)
    : c10d::Work(spec.origin.rank, spec.type, spec.profiling_title,
                 spec.profiling_title == nullptr
                     ? c10::optional<std::vector<at::Tensor>>()
                     : c10::optional<std::vector<at::Tensor>>(spec.inputs)),
      work_(std::move(work)),
      origin_(std::move(spec.origin)),
      outputs_(std::move(spec.outputs)),
      inputs_(std::move(spec.inputs)),
      timeout_(spec.timeout),
      cuda_device_(spec.cuda_device),
      type_(spec.type),
      sequence_(spec.sequence),
      started_(spec.started),
      completions_(std::move(spec.completions)),
      future_(NewFuture(spec.cuda_device)) {}

c10::intrusive_ptr<PlexusWork> PlexusWork::Create(WorkPtr work, Spec spec) {
  auto self = c10::make_intrusive<PlexusWork>(std::move(work), std::move(spec));
  // The callback holds the Work (and so the tensors) until the operation ends; it runs at once
  // when the operation has already finished.
  self->work_->OnCompleteMayBlock([self](const absl::Status& status) { self->Completed(status); });
  return self;
}

void PlexusWork::Completed(const absl::Status& status) {
  std::exception_ptr error = status.ok() ? nullptr : ToException(status, origin_);
  inputs_.clear();
  finish(error);  // torch's own bookkeeping: its profiler event ends here.
  // Before the future: a caller released by it issues its next operation only after this one
  // is queued for the hooks, so they see one thread's operations in the order it issued them.
  if (completions_ != nullptr) {
    completions_->Ended({type_, sequence_, started_, std::chrono::steady_clock::now()});
  }
  if (error == nullptr) {
    future_->markCompleted(c10::IValue(outputs_));
  } else {
    future_->setError(error);
  }
}

// Complete once Completed() has run (torch's bookkeeping, the future), not merely once plexus's
// Work has: a caller that then leaves a profiler scope must not race the profiler event's end.
bool PlexusWork::isCompleted() { return future_->completed(); }

bool PlexusWork::isSuccess() const { return future_->completed() && work_->status().ok(); }

std::exception_ptr PlexusWork::exception() const {
  if (!future_->completed()) return nullptr;
  absl::Status status = work_->status();
  return status.ok() ? nullptr : ToException(status, origin_);
}

int PlexusWork::sourceRank() const {
  int source = work_->source_rank();
  TORCH_CHECK(source >= 0, "[plexus, group '", origin_.group, "', rank ", origin_.rank,
              "] sourceRank: ", work_->op_name(), " is not a completed receive from any source");
  return source;
}

std::vector<at::Tensor> PlexusWork::result() { return outputs_; }

void PlexusWork::synchronize() {
  if (cuda_device_ < 0) return;
  absl::Status status = work_->WaitOnStream(cuda_device_, TorchCurrentStream(cuda_device_));
  if (!status.ok()) Throw(status, origin_);
}

bool PlexusWork::wait(std::chrono::milliseconds timeout) {
  const bool unbounded = timeout == ::kNoTimeout;
  absl::Status status;
  if (unbounded && cuda_device_ >= 0) {
    // As ProcessGroupNCCL: the caller's stream waits for the operation, not the host.
    status = work_->WaitOnStream(cuda_device_, TorchCurrentStream(cuda_device_));
  } else {
    absl::Duration limit =
        unbounded ? timeout_ + kCompletionGrace : absl::Milliseconds(timeout.count());
    status = work_->Wait(limit);
    if (!status.ok() && !work_->IsCompleted()) {
      status = absl::DeadlineExceededError(absl::StrCat(
          work_->op_name(), " #", work_->sequence(), " did not complete within the ",
          absl::FormatDuration(limit), unbounded ? " of its timeout" : " given to wait()",
          "; it is still running"));
    }
  }
  // plexus's Work is done (also when it failed); Completed() may still be running on the
  // completing thread (ending torch's profiler event, completing the future): it is brief, and
  // the caller must not see the Work half-finished (torch 1.13's profiler crashed when its scope
  // ended meanwhile; is_completed() read right after a failed wait() said False).
  if ((status.ok() || work_->IsCompleted()) && !(unbounded && cuda_device_ >= 0)) {
    future_->wait();
  }
  if (!status.ok()) Throw(status, origin_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> PlexusWork::getFuture() { return future_; }

c10::intrusive_ptr<c10d::Work> CompletedWork() {
  auto future = c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()), std::vector<at::Device>{});
  future->markCompleted(c10::IValue(std::vector<at::Tensor>()));
  return c10d::Work::create_from_future(future);
}

}  // namespace plexus::torch_backend
