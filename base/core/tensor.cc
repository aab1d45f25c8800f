#include "base/core/tensor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace plexus {
namespace {

Shape RowMajorStrides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

}  // namespace

Tensor::Tensor(void* data, DType dtype, Shape shape, Device device)
    : data_(data), dtype_(dtype), shape_(std::move(shape)), device_(device) {
  strides_ = RowMajorStrides(shape_);
}

Tensor::Tensor(void* data, DType dtype, Shape shape, Shape strides, Device device)
    : data_(data),
      dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      device_(device) {}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t dim : shape_) n *= dim;
  return n;
}

bool Tensor::IsContiguous() const {
  if (strides_.size() != shape_.size()) return false;
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] < 0) return false;
    if (shape_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

absl::Status Tensor::CheckContiguous(absl::string_view op, absl::string_view which) const {
  for (int64_t dim : shape_) {
    if (dim < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": ", which, " has a negative dimension (shape ", ShapeString(shape_), ")"));
    }
  }
  if (!IsContiguous()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", which, " is not contiguous (shape ",
                                                   ShapeString(shape_), ", strides ",
                                                   ShapeString(strides_), ")"));
  }
  if (data_ == nullptr && numel() > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", which, " has a null data pointer but ", numel(), " elements"));
  }
  return absl::OkStatus();
}

Tensor Tensor::Slice(int64_t offset, int64_t count) const {
  return Tensor::Flat(bytes() + offset * static_cast<int64_t>(element_size()), dtype_, count,
                      device_);
}

std::string Tensor::DebugString() const {
  return absl::StrCat(DTypeName(dtype_), ShapeString(shape_), " on ", device_.ToString());
}

std::string ShapeString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace plexus
