#include "bindings/torch/sparse_all_reduce.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/core/status_macros.h"
#include "base/work/callback_runner.h"
#include "bindings/torch/torch_types.h"

namespace plexus::torch_backend {
namespace {

// What a rank tells the others first: its entry count, then what must agree (sparse
// dimensions and sizes).
std::vector<int64_t> Header(const at::Tensor& input) {
  std::vector<int64_t> header = {input._nnz(), input.sparse_dim()};
  header.insert(header.end(), input.sizes().begin(), input.sizes().end());
  return header;
}

}  // namespace

SparseAllReducer::SparseAllReducer(std::shared_ptr<plexus::ProcessGroup> group)
    : group_(std::move(group)), thread_([this] { Serve(); }) {}

SparseAllReducer::~SparseAllReducer() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
  // The companion is dropped as torch drops the group itself, without a departure barrier: a
  // destructor runs at no agreed point (at exit, perhaps never), so peers could not meet it.
}

void SparseAllReducer::Abort(const absl::Status& reason) {
  std::shared_ptr<plexus::ProcessGroup> companion;
  std::vector<WorkPtr> ended;
  {
    MutexLock lock(mu_);
    if (aborted_.ok()) aborted_ = reason;
    companion = companion_;
    if (running_ != nullptr) ended.push_back(running_);
    for (const Job& job : jobs_) ended.push_back(job.work);
  }
  if (companion != nullptr) (void)companion->Abort(reason.message());
  // The thread may be building the companion (a store barrier): its Works end now, and what
  // it completes them with later changes nothing.
  for (const WorkPtr& work : ended) work->Complete(reason);
}

WorkPtr SparseAllReducer::Submit(at::Tensor tensor, absl::Duration timeout, int64_t sequence) {
  Job job;
  job.input = tensor.coalesce();
  if (job.input.is_same(tensor)) job.input = tensor.clone();  // The caller may change it.
  job.output = std::move(tensor);
  job.deadline = absl::Now() + timeout;
  job.work = std::make_shared<Work>(kSparseAllReduce, group_->size(), sequence);
  WorkPtr work = job.work;
  {
    MutexLock lock(mu_);
    jobs_.push_back(std::move(job));
  }
  changed_.notify_all();
  return work;
}

void SparseAllReducer::Serve() {
  // A Work completed here may have a callback that submits another reduction and waits for it.
  ProgressScope progress;
  for (;;) {
    Job job;
    std::shared_ptr<plexus::ProcessGroup> companion;
    absl::Status status;
    {
      UniqueLock lock(mu_);
      changed_.wait(
          lock, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // Stopping, with nothing left.
      job = std::move(jobs_.front());
      jobs_.pop_front();
      running_ = job.work;
      companion = companion_;
      status = aborted_;
    }
    if (status.ok() && companion == nullptr) {
      absl::StatusOr<std::shared_ptr<plexus::ProcessGroup>> made = group_->Companion("sparse");
      if (made.ok()) {
        companion = *std::move(made);
        absl::Status aborted;
        {
          MutexLock lock(mu_);
          companion_ = companion;
          aborted = aborted_;
        }
        // An abort while it was being built missed it.
        if (!aborted.ok()) (void)companion->Abort(aborted.message());
      } else {
        status = made.status();
      }
    }
    if (status.ok()) status = Reduce(*companion, job);
    {
      MutexLock lock(mu_);
      running_ = nullptr;
    }
    job.work->Complete(status);
  }
}

absl::Status SparseAllReducer::Gather(plexus::ProcessGroup& over, const at::Tensor& output,
                                      const at::Tensor& input, absl::Time deadline) {
  absl::StatusOr<Tensor> out = View(output, kSparseAllReduce, "gathered");
  if (!out.ok()) return out.status();
  absl::StatusOr<Tensor> in = View(input, kSparseAllReduce, "contribution");
  if (!in.ok()) return in.status();
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(
        absl::StrCat(kSparseAllReduce, " did not complete by its deadline"));
  }
  AllGatherOptions options;
  options.timeout = left;
  absl::StatusOr<WorkPtr> work = over.AllGatherIntoTensor(*out, *in, options);
  if (!work.ok()) return work.status();
  return (*work)->Wait(left);
}

absl::Status SparseAllReducer::Reduce(plexus::ProcessGroup& over, const Job& job) {
  const at::Tensor& input = job.input;
  const int size = over.size();
  const int64_t sparse_dims = input.sparse_dim();
  const at::Tensor indices = input.indices().contiguous();
  const at::Tensor values = input.values().contiguous();
  const int64_t count = input._nnz();

  // Who holds how many entries, and the shapes: a rank with another shape fails everyone.
  const std::vector<int64_t> header = Header(input);
  const auto header_count = static_cast<int64_t>(header.size());
  at::Tensor headers = at::empty({size, header_count}, at::kLong);
  RETURN_IF_ERROR(Gather(over, headers, at::tensor(header, at::kLong), job.deadline));
  int64_t largest = 0;
  for (int rank = 0; rank < size; ++rank) {
    for (int64_t i = 1; i < header_count; ++i) {
      if (headers[rank][i].item<int64_t>() != header[i]) {
        return absl::InvalidArgumentError(absl::StrCat(
            kSparseAllReduce, ": rank ", rank,
            "'s tensor has another shape or sparse dimension count than rank ", over.rank(), "'s [",
            absl::StrJoin(input.sizes(), ", "), "] with ", sparse_dims, " sparse dimensions"));
      }
    }
    largest = std::max(largest, headers[rank][0].item<int64_t>());
  }

  // Everyone's indices and values, padded to the largest entry count.
  at::Tensor padded_indices = at::zeros({sparse_dims, largest}, at::kLong);
  padded_indices.narrow(1, 0, count).copy_(indices);
  std::vector<int64_t> value_shape(values.sizes().begin(), values.sizes().end());
  value_shape[0] = largest;
  at::Tensor padded_values = at::zeros(value_shape, values.options());
  padded_values.narrow(0, 0, count).copy_(values);
  at::Tensor all_indices = at::empty({size, sparse_dims, largest}, at::kLong);
  RETURN_IF_ERROR(Gather(over, all_indices, padded_indices, job.deadline));
  value_shape.insert(value_shape.begin(), size);
  at::Tensor all_values = at::empty(value_shape, values.options());
  RETURN_IF_ERROR(Gather(over, all_values, padded_values, job.deadline));

  std::vector<at::Tensor> index_parts, value_parts;
  for (int rank = 0; rank < size; ++rank) {
    const int64_t entries = headers[rank][0].item<int64_t>();
    index_parts.push_back(all_indices[rank].narrow(1, 0, entries));
    value_parts.push_back(all_values[rank].narrow(0, 0, entries));
  }
  at::Tensor sum = at::sparse_coo_tensor(at::cat(index_parts, 1), at::cat(value_parts, 0),
                                         input.sizes(), input.options())
                       .coalesce();
  if (job.work->IsCompleted()) return job.work->status();  // Aborted: the caller moved on.
  job.output.copy_(sum);
  return absl::OkStatus();
}

}  // namespace plexus::torch_backend
