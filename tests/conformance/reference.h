// Inputs and locally computed references for the conformance suite. Inputs are small integers
// (or powers of two for PRODUCT) so that every dtype represents every partial result exactly:
// any reduction order then gives the same value, and references are exact.
#ifndef PLEXUS_TESTS_CONFORMANCE_REFERENCE_H_
#define PLEXUS_TESTS_CONFORMANCE_REFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/core/dtype.h"
#include "base/core/reduce_op.h"
#include "tests/testing/typed_buffer.h"

namespace plexus::conformance {

using Buffer = ::plexus::testing::TypedBuffer;

// Rank `rank`'s element `i` for a collective using `op` (seeded by `salt`).
double InputValue(DType dtype, ReduceOpKind op, int rank, int64_t i, int salt = 0);
Buffer MakeInput(DType dtype, ReduceOpKind op, int rank, int64_t count, int salt = 0);

// The reduction over ranks 0..world-1 of InputValue(..., i), with torch's semantics for `op`
// (integers wrap to the dtype's width; AVG and PREMUL_SUM(scale) in double).
double ReducedValue(DType dtype, const ReduceOp& op, int world, int64_t i, int salt = 0);

// Compares `got` with `expected`: exactly, or within the rounding AVG/PREMUL_SUM allow.
// Returns "" when equal, else a description of the first mismatches.
std::string Compare(const Buffer& got, const std::vector<double>& expected, const ReduceOp& op);

// FNV-1a of the bytes, for checking results are bit-identical across ranks.
uint64_t Fingerprint(const void* data, size_t bytes);

}  // namespace plexus::conformance

#endif  // PLEXUS_TESTS_CONFORMANCE_REFERENCE_H_
