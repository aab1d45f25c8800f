// Quantization of floating-point data to uint8 / uint16 for the wire (the elastic
// communicator's quantized all-reduce, PCCL's MIN_MAX and ZERO_POINT_SCALE).
//
// A quantized run of `count` elements is a 16-byte header (two little-endian float64) and the
// `count` codes. With L = 2^bits - 1, over the run's finite min lo and max hi:
//  - MIN_MAX: header (lo, hi); code = round((x - lo) / (hi - lo) * L); value = lo + code * (hi -
//  lo) / L.
//    Error per element at most (hi - lo) / (2 L), plus the source type's rounding.
//  - ZERO_POINT_SCALE: the range is widened to include 0 (lo' = min(lo, 0), hi' = max(hi, 0)),
//    scale = (hi' - lo') / L, zero point z = round(-lo' / scale); header (scale, z);
//    code = clamp(round(x / scale) + z, 0, L); value = (code - z) * scale. 0 is exact; error per
//    element at most scale (half a step, plus up to half a step from rounding z).
// Non-finite inputs have no meaningful code: NaN becomes lo, +-inf the nearest end. Every reader
// of the same bytes decodes the same values, bit for bit.
#ifndef PLEXUS_ALGORITHMS_QUANTIZE_KERNELS_H_
#define PLEXUS_ALGORITHMS_QUANTIZE_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "base/core/dtype.h"
#include "base/core/reduce_op.h"

namespace plexus::algorithms {

enum class QuantizationAlgorithm : int { kNone = 0, kMinMax = 1, kZeroPointScale = 2 };
// The code type; the value is its size in bytes.
enum class QuantizedType : int { kUInt8 = 1, kUInt16 = 2 };

struct Quantization {
  QuantizationAlgorithm algorithm = QuantizationAlgorithm::kNone;
  QuantizedType type = QuantizedType::kUInt8;
};

inline constexpr size_t kQuantizedHeaderBytes = 16;

// OK when `dtype` data can be quantized with `q` (a floating-point dtype, an algorithm).
absl::Status ValidateQuantization(DType dtype, const Quantization& q);

// Bytes of a quantized run of `count` elements.
size_t QuantizedBytes(int64_t count, QuantizedType type);

// Encodes `count` elements of `dtype` at `in` into QuantizedBytes(count) bytes at `out`.
void Quantize(const void* in, int64_t count, DType dtype, const Quantization& q, uint8_t* out);

// Decodes a run into `out` (count elements of dtype).
void Dequantize(const uint8_t* in, int64_t count, DType dtype, const Quantization& q, void* out);

// acc[i] = acc[i] (op) decoded[i]; `scratch` holds count elements of dtype.
void DequantizeReduceInto(const uint8_t* in, int64_t count, DType dtype, const Quantization& q,
                          ReduceOpKind op, void* acc, void* scratch);

}  // namespace plexus::algorithms

#endif  // PLEXUS_ALGORITHMS_QUANTIZE_KERNELS_H_
