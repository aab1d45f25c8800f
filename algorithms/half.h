// float16 (IEEE binary16) and bfloat16 conversions. Reductions on these types run in float:
// each element is widened, combined, and rounded back to nearest-even once.
#ifndef PLEXUS_ALGORITHMS_HALF_H_
#define PLEXUS_ALGORITHMS_HALF_H_

#include <cstdint>
#include <cstring>

namespace plexus::algorithms {

inline float BitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline uint32_t FloatToBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float BFloat16ToFloat(uint16_t bits) { return BitsToFloat(uint32_t{bits} << 16); }

inline uint16_t FloatToBFloat16(float value) {
  uint32_t bits = FloatToBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);  // Round to nearest even.
  return static_cast<uint16_t>(bits >> 16);
}

inline float HalfToFloat(uint16_t half) {
  const uint32_t sign = uint32_t{half & 0x8000u} << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1f) return BitsToFloat(sign | 0x7f800000u | (mantissa << 13));  // Inf/NaN
  if (exponent != 0) return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa x 2^-24.
  const float magnitude = static_cast<float>(mantissa) * BitsToFloat(0x33800000u);
  return sign ? -magnitude : magnitude;
}

inline uint16_t FloatToHalf(float value) {
  const uint32_t bits = FloatToBits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs_bits >= 0x477ff000u) return sign | 0x7c00u;  // Overflows to infinity after rounding.
  if (abs_bits < 0x38800000u) {
    // Subnormal or zero in half precision: scale so the result's units are 2^-24, round.
    const float scaled = BitsToFloat(abs_bits) * BitsToFloat(0x4b800000u);  // x 2^24
    // Round half to even via the float's own rounding when adding 2^23.
    const float rounded = (scaled + 8388608.0f) - 8388608.0f;
    return sign | static_cast<uint16_t>(rounded);
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  uint32_t half_bits = abs_bits - 0x38000000u;
  half_bits += 0xfffu + ((half_bits >> 13) & 1u);
  return sign | static_cast<uint16_t>(half_bits >> 13);
}

}  // namespace plexus::algorithms

#endif  // PLEXUS_ALGORITHMS_HALF_H_
