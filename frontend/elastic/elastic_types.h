// The vocabulary of the elastic communicator (PCCL's, in plexus's types): what one all-reduce
// is asked to do, what it reports back, the attributes a peer can query, and the result codes
// errors are classified into for PCCL-shaped callers.
#ifndef PLEXUS_FRONTEND_ELASTIC_ELASTIC_TYPES_H_
#define PLEXUS_FRONTEND_ELASTIC_ELASTIC_TYPES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "algorithms/quantize_kernels.h"
#include "base/core/dtype.h"
#include "base/core/reduce_op.h"

namespace plexus::elastic {

// User tags must stay below this: a tag and its per-epoch instance number form the transport's
// operation id (see communicator.cc).
inline constexpr uint64_t kMaxTag = uint64_t{1} << 20;

using ::plexus::algorithms::QuantizationAlgorithm;
using ::plexus::algorithms::QuantizedType;

enum class DistributionHint : int { kNone = 0, kNormal = 1, kUniform = 2 };

// Quantized all-reduce (algorithms/quantize_kernels.h): floating-point data travels as uint8 or
// uint16 codes; results stay bit-identical across peers, within the documented error.
struct QuantizationOptions {
  QuantizationAlgorithm algorithm = QuantizationAlgorithm::kNone;
  QuantizedType quantized_dtype = QuantizedType::kUInt8;  // Ignored with kNone.
};

// One all-reduce: `count` elements of `dtype`, reduced with `op`, matched across peers by `tag`.
struct ReduceDescriptor {
  int64_t count = 0;
  DType dtype = DType::kFloat32;
  ReduceOpKind op = ReduceOpKind::kSum;
  uint64_t tag = 0;
  DistributionHint distribution_hint = DistributionHint::kNone;  // Advisory; not on the wire.
  QuantizationOptions quantization;
};

// What peers must agree on for one tag; DescribeReduce prints it for mismatch errors.
std::string DescribeReduce(const ReduceDescriptor& descriptor);

// OK when this peer can run `descriptor`; InvalidArgument naming what is wrong otherwise.
absl::Status ValidateReduce(const ReduceDescriptor& descriptor);

// One all-reduce with its buffers, for AllReduceMultipleWithRetry.
struct ReduceOpDescriptor {
  const void* send = nullptr;
  void* recv = nullptr;
  ReduceDescriptor descriptor;
};

struct ReduceInfo {
  int64_t local_world_size = 0;  // Peers in the group the (last) reduction ran over.
  int64_t tx_bytes = 0;
  int64_t rx_bytes = 0;
};

enum class Attribute : int {
  kGlobalWorldSize = 0,  // Accepted peers, every peer group.
  kLocalWorldSize = 1,   // Accepted peers of this peer's group.
  kNumDistinctPeerGroups = 2,
  kLargestPeerGroupWorldSize = 3,
};

// PCCL's result codes. Statuses from the communicator carry one as a payload where the cause is
// specific (master lost, too few peers, ...); ResultOf() falls back to the status code.
enum class Result : int {
  kSuccess = 0,
  kNotInitialized = 1,
  kInternalError = 2,
  kInvalidArgument = 3,
  kInvalidUsage = 4,
  kTooFewPeers = 5,
  kMasterConnectionFailed = 6,
  kRankConnectionFailed = 7,
  kRankConnectionLost = 8,
  kNoSharedStateAvailable = 9,
  kPendingAsyncOps = 10,
  kUpdateTopologyFailed = 11,
  kTopologyOptimizationFailed = 12,
};

absl::Status WithResult(absl::Status status, Result result);
// Unavailable or Aborted: the peers changed (or the op was cut short); running it again may work.
bool IsRetryableFailure(const absl::Status& status);
Result ResultOf(const absl::Status& status);

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_ELASTIC_TYPES_H_
