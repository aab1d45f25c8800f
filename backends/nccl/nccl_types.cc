#include "backends/nccl/nccl_types.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "algorithms/half.h"

namespace plexus::nccl {

using algorithms::FloatToBFloat16;
using algorithms::FloatToHalf;

namespace {

// NCCL's type for reductions on `dtype`; false when it has none.
bool ReductionType(DType dtype, ncclDataType_t* type) {
  switch (dtype) {
    case DType::kBool:
    case DType::kUInt8:
      *type = ncclUint8;
      return true;
    case DType::kInt8:
      *type = ncclInt8;
      return true;
    case DType::kInt16:
      return false;
    case DType::kInt32:
      *type = ncclInt32;
      return true;
    case DType::kInt64:
      *type = ncclInt64;
      return true;
    case DType::kFloat16:
      *type = ncclFloat16;
      return true;
    case DType::kBFloat16:
      *type = ncclBfloat16;
      return true;
    case DType::kFloat32:
      *type = ncclFloat32;
      return true;
    case DType::kFloat64:
      *type = ncclFloat64;
      return true;
  }
  return false;
}

absl::Status Unsupported(absl::string_view op_name, const ReduceOp& op, DType dtype,
                         absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(op_name, ": nccl cannot reduce ", DTypeName(dtype),
                                                 " with ", ReduceOpName(op), ": ", why));
}

}  // namespace

NcclExtent MovementExtent(DType dtype, int64_t elements) {
  ncclDataType_t type;
  if (dtype != DType::kBool && ReductionType(dtype, &type)) {
    return {type, static_cast<size_t>(elements)};
  }
  return {ncclUint8, static_cast<size_t>(elements) * DTypeSize(dtype)};
}

absl::StatusOr<NcclReduction> ReductionFor(absl::string_view op_name, const ReduceOp& op,
                                           DType dtype) {
  NcclReduction reduction;
  if (!ReductionType(dtype, &reduction.type)) {
    return Unsupported(op_name, op, dtype, "NCCL has no 16-bit integer type");
  }
  const bool is_bool = dtype == DType::kBool;
  switch (op.kind) {
    case ReduceOpKind::kSum:
      reduction.op = is_bool ? ncclMax : ncclSum;
      return reduction;
    case ReduceOpKind::kProduct:
      reduction.op = is_bool ? ncclMin : ncclProd;
      return reduction;
    case ReduceOpKind::kMin:
      reduction.op = ncclMin;
      return reduction;
    case ReduceOpKind::kMax:
      reduction.op = ncclMax;
      return reduction;
    case ReduceOpKind::kAvg:
      if (!IsFloatingPoint(dtype))
        return Unsupported(op_name, op, dtype, "AVG needs floating point");
      reduction.op = ncclAvg;
      return reduction;
    case ReduceOpKind::kBand:
    case ReduceOpKind::kBor:
      if (!is_bool) return Unsupported(op_name, op, dtype, "NCCL has no bitwise reductions");
      reduction.op = op.kind == ReduceOpKind::kBand ? ncclMin : ncclMax;
      return reduction;
    case ReduceOpKind::kBxor:
      return Unsupported(op_name, op, dtype, "NCCL has no bitwise reductions");
    case ReduceOpKind::kPremulSum: {
      if (!IsFloatingPoint(dtype)) {
        return Unsupported(op_name, op, dtype, "PREMUL_SUM needs floating point");
      }
      reduction.premul = true;
      if (dtype == DType::kFloat64) {
        const double scale = op.scale;
        std::memcpy(reduction.premul_scalar, &scale, sizeof(scale));
      } else if (dtype == DType::kFloat32) {
        const float scale = static_cast<float>(op.scale);
        std::memcpy(reduction.premul_scalar, &scale, sizeof(scale));
      } else {
        const uint16_t bits = dtype == DType::kFloat16
                                  ? FloatToHalf(static_cast<float>(op.scale))
                                  : FloatToBFloat16(static_cast<float>(op.scale));
        std::memcpy(reduction.premul_scalar, &bits, sizeof(bits));
      }
      return reduction;
    }
  }
  return Unsupported(op_name, op, dtype, "unknown reduction");
}

bool NeedsOneRankPieces(const NcclReduction& reduction, int ranks, int nccl_version) {
  if (ranks != 1 || nccl_version >= kFirstNcclWithWholeOneRankReduce) return false;
  // ReductionFor gives AVG to floating point only.
  return reduction.premul || reduction.op == ncclAvg;
}

std::vector<NcclPiece> OneRankPieces(size_t count, size_t element_size) {
  // The affected kernel runs min(32, ceil(bytes / 16 KiB)) blocks over equal shares.
  constexpr size_t kBlockBytes = 16 << 10;
  constexpr size_t kMostBlocks = 32;
  const size_t bytes = count * element_size;
  if (bytes <= kBlockBytes) return {{0, count}};
  if (bytes >= kMostBlocks * kBlockBytes) {
    const size_t whole = count - count % kMostBlocks;
    std::vector<NcclPiece> pieces = {{0, whole}};
    if (whole < count) pieces.push_back({whole, count - whole});
    return pieces;
  }
  const size_t per_piece = kBlockBytes / element_size;
  std::vector<NcclPiece> pieces;
  for (size_t offset = 0; offset < count; offset += per_piece) {
    pieces.push_back({offset, std::min(per_piece, count - offset)});
  }
  return pieces;
}

}  // namespace plexus::nccl
