// The collectives of NcclBackend: each builds a Call and the NCCL calls it launches.
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/common/split_bytes.h"
#include "backends/nccl/nccl_backend.h"
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
// operator is made on the communicator for this call and destroyed once NCCL has accepted it.
absl::Status WithOperator(const NcclApi& api, NcclReduction reduction, Scope& scope, int ranks,
                          const Tensor& extent,
                          const std::function<ncclResult_t(ncclRedOp_t, NcclPiece)>& body,
                          absl::string_view what) {
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
  if (!NeedsOneRankPieces(reduction, ranks, api.version)) {
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

}  // namespace

WorkPtr NcclBackend::Broadcast(const Tensor& tensor, const BroadcastOptions& options) {
  const NcclExtent extent = MovementExtent(tensor.dtype(), tensor.numel());
  Call call{"broadcast",
            {&tensor},
            options.timeout,
            traffic::Broadcast(tensor.nbytes(), context_.size, context_.rank, options.root_rank)};
  return Run(call, [&](Scope& scope) {
    return NcclLaunchStatus(
        *nccl_,
        nccl_->Broadcast(tensor.data(), tensor.data(), extent.count, extent.type, options.root_rank,
                         scope.comm, scope.stream),
        "ncclBroadcast", scope.comm);
  });
}

WorkPtr NcclBackend::Reduce(const Tensor& tensor, const ReduceOptions& options) {
  auto reduction = ReductionFor("reduce", options.op, tensor.dtype());
  if (!reduction.ok()) return Work::Finished(reduction.status(), "reduce", context_.size);
  Call call{"reduce",
            {&tensor},
            options.timeout,
            traffic::Reduce(tensor.nbytes(), context_.size, context_.rank, options.root_rank)};
  return Run(call, [&](Scope& scope) {
    return WithOperator(
        *nccl_, *reduction, scope, context_.size, tensor,
        [&](ncclRedOp_t op, NcclPiece piece) {
          return nccl_->Reduce(At(tensor, piece.offset), At(tensor, piece.offset), piece.count,
                               reduction->type, op, options.root_rank, scope.comm, scope.stream);
        },
        "ncclReduce");
  });
}

WorkPtr NcclBackend::AllReduce(const Tensor& tensor, const AllReduceOptions& options) {
  auto reduction = ReductionFor("all_reduce", options.op, tensor.dtype());
  if (!reduction.ok()) return Work::Finished(reduction.status(), "all_reduce", context_.size);
  Call call{
      "all_reduce", {&tensor}, options.timeout, traffic::AllReduce(tensor.nbytes(), context_.size)};
  return Run(call, [&](Scope& scope) {
    return WithOperator(
        *nccl_, *reduction, scope, context_.size, tensor,
        [&](ncclRedOp_t op, NcclPiece piece) {
          return nccl_->AllReduce(At(tensor, piece.offset), At(tensor, piece.offset), piece.count,
                                  reduction->type, op, scope.comm, scope.stream);
        },
        "ncclAllReduce");
  });
}

WorkPtr NcclBackend::AllReduceCoalesced(absl::Span<const Tensor> tensors,
                                        const AllReduceCoalescedOptions& options) {
  std::vector<NcclReduction> reductions;
  int64_t bytes = 0;
  for (const Tensor& tensor : tensors) {
    auto reduction = ReductionFor("all_reduce_coalesced", options.op, tensor.dtype());
    if (!reduction.ok()) {
      return Work::Finished(reduction.status(), "all_reduce_coalesced", context_.size);
    }
    reductions.push_back(*reduction);
    bytes += tensor.nbytes();
  }
  Call call{"all_reduce_coalesced", Pointers(tensors), options.timeout,
            traffic::AllReduce(bytes, context_.size)};
  return Run(call, [&](Scope& scope) {
    return Grouped(*nccl_, scope, [&]() -> absl::Status {
      for (size_t i = 0; i < tensors.size(); ++i) {
        const Tensor& tensor = tensors[i];
        RETURN_IF_ERROR(WithOperator(
            *nccl_, reductions[i], scope, context_.size, tensor,
            [&](ncclRedOp_t op, NcclPiece piece) {
              return nccl_->AllReduce(At(tensor, piece.offset), At(tensor, piece.offset),
                                      piece.count, reductions[i].type, op, scope.comm,
                                      scope.stream);
            },
            "ncclAllReduce"));
      }
      return absl::OkStatus();
    });
  });
}

WorkPtr NcclBackend::AllGather(absl::Span<const Tensor> outputs, const Tensor& input,
                               const AllGatherOptions& options) {
  std::vector<const Tensor*> tensors = Pointers(outputs);
  tensors.push_back(&input);
  const NcclExtent extent = MovementExtent(input.dtype(), input.numel());
  Call call{"all_gather", tensors, options.timeout,
            traffic::AllGather(input.nbytes(), context_.size)};
  return Run(call, [&](Scope& scope) -> absl::Status {
    if (BackToBack(outputs)) {  // One all-gather straight into the outputs.
      return NcclLaunchStatus(*nccl_,
                              nccl_->AllGather(input.data(), outputs[0].data(), extent.count,
                                               extent.type, scope.comm, scope.stream),
                              "ncclAllGather", scope.comm);
    }
    // Scattered outputs: one broadcast per rank, launched together.
    return Grouped(*nccl_, scope, [&]() -> absl::Status {
      for (int root = 0; root < context_.size; ++root) {
        RETURN_IF_ERROR(
            NcclLaunchStatus(*nccl_,
                             nccl_->Broadcast(input.data(), outputs[root].data(), extent.count,
                                              extent.type, root, scope.comm, scope.stream),
                             "ncclBroadcast", scope.comm));
      }
      return absl::OkStatus();
    });
  });
}

WorkPtr NcclBackend::AllGatherIntoTensor(const Tensor& output, const Tensor& input,
                                         const AllGatherOptions& options) {
  const NcclExtent extent = MovementExtent(input.dtype(), input.numel());
  Call call{"all_gather_into_tensor",
            {&output, &input},
            options.timeout,
            traffic::AllGather(input.nbytes(), context_.size)};
  return Run(call, [&](Scope& scope) {
    return NcclLaunchStatus(*nccl_,
                            nccl_->AllGather(input.data(), output.data(), extent.count, extent.type,
                                             scope.comm, scope.stream),
                            "ncclAllGather", scope.comm);
  });
}

WorkPtr NcclBackend::Gather(absl::Span<const Tensor> outputs, const Tensor& input,
                            const GatherOptions& options) {
  std::vector<const Tensor*> tensors = Pointers(outputs);
  tensors.push_back(&input);
  const int root = options.root_rank;
  const NcclExtent extent = MovementExtent(input.dtype(), input.numel());
  Call call{"gather", tensors, options.timeout,
            traffic::Gather(input.nbytes(), context_.size, context_.rank, root)};
  return Run(call, [&](Scope& scope) {
    return Grouped(*nccl_, scope, [&]() -> absl::Status {
      if (context_.rank != root) {
        return NcclLaunchStatus(
            *nccl_,
            nccl_->Send(input.data(), extent.count, extent.type, root, scope.comm, scope.stream),
            "ncclSend", scope.comm);
      }
      for (int peer = 0; peer < context_.size; ++peer) {
        if (peer == root) continue;
        RETURN_IF_ERROR(NcclLaunchStatus(*nccl_,
                                         nccl_->Recv(outputs[peer].data(), extent.count,
                                                     extent.type, peer, scope.comm, scope.stream),
                                         "ncclRecv", scope.comm));
      }
      return CopyOnStream(outputs[root].data(), input.data(), input.nbytes(), scope.stream);
    });
  });
}

WorkPtr NcclBackend::Scatter(const Tensor& output, absl::Span<const Tensor> inputs,
                             const ScatterOptions& options) {
  std::vector<const Tensor*> tensors = Pointers(inputs);
  tensors.push_back(&output);
  const int root = options.root_rank;
  const NcclExtent extent = MovementExtent(output.dtype(), output.numel());
  Call call{"scatter", tensors, options.timeout,
            traffic::Scatter(output.nbytes(), context_.size, context_.rank, root)};
  return Run(call, [&](Scope& scope) {
    return Grouped(*nccl_, scope, [&]() -> absl::Status {
      if (context_.rank != root) {
        return NcclLaunchStatus(
            *nccl_,
            nccl_->Recv(output.data(), extent.count, extent.type, root, scope.comm, scope.stream),
            "ncclRecv", scope.comm);
      }
      for (int peer = 0; peer < context_.size; ++peer) {
        if (peer == root) continue;
        RETURN_IF_ERROR(NcclLaunchStatus(*nccl_,
                                         nccl_->Send(inputs[peer].data(), extent.count, extent.type,
                                                     peer, scope.comm, scope.stream),
                                         "ncclSend", scope.comm));
      }
      return CopyOnStream(output.data(), inputs[root].data(), output.nbytes(), scope.stream);
    });
  });
}

WorkPtr NcclBackend::ReduceScatter(const Tensor& output, absl::Span<const Tensor> inputs,
                                   const ReduceScatterOptions& options) {
  auto reduction = ReductionFor("reduce_scatter", options.op, output.dtype());
  if (!reduction.ok()) return Work::Finished(reduction.status(), "reduce_scatter", context_.size);
  std::vector<const Tensor*> tensors = Pointers(inputs);
  tensors.push_back(&output);
  Call call{"reduce_scatter", tensors, options.timeout,
            traffic::ReduceScatter(output.nbytes(), context_.size)};
  return Run(call, [&](Scope& scope) -> absl::Status {
    if (BackToBack(inputs)) {
      return WithOperator(
          *nccl_, *reduction, scope, context_.size, output,
          [&](ncclRedOp_t op, NcclPiece piece) {
            return nccl_->ReduceScatter(At(inputs[0], piece.offset), At(output, piece.offset),
                                        piece.count, reduction->type, op, scope.comm, scope.stream);
          },
          "ncclReduceScatter");
    }
    // Scattered inputs: one reduce per rank's block, launched together.
    return Grouped(*nccl_, scope, [&]() -> absl::Status {
      for (int root = 0; root < context_.size; ++root) {
        RETURN_IF_ERROR(WithOperator(
            *nccl_, *reduction, scope, context_.size, output,
            [&](ncclRedOp_t op, NcclPiece piece) {
              return nccl_->Reduce(At(inputs[root], piece.offset), At(output, piece.offset),
                                   piece.count, reduction->type, op, root, scope.comm,
                                   scope.stream);
            },
            "ncclReduce"));
      }
      return absl::OkStatus();
    });
  });
}

WorkPtr NcclBackend::ReduceScatterTensor(const Tensor& output, const Tensor& input,
                                         const ReduceScatterOptions& options) {
  auto reduction = ReductionFor("reduce_scatter_tensor", options.op, output.dtype());
  if (!reduction.ok()) {
    return Work::Finished(reduction.status(), "reduce_scatter_tensor", context_.size);
  }
  Call call{"reduce_scatter_tensor",
            {&output, &input},
            options.timeout,
            traffic::ReduceScatter(output.nbytes(), context_.size)};
  return Run(call, [&](Scope& scope) {
    return WithOperator(
        *nccl_, *reduction, scope, context_.size, output,
        [&](ncclRedOp_t op, NcclPiece piece) {
          return nccl_->ReduceScatter(At(input, piece.offset), At(output, piece.offset),
                                      piece.count, reduction->type, op, scope.comm, scope.stream);
        },
        "ncclReduceScatter");
  });
}

WorkPtr NcclBackend::AllToAll(absl::Span<const Tensor> outputs, absl::Span<const Tensor> inputs,
                              const AllToAllOptions& options) {
  std::vector<const Tensor*> tensors = Pointers(outputs);
  for (const Tensor& input : inputs) tensors.push_back(&input);
  std::vector<int64_t> send_bytes, recv_bytes;
  for (const Tensor& input : inputs) send_bytes.push_back(input.nbytes());
  for (const Tensor& output : outputs) recv_bytes.push_back(output.nbytes());
  Call call{"all_to_all", tensors, options.timeout,
            traffic::AllToAll(send_bytes, recv_bytes, context_.rank)};
  return Run(call, [&](Scope& scope) {
    return Grouped(*nccl_, scope, [&]() -> absl::Status {
      for (int peer = 0; peer < context_.size; ++peer) {
        if (peer == context_.rank) continue;
        const NcclExtent sent = MovementExtent(inputs[peer].dtype(), inputs[peer].numel());
        const NcclExtent received = MovementExtent(outputs[peer].dtype(), outputs[peer].numel());
        RETURN_IF_ERROR(NcclLaunchStatus(
            *nccl_,
            nccl_->Send(inputs[peer].data(), sent.count, sent.type, peer, scope.comm, scope.stream),
            "ncclSend", scope.comm));
        RETURN_IF_ERROR(NcclLaunchStatus(*nccl_,
                                         nccl_->Recv(outputs[peer].data(), received.count,
                                                     received.type, peer, scope.comm, scope.stream),
                                         "ncclRecv", scope.comm));
      }
      const Tensor& own = inputs[context_.rank];
      return CopyOnStream(outputs[context_.rank].data(), own.data(), own.nbytes(), scope.stream);
    });
  });
}

WorkPtr NcclBackend::AllToAllSingle(const Tensor& output, const Tensor& input,
                                    absl::Span<const int64_t> output_split_sizes,
                                    absl::Span<const int64_t> input_split_sizes,
                                    const AllToAllOptions& options) {
  const std::vector<int64_t> send_bytes = SplitBytes(input, input_split_sizes);
  const std::vector<int64_t> recv_bytes = SplitBytes(output, output_split_sizes);
  Call call{"all_to_all_single",
            {&output, &input},
            options.timeout,
            traffic::AllToAll(send_bytes, recv_bytes, context_.rank)};
  return Run(call, [&](Scope& scope) {
    return Grouped(*nccl_, scope, [&]() -> absl::Status {
      int64_t send_offset = 0, recv_offset = 0;
      for (int peer = 0; peer < context_.size; ++peer) {
        uint8_t* send = input.bytes() + send_offset;
        uint8_t* recv = output.bytes() + recv_offset;
        if (peer == context_.rank) {
          RETURN_IF_ERROR(CopyOnStream(recv, send, send_bytes[peer], scope.stream));
        } else {
          // Uneven splits may be zero; NCCL accepts empty sends and receives.
          RETURN_IF_ERROR(NcclLaunchStatus(
              *nccl_,
              nccl_->Send(send, send_bytes[peer], ncclUint8, peer, scope.comm, scope.stream),
              "ncclSend", scope.comm));
          RETURN_IF_ERROR(NcclLaunchStatus(
              *nccl_,
              nccl_->Recv(recv, recv_bytes[peer], ncclUint8, peer, scope.comm, scope.stream),
              "ncclRecv", scope.comm));
        }
        send_offset += send_bytes[peer];
        recv_offset += recv_bytes[peer];
      }
      return absl::OkStatus();
    });
  });
}

WorkPtr NcclBackend::Barrier(const BarrierOptions& options) {
  // As ProcessGroupNCCL: a one-element all-reduce on the device, complete when it has run.
  Call call{"barrier", {}, options.timeout, {}};
  return Run(call, [&](Scope& scope) {
    return NcclLaunchStatus(*nccl_,
                            nccl_->AllReduce(scope.scratch, scope.scratch, 1, ncclInt32, ncclSum,
                                             scope.comm, scope.stream),
                            "ncclAllReduce", scope.comm);
  });
}

WorkPtr NcclBackend::Send(const Tensor& tensor, int dst_rank, const SendOptions& options) {
  const NcclExtent extent = MovementExtent(tensor.dtype(), tensor.numel());
  Call call{"send", {&tensor}, options.timeout, {static_cast<int64_t>(tensor.nbytes()), 0}};
  return Run(call, [&](Scope& scope) {
    return NcclLaunchStatus(
        *nccl_,
        nccl_->Send(tensor.data(), extent.count, extent.type, dst_rank, scope.comm, scope.stream),
        "ncclSend", scope.comm);
  });
}

WorkPtr NcclBackend::Recv(const Tensor& tensor, int src_rank, const RecvOptions& options) {
  const NcclExtent extent = MovementExtent(tensor.dtype(), tensor.numel());
  Call call{"recv", {&tensor}, options.timeout, {0, static_cast<int64_t>(tensor.nbytes())}};
  return Run(call, [&](Scope& scope) {
    return NcclLaunchStatus(
        *nccl_,
        nccl_->Recv(tensor.data(), extent.count, extent.type, src_rank, scope.comm, scope.stream),
        "ncclRecv", scope.comm);
  });
}

WorkPtr NcclBackend::RecvAnySource(const Tensor&, const RecvOptions&) {
  // capabilities() says no, so the ProcessGroup never calls this.
  return Work::Finished(absl::UnimplementedError("recv_any_source: nccl matches by source rank"),
                        "recv_any_source", context_.size);
}

WorkPtr NcclBackend::BatchPointToPoint(absl::Span<const PointToPointOp> ops,
                                       const BatchOptions& options) {
  std::vector<const Tensor*> tensors;
  nominal_traffic::Traffic moved;
  for (const PointToPointOp& op : ops) {
    tensors.push_back(&op.tensor);
    (op.kind == PointToPointOp::Kind::kSend ? moved.sent : moved.received) += op.tensor.nbytes();
  }
  Call call{"batch_isend_irecv", tensors, options.timeout, moved};
  return Run(call, [&](Scope& scope) {
    return Grouped(*nccl_, scope, [&]() -> absl::Status {
      for (const PointToPointOp& op : ops) {
        const NcclExtent extent = MovementExtent(op.tensor.dtype(), op.tensor.numel());
        const bool send = op.kind == PointToPointOp::Kind::kSend;
        RETURN_IF_ERROR(
            NcclLaunchStatus(*nccl_,
                             send ? nccl_->Send(op.tensor.data(), extent.count, extent.type,
                                                op.peer, scope.comm, scope.stream)
                                  : nccl_->Recv(op.tensor.data(), extent.count, extent.type,
                                                op.peer, scope.comm, scope.stream),
                             send ? "ncclSend" : "ncclRecv", scope.comm));
      }
      return absl::OkStatus();
    });
  });
}

}  // namespace plexus::nccl
