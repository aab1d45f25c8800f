#include "base/core/reduce_op.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace plexus {

absl::string_view ReduceOpName(ReduceOpKind kind) {
  switch (kind) {
    case ReduceOpKind::kSum:
      return "SUM";
    case ReduceOpKind::kProduct:
      return "PRODUCT";
    case ReduceOpKind::kMin:
      return "MIN";
    case ReduceOpKind::kMax:
      return "MAX";
    case ReduceOpKind::kAvg:
      return "AVG";
    case ReduceOpKind::kBand:
      return "BAND";
    case ReduceOpKind::kBor:
      return "BOR";
    case ReduceOpKind::kBxor:
      return "BXOR";
    case ReduceOpKind::kPremulSum:
      return "PREMUL_SUM";
  }
  return "UNKNOWN";
}

std::string ReduceOpName(const ReduceOp& op) {
  if (op.kind == ReduceOpKind::kPremulSum) return absl::StrCat("PREMUL_SUM(", op.scale, ")");
  return std::string(ReduceOpName(op.kind));
}

absl::StatusOr<ReduceOpKind> ParseReduceOp(absl::string_view name) {
  std::string upper = absl::AsciiStrToUpper(name);
  if (upper == "PROD") upper = "PRODUCT";
  std::string known;
  for (ReduceOpKind kind : kAllReduceOpKinds) {
    if (ReduceOpName(kind) == upper) return kind;
    absl::StrAppend(&known, known.empty() ? "" : ", ", ReduceOpName(kind));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown reduce op '", name, "'; known ops: ", known));
}

absl::Status ValidateReduceOp(const ReduceOp& op, DType dtype) {
  bool valid = false;
  const char* why = "";
  switch (op.kind) {
    case ReduceOpKind::kSum:
    case ReduceOpKind::kProduct:
    case ReduceOpKind::kMin:
    case ReduceOpKind::kMax:
      valid = true;
      break;
    case ReduceOpKind::kAvg:
    case ReduceOpKind::kPremulSum:
      valid = IsFloatingPoint(dtype);
      why = "it is defined for floating-point dtypes only";
      break;
    case ReduceOpKind::kBand:
    case ReduceOpKind::kBor:
    case ReduceOpKind::kBxor:
      valid = !IsFloatingPoint(dtype);
      why = "bitwise ops are defined for bool and integer dtypes only";
      break;
  }
  if (valid) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "reduce op ", ReduceOpName(op), " is not valid for dtype ", DTypeName(dtype), ": ", why));
}

}  // namespace plexus
