// Quantized elastic all-reduce on 3 forked peers: MIN_MAX and ZERO_POINT_SCALE to uint8 and
// uint16, float32 / bfloat16 / float64, SUM / AVG / MAX: every result within the documented
// error of the exact reduction, bit-identical on every peer, and the wire bytes cut by the
// element-to-code size ratio.
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/elastic/communicator.h"
#include "frontend/elastic/shared_state.h"
#include "gtest/gtest.h"
#include "tests/elastic/elastic_peers.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/typed_buffer.h"

namespace plexus::elastic {
namespace {

constexpr int kWorld = 3;
constexpr int64_t kCount = 100003;  // Several segments per block.

// Peer p's inputs lie in [-3, 3 + 2 p] ⊂ [-3, 7].
double Input(int peer, int64_t i) {
  return 3 * std::sin(0.37 * i + peer) + peer * (1 + std::cos(0.11 * i));
}
constexpr double kLow = -3, kHigh = 7;

// Each reduce-scatter hop k (k = 1 .. n - 1) encodes a partial result of k inputs, the owner one of
// n: one quantization error each, at most the encoded range over the code levels
// (quantize_kernels.h; ZERO_POINT_SCALE's full step bounds MIN_MAX's half step too).
double Bound(QuantizedType type, DType dtype, ReduceOpKind op) {
  const double levels = type == QuantizedType::kUInt8 ? 255 : 65535;
  const double width = std::max(kHigh, 0.0) - std::min(kLow, 0.0);
  double bound = 0;
  for (int k = 1; k <= kWorld; ++k) bound += (op == ReduceOpKind::kMax ? 1 : k) * width / levels;
  if (dtype == DType::kBFloat16) bound += (kWorld + 1) * kWorld * kHigh / 256;  // Storage rounding.
  // AVG: the hops carry sums (same errors), the owner divides before its encoding.
  return bound;
}

TEST(QuantizedAllReduceTest, WithinTheErrorBoundBitIdenticalAndSmallerOnTheWire) {
  auto master = StartMaster();
  ASSERT_NE(master, nullptr);
  const std::string dir = testing::TempPath("digests");
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  const int port = master->port();
  absl::Status status = RunJoinedPeers(
      port, kWorld,
      [&](int peer, std::unique_ptr<Communicator>& comm) {
        std::ofstream digest(absl::StrCat(dir, "/", peer));
        uint64_t tag = 0;
        for (QuantizationAlgorithm algorithm :
             {QuantizationAlgorithm::kMinMax, QuantizationAlgorithm::kZeroPointScale}) {
          for (QuantizedType type : {QuantizedType::kUInt8, QuantizedType::kUInt16}) {
            for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat64}) {
              for (ReduceOpKind op : {ReduceOpKind::kSum, ReduceOpKind::kAvg, ReduceOpKind::kMax}) {
                testing::TypedBuffer data(dtype, kCount);
                for (int64_t i = 0; i < kCount; ++i) data.Set(i, Input(peer, i));
                ReduceDescriptor d;
                d.count = kCount;
                d.dtype = dtype;
                d.op = op;
                d.tag = tag++;
                d.quantization = {algorithm, type};
                auto info = comm->AllReduce(data.data(), data.data(), d);
                if (!info.ok()) return Fail(peer, DescribeReduce(d), info.status());
                // A ring moves 2 (n - 1) / n of the buffer; quantized, of its codes (plus one
                // 16-byte header per segment): element size / code size fewer bytes.
                const double ring_codes =
                    2.0 * (kWorld - 1) / kWorld * kCount * static_cast<int>(type);
                const double ring_plain = 2.0 * (kWorld - 1) / kWorld * kCount * DTypeSize(dtype);
                if (info->tx_bytes < ring_codes || info->tx_bytes > ring_codes * 1.01) {
                  return Fail(peer, absl::StrCat(DescribeReduce(d), ": sent ", info->tx_bytes,
                                                 " bytes; codes of a ring are ", ring_codes,
                                                 ", unquantized ", ring_plain));
                }
                const double bound = Bound(type, dtype, op);
                for (int64_t i = 0; i < kCount; ++i) {
                  double want = op == ReduceOpKind::kMax ? Input(0, i) : 0;
                  for (int p = 0; p < kWorld; ++p) {
                    want =
                        op == ReduceOpKind::kMax ? std::max(want, Input(p, i)) : want + Input(p, i);
                  }
                  if (op == ReduceOpKind::kAvg) want /= kWorld;
                  if (std::fabs(data.Get(i) - want) > bound) {
                    return Fail(peer,
                                absl::StrCat(DescribeReduce(d), " element ", i, ": ", data.Get(i),
                                             " vs exact ", want, ", bound ", bound));
                  }
                }
                digest << ContentHash(data.data(), data.nbytes()) << "\n";
              }
            }
          }
        }
        return 0;
      },
      absl::Seconds(240));
  ASSERT_TRUE(status.ok()) << status;
  ExpectSameOnEveryPeer(dir, kWorld);
}

TEST(QuantizedAllReduceTest, IntegerDataOrUnknownCodesAreRefused) {
  ReduceDescriptor d;
  d.count = 4;
  d.dtype = DType::kInt32;
  d.quantization = {QuantizationAlgorithm::kMinMax, QuantizedType::kUInt8};
  const absl::Status status = ValidateReduce(d);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("floating-point"), std::string::npos) << status;
  d.dtype = DType::kFloat32;
  d.quantization.quantized_dtype = static_cast<QuantizedType>(4);
  EXPECT_FALSE(ValidateReduce(d).ok());
}

}  // namespace
}  // namespace plexus::elastic
