// Gloo's own collective algorithms, called for the collectives Gloo has (all_reduce, reduce,
// broadcast, all_gather, gather, scatter, all_to_all, barrier). Each runs one collective to
// completion on the calling thread and throws Gloo's exceptions; GlooBackend queues them in
// issue order with the algorithms/ collectives and turns failures into statuses.
#ifndef PLEXUS_BACKENDS_GLOO_GLOO_NATIVE_H_
#define PLEXUS_BACKENDS_GLOO_GLOO_NATIVE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/core/dtype.h"
#include "base/core/reduce_op.h"
#include "gloo/context.h"

namespace plexus::gloo_native {

// What every call carries: Gloo's tag (unique per operation) and the time left.
struct Call {
  std::shared_ptr<gloo::Context> context;
  uint32_t tag = 0;
  std::chrono::milliseconds timeout{1};
};

// In place over `count` elements; `op` is a kernel op (SUM, PRODUCT, MIN, MAX, bitwise), which
// Gloo applies through plexus's reduce kernels, so every dtype reduces natively.
void AllReduce(const Call& call, void* data, int64_t count, DType dtype, ReduceOpKind op);
// `input` is reduced into `output` at the root (output may equal input; unused elsewhere).
void Reduce(const Call& call, const void* input, void* output, int64_t count, DType dtype,
            ReduceOpKind op, int root);
void Broadcast(const Call& call, void* data, size_t bytes, int root);
// `output` holds size x bytes; rank r's block comes from rank r's `input` (may be in place).
void AllGather(const Call& call, const void* input, void* output, size_t bytes);
// At the root `output` holds size x bytes; elsewhere it is ignored.
void Gather(const Call& call, const void* input, void* output, size_t bytes, int root);
// `inputs` (root only) hold `bytes` each for ranks 0..size-1.
void Scatter(const Call& call, const std::vector<void*>& inputs, void* output, size_t bytes,
             int root);
// Per-peer byte counts; all equal uses Gloo's alltoall, otherwise alltoallv.
void AllToAll(const Call& call, const void* input, const std::vector<int64_t>& send_bytes,
              void* output, const std::vector<int64_t>& recv_bytes);
void Barrier(const Call& call);

}  // namespace plexus::gloo_native

#endif  // PLEXUS_BACKENDS_GLOO_GLOO_NATIVE_H_
