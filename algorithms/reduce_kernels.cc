#include "algorithms/reduce_kernels.h"

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "algorithms/half.h"

namespace plexus::algorithms {
namespace {

// Element access for stored types; half types are computed in float.
template <typename Stored>
struct Element {
  using Compute = Stored;
  static Compute Load(Stored value) { return value; }
  static Stored Store(Compute value) { return value; }
};

struct Float16Tag {};
struct BFloat16Tag {};

template <>
struct Element<Float16Tag> {
  using Compute = float;
  static float Load(uint16_t value) { return HalfToFloat(value); }
  static uint16_t Store(float value) { return FloatToHalf(value); }
};

template <>
struct Element<BFloat16Tag> {
  using Compute = float;
  static float Load(uint16_t value) { return BFloat16ToFloat(value); }
  static uint16_t Store(float value) { return FloatToBFloat16(value); }
};

template <typename Tag>
using StoredType =
    std::conditional_t<std::is_same_v<Tag, Float16Tag> || std::is_same_v<Tag, BFloat16Tag>,
                       uint16_t, Tag>;

template <typename Tag, typename Fn>
void Combine(void* out_raw, const void* a_raw, const void* b_raw, int64_t count, Fn fn) {
  using Stored = StoredType<Tag>;
  using E = Element<Tag>;
  auto* out = static_cast<Stored*>(out_raw);
  const auto* a = static_cast<const Stored*>(a_raw);
  const auto* b = static_cast<const Stored*>(b_raw);
  for (int64_t i = 0; i < count; ++i) out[i] = E::Store(fn(E::Load(a[i]), E::Load(b[i])));
}

// Integer sums and products wrap (two's complement) instead of overflowing, as torch's do.
template <typename C>
C Add(C x, C y) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
  } else {
    return x + y;
  }
}

template <typename C>
C Multiply(C x, C y) {
  if constexpr (std::is_integral_v<C>) {
    // Promote to unsigned int at least, so uint16 x uint16 cannot overflow a signed int.
    using U = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;
    return static_cast<C>(static_cast<U>(static_cast<U>(x) * static_cast<U>(y)));
  } else {
    return x * y;
  }
}

template <typename Tag>
void CombineArithmetic(void* out, const void* a, const void* b, int64_t count, ReduceOpKind op) {
  using C = typename Element<Tag>::Compute;
  switch (KernelOp(op)) {
    case ReduceOpKind::kSum:
      return Combine<Tag>(out, a, b, count, [](C x, C y) { return Add(x, y); });
    case ReduceOpKind::kProduct:
      return Combine<Tag>(out, a, b, count, [](C x, C y) { return Multiply(x, y); });
    case ReduceOpKind::kMin:
      // NaN propagates, as in torch.
      return Combine<Tag>(out, a, b, count, [](C x, C y) { return (y < x || y != y) ? y : x; });
    case ReduceOpKind::kMax:
      return Combine<Tag>(out, a, b, count, [](C x, C y) { return (y > x || y != y) ? y : x; });
    case ReduceOpKind::kBand:
    case ReduceOpKind::kBor:
    case ReduceOpKind::kBxor:
    case ReduceOpKind::kAvg:
    case ReduceOpKind::kPremulSum:
      break;
  }
  if constexpr (std::is_integral_v<C>) {
    switch (op) {
      case ReduceOpKind::kBand:
        return Combine<Tag>(out, a, b, count, [](C x, C y) { return static_cast<C>(x & y); });
      case ReduceOpKind::kBor:
        return Combine<Tag>(out, a, b, count, [](C x, C y) { return static_cast<C>(x | y); });
      case ReduceOpKind::kBxor:
        return Combine<Tag>(out, a, b, count, [](C x, C y) { return static_cast<C>(x ^ y); });
      default:
        break;
    }
  }
}

void CombineBool(void* out_raw, const void* a_raw, const void* b_raw, int64_t count,
                 ReduceOpKind op) {
  auto* out = static_cast<uint8_t*>(out_raw);
  const auto* a = static_cast<const uint8_t*>(a_raw);
  const auto* b = static_cast<const uint8_t*>(b_raw);
  switch (op) {
    case ReduceOpKind::kSum:
    case ReduceOpKind::kMax:
    case ReduceOpKind::kBor:
      for (int64_t i = 0; i < count; ++i) out[i] = (a[i] | b[i]) != 0;
      return;
    case ReduceOpKind::kProduct:
    case ReduceOpKind::kMin:
    case ReduceOpKind::kBand:
      for (int64_t i = 0; i < count; ++i) out[i] = (a[i] != 0) & (b[i] != 0);
      return;
    case ReduceOpKind::kBxor:
      for (int64_t i = 0; i < count; ++i) out[i] = (a[i] != 0) != (b[i] != 0);
      return;
    case ReduceOpKind::kAvg:
    case ReduceOpKind::kPremulSum:
      return;  // Rejected by ValidateReduceOp.
  }
}

template <typename Tag>
void Scale(void* data, int64_t count, double factor) {
  using Stored = StoredType<Tag>;
  using E = Element<Tag>;
  using C = typename E::Compute;
  auto* values = static_cast<Stored*>(data);
  const C f = static_cast<C>(factor);
  for (int64_t i = 0; i < count; ++i) values[i] = E::Store(E::Load(values[i]) * f);
}

}  // namespace

ReduceOpKind KernelOp(ReduceOpKind op) {
  switch (op) {
    case ReduceOpKind::kAvg:
    case ReduceOpKind::kPremulSum:
      return ReduceOpKind::kSum;
    case ReduceOpKind::kSum:
    case ReduceOpKind::kProduct:
    case ReduceOpKind::kMin:
    case ReduceOpKind::kMax:
    case ReduceOpKind::kBand:
    case ReduceOpKind::kBor:
    case ReduceOpKind::kBxor:
      return op;
  }
  return op;
}

void ReduceCombine(void* out, const void* a, const void* b, int64_t count, DType dtype,
                   ReduceOpKind op) {
  switch (dtype) {
    case DType::kBool:
      return CombineBool(out, a, b, count, KernelOp(op));
    case DType::kUInt8:
      return CombineArithmetic<uint8_t>(out, a, b, count, op);
    case DType::kInt8:
      return CombineArithmetic<int8_t>(out, a, b, count, op);
    case DType::kInt16:
      return CombineArithmetic<int16_t>(out, a, b, count, op);
    case DType::kInt32:
      return CombineArithmetic<int32_t>(out, a, b, count, op);
    case DType::kInt64:
      return CombineArithmetic<int64_t>(out, a, b, count, op);
    case DType::kFloat16:
      return CombineArithmetic<Float16Tag>(out, a, b, count, op);
    case DType::kBFloat16:
      return CombineArithmetic<BFloat16Tag>(out, a, b, count, op);
    case DType::kFloat32:
      return CombineArithmetic<float>(out, a, b, count, op);
    case DType::kFloat64:
      return CombineArithmetic<double>(out, a, b, count, op);
  }
}

void ReduceInto(void* acc, const void* in, int64_t count, DType dtype, ReduceOpKind op) {
  ReduceCombine(acc, acc, in, count, dtype, op);
}

void ScaleInPlace(void* data, int64_t count, DType dtype, double factor) {
  switch (dtype) {
    case DType::kFloat16:
      return Scale<Float16Tag>(data, count, factor);
    case DType::kBFloat16:
      return Scale<BFloat16Tag>(data, count, factor);
    case DType::kFloat32:
      return Scale<float>(data, count, factor);
    case DType::kFloat64:
      return Scale<double>(data, count, factor);
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      return;  // AVG and PREMUL_SUM are rejected for these by ValidateReduceOp.
  }
}

void PreScale(void* data, int64_t count, DType dtype, const ReduceOp& op) {
  if (op.kind == ReduceOpKind::kPremulSum) ScaleInPlace(data, count, dtype, op.scale);
}

void PostScale(void* data, int64_t count, DType dtype, const ReduceOp& op, int ranks) {
  if (op.kind == ReduceOpKind::kAvg) ScaleInPlace(data, count, dtype, 1.0 / ranks);
}

}  // namespace plexus::algorithms
