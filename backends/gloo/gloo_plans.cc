// The collectives GlooBackend runs with Gloo's own algorithms: each kind's plan.
#include "backends/gloo/gloo_plans.h"

#include <cstring>
#include <utility>
#include <vector>

#include "algorithms/reduce_kernels.h"
#include "backends/common/split_bytes.h"
#include "backends/interface/backend.h"

namespace plexus::gloo_backend {

using algorithms::CollectiveContext;
using algorithms::KernelOp;
using algorithms::PostScale;
using algorithms::PreScale;
using algorithms::ScratchArena;
using algorithms::UnpackTensors;

namespace {

namespace traffic = nominal_traffic;
using gloo_native::Call;

absl::StatusOr<GlooPlan> PlanAllReduce(const Collective& call, int /*rank*/, int size) {
  const Tensor& tensor = call.tensor();
  return GlooPlan::Of(call, CollectiveKind::kAllReduce, tensor.dtype(), tensor.numel(),
                      traffic::AllReduce(tensor.nbytes(), size),
                      [tensor, op = call.op](const Call& gloo, CollectiveContext&) {
                        const int64_t count = tensor.numel();
                        PreScale(tensor.data(), count, tensor.dtype(), op);
                        gloo_native::AllReduce(gloo, tensor.data(), count, tensor.dtype(),
                                               KernelOp(op.kind));
                        PostScale(tensor.data(), count, tensor.dtype(), op, gloo.context->size);
                      });
}

absl::StatusOr<GlooPlan> PlanReduce(const Collective& call, int rank, int size) {
  const Tensor& tensor = call.tensor();
  const int root = call.root;
  return GlooPlan::Of(
      call, CollectiveKind::kReduce, tensor.dtype(), tensor.numel(),
      traffic::Reduce(tensor.nbytes(), size, rank, root),
      [tensor, op = call.op, root](const Call& gloo, CollectiveContext& ctx) {
        const int64_t count = tensor.numel();
        const DType dtype = tensor.dtype();
        // Off the root the caller's tensor must stay as it was: Gloo reduces into
        // scratch there, and PREMUL_SUM scales a copy.
        const bool at_root = gloo.context->rank == root;
        const void* input = tensor.data();
        if (op.kind == ReduceOpKind::kPremulSum) {
          uint8_t* scaled = ctx.Scratch(ScratchArena::kReduceIn, tensor.nbytes());
          if (tensor.nbytes() > 0) std::memcpy(scaled, tensor.data(), tensor.nbytes());
          PreScale(scaled, count, dtype, op);
          input = scaled;
        }
        void* output =
            at_root ? tensor.data() : ctx.Scratch(ScratchArena::kPacked, tensor.nbytes());
        gloo_native::Reduce(gloo, input, output, count, dtype, KernelOp(op.kind), root);
        if (at_root) PostScale(tensor.data(), count, dtype, op, gloo.context->size);
      });
}

absl::StatusOr<GlooPlan> PlanBroadcast(const Collective& call, int rank, int size) {
  const Tensor& tensor = call.tensor();
  const int root = call.root;
  return GlooPlan::Of(call, CollectiveKind::kBroadcast, tensor.dtype(), tensor.numel(),
                      traffic::Broadcast(tensor.nbytes(), size, rank, root),
                      [tensor, root](const Call& gloo, CollectiveContext&) {
                        gloo_native::Broadcast(gloo, tensor.data(), tensor.nbytes(), root);
                      });
}

absl::StatusOr<GlooPlan> PlanAllGather(const Collective& call, int /*rank*/, int size) {
  const Tensor& input = call.input();
  return GlooPlan::Of(call, CollectiveKind::kAllGather, input.dtype(), input.numel(),
                      traffic::AllGather(input.nbytes(), size),
                      [list = std::vector<Tensor>(call.outputs.begin(), call.outputs.end()), input](
                          const Call& gloo, CollectiveContext& ctx) {
                        // The outputs are separate tensors: gather into one block, then hand them
                        // out.
                        const size_t bytes = input.nbytes();
                        uint8_t* packed = ctx.Scratch(ScratchArena::kPacked, bytes * list.size());
                        gloo_native::AllGather(gloo, input.data(), packed, bytes);
                        UnpackTensors(packed, list);
                      });
}

absl::StatusOr<GlooPlan> PlanAllGatherIntoTensor(const Collective& call, int /*rank*/, int size) {
  const Tensor& output = call.output();
  const Tensor& input = call.input();
  return GlooPlan::Of(call, CollectiveKind::kAllGather, input.dtype(), input.numel(),
                      traffic::AllGather(input.nbytes(), size),
                      [output, input](const Call& gloo, CollectiveContext&) {
                        gloo_native::AllGather(gloo, input.data(), output.data(), input.nbytes());
                      });
}

absl::StatusOr<GlooPlan> PlanGather(const Collective& call, int rank, int size) {
  const Tensor& input = call.input();
  const int root = call.root;
  return GlooPlan::Of(call, CollectiveKind::kGather, input.dtype(), input.numel(),
                      traffic::Gather(input.nbytes(), size, rank, root),
                      [list = std::vector<Tensor>(call.outputs.begin(), call.outputs.end()), input,
                       root](const Call& gloo, CollectiveContext& ctx) {
                        const size_t bytes = input.nbytes();
                        uint8_t* packed =
                            list.empty() ? nullptr
                                         : ctx.Scratch(ScratchArena::kPacked, bytes * list.size());
                        gloo_native::Gather(gloo, input.data(), packed, bytes, root);
                        if (packed != nullptr) UnpackTensors(packed, list);
                      });
}

absl::StatusOr<GlooPlan> PlanScatter(const Collective& call, int rank, int size) {
  const Tensor& output = call.output();
  const int root = call.root;
  std::vector<void*> pointers;
  for (const Tensor& input : call.inputs) pointers.push_back(input.data());
  return GlooPlan::Of(call, CollectiveKind::kScatter, output.dtype(), output.numel(),
                      traffic::Scatter(output.nbytes(), size, rank, root),
                      [pointers, output, root](const Call& gloo, CollectiveContext&) {
                        gloo_native::Scatter(gloo, pointers, output.data(), output.nbytes(), root);
                      });
}

absl::StatusOr<GlooPlan> PlanAllToAllSingle(const Collective& call, int rank, int /*size*/) {
  const Tensor& output = call.output();
  const Tensor& input = call.input();
  std::vector<int64_t> send = SplitBytes(input, call.input_splits);
  std::vector<int64_t> recv = SplitBytes(output, call.output_splits);
  const traffic::Traffic moved = traffic::AllToAll(send, recv, rank);
  return GlooPlan::Of(call, CollectiveKind::kAllToAll, input.dtype(), 0, moved,
                      [output, input, send = std::move(send), recv = std::move(recv)](
                          const Call& gloo, CollectiveContext&) {
                        gloo_native::AllToAll(gloo, input.data(), send, output.data(), recv);
                      });
}

absl::StatusOr<GlooPlan> PlanBarrier(const Collective& call, int /*rank*/, int /*size*/) {
  return GlooPlan::Of(call, CollectiveKind::kBarrier, DType::kUInt8, 0, {},
                      [](const Call& gloo, CollectiveContext&) { gloo_native::Barrier(gloo); });
}

}  // namespace

absl::StatusOr<GlooPlan> PlanGlooCall(const Collective& call, int rank, int size) {
  switch (call.kind) {
    case CollectiveKind::kBroadcast:
      return PlanBroadcast(call, rank, size);
    case CollectiveKind::kReduce:
      return PlanReduce(call, rank, size);
    case CollectiveKind::kAllReduce:
      return PlanAllReduce(call, rank, size);
    case CollectiveKind::kAllGather:
      return PlanAllGather(call, rank, size);
    case CollectiveKind::kAllGatherIntoTensor:
      return PlanAllGatherIntoTensor(call, rank, size);
    case CollectiveKind::kGather:
      return PlanGather(call, rank, size);
    case CollectiveKind::kScatter:
      return PlanScatter(call, rank, size);
    case CollectiveKind::kAllToAllSingle:
      return PlanAllToAllSingle(call, rank, size);
    case CollectiveKind::kBarrier:
      return PlanBarrier(call, rank, size);
    case CollectiveKind::kAllReduceCoalesced:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kReduceScatterTensor:
    case CollectiveKind::kAllToAll:
      return NotRunError("gloo", call, "Gloo has no better schedule than algorithms/");
    case CollectiveKind::kSend:
    case CollectiveKind::kRecv:
    case CollectiveKind::kRecvAnySource:
      return NotRunError("gloo", call, "point-to-point runs on GlooTransport");
  }
  return NotRunError("gloo", call);
}

}  // namespace plexus::gloo_backend
