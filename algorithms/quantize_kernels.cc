#include "algorithms/quantize_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/base/internal/endian.h"
#include "absl/strings/str_cat.h"
#include "algorithms/half.h"
#include "algorithms/reduce_kernels.h"

namespace plexus::algorithms {
namespace {

// Element access in the compute type: float for the 16/32-bit floats, double for float64.
template <typename Storage, typename Compute>
struct Access {
  static Compute Load(const void* data, int64_t i);
  static void Store(void* data, int64_t i, Compute value);
};

template <>
float Access<float, float>::Load(const void* d, int64_t i) {
  return static_cast<const float*>(d)[i];
}
template <>
void Access<float, float>::Store(void* d, int64_t i, float v) {
  static_cast<float*>(d)[i] = v;
}
template <>
double Access<double, double>::Load(const void* d, int64_t i) {
  return static_cast<const double*>(d)[i];
}
template <>
void Access<double, double>::Store(void* d, int64_t i, double v) {
  static_cast<double*>(d)[i] = v;
}

struct HalfTag {};
struct BFloatTag {};
template <>
float Access<HalfTag, float>::Load(const void* d, int64_t i) {
  return HalfToFloat(static_cast<const uint16_t*>(d)[i]);
}
template <>
void Access<HalfTag, float>::Store(void* d, int64_t i, float v) {
  static_cast<uint16_t*>(d)[i] = FloatToHalf(v);
}
template <>
float Access<BFloatTag, float>::Load(const void* d, int64_t i) {
  return BFloat16ToFloat(static_cast<const uint16_t*>(d)[i]);
}
template <>
void Access<BFloatTag, float>::Store(void* d, int64_t i, float v) {
  static_cast<uint16_t*>(d)[i] = FloatToBFloat16(v);
}

template <typename Code>
void StoreCode(uint8_t* codes, int64_t i, uint32_t code) {
  const Code c = static_cast<Code>(code);
  std::memcpy(codes + i * sizeof(Code), &c, sizeof(Code));
}

template <typename Code>
uint32_t LoadCode(const uint8_t* codes, int64_t i) {
  Code c;
  std::memcpy(&c, codes + i * sizeof(Code), sizeof(Code));
  return c;
}

template <typename Storage, typename Compute, typename Code>
void QuantizeTyped(const void* in, int64_t count, QuantizationAlgorithm algorithm, uint8_t* out) {
  using A = Access<Storage, Compute>;
  const Compute levels = static_cast<Compute>((uint64_t{1} << (8 * sizeof(Code))) - 1);
  Compute lo = 0, hi = 0;
  bool any = false;
  for (int64_t i = 0; i < count; ++i) {
    const Compute x = A::Load(in, i);
    if (!std::isfinite(x)) continue;
    if (!any || x < lo) lo = x;
    if (!any || x > hi) hi = x;
    any = true;
  }
  double first, second;
  Compute scale, offset;  // code = round(x * scale + offset)
  if (algorithm == QuantizationAlgorithm::kMinMax) {
    first = lo;
    second = hi;
    const Compute range = hi - lo;
    scale = range > 0 ? levels / range : 0;
    offset = -lo * scale;
  } else {
    const Compute low = std::min<Compute>(lo, 0), high = std::max<Compute>(hi, 0);
    const Compute step = high > low ? (high - low) / levels : 1;
    const Compute zero = std::min(levels, std::max<Compute>(0, std::nearbyint(-low / step)));
    first = step;
    second = zero;
    scale = 1 / step;
    offset = zero;
  }
  absl::little_endian::Store64(out, absl::bit_cast<uint64_t>(first));
  absl::little_endian::Store64(out + 8, absl::bit_cast<uint64_t>(second));
  uint8_t* codes = out + kQuantizedHeaderBytes;
  for (int64_t i = 0; i < count; ++i) {
    Compute x = A::Load(in, i);
    if (std::isnan(x)) x = lo;
    const Compute code = std::nearbyint(x * scale + offset);
    StoreCode<Code>(codes, i, static_cast<uint32_t>(std::min(levels, std::max<Compute>(0, code))));
  }
}

// Calls f(value) for each decoded element.
template <typename Compute, typename Code, typename F>
void DecodeTyped(const uint8_t* in, int64_t count, QuantizationAlgorithm algorithm, F&& f) {
  const Compute levels = static_cast<Compute>((uint64_t{1} << (8 * sizeof(Code))) - 1);
  const double first = absl::bit_cast<double>(absl::little_endian::Load64(in));
  const double second = absl::bit_cast<double>(absl::little_endian::Load64(in + 8));
  Compute step, base;  // value = code * step + base
  if (algorithm == QuantizationAlgorithm::kMinMax) {
    step = (static_cast<Compute>(second) - static_cast<Compute>(first)) / levels;
    base = static_cast<Compute>(first);
  } else {
    step = static_cast<Compute>(first);
    base = -static_cast<Compute>(second) * step;
  }
  const uint8_t* codes = in + kQuantizedHeaderBytes;
  for (int64_t i = 0; i < count; ++i) {
    f(i, static_cast<Compute>(LoadCode<Code>(codes, i)) * step + base);
  }
}

template <typename Storage, typename Compute>
void DequantizeStorage(const uint8_t* in, int64_t count, const Quantization& q, void* out) {
  auto store = [out](int64_t i, Compute v) { Access<Storage, Compute>::Store(out, i, v); };
  if (q.type == QuantizedType::kUInt8) {
    DecodeTyped<Compute, uint8_t>(in, count, q.algorithm, store);
  } else {
    DecodeTyped<Compute, uint16_t>(in, count, q.algorithm, store);
  }
}

template <typename Storage, typename Compute>
void QuantizeStorage(const void* in, int64_t count, const Quantization& q, uint8_t* out) {
  if (q.type == QuantizedType::kUInt8) {
    QuantizeTyped<Storage, Compute, uint8_t>(in, count, q.algorithm, out);
  } else {
    QuantizeTyped<Storage, Compute, uint16_t>(in, count, q.algorithm, out);
  }
}

}  // namespace

absl::Status ValidateQuantization(DType dtype, const Quantization& q) {
  if (q.algorithm == QuantizationAlgorithm::kNone) return absl::OkStatus();
  if (q.algorithm != QuantizationAlgorithm::kMinMax &&
      q.algorithm != QuantizationAlgorithm::kZeroPointScale) {
    return absl::InvalidArgumentError("unknown quantization algorithm");
  }
  if (q.type != QuantizedType::kUInt8 && q.type != QuantizedType::kUInt16) {
    return absl::InvalidArgumentError("quantization codes are uint8 or uint16");
  }
  if (!IsFloatingPoint(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantization applies to floating-point data, not ", DTypeName(dtype)));
  }
  return absl::OkStatus();
}

size_t QuantizedBytes(int64_t count, QuantizedType type) {
  return kQuantizedHeaderBytes + static_cast<size_t>(count) * static_cast<size_t>(type);
}

void Quantize(const void* in, int64_t count, DType dtype, const Quantization& q, uint8_t* out) {
  switch (dtype) {
    case DType::kFloat32:
      return QuantizeStorage<float, float>(in, count, q, out);
    case DType::kFloat64:
      return QuantizeStorage<double, double>(in, count, q, out);
    case DType::kFloat16:
      return QuantizeStorage<HalfTag, float>(in, count, q, out);
    case DType::kBFloat16:
      return QuantizeStorage<BFloatTag, float>(in, count, q, out);
    default:
      return;  // Refused by ValidateQuantization.
  }
}

void Dequantize(const uint8_t* in, int64_t count, DType dtype, const Quantization& q, void* out) {
  switch (dtype) {
    case DType::kFloat32:
      return DequantizeStorage<float, float>(in, count, q, out);
    case DType::kFloat64:
      return DequantizeStorage<double, double>(in, count, q, out);
    case DType::kFloat16:
      return DequantizeStorage<HalfTag, float>(in, count, q, out);
    case DType::kBFloat16:
      return DequantizeStorage<BFloatTag, float>(in, count, q, out);
    default:
      return;
  }
}

void DequantizeReduceInto(const uint8_t* in, int64_t count, DType dtype, const Quantization& q,
                          ReduceOpKind op, void* acc, void* scratch) {
  Dequantize(in, count, dtype, q, scratch);
  ReduceInto(acc, scratch, count, dtype, op);
}

}  // namespace plexus::algorithms
