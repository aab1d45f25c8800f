#include "bindings/torch/torch_types.h"

#include <c10/util/Exception.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/core/dtype.h"
#include "base/core/options.h"

namespace plexus::torch_backend {
namespace {

absl::Status Invalid(absl::string_view op, absl::string_view which, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", which, " ", what));
}

absl::StatusOr<DType> ToDType(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Bool:
      return DType::kBool;
    case c10::ScalarType::Byte:
      return DType::kUInt8;
    case c10::ScalarType::Char:
      return DType::kInt8;
    case c10::ScalarType::Short:
      return DType::kInt16;
    case c10::ScalarType::Int:
      return DType::kInt32;
    case c10::ScalarType::Long:
      return DType::kInt64;
    case c10::ScalarType::Half:
      return DType::kFloat16;
    case c10::ScalarType::BFloat16:
      return DType::kBFloat16;
    case c10::ScalarType::Float:
      return DType::kFloat32;
    case c10::ScalarType::Double:
      return DType::kFloat64;
    default:
      return absl::InvalidArgumentError(c10::toString(type));
  }
}

}  // namespace

absl::StatusOr<Tensor> View(const at::Tensor& tensor, absl::string_view op,
                            absl::string_view which) {
  if (!tensor.defined()) return Invalid(op, which, "is undefined (None)");
  if (tensor.layout() != c10::kStrided) {
    return Invalid(op, which,
                   absl::StrCat("is a ", c10::str(tensor.layout()),
                                " tensor; only dense (strided) tensors can be sent"));
  }
  absl::StatusOr<DType> dtype = ToDType(tensor.scalar_type());
  if (!dtype.ok()) {
    return Invalid(op, which,
                   absl::StrCat("has dtype ", c10::toString(tensor.scalar_type()),
                                ", which plexus does not carry (complex tensors are sent as "
                                "real pairs by torch.distributed's own wrappers)"));
  }
  Device device = Device::Cpu();
  if (tensor.is_cuda()) {
    device = Device::Cuda(tensor.get_device());
  } else if (!tensor.is_cpu()) {
    return Invalid(op, which,
                   absl::StrCat("is on device ", tensor.device().str(),
                                ", which plexus does not serve (cpu and cuda only)"));
  }
  Shape shape(tensor.sizes().begin(), tensor.sizes().end());
  Shape strides(tensor.strides().begin(), tensor.strides().end());
  Tensor view(tensor.data_ptr(), *dtype, std::move(shape), std::move(strides), device);
  absl::Status contiguous = view.CheckContiguous(op, which);
  if (!contiguous.ok()) return contiguous;
  return view;
}

absl::StatusOr<std::vector<Tensor>> Views(const std::vector<at::Tensor>& tensors,
                                          absl::string_view op, absl::string_view which) {
  std::vector<Tensor> views;
  views.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    absl::StatusOr<Tensor> view = View(tensors[i], op, absl::StrCat(which, " ", i));
    if (!view.ok()) return view.status();
    views.push_back(*std::move(view));
  }
  return views;
}

absl::StatusOr<ReduceOp> ToReduceOp(const c10d::ReduceOp& op, absl::string_view op_name) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return ReduceOp(ReduceOpKind::kSum);
    case c10d::ReduceOp::AVG:
      return ReduceOp(ReduceOpKind::kAvg);
    case c10d::ReduceOp::PRODUCT:
      return ReduceOp(ReduceOpKind::kProduct);
    case c10d::ReduceOp::MIN:
      return ReduceOp(ReduceOpKind::kMin);
    case c10d::ReduceOp::MAX:
      return ReduceOp(ReduceOpKind::kMax);
    case c10d::ReduceOp::BAND:
      return ReduceOp(ReduceOpKind::kBand);
    case c10d::ReduceOp::BOR:
      return ReduceOp(ReduceOpKind::kBor);
    case c10d::ReduceOp::BXOR:
      return ReduceOp(ReduceOpKind::kBxor);
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* factor = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      if (factor == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(op_name, ": PREMUL_SUM without its factor"));
      }
      const at::Tensor* tensor = compat::PremulSumTensor(*factor);
      if (tensor == nullptr) return ReduceOp::PremulSum(factor->double_factor);
      const at::Tensor& scale = *tensor;
      if (scale.numel() != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(op_name, ": PREMUL_SUM's factor must be one number, got a tensor of ",
                         scale.numel(), " elements"));
      }
      return ReduceOp::PremulSum(scale.item<double>());
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          op_name, ": reduce op ", static_cast<int>(op.op_), " is not one plexus has"));
  }
}

absl::Duration ToTimeout(std::chrono::milliseconds timeout) {
  if (timeout == c10d::kUnsetTimeout) return kDefaultTimeout;
  // kDefaultTimeout is zero: an expired deadline must not read as "the group's timeout".
  if (timeout.count() <= 0) return absl::Nanoseconds(1);
  return absl::Milliseconds(timeout.count());
}

std::exception_ptr ToException(const absl::Status& status, const Origin& origin) {
  std::string message = "[plexus, ";
  if (!origin.group.empty()) absl::StrAppend(&message, "group '", origin.group, "', ");
  absl::StrAppend(&message, "rank ", origin.rank, "] ", absl::StatusCodeToString(status.code()),
                  ": ");
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    absl::StrAppend(&message, "Timed out waiting: ");
  }
  absl::StrAppend(&message, status.message());
  const c10::SourceLocation where{__func__, __FILE__, static_cast<uint32_t>(__LINE__)};
  switch (status.code()) {
    case absl::StatusCode::kUnimplemented:
      return std::make_exception_ptr(c10::NotImplementedError(where, std::move(message)));
    case absl::StatusCode::kInvalidArgument:
      return std::make_exception_ptr(c10::Error(where, std::move(message)));
    default:
#if PLEXUS_TORCH_DIST_BACKEND_ERROR
      return std::make_exception_ptr(c10::DistBackendError(where, std::move(message)));
#else
      return std::make_exception_ptr(c10::Error(where, std::move(message)));
#endif
  }
}

void Throw(const absl::Status& status, const Origin& origin) {
  std::rethrow_exception(ToException(status, origin));
}

}  // namespace plexus::torch_backend
