#include "base/core/dtype.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace plexus {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
      return 1;
    case DType::kInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return "bool";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
  }
  return "unknown";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  std::string lower = absl::AsciiStrToLower(name);
  for (DType dtype : kAllDTypes) {
    if (DTypeName(dtype) == lower) return dtype;
  }
  struct Alias {
    absl::string_view name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"float", DType::kFloat32}, {"double", DType::kFloat64}, {"half", DType::kFloat16},
      {"int", DType::kInt32},     {"long", DType::kInt64},     {"short", DType::kInt16},
      {"f32", DType::kFloat32},   {"f64", DType::kFloat64},    {"f16", DType::kFloat16},
      {"bf16", DType::kBFloat16},
  };
  for (const Alias& alias : kAliases) {
    if (alias.name == lower) return alias.dtype;
  }
  std::string known;
  for (DType dtype : kAllDTypes)
    absl::StrAppend(&known, known.empty() ? "" : ", ", DTypeName(dtype));
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name, "'; known dtypes: ", known));
}

bool IsFloatingPoint(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      return true;
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      return false;
  }
  return false;
}

}  // namespace plexus
