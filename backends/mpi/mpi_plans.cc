// The collectives MpiBackend runs natively: each kind's plan, the MPI call it posts.
#include "backends/mpi/mpi_plans.h"

#include <climits>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "algorithms/reduce_kernels.h"
#include "backends/common/split_bytes.h"

namespace plexus::mpi {

using algorithms::CollectiveContext;
using algorithms::KernelOp;
using algorithms::PackTensors;
using algorithms::PostScale;
using algorithms::PreScale;
using algorithms::ScratchArena;
using algorithms::TotalBytes;
using algorithms::UnpackTensors;

namespace {

// MPI's type for reducing `dtype`; MPI_DATATYPE_NULL where MPI has none.
MPI_Datatype ReductionType(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return MPI_UINT8_T;
    case DType::kInt8:
      return MPI_INT8_T;
    case DType::kInt16:
      return MPI_INT16_T;
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kFloat64:
      return MPI_DOUBLE;
    case DType::kBool:
    case DType::kFloat16:
    case DType::kBFloat16:
      return MPI_DATATYPE_NULL;
  }
  return MPI_DATATYPE_NULL;
}

// MPI's op for a kernel op (AVG and PREMUL_SUM arrive as SUM).
MPI_Op ReductionOp(ReduceOpKind kernel) {
  switch (kernel) {
    case ReduceOpKind::kProduct:
      return MPI_PROD;
    case ReduceOpKind::kMin:
      return MPI_MIN;
    case ReduceOpKind::kMax:
      return MPI_MAX;
    case ReduceOpKind::kBand:
      return MPI_BAND;
    case ReduceOpKind::kBor:
      return MPI_BOR;
    case ReduceOpKind::kBxor:
      return MPI_BXOR;
    default:
      return MPI_SUM;
  }
}

bool FitsInt(int64_t value) { return value >= 0 && value <= INT_MAX; }

// Whether MPI reduces `count` elements of `dtype` itself.
bool NativeReduction(DType dtype, int64_t count) {
  return ReductionType(dtype) != MPI_DATATYPE_NULL && FitsInt(count);
}

// Byte counts and displacements for MPI_Ialltoallv; empty when any does not fit an int.
struct Layout {
  std::vector<int> counts;
  std::vector<int> displacements;
};
std::optional<Layout> ByteLayout(const std::vector<int64_t>& bytes) {
  Layout layout;
  int64_t offset = 0;
  for (int64_t b : bytes) {
    if (!FitsInt(b) || !FitsInt(offset)) return std::nullopt;
    layout.counts.push_back(static_cast<int>(b));
    layout.displacements.push_back(static_cast<int>(offset));
    offset += b;
  }
  return layout;
}

// Where MPI lacks the dtype's reduction or a count passes INT_MAX: algorithms/ runs the call.
absl::Status NotNative(const Collective& call) {
  return NotRunError("mpi", call, "MPI lacks the dtype, or a count passes INT_MAX");
}

absl::StatusOr<MpiPlan> PlanAllReduce(const Collective& call, int /*rank*/, int size) {
  const Tensor& tensor = call.tensor();

  if (!NativeReduction(tensor.dtype(), tensor.numel())) {
    return NotNative(call);
  }
  return MpiPlan::Of(
      call, CollectiveKind::kAllReduce, tensor.dtype(), tensor.numel(),
      nominal_traffic::AllReduce(tensor.nbytes(), size),
      [tensor, op = call.op, n = size](CollectiveContext&) -> absl::StatusOr<NativeCall> {
        PreScale(tensor.data(), tensor.numel(), tensor.dtype(), op);
        NativeCall call;
        call.post = [tensor, op](MPI_Comm comm, MPI_Request* request) {
          return MPI_Iallreduce(MPI_IN_PLACE, tensor.data(), static_cast<int>(tensor.numel()),
                                ReductionType(tensor.dtype()), ReductionOp(KernelOp(op.kind)), comm,
                                request);
        };
        call.after = [tensor, op, n] {
          PostScale(tensor.data(), tensor.numel(), tensor.dtype(), op, n);
        };
        return call;
      });
}

absl::StatusOr<MpiPlan> PlanAllReduceCoalesced(const Collective& call, int /*rank*/, int size) {
  const absl::Span<const Tensor> tensors = call.outputs;

  std::vector<Tensor> list(tensors.begin(), tensors.end());
  const int64_t bytes = TotalBytes(list);
  const int64_t count = bytes / static_cast<int64_t>(list[0].element_size());
  if (!NativeReduction(list[0].dtype(), count)) {
    return NotNative(call);
  }
  return MpiPlan::Of(call, CollectiveKind::kAllReduceCoalesced, list[0].dtype(), count,
                     nominal_traffic::AllReduce(bytes, size),
                     [list, bytes, count, op = call.op,
                      n = size](CollectiveContext& ctx) -> absl::StatusOr<NativeCall> {
                       const DType dtype = list[0].dtype();
                       uint8_t* packed = ctx.Scratch(ScratchArena::kPacked, bytes);
                       PackTensors(list, packed);
                       PreScale(packed, count, dtype, op);
                       NativeCall call;
                       call.post = [packed, count, dtype, op](MPI_Comm comm, MPI_Request* request) {
                         return MPI_Iallreduce(MPI_IN_PLACE, packed, static_cast<int>(count),
                                               ReductionType(dtype), ReductionOp(KernelOp(op.kind)),
                                               comm, request);
                       };
                       call.after = [list, packed, count, dtype, op, n] {
                         PostScale(packed, count, dtype, op, n);
                         UnpackTensors(packed, list);
                       };
                       return call;
                     });
}

absl::StatusOr<MpiPlan> PlanReduce(const Collective& call, int rank, int size) {
  const Tensor& tensor = call.tensor();

  if (!NativeReduction(tensor.dtype(), tensor.numel())) {
    return NotNative(call);
  }
  const bool root = rank == call.root;
  return MpiPlan::Of(
      call, CollectiveKind::kReduce, tensor.dtype(), tensor.numel(),
      nominal_traffic::Reduce(tensor.nbytes(), size, rank, call.root),
      [tensor, op = call.op, root_rank = call.root, root,
       n = size](CollectiveContext& ctx) -> absl::StatusOr<NativeCall> {
        const DType dtype = tensor.dtype();
        const int64_t count = tensor.numel();
        // Off the root the caller's tensor stays as it was: PREMUL_SUM scales a copy there.
        void* input = tensor.data();
        if (!root && op.kind == ReduceOpKind::kPremulSum) {
          uint8_t* scaled = ctx.Scratch(ScratchArena::kPacked, tensor.nbytes());
          if (tensor.nbytes() > 0) std::memcpy(scaled, tensor.data(), tensor.nbytes());
          input = scaled;
        }
        PreScale(input, count, dtype, op);
        NativeCall call;
        call.post = [tensor, input, root, op, root_rank](MPI_Comm comm, MPI_Request* request) {
          return MPI_Ireduce(root ? MPI_IN_PLACE : input, root ? tensor.data() : nullptr,
                             static_cast<int>(tensor.numel()), ReductionType(tensor.dtype()),
                             ReductionOp(KernelOp(op.kind)), root_rank, comm, request);
        };
        if (root) {
          call.after = [tensor, op, n] {
            PostScale(tensor.data(), tensor.numel(), tensor.dtype(), op, n);
          };
        }
        return call;
      });
}

absl::StatusOr<MpiPlan> PlanBroadcast(const Collective& call, int rank, int size) {
  const Tensor& tensor = call.tensor();

  if (!FitsInt(tensor.nbytes())) return NotNative(call);
  return MpiPlan::Of(call, CollectiveKind::kBroadcast, tensor.dtype(), tensor.numel(),
                     nominal_traffic::Broadcast(tensor.nbytes(), size, rank, call.root),
                     [tensor, root = call.root](CollectiveContext&) -> absl::StatusOr<NativeCall> {
                       NativeCall call;
                       call.post = [tensor, root](MPI_Comm comm, MPI_Request* request) {
                         return MPI_Ibcast(tensor.data(), static_cast<int>(tensor.nbytes()),
                                           MPI_BYTE, root, comm, request);
                       };
                       return call;
                     });
}

absl::StatusOr<MpiPlan> PlanAllGatherIntoTensor(const Collective& call, int rank, int size) {
  const Tensor& output = call.output();
  const Tensor& input = call.input();

  if (!FitsInt(output.nbytes())) {
    return NotNative(call);
  }
  return MpiPlan::Of(
      call, CollectiveKind::kAllGather, input.dtype(), input.numel(),
      nominal_traffic::AllGather(input.nbytes(), size),
      [output, input, r = rank](CollectiveContext&) -> absl::StatusOr<NativeCall> {
        NativeCall call;
        call.post = [output, input, r](MPI_Comm comm, MPI_Request* request) {
          const int bytes = static_cast<int>(input.nbytes());
          // In place when the input already sits in this rank's block.
          const bool in_place = input.bytes() == output.bytes() + static_cast<size_t>(r) * bytes;
          return MPI_Iallgather(in_place ? MPI_IN_PLACE : input.data(), bytes, MPI_BYTE,
                                output.data(), bytes, MPI_BYTE, comm, request);
        };
        return call;
      });
}

absl::StatusOr<MpiPlan> PlanAllGather(const Collective& call, int /*rank*/, int size) {
  const absl::Span<const Tensor> outputs = call.outputs;
  const Tensor& input = call.input();

  std::vector<Tensor> list(outputs.begin(), outputs.end());
  if (!FitsInt(TotalBytes(list))) return NotNative(call);
  return MpiPlan::Of(call, CollectiveKind::kAllGather, input.dtype(), input.numel(),
                     nominal_traffic::AllGather(input.nbytes(), size),
                     [list, input](CollectiveContext& ctx) -> absl::StatusOr<NativeCall> {
                       // The outputs are separate tensors: gather into one block, then hand them
                       // out.
                       uint8_t* packed = ctx.Scratch(ScratchArena::kPacked, TotalBytes(list));
                       NativeCall call;
                       call.post = [packed, input](MPI_Comm comm, MPI_Request* request) {
                         const int bytes = static_cast<int>(input.nbytes());
                         return MPI_Iallgather(input.data(), bytes, MPI_BYTE, packed, bytes,
                                               MPI_BYTE, comm, request);
                       };
                       call.after = [packed, list] { UnpackTensors(packed, list); };
                       return call;
                     });
}

absl::StatusOr<MpiPlan> PlanGather(const Collective& call, int rank, int size) {
  const absl::Span<const Tensor> outputs = call.outputs;
  const Tensor& input = call.input();

  std::vector<Tensor> list(outputs.begin(), outputs.end());
  if (!FitsInt(static_cast<int64_t>(input.nbytes()) * size)) {
    return NotNative(call);
  }
  return MpiPlan::Of(
      call, CollectiveKind::kGather, input.dtype(), input.numel(),
      nominal_traffic::Gather(input.nbytes(), size, rank, call.root),
      [list, input, root = call.root](CollectiveContext& ctx) -> absl::StatusOr<NativeCall> {
        uint8_t* packed =
            list.empty() ? nullptr : ctx.Scratch(ScratchArena::kPacked, TotalBytes(list));
        NativeCall call;
        call.post = [packed, input, root](MPI_Comm comm, MPI_Request* request) {
          const int bytes = static_cast<int>(input.nbytes());
          return MPI_Igather(input.data(), bytes, MPI_BYTE, packed, bytes, MPI_BYTE, root, comm,
                             request);
        };
        if (!list.empty()) call.after = [packed, list] { UnpackTensors(packed, list); };
        return call;
      });
}

absl::StatusOr<MpiPlan> PlanScatter(const Collective& call, int rank, int size) {
  const Tensor& output = call.output();
  const absl::Span<const Tensor> inputs = call.inputs;

  std::vector<Tensor> list(inputs.begin(), inputs.end());
  if (!FitsInt(static_cast<int64_t>(output.nbytes()) * size)) {
    return NotNative(call);
  }
  return MpiPlan::Of(
      call, CollectiveKind::kScatter, output.dtype(), output.numel(),
      nominal_traffic::Scatter(output.nbytes(), size, rank, call.root),
      [list, output, root = call.root](CollectiveContext& ctx) -> absl::StatusOr<NativeCall> {
        uint8_t* packed = nullptr;
        if (!list.empty()) {
          packed = ctx.Scratch(ScratchArena::kPacked, TotalBytes(list));
          PackTensors(list, packed);
        }
        NativeCall call;
        call.post = [packed, output, root](MPI_Comm comm, MPI_Request* request) {
          const int bytes = static_cast<int>(output.nbytes());
          return MPI_Iscatter(packed, bytes, MPI_BYTE, output.data(), bytes, MPI_BYTE, root, comm,
                              request);
        };
        return call;
      });
}

absl::StatusOr<MpiPlan> PlanReduceScatterTensor(const Collective& call, int /*rank*/, int size) {
  const Tensor& output = call.output();
  const Tensor& input = call.input();

  if (!NativeReduction(output.dtype(), input.numel())) {
    return NotNative(call);
  }
  return MpiPlan::Of(call, CollectiveKind::kReduceScatter, output.dtype(), output.numel(),
                     nominal_traffic::ReduceScatter(output.nbytes(), size),
                     [output, input, op = call.op,
                      n = size](CollectiveContext& ctx) -> absl::StatusOr<NativeCall> {
                       // MPI reads the input without changing it; PREMUL_SUM scales a copy.
                       const void* source = input.data();
                       if (op.kind == ReduceOpKind::kPremulSum) {
                         uint8_t* scaled = ctx.Scratch(ScratchArena::kPacked, input.nbytes());
                         if (input.nbytes() > 0) std::memcpy(scaled, input.data(), input.nbytes());
                         PreScale(scaled, input.numel(), input.dtype(), op);
                         source = scaled;
                       }
                       NativeCall call;
                       call.post = [source, output, op](MPI_Comm comm, MPI_Request* request) {
                         return MPI_Ireduce_scatter_block(
                             source, output.data(), static_cast<int>(output.numel()),
                             ReductionType(output.dtype()), ReductionOp(KernelOp(op.kind)), comm,
                             request);
                       };
                       call.after = [output, op, n] {
                         PostScale(output.data(), output.numel(), output.dtype(), op, n);
                       };
                       return call;
                     });
}

absl::StatusOr<MpiPlan> PlanReduceScatter(const Collective& call, int /*rank*/, int size) {
  const Tensor& output = call.output();
  const absl::Span<const Tensor> inputs = call.inputs;

  std::vector<Tensor> list(inputs.begin(), inputs.end());
  if (!NativeReduction(output.dtype(), output.numel() * size)) {
    return NotNative(call);
  }
  return MpiPlan::Of(
      call, CollectiveKind::kReduceScatter, output.dtype(), output.numel(),
      nominal_traffic::ReduceScatter(output.nbytes(), size),
      [list, output, op = call.op, n = size](CollectiveContext& ctx) -> absl::StatusOr<NativeCall> {
        uint8_t* packed = ctx.Scratch(ScratchArena::kPacked, TotalBytes(list));
        PackTensors(list, packed);
        PreScale(packed, output.numel() * n, output.dtype(), op);
        NativeCall call;
        call.post = [packed, output, op](MPI_Comm comm, MPI_Request* request) {
          return MPI_Ireduce_scatter_block(packed, output.data(), static_cast<int>(output.numel()),
                                           ReductionType(output.dtype()),
                                           ReductionOp(KernelOp(op.kind)), comm, request);
        };
        call.after = [output, op, n] {
          PostScale(output.data(), output.numel(), output.dtype(), op, n);
        };
        return call;
      });
}

absl::StatusOr<MpiPlan> PlanAllToAllSingle(const Collective& call, int rank, int /*size*/) {
  const Tensor& output = call.output();
  const Tensor& input = call.input();
  const absl::Span<const int64_t> output_split_sizes = call.output_splits;
  const absl::Span<const int64_t> input_split_sizes = call.input_splits;

  const std::vector<int64_t> send = SplitBytes(input, input_split_sizes);
  const std::vector<int64_t> recv = SplitBytes(output, output_split_sizes);
  std::optional<Layout> send_layout = ByteLayout(send);
  std::optional<Layout> recv_layout = ByteLayout(recv);
  if (!send_layout || !recv_layout) {
    return NotNative(call);
  }
  return MpiPlan::Of(
      call, CollectiveKind::kAllToAll, input.dtype(), 0,
      nominal_traffic::AllToAll(send, recv, rank),
      [output, input, send_layout = *send_layout,
       recv_layout = *recv_layout](CollectiveContext&) -> absl::StatusOr<NativeCall> {
        NativeCall call;
        // MPI reads the count arrays until the operation completes: they live in the closure.
        call.post = [output, input, send_layout, recv_layout](MPI_Comm comm, MPI_Request* request) {
          return MPI_Ialltoallv(input.data(), send_layout.counts.data(),
                                send_layout.displacements.data(), MPI_BYTE, output.data(),
                                recv_layout.counts.data(), recv_layout.displacements.data(),
                                MPI_BYTE, comm, request);
        };
        return call;
      });
}

absl::StatusOr<MpiPlan> PlanAllToAll(const Collective& call, int rank, int /*size*/) {
  const absl::Span<const Tensor> outputs = call.outputs;
  const absl::Span<const Tensor> inputs = call.inputs;

  std::vector<Tensor> outs(outputs.begin(), outputs.end());
  std::vector<Tensor> ins(inputs.begin(), inputs.end());
  std::vector<int64_t> send, recv;
  for (const Tensor& t : ins) send.push_back(static_cast<int64_t>(t.nbytes()));
  for (const Tensor& t : outs) recv.push_back(static_cast<int64_t>(t.nbytes()));
  std::optional<Layout> send_layout = ByteLayout(send);
  std::optional<Layout> recv_layout = ByteLayout(recv);
  if (!send_layout || !recv_layout || !FitsInt(TotalBytes(ins)) || !FitsInt(TotalBytes(outs))) {
    return NotNative(call);
  }
  return MpiPlan::Of(
      call, CollectiveKind::kAllToAll, ins[0].dtype(), 0,
      nominal_traffic::AllToAll(send, recv, rank),
      [outs, ins, send_layout = *send_layout,
       recv_layout = *recv_layout](CollectiveContext& ctx) -> absl::StatusOr<NativeCall> {
        // Separate tensors per peer: pack, exchange with MPI_Ialltoallv, unpack.
        uint8_t* packed_in = ctx.Scratch(ScratchArena::kPacked, TotalBytes(ins));
        uint8_t* packed_out = ctx.Scratch(ScratchArena::kAccumulator, TotalBytes(outs));
        PackTensors(ins, packed_in);
        NativeCall call;
        call.post = [packed_in, packed_out, send_layout, recv_layout](MPI_Comm comm,
                                                                      MPI_Request* request) {
          return MPI_Ialltoallv(packed_in, send_layout.counts.data(),
                                send_layout.displacements.data(), MPI_BYTE, packed_out,
                                recv_layout.counts.data(), recv_layout.displacements.data(),
                                MPI_BYTE, comm, request);
        };
        call.after = [packed_out, outs] { UnpackTensors(packed_out, outs); };
        return call;
      });
}

absl::StatusOr<MpiPlan> PlanBarrier(const Collective& call, int /*rank*/, int /*size*/) {
  return MpiPlan::Of(call, CollectiveKind::kBarrier, DType::kUInt8, 0, {},
                     [](CollectiveContext&) -> absl::StatusOr<NativeCall> {
                       NativeCall call;
                       call.post = [](MPI_Comm comm, MPI_Request* request) {
                         return MPI_Ibarrier(comm, request);
                       };
                       return call;
                     });
}

}  // namespace

absl::StatusOr<MpiPlan> PlanMpiCall(const Collective& call, int rank, int size) {
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
    case CollectiveKind::kSend:  // Point-to-point runs on the transport.
    case CollectiveKind::kRecv:
    case CollectiveKind::kRecvAnySource:
      return NotRunError("mpi", call, "point-to-point runs on MpiTransport");
  }
  return NotRunError("mpi", call);
}

}  // namespace plexus::mpi
