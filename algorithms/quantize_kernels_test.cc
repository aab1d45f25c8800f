#include "algorithms/quantize_kernels.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "algorithms/half.h"
#include "gtest/gtest.h"

namespace plexus::algorithms {
namespace {

constexpr Quantization kMinMax8{QuantizationAlgorithm::kMinMax, QuantizedType::kUInt8};
constexpr Quantization kMinMax16{QuantizationAlgorithm::kMinMax, QuantizedType::kUInt16};
constexpr Quantization kZps8{QuantizationAlgorithm::kZeroPointScale, QuantizedType::kUInt8};
constexpr Quantization kZps16{QuantizationAlgorithm::kZeroPointScale, QuantizedType::kUInt16};

std::vector<double> RoundTrip(const std::vector<float>& in, const Quantization& q) {
  std::vector<uint8_t> codes(QuantizedBytes(static_cast<int64_t>(in.size()), q.type));
  Quantize(in.data(), static_cast<int64_t>(in.size()), DType::kFloat32, q, codes.data());
  std::vector<float> out(in.size());
  Dequantize(codes.data(), static_cast<int64_t>(in.size()), DType::kFloat32, q, out.data());
  return std::vector<double>(out.begin(), out.end());
}

TEST(QuantizeKernelsTest, ErrorStaysWithinTheDocumentedBound) {
  std::mt19937 random(3);
  for (const Quantization& q : {kMinMax8, kMinMax16, kZps8, kZps16}) {
    for (auto [lo, hi] : {std::pair{-3.0f, 5.0f}, std::pair{2.0f, 9.0f}, std::pair{-7.0f, -1.0f}}) {
      std::uniform_real_distribution<float> dist(lo, hi);
      std::vector<float> in(4099);
      for (float& x : in) x = dist(random);
      const float mn = *std::min_element(in.begin(), in.end());
      const float mx = *std::max_element(in.begin(), in.end());
      const double levels = q.type == QuantizedType::kUInt8 ? 255 : 65535;
      const double bound = q.algorithm == QuantizationAlgorithm::kMinMax
                               ? (mx - mn) / (2 * levels)
                               : (std::max(mx, 0.0f) - std::min(mn, 0.0f)) / levels;
      const std::vector<double> out = RoundTrip(in, q);
      for (size_t i = 0; i < in.size(); ++i) {
        ASSERT_LE(std::fabs(out[i] - in[i]), bound * 1.001 + 1e-6)
            << "algorithm " << static_cast<int>(q.algorithm) << " bytes "
            << static_cast<int>(q.type) << " at " << i;
      }
    }
  }
}

TEST(QuantizeKernelsTest, ExtremesAndZeroAreExactWhereTheAlgorithmPromises) {
  const std::vector<float> in = {-2.0f, 0.0f, 0.3f, 6.0f};
  const std::vector<double> minmax = RoundTrip(in, kMinMax8);
  EXPECT_EQ(minmax.front(), -2.0);
  EXPECT_EQ(minmax.back(), 6.0);
  EXPECT_EQ(RoundTrip(in, kZps8)[1], 0.0);
  EXPECT_EQ(RoundTrip({4.0f, 4.0f, 4.0f}, kMinMax8), (std::vector<double>{4, 4, 4}));
}

TEST(QuantizeKernelsTest, NonFiniteInputsGiveBoundedCodesNotGarbage) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<double> out = RoundTrip({1.0f, std::nanf(""), inf, -inf, 3.0f}, kMinMax8);
  EXPECT_EQ(out[1], 1.0);
  EXPECT_EQ(out[2], 3.0);
  EXPECT_EQ(out[3], 1.0);
}

TEST(QuantizeKernelsTest, HalfTypesAndDoubleRoundTrip) {
  std::vector<uint16_t> bf(300), half(300);
  std::vector<double> dbl(300);
  for (int i = 0; i < 300; ++i) {
    bf[i] = FloatToBFloat16(i * 0.1f - 10);
    half[i] = FloatToHalf(i * 0.1f - 10);
    dbl[i] = i * 0.1 - 10;
  }
  std::vector<uint8_t> codes(QuantizedBytes(300, QuantizedType::kUInt16));
  std::vector<uint16_t> back(300);
  Quantize(bf.data(), 300, DType::kBFloat16, kMinMax16, codes.data());
  Dequantize(codes.data(), 300, DType::kBFloat16, kMinMax16, back.data());
  for (int i = 0; i < 300; ++i) {
    EXPECT_NEAR(BFloat16ToFloat(back[i]), BFloat16ToFloat(bf[i]), 0.1) << i;
  }
  Quantize(half.data(), 300, DType::kFloat16, kZps16, codes.data());
  Dequantize(codes.data(), 300, DType::kFloat16, kZps16, back.data());
  for (int i = 0; i < 300; ++i) EXPECT_NEAR(HalfToFloat(back[i]), HalfToFloat(half[i]), 0.01) << i;
  std::vector<double> dback(300);
  Quantize(dbl.data(), 300, DType::kFloat64, kMinMax16, codes.data());
  Dequantize(codes.data(), 300, DType::kFloat64, kMinMax16, dback.data());
  for (int i = 0; i < 300; ++i) EXPECT_NEAR(dback[i], dbl[i], 29.9 / (2 * 65535) * 1.001) << i;
}

TEST(QuantizeKernelsTest, OnlyFloatingPointDataIsQuantized) {
  EXPECT_FALSE(ValidateQuantization(DType::kInt32, kMinMax8).ok());
  EXPECT_TRUE(ValidateQuantization(DType::kInt32, Quantization{}).ok());
  EXPECT_TRUE(ValidateQuantization(DType::kBFloat16, kZps16).ok());
  EXPECT_EQ(QuantizedBytes(10, QuantizedType::kUInt16), 16u + 20u);
}

}  // namespace
}  // namespace plexus::algorithms
