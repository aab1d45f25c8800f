// The collectives of NcclBackend: each kind's plan, the NCCL calls it launches.
#include "backends/nccl/nccl_plans.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/common/split_bytes.h"
#include "backends/nccl/nccl_types.h"
#include "base/core/status_macros.h"

namespace plexus::nccl {
namespace {

using Scope = NcclCommunicator::Scope;
namespace traffic = nominal_traffic;

std::vector<const Tensor*> Pointers(absl::Span<const Tensor> tensors) {
  std::vector<const Tensor*> pointers;
  for (const Tensor& tensor : tensors) pointers.push_back(&tensor);
  return pointers;
}

// True when `blocks` lie back to back in memory, so one NCCL call can treat them as one buffer.
bool BackToBack(absl::Span<const Tensor> blocks) {
  for (size_t i = 1; i < blocks.size(); ++i) {
    if (blocks[i].bytes() != blocks[0].bytes() + i * blocks[0].nbytes()) return false;
  }
  return true;
}

// The address of `tensor`'s element `offset`.
void* At(const Tensor& tensor, size_t offset) {
  return static_cast<uint8_t*>(tensor.data()) + offset * tensor.element_size();
}

// Launches `body` with NCCL's operator for `reduction` over `extent`'s elements: once, or piece
// by piece where NCCL's one-rank kernel would leave some out (NeedsOneRankPieces). A PREMUL_SUM
// operator is made on the communicator for this call and destroyed once NCCL has accepted it
// (`reduction` is a copy: NCCL takes the scalar through a mutable pointer).
absl::Status WithOperator(const NcclLaunch& launch, NcclReduction reduction, Scope& scope,
                          const Tensor& extent,
                          const std::function<ncclResult_t(ncclRedOp_t, NcclPiece)>& body,
                          absl::string_view what) {
  const NcclApi& api = launch.nccl;
  ncclRedOp_t op = reduction.op;
  if (reduction.premul) {
    RETURN_IF_ERROR(
        NcclStatus(api,
                   api.RedOpCreatePreMulSum(&op, reduction.premul_scalar, reduction.type,
                                            ncclScalarHostImmediate, scope.comm),
                   "ncclRedOpCreatePreMulSum", scope.comm));
    ncclComm_t comm = scope.comm;
    scope.after_accepted.push_back([&api, op, comm] { api.RedOpDestroy(op, comm); });
  }
  const size_t count = extent.numel();
  if (!NeedsOneRankPieces(reduction, launch.size, api.version)) {
    return NcclLaunchStatus(api, body(op, {0, count}), what, scope.comm);
  }
  for (const NcclPiece& piece : OneRankPieces(count, extent.element_size())) {
    RETURN_IF_ERROR(NcclLaunchStatus(api, body(op, piece), what, scope.comm));
  }
  return absl::OkStatus();
}

// Wraps `calls` in ncclGroupStart/End, so NCCL launches them as one operation.
absl::Status Grouped(const NcclApi& api, Scope& scope, const std::function<absl::Status()>& calls) {
  RETURN_IF_ERROR(NcclStatus(api, api.GroupStart(), "ncclGroupStart"));
  absl::Status status = calls();
  ncclResult_t ended = api.GroupEnd();
  RETURN_IF_ERROR(status);
  return NcclLaunchStatus(api, ended, "ncclGroupEnd", scope.comm);
}

// One ncclSend or ncclRecv of `count` elements of `type`, its error naming the call.
absl::Status SendTo(const NcclLaunch& launch, Scope& scope, const void* data, size_t count,
                    ncclDataType_t type, int peer) {
  return NcclLaunchStatus(launch.nccl,
                          launch.nccl.Send(data, count, type, peer, scope.comm, scope.stream),
                          "ncclSend", scope.comm);
}
absl::Status ReceiveFrom(const NcclLaunch& launch, Scope& scope, void* data, size_t count,
                         ncclDataType_t type, int peer) {
  return NcclLaunchStatus(launch.nccl,
                          launch.nccl.Recv(data, count, type, peer, scope.comm, scope.stream),
                          "ncclRecv", scope.comm);
}

// The plan of `call` that launches `launch` over `tensors` (the first one's dtype and count
// describe it).
NcclPlan Planned(const Collective& call, std::vector<const Tensor*> tensors, traffic::Traffic moved,
                 std::function<absl::Status(const NcclLaunch&, Scope&)> launch) {
  const DType dtype = tensors.empty() ? DType::kUInt8 : tensors[0]->dtype();
  const int64_t count = tensors.empty() ? 0 : tensors[0]->numel();
  return NcclPlan::Of(call, call.kind, dtype, count, moved,
                      NcclRun{std::move(tensors), std::move(launch)});
}

absl::StatusOr<NcclReduction> ReductionOf(const Collective& call, const Tensor& typed) {
  return ReductionFor(call.name(), call.op, typed.dtype());
}

absl::StatusOr<NcclPlan> PlanBroadcast(const Collective& call, int rank, int size) {
  const Tensor& tensor = call.tensor();
  const NcclExtent extent = MovementExtent(tensor.dtype(), tensor.numel());
  const int root = call.root;
  return Planned(call, {&tensor}, traffic::Broadcast(tensor.nbytes(), size, rank, root),
                 [&tensor, extent, root](const NcclLaunch& launch, Scope& scope) {
                   return NcclLaunchStatus(
                       launch.nccl,
                       launch.nccl.Broadcast(tensor.data(), tensor.data(), extent.count,
                                             extent.type, root, scope.comm, scope.stream),
                       "ncclBroadcast", scope.comm);
                 });
}

absl::StatusOr<NcclPlan> PlanReduce(const Collective& call, int rank, int size) {
  const Tensor& tensor = call.tensor();
  ASSIGN_OR_RETURN(const NcclReduction reduction, ReductionOf(call, tensor));
  const int root = call.root;
  return Planned(call, {&tensor}, traffic::Reduce(tensor.nbytes(), size, rank, root),
                 [&tensor, reduction, root](const NcclLaunch& launch, Scope& scope) {
                   return WithOperator(
                       launch, reduction, scope, tensor,
                       [&](ncclRedOp_t op, NcclPiece piece) {
                         return launch.nccl.Reduce(
                             At(tensor, piece.offset), At(tensor, piece.offset), piece.count,
                             reduction.type, op, root, scope.comm, scope.stream);
                       },
                       "ncclReduce");
                 });
}

// One in-place ncclAllReduce of `tensor`.
absl::Status AllReduceInPlace(const NcclLaunch& launch, Scope& scope,
                              const NcclReduction& reduction, const Tensor& tensor) {
  return WithOperator(
      launch, reduction, scope, tensor,
      [&](ncclRedOp_t op, NcclPiece piece) {
        return launch.nccl.AllReduce(At(tensor, piece.offset), At(tensor, piece.offset),
                                     piece.count, reduction.type, op, scope.comm, scope.stream);
      },
      "ncclAllReduce");
}

absl::StatusOr<NcclPlan> PlanAllReduce(const Collective& call, int /*rank*/, int size) {
  const Tensor& tensor = call.tensor();
  ASSIGN_OR_RETURN(const NcclReduction reduction, ReductionOf(call, tensor));
  return Planned(call, {&tensor}, traffic::AllReduce(tensor.nbytes(), size),
                 [&tensor, reduction](const NcclLaunch& launch, Scope& scope) {
                   return AllReduceInPlace(launch, scope, reduction, tensor);
                 });
}

absl::StatusOr<NcclPlan> PlanAllReduceCoalesced(const Collective& call, int /*rank*/, int size) {
  const absl::Span<const Tensor> tensors = call.outputs;
  std::vector<NcclReduction> reductions;
  int64_t bytes = 0;
  for (const Tensor& tensor : tensors) {
    ASSIGN_OR_RETURN(NcclReduction reduction, ReductionOf(call, tensor));
    reductions.push_back(reduction);
    bytes += tensor.nbytes();
  }
  return Planned(call, Pointers(tensors), traffic::AllReduce(bytes, size),
                 [tensors, reductions](const NcclLaunch& launch, Scope& scope) {
                   return Grouped(launch.nccl, scope, [&]() -> absl::Status {
                     for (size_t i = 0; i < tensors.size(); ++i) {
                       RETURN_IF_ERROR(AllReduceInPlace(launch, scope, reductions[i], tensors[i]));
                     }
                     return absl::OkStatus();
                   });
                 });
}

absl::StatusOr<NcclPlan> PlanAllGather(const Collective& call, int /*rank*/, int size) {
  const absl::Span<const Tensor> outputs = call.outputs;
  const Tensor& input = call.input();
  std::vector<const Tensor*> tensors = Pointers(outputs);
  tensors.push_back(&input);
  const NcclExtent extent = MovementExtent(input.dtype(), input.numel());
  return Planned(call, tensors, traffic::AllGather(input.nbytes(), size),
                 [outputs, &input, extent](const NcclLaunch& launch, Scope& scope) -> absl::Status {
                   if (BackToBack(outputs)) {  // One all-gather straight into the outputs.
                     return NcclLaunchStatus(
                         launch.nccl,
                         launch.nccl.AllGather(input.data(), outputs[0].data(), extent.count,
                                               extent.type, scope.comm, scope.stream),
                         "ncclAllGather", scope.comm);
                   }
                   // Scattered outputs: one broadcast per rank, launched together.
                   return Grouped(launch.nccl, scope, [&]() -> absl::Status {
                     for (int root = 0; root < launch.size; ++root) {
                       RETURN_IF_ERROR(NcclLaunchStatus(
                           launch.nccl,
                           launch.nccl.Broadcast(input.data(), outputs[root].data(), extent.count,
                                                 extent.type, root, scope.comm, scope.stream),
                           "ncclBroadcast", scope.comm));
                     }
                     return absl::OkStatus();
                   });
                 });
}

absl::StatusOr<NcclPlan> PlanAllGatherIntoTensor(const Collective& call, int /*rank*/, int size) {
  const Tensor& output = call.output();
  const Tensor& input = call.input();
  const NcclExtent extent = MovementExtent(input.dtype(), input.numel());
  return Planned(call, {&output, &input}, traffic::AllGather(input.nbytes(), size),
                 [&output, &input, extent](const NcclLaunch& launch, Scope& scope) {
                   return NcclLaunchStatus(
                       launch.nccl,
                       launch.nccl.AllGather(input.data(), output.data(), extent.count, extent.type,
                                             scope.comm, scope.stream),
                       "ncclAllGather", scope.comm);
                 });
}

absl::StatusOr<NcclPlan> PlanGather(const Collective& call, int rank, int size) {
  const absl::Span<const Tensor> outputs = call.outputs;
  const Tensor& input = call.input();
  std::vector<const Tensor*> tensors = Pointers(outputs);
  tensors.push_back(&input);
  const int root = call.root;
  const NcclExtent extent = MovementExtent(input.dtype(), input.numel());
  return Planned(
      call, tensors, traffic::Gather(input.nbytes(), size, rank, root),
      [outputs, &input, extent, root](const NcclLaunch& launch, Scope& scope) {
        return Grouped(launch.nccl, scope, [&]() -> absl::Status {
          if (launch.rank != root) {
            return SendTo(launch, scope, input.data(), extent.count, extent.type, root);
          }
          for (int peer = 0; peer < launch.size; ++peer) {
            if (peer == root) continue;
            RETURN_IF_ERROR(
                ReceiveFrom(launch, scope, outputs[peer].data(), extent.count, extent.type, peer));
          }
          return launch.Copy(outputs[root].data(), input.data(), input.nbytes(), scope.stream);
        });
      });
}

absl::StatusOr<NcclPlan> PlanScatter(const Collective& call, int rank, int size) {
  const Tensor& output = call.output();
  const absl::Span<const Tensor> inputs = call.inputs;
  std::vector<const Tensor*> tensors = Pointers(inputs);
  tensors.push_back(&output);
  const int root = call.root;
  const NcclExtent extent = MovementExtent(output.dtype(), output.numel());
  return Planned(
      call, tensors, traffic::Scatter(output.nbytes(), size, rank, root),
      [&output, inputs, extent, root](const NcclLaunch& launch, Scope& scope) {
        return Grouped(launch.nccl, scope, [&]() -> absl::Status {
          if (launch.rank != root) {
            return ReceiveFrom(launch, scope, output.data(), extent.count, extent.type, root);
          }
          for (int peer = 0; peer < launch.size; ++peer) {
            if (peer == root) continue;
            RETURN_IF_ERROR(
                SendTo(launch, scope, inputs[peer].data(), extent.count, extent.type, peer));
          }
          return launch.Copy(output.data(), inputs[root].data(), output.nbytes(), scope.stream);
        });
      });
}

absl::StatusOr<NcclPlan> PlanReduceScatter(const Collective& call, int /*rank*/, int size) {
  const Tensor& output = call.output();
  const absl::Span<const Tensor> inputs = call.inputs;
  ASSIGN_OR_RETURN(const NcclReduction reduction, ReductionOf(call, output));
  std::vector<const Tensor*> tensors = Pointers(inputs);
  tensors.push_back(&output);
  return Planned(
      call, tensors, traffic::ReduceScatter(output.nbytes(), size),
      [&output, inputs, reduction](const NcclLaunch& launch, Scope& scope) -> absl::Status {
        const NcclApi& nccl = launch.nccl;
        if (BackToBack(inputs)) {
          return WithOperator(
              launch, reduction, scope, output,
              [&](ncclRedOp_t op, NcclPiece piece) {
                return nccl.ReduceScatter(At(inputs[0], piece.offset), At(output, piece.offset),
                                          piece.count, reduction.type, op, scope.comm,
                                          scope.stream);
              },
              "ncclReduceScatter");
        }
        // Scattered inputs: one reduce per rank's block, launched together.
        return Grouped(nccl, scope, [&]() -> absl::Status {
          for (int root = 0; root < launch.size; ++root) {
            RETURN_IF_ERROR(WithOperator(
                launch, reduction, scope, output,
                [&](ncclRedOp_t op, NcclPiece piece) {
                  return nccl.Reduce(At(inputs[root], piece.offset), At(output, piece.offset),
                                     piece.count, reduction.type, op, root, scope.comm,
                                     scope.stream);
                },
                "ncclReduce"));
          }
          return absl::OkStatus();
        });
      });
}

absl::StatusOr<NcclPlan> PlanReduceScatterTensor(const Collective& call, int /*rank*/, int size) {
  const Tensor& output = call.output();
  const Tensor& input = call.input();
  ASSIGN_OR_RETURN(const NcclReduction reduction, ReductionOf(call, output));
  return Planned(call, {&output, &input}, traffic::ReduceScatter(output.nbytes(), size),
                 [&output, &input, reduction](const NcclLaunch& launch, Scope& scope) {
                   return WithOperator(
                       launch, reduction, scope, output,
                       [&](ncclRedOp_t op, NcclPiece piece) {
                         return launch.nccl.ReduceScatter(
                             At(input, piece.offset), At(output, piece.offset), piece.count,
                             reduction.type, op, scope.comm, scope.stream);
                       },
                       "ncclReduceScatter");
                 });
}

absl::StatusOr<NcclPlan> PlanAllToAll(const Collective& call, int rank, int /*size*/) {
  const absl::Span<const Tensor> outputs = call.outputs;
  const absl::Span<const Tensor> inputs = call.inputs;
  std::vector<const Tensor*> tensors = Pointers(outputs);
  for (const Tensor& input : inputs) tensors.push_back(&input);
  std::vector<int64_t> send_bytes, recv_bytes;
  for (const Tensor& input : inputs) send_bytes.push_back(input.nbytes());
  for (const Tensor& output : outputs) recv_bytes.push_back(output.nbytes());
  return Planned(
      call, tensors, traffic::AllToAll(send_bytes, recv_bytes, rank),
      [outputs, inputs](const NcclLaunch& launch, Scope& scope) {
        return Grouped(launch.nccl, scope, [&]() -> absl::Status {
          for (int peer = 0; peer < launch.size; ++peer) {
            if (peer == launch.rank) continue;
            const Tensor& in = inputs[peer];
            const Tensor& out = outputs[peer];
            const NcclExtent sent = MovementExtent(in.dtype(), in.numel());
            const NcclExtent received = MovementExtent(out.dtype(), out.numel());
            RETURN_IF_ERROR(SendTo(launch, scope, in.data(), sent.count, sent.type, peer));
            RETURN_IF_ERROR(
                ReceiveFrom(launch, scope, out.data(), received.count, received.type, peer));
          }
          const Tensor& own = inputs[launch.rank];
          return launch.Copy(outputs[launch.rank].data(), own.data(), own.nbytes(), scope.stream);
        });
      });
}

absl::StatusOr<NcclPlan> PlanAllToAllSingle(const Collective& call, int rank, int /*size*/) {
  const Tensor& output = call.output();
  const Tensor& input = call.input();
  std::vector<int64_t> send_bytes = SplitBytes(input, call.input_splits);
  std::vector<int64_t> recv_bytes = SplitBytes(output, call.output_splits);
  const traffic::Traffic moved = traffic::AllToAll(send_bytes, recv_bytes, rank);
  return Planned(
      call, {&output, &input}, moved,
      [&output, &input, send_bytes = std::move(send_bytes), recv_bytes = std::move(recv_bytes)](
          const NcclLaunch& launch, Scope& scope) {
        return Grouped(launch.nccl, scope, [&]() -> absl::Status {
          int64_t send_offset = 0, recv_offset = 0;
          for (int peer = 0; peer < launch.size; ++peer) {
            uint8_t* send = input.bytes() + send_offset;
            uint8_t* recv = output.bytes() + recv_offset;
            if (peer == launch.rank) {
              RETURN_IF_ERROR(launch.Copy(recv, send, send_bytes[peer], scope.stream));
            } else {
              // Uneven splits may be zero; NCCL accepts empty sends and receives.
              RETURN_IF_ERROR(SendTo(launch, scope, send, send_bytes[peer], ncclUint8, peer));
              RETURN_IF_ERROR(ReceiveFrom(launch, scope, recv, recv_bytes[peer], ncclUint8, peer));
            }
            send_offset += send_bytes[peer];
            recv_offset += recv_bytes[peer];
          }
          return absl::OkStatus();
        });
      });
}

absl::StatusOr<NcclPlan> PlanBarrier(const Collective& call, int /*rank*/, int /*size*/) {
  // As ProcessGroupNCCL: a one-element all-reduce on the device, complete when it has run.
  return Planned(call, {}, {}, [](const NcclLaunch& launch, Scope& scope) {
    return NcclLaunchStatus(launch.nccl,
                            launch.nccl.AllReduce(scope.scratch, scope.scratch, 1, ncclInt32,
                                                  ncclSum, scope.comm, scope.stream),
                            "ncclAllReduce", scope.comm);
  });
}

absl::StatusOr<NcclPlan> PlanSend(const Collective& call, int /*rank*/, int /*size*/) {
  const Tensor& tensor = call.input();
  const NcclExtent extent = MovementExtent(tensor.dtype(), tensor.numel());
  const int peer = call.peer;
  return Planned(call, {&tensor}, {static_cast<int64_t>(tensor.nbytes()), 0},
                 [&tensor, extent, peer](const NcclLaunch& launch, Scope& scope) {
                   return SendTo(launch, scope, tensor.data(), extent.count, extent.type, peer);
                 });
}

absl::StatusOr<NcclPlan> PlanRecv(const Collective& call, int /*rank*/, int /*size*/) {
  const Tensor& tensor = call.output();
  const NcclExtent extent = MovementExtent(tensor.dtype(), tensor.numel());
  const int peer = call.peer;
  return Planned(call, {&tensor}, {0, static_cast<int64_t>(tensor.nbytes())},
                 [&tensor, extent, peer](const NcclLaunch& launch, Scope& scope) {
                   return ReceiveFrom(launch, scope, tensor.data(), extent.count, extent.type,
                                      peer);
                 });
}

}  // namespace

absl::Status NcclLaunch::Copy(void* to, const void* from, size_t bytes, cudaStream_t stream) const {
  if (bytes == 0 || to == from) return absl::OkStatus();
  return cuda::CudaStatus(cuda, cuda.MemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream),
                          "cudaMemcpyAsync");
}

absl::StatusOr<NcclPlan> PlanNcclCall(const Collective& call, int rank, int size) {
  switch (call.kind) {
    case CollectiveKind::kBroadcast:
      return PlanBroadcast(call, rank, size);
    case CollectiveKind::kReduce:
      return PlanReduce(call, rank, size);
    case CollectiveKind::kAllReduce:
      return PlanAllReduce(call, rank, size);
    case CollectiveKind::kAllReduceCoalesced:
      return PlanAllReduceCoalesced(call, rank, size);
    case CollectiveKind::kAllGather:
      return PlanAllGather(call, rank, size);
    case CollectiveKind::kAllGatherIntoTensor:
      return PlanAllGatherIntoTensor(call, rank, size);
    case CollectiveKind::kGather:
      return PlanGather(call, rank, size);
    case CollectiveKind::kScatter:
      return PlanScatter(call, rank, size);
    case CollectiveKind::kReduceScatter:
      return PlanReduceScatter(call, rank, size);
    case CollectiveKind::kReduceScatterTensor:
      return PlanReduceScatterTensor(call, rank, size);
    case CollectiveKind::kAllToAll:
      return PlanAllToAll(call, rank, size);
    case CollectiveKind::kAllToAllSingle:
      return PlanAllToAllSingle(call, rank, size);
    case CollectiveKind::kBarrier:
      return PlanBarrier(call, rank, size);
    case CollectiveKind::kSend:
      return PlanSend(call, rank, size);
    case CollectiveKind::kRecv:
      return PlanRecv(call, rank, size);
    case CollectiveKind::kRecvAnySource:  // capabilities() says no: the ProcessGroup never asks.
      return NotRunError("nccl", call, "nccl matches by source rank");
  }
  return NotRunError("nccl", call);
}

NcclPlan PlanPointToPointBatch(absl::Span<const PointToPointOp> ops, absl::Duration timeout) {
  std::vector<const Tensor*> tensors;
  traffic::Traffic moved;
  for (const PointToPointOp& op : ops) {
    tensors.push_back(&op.tensor);
    (op.kind == PointToPointOp::Kind::kSend ? moved.sent : moved.received) += op.tensor.nbytes();
  }
  // Planned as sends: NCCL's launch reads only the name, tensors, timeout and traffic.
  return {"batch_isend_irecv",
          CollectiveKind::kSend,
          DType::kUInt8,
          0,
          timeout,
          moved,
          NcclRun{tensors, [ops](const NcclLaunch& launch, Scope& scope) {
                    return Grouped(launch.nccl, scope, [&]() -> absl::Status {
                      for (const PointToPointOp& op : ops) {
                        const NcclExtent extent =
                            MovementExtent(op.tensor.dtype(), op.tensor.numel());
                        RETURN_IF_ERROR(op.kind == PointToPointOp::Kind::kSend
                                            ? SendTo(launch, scope, op.tensor.data(), extent.count,
                                                     extent.type, op.peer)
                                            : ReceiveFrom(launch, scope, op.tensor.data(),
                                                          extent.count, extent.type, op.peer));
                      }
                      return absl::OkStatus();
                    });
                  }}};
}

}  // namespace plexus::nccl
