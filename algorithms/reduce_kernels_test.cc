// Every (op, dtype) kernel against references computed independently: wide integer and double
// arithmetic, and the compiler's own _Float16 conversions for float16.
#include "algorithms/reduce_kernels.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "algorithms/half.h"
#include "gtest/gtest.h"

namespace plexus::algorithms {
namespace {

TEST(HalfTest, Float16MatchesCompilerConversionsForEveryValue) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    _Float16 reference;
    const uint16_t half = static_cast<uint16_t>(bits);
    std::memcpy(&reference, &half, 2);
    const float expected = static_cast<float>(reference);
    const float actual = HalfToFloat(half);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(actual)) << bits;
      continue;
    }
    ASSERT_EQ(FloatToBits(actual), FloatToBits(expected)) << bits;
    ASSERT_EQ(FloatToHalf(expected), half) << bits;  // Exact values round-trip.
  }
}

TEST(HalfTest, FloatToFloat16RoundsLikeTheCompiler) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 2000000; ++i) {
    const float value = BitsToFloat(any(rng));
    if (std::isnan(value)) continue;
    const _Float16 reference = static_cast<_Float16>(value);
    uint16_t expected;
    std::memcpy(&expected, &reference, 2);
    ASSERT_EQ(FloatToHalf(value), expected) << value;
  }
}

// Nearest bfloat16 by exhaustive comparison of the two neighbours, ties to even.
uint16_t ReferenceBFloat16(float value) {
  const uint32_t bits = FloatToBits(value);
  const uint16_t down = static_cast<uint16_t>(bits >> 16);
  const uint16_t up = static_cast<uint16_t>(down + 1);
  const double d_down = std::fabs(double{BFloat16ToFloat(down)} - value);
  const double d_up = std::fabs(double{BFloat16ToFloat(up)} - value);
  if (d_down < d_up) return down;
  if (d_up < d_down) return up;
  return (down & 1) == 0 ? down : up;
}

TEST(HalfTest, BFloat16RoundsToNearestEven) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> values(-1e6f, 1e6f);
  for (int i = 0; i < 1000000; ++i) {
    const float value = values(rng);
    ASSERT_EQ(FloatToBFloat16(value), ReferenceBFloat16(value)) << value;
  }
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
}

template <typename T>
std::vector<T> RandomValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<T> out(n);
  for (auto& v : out) {
    if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(std::uniform_real_distribution<double>(-100, 100)(rng));
    } else {
      v = static_cast<T>(rng());
    }
  }
  return out;
}

// Reference for integers: 64-bit arithmetic truncated to T (two's complement wrap).
template <typename T>
T IntReference(ReduceOpKind op, T a, T b) {
  const uint64_t x = static_cast<uint64_t>(static_cast<int64_t>(a));
  const uint64_t y = static_cast<uint64_t>(static_cast<int64_t>(b));
  switch (op) {
    case ReduceOpKind::kSum:
      return static_cast<T>(x + y);
    case ReduceOpKind::kProduct:
      return static_cast<T>(x * y);
    case ReduceOpKind::kMin:
      return std::min(a, b);
    case ReduceOpKind::kMax:
      return std::max(a, b);
    case ReduceOpKind::kBand:
      return static_cast<T>(x & y);
    case ReduceOpKind::kBor:
      return static_cast<T>(x | y);
    case ReduceOpKind::kBxor:
      return static_cast<T>(x ^ y);
    default:
      return 0;
  }
}

template <typename T>
void CheckIntegers(DType dtype) {
  const size_t n = 1003;
  for (ReduceOpKind op :
       {ReduceOpKind::kSum, ReduceOpKind::kProduct, ReduceOpKind::kMin, ReduceOpKind::kMax,
        ReduceOpKind::kBand, ReduceOpKind::kBor, ReduceOpKind::kBxor}) {
    std::vector<T> acc = RandomValues<T>(n, 1);
    const std::vector<T> in = RandomValues<T>(n, 2);
    std::vector<T> expected(n);
    for (size_t i = 0; i < n; ++i) expected[i] = IntReference(op, acc[i], in[i]);
    ReduceInto(acc.data(), in.data(), n, dtype, op);
    ASSERT_EQ(acc, expected) << DTypeName(dtype) << " " << ReduceOpName(op);
  }
}

TEST(ReduceKernelsTest, Integers) {
  CheckIntegers<uint8_t>(DType::kUInt8);
  CheckIntegers<int8_t>(DType::kInt8);
  CheckIntegers<int16_t>(DType::kInt16);
  CheckIntegers<int32_t>(DType::kInt32);
  CheckIntegers<int64_t>(DType::kInt64);
}

TEST(ReduceKernelsTest, Bool) {
  const uint8_t a[] = {0, 0, 1, 1};
  const uint8_t b[] = {0, 1, 0, 1};
  struct Case {
    ReduceOpKind op;
    uint8_t expected[4];
  };
  const Case cases[] = {
      {ReduceOpKind::kSum, {0, 1, 1, 1}},  {ReduceOpKind::kMax, {0, 1, 1, 1}},
      {ReduceOpKind::kBor, {0, 1, 1, 1}},  {ReduceOpKind::kProduct, {0, 0, 0, 1}},
      {ReduceOpKind::kMin, {0, 0, 0, 1}},  {ReduceOpKind::kBand, {0, 0, 0, 1}},
      {ReduceOpKind::kBxor, {0, 1, 1, 0}},
  };
  for (const Case& c : cases) {
    uint8_t acc[4];
    std::memcpy(acc, a, 4);
    ReduceInto(acc, b, 4, DType::kBool, c.op);
    EXPECT_EQ(0, std::memcmp(acc, c.expected, 4)) << ReduceOpName(c.op);
  }
}

template <typename T>
void CheckFloats(DType dtype) {
  const size_t n = 1001;
  for (ReduceOpKind op : {ReduceOpKind::kSum, ReduceOpKind::kProduct, ReduceOpKind::kMin,
                          ReduceOpKind::kMax, ReduceOpKind::kAvg, ReduceOpKind::kPremulSum}) {
    std::vector<T> acc = RandomValues<T>(n, 3);
    const std::vector<T> in = RandomValues<T>(n, 4);
    std::vector<T> expected(n);
    for (size_t i = 0; i < n; ++i) {
      switch (KernelOp(op)) {
        case ReduceOpKind::kSum:
          expected[i] = acc[i] + in[i];
          break;
        case ReduceOpKind::kProduct:
          expected[i] = acc[i] * in[i];
          break;
        case ReduceOpKind::kMin:
          expected[i] = std::min(acc[i], in[i]);
          break;
        default:
          expected[i] = std::max(acc[i], in[i]);
          break;
      }
    }
    ReduceInto(acc.data(), in.data(), n, dtype, op);
    ASSERT_EQ(acc, expected) << DTypeName(dtype) << " " << ReduceOpName(op);
  }
  std::vector<T> values = {1, -2, 4};
  ScaleInPlace(values.data(), 3, dtype, 0.5);
  EXPECT_EQ(values, (std::vector<T>{0.5, -1, 2}));
}

TEST(ReduceKernelsTest, Floats) {
  CheckFloats<float>(DType::kFloat32);
  CheckFloats<double>(DType::kFloat64);
}

TEST(ReduceKernelsTest, MinMaxPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float acc[] = {1, nan};
  const float in[] = {nan, 1};
  ReduceInto(acc, in, 2, DType::kFloat32, ReduceOpKind::kMin);
  EXPECT_TRUE(std::isnan(acc[0]));
  EXPECT_TRUE(std::isnan(acc[1]));
}

TEST(ReduceKernelsTest, HalfTypesReduceThroughFloat) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-50, 50);
  for (ReduceOpKind op :
       {ReduceOpKind::kSum, ReduceOpKind::kProduct, ReduceOpKind::kMin, ReduceOpKind::kMax}) {
    const size_t n = 777;
    std::vector<uint16_t> half_acc(n), half_in(n), bf_acc(n), bf_in(n);
    std::vector<uint16_t> half_expected(n), bf_expected(n);
    for (size_t i = 0; i < n; ++i) {
      const _Float16 a = static_cast<_Float16>(dist(rng));
      const _Float16 b = static_cast<_Float16>(dist(rng));
      std::memcpy(&half_acc[i], &a, 2);
      std::memcpy(&half_in[i], &b, 2);
      const float fa = static_cast<float>(a), fb = static_cast<float>(b);
      const float r = op == ReduceOpKind::kSum       ? fa + fb
                      : op == ReduceOpKind::kProduct ? fa * fb
                      : op == ReduceOpKind::kMin     ? std::min(fa, fb)
                                                     : std::max(fa, fb);
      const _Float16 rh = static_cast<_Float16>(r);
      std::memcpy(&half_expected[i], &rh, 2);
      bf_acc[i] = FloatToBFloat16(dist(rng));
      bf_in[i] = FloatToBFloat16(dist(rng));
      const float ba = BFloat16ToFloat(bf_acc[i]), bb = BFloat16ToFloat(bf_in[i]);
      const float br = op == ReduceOpKind::kSum       ? ba + bb
                       : op == ReduceOpKind::kProduct ? ba * bb
                       : op == ReduceOpKind::kMin     ? std::min(ba, bb)
                                                      : std::max(ba, bb);
      bf_expected[i] = ReferenceBFloat16(br);
    }
    ReduceInto(half_acc.data(), half_in.data(), n, DType::kFloat16, op);
    ReduceInto(bf_acc.data(), bf_in.data(), n, DType::kBFloat16, op);
    ASSERT_EQ(half_acc, half_expected) << ReduceOpName(op);
    ASSERT_EQ(bf_acc, bf_expected) << ReduceOpName(op);
  }
}

}  // namespace
}  // namespace plexus::algorithms
