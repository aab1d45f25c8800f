#include "frontend/dispatch/validate.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/core/status_macros.h"

namespace plexus {
namespace {

std::string Where(absl::string_view op, GroupPosition at) {
  return absl::StrCat(op, " on rank ", at.rank, " of ", at.size);
}

absl::Status Invalid(absl::string_view op, GroupPosition at, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Where(op, at), ": ", what));
}

absl::Status CheckTensor(absl::string_view op, GroupPosition at, absl::string_view which,
                         const Tensor& tensor) {
  // Names the place only for a tensor that fails: every call of every collective passes here.
  if (tensor.CheckContiguous("", which).ok()) return absl::OkStatus();
  return tensor.CheckContiguous(Where(op, at), which);
}

// Every tensor in `tensors` is valid and matches `reference` in dtype and device.
absl::Status CheckList(absl::string_view op, GroupPosition at, absl::string_view list_name,
                       absl::Span<const Tensor> tensors, const Tensor& reference, bool same_numel) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string which = absl::StrCat(list_name, "[", i, "]");
    RETURN_IF_ERROR(CheckTensor(op, at, which, tensors[i]));
    if (tensors[i].dtype() != reference.dtype()) {
      return Invalid(op, at,
                     absl::StrCat(which, " has dtype ", DTypeName(tensors[i].dtype()),
                                  " but the input has ", DTypeName(reference.dtype())));
    }
    if (tensors[i].device() != reference.device()) {
      return Invalid(op, at,
                     absl::StrCat(which, " is on ", tensors[i].device().ToString(),
                                  " but the input is on ", reference.device().ToString()));
    }
    if (same_numel && tensors[i].numel() != reference.numel()) {
      return Invalid(op, at,
                     absl::StrCat(which, " has ", tensors[i].numel(),
                                  " elements but the input has ", reference.numel()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRoot(absl::string_view op, GroupPosition at, int root) {
  if (root >= 0 && root < at.size) return absl::OkStatus();
  return Invalid(op, at, absl::StrCat("root rank ", root, " is outside [0, ", at.size, ")"));
}

absl::Status CheckOp(absl::string_view op, GroupPosition at, const ReduceOp& reduce_op,
                     DType dtype) {
  absl::Status status = ValidateReduceOp(reduce_op, dtype);
  if (status.ok()) return status;
  return Invalid(op, at, status.message());
}

absl::Status CheckCount(absl::string_view op, GroupPosition at, absl::string_view list_name,
                        size_t count, size_t expected) {
  if (count == expected) return absl::OkStatus();
  return Invalid(op, at, absl::StrCat(list_name, " has ", count, " tensors; expected ", expected));
}

absl::Status CheckSameDtypeDevice(absl::string_view op, GroupPosition at, const Tensor& output,
                                  const Tensor& input) {
  if (output.dtype() != input.dtype()) {
    return Invalid(op, at,
                   absl::StrCat("output dtype ", DTypeName(output.dtype()),
                                " differs from input dtype ", DTypeName(input.dtype())));
  }
  if (output.device() != input.device()) {
    return Invalid(op, at,
                   absl::StrCat("output is on ", output.device().ToString(), " but input is on ",
                                input.device().ToString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateInPlace(GroupPosition at, const Collective& call) {
  const CollectiveTraits& traits = call.traits();
  if (traits.rooted()) RETURN_IF_ERROR(CheckRoot(traits.name, at, call.root));
  if (call.outputs.size() != 1 || call.inputs.data() != call.outputs.data()) {
    return Invalid(traits.name, at, "expects one tensor, reduced or copied in place");
  }
  RETURN_IF_ERROR(CheckTensor(traits.name, at, "tensor", call.tensor()));
  if (traits.reduces()) return CheckOp(traits.name, at, call.op, call.tensor().dtype());
  return absl::OkStatus();
}

absl::Status ValidateAllReduceCoalesced(GroupPosition at, absl::Span<const Tensor> tensors,
                                        const ReduceOp& op) {
  if (tensors.empty()) return Invalid("all_reduce_coalesced", at, "no tensors given");
  RETURN_IF_ERROR(CheckList("all_reduce_coalesced", at, "tensors", tensors, tensors[0],
                            /*same_numel=*/false));
  return CheckOp("all_reduce_coalesced", at, op, tensors[0].dtype());
}

absl::Status ValidateAllGather(GroupPosition at, absl::Span<const Tensor> outputs,
                               const Tensor& input) {
  RETURN_IF_ERROR(CheckTensor("all_gather", at, "input", input));
  RETURN_IF_ERROR(CheckCount("all_gather", at, "outputs", outputs.size(), at.size));
  return CheckList("all_gather", at, "outputs", outputs, input, /*same_numel=*/true);
}

absl::Status ValidateAllGatherIntoTensor(GroupPosition at, const Tensor& output,
                                         const Tensor& input) {
  constexpr absl::string_view kOp = "all_gather_into_tensor";
  RETURN_IF_ERROR(CheckTensor(kOp, at, "input", input));
  RETURN_IF_ERROR(CheckTensor(kOp, at, "output", output));
  RETURN_IF_ERROR(CheckSameDtypeDevice(kOp, at, output, input));
  if (output.numel() != input.numel() * at.size) {
    return Invalid(kOp, at,
                   absl::StrCat("output has ", output.numel(), " elements; expected ", at.size,
                                " x ", input.numel(), " = ", input.numel() * at.size));
  }
  return absl::OkStatus();
}

absl::Status ValidateGather(GroupPosition at, absl::Span<const Tensor> outputs, const Tensor& input,
                            int root) {
  RETURN_IF_ERROR(CheckRoot("gather", at, root));
  RETURN_IF_ERROR(CheckTensor("gather", at, "input", input));
  const size_t expected = at.rank == root ? at.size : 0;
  RETURN_IF_ERROR(CheckCount("gather", at, "outputs", outputs.size(), expected));
  return CheckList("gather", at, "outputs", outputs, input, /*same_numel=*/true);
}

absl::Status ValidateScatter(GroupPosition at, const Tensor& output,
                             absl::Span<const Tensor> inputs, int root) {
  RETURN_IF_ERROR(CheckRoot("scatter", at, root));
  RETURN_IF_ERROR(CheckTensor("scatter", at, "output", output));
  const size_t expected = at.rank == root ? at.size : 0;
  RETURN_IF_ERROR(CheckCount("scatter", at, "inputs", inputs.size(), expected));
  return CheckList("scatter", at, "inputs", inputs, output, /*same_numel=*/true);
}

absl::Status ValidateReduceScatter(GroupPosition at, const Tensor& output,
                                   absl::Span<const Tensor> inputs, const ReduceOp& op) {
  RETURN_IF_ERROR(CheckTensor("reduce_scatter", at, "output", output));
  RETURN_IF_ERROR(CheckCount("reduce_scatter", at, "inputs", inputs.size(), at.size));
  RETURN_IF_ERROR(CheckList("reduce_scatter", at, "inputs", inputs, output, /*same_numel=*/true));
  return CheckOp("reduce_scatter", at, op, output.dtype());
}

absl::Status ValidateReduceScatterTensor(GroupPosition at, const Tensor& output,
                                         const Tensor& input, const ReduceOp& op) {
  constexpr absl::string_view kOp = "reduce_scatter_tensor";
  RETURN_IF_ERROR(CheckTensor(kOp, at, "input", input));
  RETURN_IF_ERROR(CheckTensor(kOp, at, "output", output));
  RETURN_IF_ERROR(CheckSameDtypeDevice(kOp, at, output, input));
  if (input.numel() != output.numel() * at.size) {
    return Invalid(kOp, at,
                   absl::StrCat("input has ", input.numel(), " elements; expected ", at.size, " x ",
                                output.numel(), " = ", output.numel() * at.size));
  }
  return CheckOp(kOp, at, op, output.dtype());
}

absl::Status ValidateAllToAll(GroupPosition at, absl::Span<const Tensor> outputs,
                              absl::Span<const Tensor> inputs) {
  RETURN_IF_ERROR(CheckCount("all_to_all", at, "inputs", inputs.size(), at.size));
  RETURN_IF_ERROR(CheckCount("all_to_all", at, "outputs", outputs.size(), at.size));
  RETURN_IF_ERROR(CheckList("all_to_all", at, "inputs", inputs, inputs[0], false));
  return CheckList("all_to_all", at, "outputs", outputs, inputs[0], false);
}

absl::Status ValidateAllToAllSingle(GroupPosition at, const Tensor& output, const Tensor& input,
                                    std::vector<int64_t>& output_split_sizes,
                                    std::vector<int64_t>& input_split_sizes) {
  constexpr absl::string_view kOp = "all_to_all_single";
  RETURN_IF_ERROR(CheckTensor(kOp, at, "input", input));
  RETURN_IF_ERROR(CheckTensor(kOp, at, "output", output));
  RETURN_IF_ERROR(CheckSameDtypeDevice(kOp, at, output, input));
  auto rows = [](const Tensor& t) { return t.shape().empty() ? t.numel() : t.shape()[0]; };
  auto fill_and_check = [&](absl::string_view name, const Tensor& tensor,
                            std::vector<int64_t>& splits) -> absl::Status {
    const int64_t total = rows(tensor);
    if (splits.empty()) {
      if (total % at.size != 0) {
        return Invalid(kOp, at,
                       absl::StrCat(name, " has ", total, " rows, not divisible by ", at.size,
                                    " ranks; pass split sizes"));
      }
      splits.assign(at.size, total / at.size);
    }
    if (splits.size() != static_cast<size_t>(at.size)) {
      return Invalid(
          kOp, at,
          absl::StrCat(name, " split sizes have ", splits.size(), " entries; expected ", at.size));
    }
    int64_t sum = 0;
    for (int64_t split : splits) {
      if (split < 0) return Invalid(kOp, at, absl::StrCat(name, " split size ", split, " < 0"));
      sum += split;
    }
    if (sum != total) {
      return Invalid(
          kOp, at, absl::StrCat(name, " split sizes sum to ", sum, " but it has ", total, " rows"));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(fill_and_check("input", input, input_split_sizes));
  return fill_and_check("output", output, output_split_sizes);
}

absl::Status ValidatePeer(GroupPosition at, absl::string_view op, int peer) {
  if (peer < 0 || peer >= at.size) {
    return Invalid(op, at, absl::StrCat("peer rank ", peer, " is outside [0, ", at.size, ")"));
  }
  if (peer == at.rank) return Invalid(op, at, "peer rank is this rank");
  return absl::OkStatus();
}

absl::Status ValidatePointToPoint(GroupPosition at, absl::string_view op, const Tensor& tensor,
                                  int peer, int tag) {
  RETURN_IF_ERROR(ValidatePeer(at, op, peer));
  if (tag < 0) return Invalid(op, at, absl::StrCat("tag ", tag, " is negative"));
  return CheckTensor(op, at, "tensor", tensor);
}

absl::Status ValidateCollective(GroupPosition at, Collective& call, FilledSplits& filled) {
  if (call.traits().shape == CollectiveShape::kInPlace) return ValidateInPlace(at, call);
  // No default: a kind added to the enum is a -Wswitch error until it is listed here.
  switch (call.kind) {
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
    case CollectiveKind::kAllReduce:
      return ValidateInPlace(at, call);  // kInPlace rows, checked above.
    case CollectiveKind::kAllReduceCoalesced:
      return ValidateAllReduceCoalesced(at, call.outputs, call.op);
    case CollectiveKind::kAllGather:
      return ValidateAllGather(at, call.outputs, call.input());
    case CollectiveKind::kAllGatherIntoTensor:
      return ValidateAllGatherIntoTensor(at, call.output(), call.input());
    case CollectiveKind::kGather:
      return ValidateGather(at, call.outputs, call.input(), call.root);
    case CollectiveKind::kScatter:
      return ValidateScatter(at, call.output(), call.inputs, call.root);
    case CollectiveKind::kReduceScatter:
      return ValidateReduceScatter(at, call.output(), call.inputs, call.op);
    case CollectiveKind::kReduceScatterTensor:
      return ValidateReduceScatterTensor(at, call.output(), call.input(), call.op);
    case CollectiveKind::kAllToAll:
      return ValidateAllToAll(at, call.outputs, call.inputs);
    case CollectiveKind::kAllToAllSingle:
      filled.output.assign(call.output_splits.begin(), call.output_splits.end());
      filled.input.assign(call.input_splits.begin(), call.input_splits.end());
      RETURN_IF_ERROR(
          ValidateAllToAllSingle(at, call.output(), call.input(), filled.output, filled.input));
      call.output_splits = filled.output;
      call.input_splits = filled.input;
      return absl::OkStatus();
    case CollectiveKind::kBarrier:
      return absl::OkStatus();
    case CollectiveKind::kSend:
      return ValidatePointToPoint(at, call.name(), call.input(), call.peer, call.tag);
    case CollectiveKind::kRecv:
      return ValidatePointToPoint(at, call.name(), call.output(), call.peer, call.tag);
    case CollectiveKind::kRecvAnySource:
      if (call.tag < 0) {
        return Invalid(call.name(), at, absl::StrCat("tag ", call.tag, " is negative"));
      }
      return CheckTensor(call.name(), at, "tensor", call.output());
  }
  return Invalid(call.name(), at, "no argument rule for this collective (validate.cc)");
}

}  // namespace plexus
