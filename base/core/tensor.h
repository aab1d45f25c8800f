// Tensor: a non-owning view of a tensor's memory (pointer, dtype, shape, strides, device).
// Collectives need contiguous memory; CheckContiguous() turns anything else into an
// InvalidArgument naming the op and the offending layout.
#ifndef PLEXUS_BASE_CORE_TENSOR_H_
#define PLEXUS_BASE_CORE_TENSOR_H_

#include <cstdint>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/core/device.h"
#include "base/core/dtype.h"

namespace plexus {

using Shape = absl::InlinedVector<int64_t, 4>;

class Tensor {
 public:
  Tensor() = default;

  // A view with row-major (C-contiguous) strides.
  Tensor(void* data, DType dtype, Shape shape, Device device = Device::Cpu());

  // A view with explicit strides, counted in elements (as torch and DLPack count them).
  Tensor(void* data, DType dtype, Shape shape, Shape strides, Device device);

  // A one-dimensional contiguous view of `count` elements.
  static Tensor Flat(void* data, DType dtype, int64_t count, Device device = Device::Cpu()) {
    return Tensor(data, dtype, Shape{count}, device);
  }

  void* data() const { return data_; }
  uint8_t* bytes() const { return static_cast<uint8_t*>(data_); }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  const Device& device() const { return device_; }

  int64_t numel() const;
  size_t element_size() const { return DTypeSize(dtype_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }

  // True when elements are laid out densely in row-major order (size-1 dims may have any stride).
  bool IsContiguous() const;

  // OK when contiguous and, if non-empty, backed by a non-null pointer; otherwise an
  // InvalidArgument such as "all_reduce: tensor 2 is not contiguous (shape [4, 4], strides [1,
  // 4])".
  absl::Status CheckContiguous(absl::string_view op, absl::string_view which) const;

  // The view of elements [offset, offset + count) of a contiguous tensor, flattened.
  Tensor Slice(int64_t offset, int64_t count) const;

  std::string DebugString() const;  // "float32[4, 4] on cpu"

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  Shape strides_;
  Device device_;
};

std::string ShapeString(const Shape& shape);  // "[2, 3]"

}  // namespace plexus

#endif  // PLEXUS_BASE_CORE_TENSOR_H_
