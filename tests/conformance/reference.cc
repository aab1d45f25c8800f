#include "tests/conformance/reference.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace plexus::conformance {
namespace {

bool IsExactOp(ReduceOpKind op) {
  return op != ReduceOpKind::kAvg && op != ReduceOpKind::kPremulSum;
}

}  // namespace

double InputValue(DType dtype, ReduceOpKind op, int rank, int64_t i, int salt) {
  const int64_t mix = (rank * 131 + i * 7 + salt * 17 + 3) & 0x7fffffff;
  if (dtype == DType::kBool) return (mix % 3) == 0 ? 1 : 0;
  if (op == ReduceOpKind::kProduct) {
    static constexpr double kSigned[] = {1, 2, -1, 1, -2};
    static constexpr double kUnsigned[] = {1, 2, 1, 3, 1};
    static constexpr double kFloat[] = {1, 2, -1, 0.5, -2};
    if (dtype == DType::kUInt8) return kUnsigned[mix % 5];
    return IsFloatingPoint(dtype) ? kFloat[mix % 5] : kSigned[mix % 5];
  }
  if (dtype == DType::kUInt8) return static_cast<double>(mix % 11);
  return static_cast<double>(mix % 11) - 5;
}

Buffer MakeInput(DType dtype, ReduceOpKind op, int rank, int64_t count, int salt) {
  Buffer buffer(dtype, count);
  for (int64_t i = 0; i < count; ++i) buffer.Set(i, InputValue(dtype, op, rank, i, salt));
  return buffer;
}

double ReducedValue(DType dtype, const ReduceOp& op, int world, int64_t i, int salt) {
  if (dtype == DType::kBool) {
    int ones = 0;
    for (int r = 0; r < world; ++r) ones += InputValue(dtype, op.kind, r, i, salt) != 0;
    switch (op.kind) {
      case ReduceOpKind::kProduct:
      case ReduceOpKind::kMin:
      case ReduceOpKind::kBand:
        return ones == world ? 1 : 0;
      case ReduceOpKind::kBxor:
        return ones % 2;
      default:
        return ones > 0 ? 1 : 0;
    }
  }
  double acc = InputValue(dtype, op.kind, 0, i, salt);
  int64_t bits = static_cast<int64_t>(acc);
  for (int r = 1; r < world; ++r) {
    const double v = InputValue(dtype, op.kind, r, i, salt);
    switch (op.kind) {
      case ReduceOpKind::kSum:
      case ReduceOpKind::kAvg:
      case ReduceOpKind::kPremulSum:
        acc += v;
        break;
      case ReduceOpKind::kProduct:
        acc *= v;
        break;
      case ReduceOpKind::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOpKind::kMax:
        acc = std::max(acc, v);
        break;
      case ReduceOpKind::kBand:
        bits &= static_cast<int64_t>(v);
        break;
      case ReduceOpKind::kBor:
        bits |= static_cast<int64_t>(v);
        break;
      case ReduceOpKind::kBxor:
        bits ^= static_cast<int64_t>(v);
        break;
    }
  }
  switch (op.kind) {
    case ReduceOpKind::kBand:
    case ReduceOpKind::kBor:
    case ReduceOpKind::kBxor:
      acc = static_cast<double>(bits);
      break;
    case ReduceOpKind::kAvg:
      acc /= world;
      break;
    case ReduceOpKind::kPremulSum:
      acc *= op.scale;
      break;
    default:
      break;
  }
  // Round-trip through the dtype so integer wrap-around matches the backend's arithmetic.
  Buffer one(dtype, 1);
  one.Set(0, acc);
  return IsExactOp(op.kind) ? one.Get(0) : acc;
}

std::string Compare(const Buffer& got, const std::vector<double>& expected, const ReduceOp& op) {
  std::string problems;
  int shown = 0;
  int64_t wrong = 0;
  double tolerance = 0;
  if (!IsExactOp(op.kind)) {
    tolerance = got.dtype() == DType::kFloat16 || got.dtype() == DType::kBFloat16 ? 1e-2 : 1e-6;
  }
  for (int64_t i = 0; i < got.count(); ++i) {
    const double g = got.Get(i);
    const double e = expected[i];
    const bool equal = tolerance == 0 ? g == e : std::fabs(g - e) <= tolerance * (1 + std::fabs(e));
    if (equal) continue;
    ++wrong;
    if (shown++ < 4) absl::StrAppend(&problems, " [", i, "] got ", g, " expected ", e, ";");
  }
  if (wrong == 0) return "";
  return absl::StrCat(wrong, " of ", got.count(), " elements wrong:", problems);
}

uint64_t Fingerprint(const void* data, size_t bytes) {
  uint64_t hash = 1469598103934665603ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace plexus::conformance
