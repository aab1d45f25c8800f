// Element-wise reduction kernels for every (op, dtype) pair of DESIGN.md. The ops a kernel
// executes are the primitive ones (SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR); AVG and PREMUL_SUM
// are SUM plus the scaling steps below, which the collectives apply before and after.
// Callers validate (op, dtype) first with ValidateReduceOp.
#ifndef PLEXUS_ALGORITHMS_REDUCE_KERNELS_H_
#define PLEXUS_ALGORITHMS_REDUCE_KERNELS_H_

#include <cstdint>

#include "base/core/dtype.h"
#include "base/core/reduce_op.h"

namespace plexus::algorithms {

// The primitive op a reduction runs element-wise: AVG and PREMUL_SUM run SUM.
ReduceOpKind KernelOp(ReduceOpKind op);

// acc[i] = acc[i] (op) in[i] for i in [0, count). `op` must be valid for `dtype`. acc and in
// may not overlap. On bool, SUM/MAX/BOR are OR and PRODUCT/MIN/BAND are AND, BXOR is XOR.
void ReduceInto(void* acc, const void* in, int64_t count, DType dtype, ReduceOpKind op);

// out[i] = a[i] (op) b[i]: the three-operand form (out may alias a or b).
void ReduceCombine(void* out, const void* a, const void* b, int64_t count, DType dtype,
                   ReduceOpKind op);

// data[i] *= factor, for floating-point dtypes (PREMUL_SUM's pre-step, AVG's 1/n post-step).
void ScaleInPlace(void* data, int64_t count, DType dtype, double factor);

// The steps around a SUM that make it `op`: PREMUL_SUM scales each input by op.scale before,
// AVG divides the result by the number of ranks after. No-ops for every other op.
void PreScale(void* data, int64_t count, DType dtype, const ReduceOp& op);
void PostScale(void* data, int64_t count, DType dtype, const ReduceOp& op, int ranks);

}  // namespace plexus::algorithms

#endif  // PLEXUS_ALGORITHMS_REDUCE_KERNELS_H_
