// ProcessGroupPlexus::SparseAllReduce: SUM of sparse COO tensors, as Gloo offers it. Every rank
// all-gathers the others' (coalesced) indices and values, padded to the largest count, and sums
// them locally with torch's own sparse kernels, so every rank computes the same result from the
// same inputs in the same order. Runs in the calling thread; the Work it returns is complete,
// carrying the error (raised by wait()) when a step failed.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bindings/torch/process_group_plexus.h"

namespace plexus::torch_backend {
namespace {

constexpr char kOp[] = "all_reduce (sparse)";

}  // namespace

absl::Status ProcessGroupPlexus::GatherBlocking(const at::Tensor& output, const at::Tensor& input,
                                                absl::Duration timeout) {
  absl::StatusOr<Tensor> out = View(output, kOp, "gathered");
  if (!out.ok()) return out.status();
  absl::StatusOr<Tensor> in = View(input, kOp, "contribution");
  if (!in.ok()) return in.status();
  AllGatherOptions options;
  options.timeout = timeout;
  absl::StatusOr<WorkPtr> work = group_->AllGatherIntoTensor(*out, *in, options);
  if (!work.ok()) return work.status();
  return (*work)->Wait(ResolveTimeout(timeout, group_->timeout()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::SparseAllReduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  at::Tensor& tensor = tensors.front();
  if (opts.reduceOp.op_ != c10d::ReduceOp::SUM) {
    Throw(absl::InvalidArgumentError(
              absl::StrCat(kOp, ": only SUM reduces sparse tensors (got reduce op ",
                           static_cast<int>(opts.reduceOp.op_), ")")),
          rank_);
  }
  if (!tensor.is_cpu()) {
    Throw(absl::InvalidArgumentError(absl::StrCat(kOp, ": the tensor is on ", tensor.device().str(),
                                                  "; sparse tensors are reduced on the CPU only")),
          rank_);
  }
  const absl::Duration timeout = ToTimeout(opts.timeout);
  const at::Tensor input = tensor.coalesce();
  const int64_t sparse_dims = input.sparse_dim();
  const at::Tensor indices = input.indices().contiguous();
  const at::Tensor values = input.values().contiguous();
  const int64_t count = input._nnz();

  auto finish = [&](const absl::Status& status) {
    PlexusWork::Spec spec;
    spec.rank = rank_;
    spec.type = c10d::OpType::ALLREDUCE;
    spec.outputs = tensors;
    spec.timeout = ResolveTimeout(timeout, group_->timeout());
    return PlexusWork::Create(Work::Finished(status, kOp, size_), std::move(spec));
  };

  // Who holds how many entries, and the shapes: a rank with another shape fails everyone.
  std::vector<int64_t> header = {count, sparse_dims};
  header.insert(header.end(), input.sizes().begin(), input.sizes().end());
  const auto header_count = static_cast<int64_t>(header.size());
  at::Tensor mine = at::tensor(header, at::kLong);
  at::Tensor headers = at::empty({size_, header_count}, at::kLong);
  absl::Status status = GatherBlocking(headers, mine, timeout);
  if (!status.ok()) return finish(status);
  int64_t largest = 0;
  for (int rank = 0; rank < size_; ++rank) {
    for (int64_t i = 1; i < header_count; ++i) {
      if (headers[rank][i].item<int64_t>() != header[i]) {
        return finish(absl::InvalidArgumentError(
            absl::StrCat(kOp, ": rank ", rank,
                         "'s tensor has another shape or sparse dimension count than "
                         "rank ",
                         rank_, "'s [", absl::StrJoin(input.sizes(), ", "), "] with ", sparse_dims,
                         " sparse dimensions")));
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
  std::vector<int64_t> all_indices_shape = {size_, sparse_dims, largest};
  at::Tensor all_indices = at::empty(all_indices_shape, at::kLong);
  status = GatherBlocking(all_indices, padded_indices, timeout);
  if (!status.ok()) return finish(status);
  value_shape.insert(value_shape.begin(), size_);
  at::Tensor all_values = at::empty(value_shape, values.options());
  status = GatherBlocking(all_values, padded_values, timeout);
  if (!status.ok()) return finish(status);

  std::vector<at::Tensor> index_parts, value_parts;
  for (int rank = 0; rank < size_; ++rank) {
    const int64_t entries = headers[rank][0].item<int64_t>();
    index_parts.push_back(all_indices[rank].narrow(1, 0, entries));
    value_parts.push_back(all_values[rank].narrow(0, 0, entries));
  }
  at::Tensor sum = at::sparse_coo_tensor(at::cat(index_parts, 1), at::cat(value_parts, 0),
                                         input.sizes(), input.options())
                       .coalesce();
  tensor.copy_(sum);
  return finish(absl::OkStatus());
}

}  // namespace plexus::torch_backend
