// DType: the element types a collective can carry, with their sizes and names.
#ifndef PLEXUS_BASE_CORE_DTYPE_H_
#define PLEXUS_BASE_CORE_DTYPE_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace plexus {

enum class DType {
  kBool,
  kUInt8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
};

inline constexpr DType kAllDTypes[] = {
    DType::kBool,  DType::kUInt8,   DType::kInt8,     DType::kInt16,   DType::kInt32,
    DType::kInt64, DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64,
};

// Bytes per element.
size_t DTypeSize(DType dtype);

// Lower-case name as torch spells it ("float32", "bfloat16", "bool").
absl::string_view DTypeName(DType dtype);

// Inverse of DTypeName; also accepts torch/numpy aliases ("float", "half", "int", "long").
absl::StatusOr<DType> ParseDType(absl::string_view name);

bool IsFloatingPoint(DType dtype);

}  // namespace plexus

#endif  // PLEXUS_BASE_CORE_DTYPE_H_
