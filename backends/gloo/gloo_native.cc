#include "backends/gloo/gloo_native.h"

#include <cstring>
#include <functional>
#include <type_traits>

#include "algorithms/reduce_kernels.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/alltoallv.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/gather.h"
#include "gloo/reduce.h"
#include "gloo/scatter.h"

namespace plexus::gloo_native {

using algorithms::ReduceCombine;

namespace {

// Gloo's three-operand reduction (out = a op b, any of them may alias) over plexus's kernels.
std::function<void(void*, const void*, const void*, size_t)> ReduceFunction(DType dtype,
                                                                            ReduceOpKind op) {
  return [dtype, op](void* out, const void* a, const void* b, size_t count) {
    ReduceCombine(out, a, b, static_cast<int64_t>(count), dtype, op);
  };
}

// Gloo derives the element size from the pointer type; these stand in for each dtype width.
template <typename Setter>
void WithElementType(size_t element_size, Setter&& set) {
  switch (element_size) {
    case 1:
      set(static_cast<uint8_t*>(nullptr));
      break;
    case 2:
      set(static_cast<uint16_t*>(nullptr));
      break;
    case 4:
      set(static_cast<uint32_t*>(nullptr));
      break;
    default:
      set(static_cast<uint64_t*>(nullptr));
      break;
  }
}

}  // namespace

void AllReduce(const Call& call, void* data, int64_t count, DType dtype, ReduceOpKind op) {
  if (count == 0) return;
  gloo::AllreduceOptions options(call.context);
  WithElementType(DTypeSize(dtype), [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    options.setOutput(static_cast<T*>(data), static_cast<size_t>(count));
  });
  options.setReduceFunction(ReduceFunction(dtype, op));
  options.setTag(call.tag);
  options.setTimeout(call.timeout);
  gloo::allreduce(options);
}

void Reduce(const Call& call, const void* input, void* output, int64_t count, DType dtype,
            ReduceOpKind op, int root) {
  if (count == 0) return;
  gloo::ReduceOptions options(call.context);
  WithElementType(DTypeSize(dtype), [&](auto* type) {
    using T = std::remove_pointer_t<decltype(type)>;
    // Gloo reduces into the output on every rank (as scratch off the root).
    options.setInput(const_cast<T*>(static_cast<const T*>(input)), static_cast<size_t>(count));
    options.setOutput(static_cast<T*>(output), static_cast<size_t>(count));
  });
  options.setRoot(root);
  options.setReduceFunction(ReduceFunction(dtype, op));
  options.setTag(call.tag);
  options.setTimeout(call.timeout);
  gloo::reduce(options);
}

void Broadcast(const Call& call, void* data, size_t bytes, int root) {
  if (bytes == 0) return;
  gloo::BroadcastOptions options(call.context);
  options.setOutput(static_cast<uint8_t*>(data), bytes);
  options.setRoot(root);
  options.setTag(call.tag);
  options.setTimeout(call.timeout);
  gloo::broadcast(options);
}

void AllGather(const Call& call, const void* input, void* output, size_t bytes) {
  if (bytes == 0) return;
  gloo::AllgatherOptions options(call.context);
  uint8_t* out = static_cast<uint8_t*>(output);
  // In place when the input already sits in this rank's block.
  if (input != out + call.context->rank * bytes) {
    options.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(input)), bytes);
  }
  options.setOutput(out, bytes * call.context->size);
  options.setTag(call.tag);
  options.setTimeout(call.timeout);
  gloo::allgather(options);
}

void Gather(const Call& call, const void* input, void* output, size_t bytes, int root) {
  if (bytes == 0) return;
  gloo::GatherOptions options(call.context);
  options.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(input)), bytes);
  if (call.context->rank == root) {
    options.setOutput(static_cast<uint8_t*>(output), bytes * call.context->size);
  }
  options.setRoot(root);
  options.setTag(call.tag);
  options.setTimeout(call.timeout);
  gloo::gather(options);
}

void Scatter(const Call& call, const std::vector<void*>& inputs, void* output, size_t bytes,
             int root) {
  if (bytes == 0) return;
  gloo::ScatterOptions options(call.context);
  if (call.context->rank == root) {
    std::vector<uint8_t*> pointers;
    for (void* input : inputs) pointers.push_back(static_cast<uint8_t*>(input));
    options.setInputs(pointers, bytes);
  }
  options.setOutput(static_cast<uint8_t*>(output), bytes);
  options.setRoot(root);
  options.setTag(call.tag);
  options.setTimeout(call.timeout);
  gloo::scatter(options);
}

void AllToAll(const Call& call, const void* input, const std::vector<int64_t>& send_bytes,
              void* output, const std::vector<int64_t>& recv_bytes) {
  int64_t total = 0;
  bool even = true;
  for (size_t i = 0; i < send_bytes.size(); ++i) {
    total += send_bytes[i] + recv_bytes[i];
    even = even && send_bytes[i] == send_bytes[0] && recv_bytes[i] == send_bytes[0];
  }
  if (total == 0) return;
  // Gloo wants non-null buffers even when this rank's side is empty.
  static uint8_t empty_target;
  uint8_t* in =
      input != nullptr ? const_cast<uint8_t*>(static_cast<const uint8_t*>(input)) : &empty_target;
  uint8_t* out = output != nullptr ? static_cast<uint8_t*>(output) : &empty_target;
  if (even) {
    gloo::AlltoallOptions options(call.context);
    const size_t bytes = static_cast<size_t>(send_bytes[0]) * send_bytes.size();
    options.setInput(in, bytes);
    options.setOutput(out, bytes);
    options.setTag(call.tag);
    options.setTimeout(call.timeout);
    gloo::alltoall(options);
    return;
  }
  gloo::AlltoallvOptions options(call.context);
  options.setInput(in, send_bytes);
  options.setOutput(out, recv_bytes);
  options.setTag(call.tag);
  options.setTimeout(call.timeout);
  gloo::alltoallv(options);
}

void Barrier(const Call& call) {
  gloo::BarrierOptions options(call.context);
  options.setTag(call.tag);
  options.setTimeout(call.timeout);
  gloo::barrier(options);
}

}  // namespace plexus::gloo_native
