// ReduceOp: the reductions collectives can apply, and which (op, dtype) pairs are valid.
#ifndef PLEXUS_BASE_CORE_REDUCE_OP_H_
#define PLEXUS_BASE_CORE_REDUCE_OP_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/core/dtype.h"

namespace plexus {

enum class ReduceOpKind {
  kSum,
  kProduct,
  kMin,
  kMax,
  kAvg,        // Sum divided by the number of contributing ranks; floating point only.
  kBand,       // Bitwise AND; bool and integers only.
  kBor,        // Bitwise OR; bool and integers only.
  kBxor,       // Bitwise XOR; bool and integers only.
  kPremulSum,  // Each input is multiplied by `scale` before summing; floating point only.
};

inline constexpr ReduceOpKind kAllReduceOpKinds[] = {
    ReduceOpKind::kSum, ReduceOpKind::kProduct, ReduceOpKind::kMin,
    ReduceOpKind::kMax, ReduceOpKind::kAvg,     ReduceOpKind::kBand,
    ReduceOpKind::kBor, ReduceOpKind::kBxor,    ReduceOpKind::kPremulSum,
};

// A reduction. Implicitly constructible from its kind; PREMUL_SUM also carries a scale.
struct ReduceOp {
  ReduceOp(ReduceOpKind kind = ReduceOpKind::kSum) : kind(kind) {}  // NOLINT: implicit by design.
  static ReduceOp PremulSum(double scale) {
    ReduceOp op(ReduceOpKind::kPremulSum);
    op.scale = scale;
    return op;
  }
  bool operator==(const ReduceOp& other) const {
    return kind == other.kind && scale == other.scale;
  }

  ReduceOpKind kind;
  double scale = 1.0;  // Used by kPremulSum only.
};

// Upper-case name as torch.distributed spells it ("SUM", "PREMUL_SUM").
absl::string_view ReduceOpName(ReduceOpKind kind);
std::string ReduceOpName(const ReduceOp& op);

// Accepts the torch names in any case ("sum", "PRODUCT", "band").
absl::StatusOr<ReduceOpKind> ParseReduceOp(absl::string_view name);

// OK when `op` is defined for `dtype`; otherwise InvalidArgument naming both. Every backend
// calls this before any byte is sent. On bool, SUM and MAX are logical OR, PRODUCT and MIN
// logical AND.
absl::Status ValidateReduceOp(const ReduceOp& op, DType dtype);

}  // namespace plexus

#endif  // PLEXUS_BASE_CORE_REDUCE_OP_H_
