// How plexus element types and reductions map onto NCCL's, decided before anything launches.
//
// NCCL reduces int8, uint8, int32, int64, float16, bfloat16, float32 and float64 with SUM,
// PRODUCT, MIN, MAX and AVG, and PREMUL_SUM through a per-call operator. plexus's bool is
// reduced as uint8 (SUM, MAX and BOR are logical OR = max; PRODUCT, MIN and BAND logical AND =
// min). Everything else (int16 reductions, bitwise ops on integers, BXOR on bool) is rejected
// with InvalidArgument naming the op and dtype. Moving data never depends on the type: any
// dtype is carried as bytes where NCCL has no matching type.
#ifndef PLEXUS_BACKENDS_NCCL_NCCL_TYPES_H_
#define PLEXUS_BACKENDS_NCCL_NCCL_TYPES_H_

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/core/dtype.h"
#include "base/core/reduce_op.h"

namespace plexus::nccl {

// A buffer as NCCL counts it: `count` elements of `type`.
struct NcclExtent {
  ncclDataType_t type;
  size_t count;
};

// For data movement: the native type when NCCL has one, else bytes.
NcclExtent MovementExtent(DType dtype, int64_t elements);

// A reduction as NCCL runs it. `premul` is set for PREMUL_SUM, whose operator must be created on
// the communicator (ncclRedOpCreatePreMulSum) with `premul_scalar` (the scale in the dtype's
// own encoding) and destroyed after the launch.
struct NcclReduction {
  ncclDataType_t type;
  ncclRedOp_t op = ncclSum;
  bool premul = false;
  alignas(8) unsigned char premul_scalar[8] = {};
};

// InvalidArgument "<op_name>: nccl cannot reduce <dtype> with <OP>: ..." when NCCL cannot.
absl::StatusOr<NcclReduction> ReductionFor(absl::string_view op_name, const ReduceOp& op,
                                           DType dtype);

// NCCL before 2.29.7 leaves the last elements of a one-rank PREMUL_SUM unwritten when the count
// does not split evenly over its kernel's blocks (NVIDIA/nccl#1950; AVG on floating point runs
// as a PREMUL_SUM there). On a one-rank communicator such a reduction is issued in pieces that
// kernel covers whole.
constexpr int kFirstNcclWithWholeOneRankReduce = 22907;
bool NeedsOneRankPieces(const NcclReduction& reduction, int ranks, int nccl_version);

// A range of elements: [offset, offset + count).
struct NcclPiece {
  size_t offset;
  size_t count;
};
// `count` elements of `element_size` bytes in pieces each of which the affected kernel covers
// whole: one piece of at most 16 KiB (one block), or a multiple of 32 elements of at least
// 512 KiB (32 blocks, each an equal share) and a tail under 32 elements, or pieces of 16 KiB.
std::vector<NcclPiece> OneRankPieces(size_t count, size_t element_size);

}  // namespace plexus::nccl

#endif  // PLEXUS_BACKENDS_NCCL_NCCL_TYPES_H_
