#include "frontend/elastic/elastic_types.h"

#include <optional>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace plexus::elastic {

using algorithms::Quantization;
using algorithms::ValidateQuantization;

namespace {

constexpr char kResultPayload[] = "plexus.elastic/result";

const char* QuantizationName(QuantizationAlgorithm algorithm) {
  switch (algorithm) {
    case QuantizationAlgorithm::kNone:
      return "NONE";
    case QuantizationAlgorithm::kMinMax:
      return "MIN_MAX";
    case QuantizationAlgorithm::kZeroPointScale:
      return "ZERO_POINT_SCALE";
  }
  return "?";
}

}  // namespace

std::string DescribeReduce(const ReduceDescriptor& d) {
  std::string text =
      absl::StrCat(ReduceOpName(d.op), " of ", d.count, " ", DTypeName(d.dtype), " (tag ", d.tag);
  if (d.quantization.algorithm != QuantizationAlgorithm::kNone) {
    absl::StrAppend(&text, ", quantized ", QuantizationName(d.quantization.algorithm), " to ",
                    d.quantization.quantized_dtype == QuantizedType::kUInt16 ? "uint16" : "uint8");
  }
  return absl::StrCat(text, ")");
}

absl::Status ValidateReduce(const ReduceDescriptor& d) {
  const std::string what = absl::StrCat("all_reduce ", DescribeReduce(d));
  if (d.count < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": negative count"));
  if (d.tag >= kMaxTag) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": tags must be below ", kMaxTag, " (2^20)"));
  }
  if (d.dtype == DType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": bool is not an elastic data type"));
  }
  switch (d.op) {
    case ReduceOpKind::kSum:
    case ReduceOpKind::kProduct:
    case ReduceOpKind::kMin:
    case ReduceOpKind::kMax:
    case ReduceOpKind::kAvg:
      break;
    case ReduceOpKind::kBand:
    case ReduceOpKind::kBor:
    case ReduceOpKind::kBxor:
    case ReduceOpKind::kPremulSum:
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": the elastic communicator reduces with SUM, AVG, PROD, MIN, MAX"));
  }
  if (absl::Status q = ValidateQuantization(
          d.dtype, Quantization{d.quantization.algorithm, d.quantization.quantized_dtype});
      !q.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", q.message()));
  }
  return ValidateReduceOp(ReduceOp(d.op), d.dtype);
}

bool IsRetryableFailure(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kAborted;
}

absl::Status WithResult(absl::Status status, Result result) {
  if (!status.ok())
    status.SetPayload(kResultPayload, absl::Cord(absl::StrCat(static_cast<int>(result))));
  return status;
}

Result ResultOf(const absl::Status& status) {
  if (status.ok()) return Result::kSuccess;
  if (auto payload = status.GetPayload(kResultPayload)) {
    int value = 0;
    if (absl::SimpleAtoi(std::string(*payload), &value) && value >= 0 &&
        value <= static_cast<int>(Result::kTopologyOptimizationFailed)) {
      return static_cast<Result>(value);
    }
  }
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kUnimplemented:
      return Result::kInvalidArgument;
    case absl::StatusCode::kFailedPrecondition:
      return Result::kInvalidUsage;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
      return Result::kRankConnectionLost;
    default:
      return Result::kInternalError;
  }
}

}  // namespace plexus::elastic
