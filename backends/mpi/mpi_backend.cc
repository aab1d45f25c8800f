#include "backends/mpi/mpi_backend.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "algorithms/reduce_kernels.h"
#include "backends/interface/backend_registry.h"
#include "base/core/status_macros.h"
#include "base/rendezvous/rendezvous.h"
#include "base/store/tcp_store.h"

namespace plexus::mpi {

using algorithms::AlgorithmTable;
using algorithms::CollectiveContext;
using algorithms::CollectiveKind;
using algorithms::KernelOp;
using algorithms::PackTensors;
using algorithms::PostScale;
using algorithms::PreScale;
using algorithms::ScratchArena;
using algorithms::TotalBytes;
using algorithms::UnpackTensors;
using executor::Collectives;

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

// Posts `post` on the group's native communicator from this thread and tests it until done
// (needs MPI_THREAD_MULTIPLE). At the deadline, or when the group breaks meanwhile, the request
// goes to the engine to be reaped and the group breaks.
absl::Status PostAndTest(MpiGroup& group, const std::string& what,
                         const std::function<int(MPI_Comm, MPI_Request*)>& post,
                         absl::Time deadline) {
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = post(group.native(), &request);
  if (rc != MPI_SUCCESS) {
    absl::Status status = MpiErrorToStatus(rc, what);
    group.Break(status);
    return status;
  }
  for (uint64_t round = 0;; ++round) {
    int done = 0;
    MPI_Status mpi_status;
    rc = MPI_Test(&request, &done, &mpi_status);
    if (rc != MPI_SUCCESS) {
      absl::Status status = MpiErrorToStatus(rc, what);
      group.Break(status);
      return status;
    }
    if (done) return absl::OkStatus();
    // Checking the clock and the group every round would cost more than the test itself.
    if (round % 64 == 63) {
      absl::Status status = group.broken();
      if (status.ok() && absl::Now() >= deadline) {
        status = absl::DeadlineExceededError(
            absl::StrCat(what,
                         ": not complete by its deadline (a peer did not make the "
                         "matching call in time)"));
      }
      if (!status.ok()) {
        group.engine()->Adopt(request, what);
        group.Break(status);
        return status;
      }
    }
    // Other ranks' processes may need this core (fewer cores than ranks).
    std::this_thread::yield();
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<Backend>> MpiBackend::Create(const BackendContext& context) {
  ASSIGN_OR_RETURN(MpiEngine * engine, MpiEngine::Get());
  ASSIGN_OR_RETURN(AlgorithmTable table, AlgorithmTable::FromEnvironment());
  // Group rank -> MPI_COMM_WORLD rank, through the group's store (plexus's ranks need not be
  // MPI's, e.g. with a file:// rendezvous).
  Store& store = *context.store;
  RETURN_IF_ERROR(
      store.Set(absl::StrCat("mpi_rank/", context.rank), absl::StrCat(engine->world_rank())));
  std::vector<std::string> keys;
  for (int r = 0; r < context.size; ++r) keys.push_back(absl::StrCat("mpi_rank/", r));
  RETURN_IF_ERROR(store.Wait(keys, context.timeout));
  std::vector<int> mpi_ranks;
  for (const std::string& key : keys) {
    ASSIGN_OR_RETURN(std::string text, store.Get(key));
    int mpi_rank = -1;
    if (!absl::SimpleAtoi(text, &mpi_rank) || mpi_rank < 0 || mpi_rank >= engine->world_size()) {
      return absl::InternalError(absl::StrCat(key, " is '", text, "'"));
    }
    for (size_t i = 0; i < mpi_ranks.size(); ++i) {
      if (mpi_ranks[i] == mpi_rank) {
        return absl::FailedPreconditionError(absl::StrCat(
            "group ranks ", i, " and ", mpi_ranks.size(), " are the same MPI process (rank ",
            mpi_rank, "); each plexus rank must be its own mpirun process"));
      }
    }
    mpi_ranks.push_back(mpi_rank);
  }
  ASSIGN_OR_RETURN(
      std::shared_ptr<MpiGroup> group,
      MpiGroup::Create(engine, context.group_name, mpi_ranks, context.rank, context.timeout));
  auto transport = std::make_shared<MpiTransport>(group);
  auto collectives = std::make_unique<Collectives>(std::move(transport), std::move(table));
  return std::shared_ptr<Backend>(new MpiBackend(std::move(collectives), std::move(group)));
}

// What a native call does on the worker: prepare (pack, pre-scale) and return the MPI call to
// post on the group's native communicator; `after` runs once it completed (unpack, post-scale)
// and may be empty.
struct NativeCall {
  std::function<int(MPI_Comm, MPI_Request*)> post;
  std::function<void()> after;
};

// One collective run natively: what peers check (kind, dtype, count), the bytes it moves for
// the Work's stats, and its preparation.
struct NativePlan {
  CollectiveKind kind;
  DType dtype;
  int64_t count;
  nominal_traffic::Traffic traffic;
  std::function<absl::StatusOr<NativeCall>(CollectiveContext&)> prepare;
};

BackendCapabilities MpiBackend::capabilities() const { return CpuTransportCapabilities(); }

WorkPtr MpiBackend::SubmitNative(absl::Duration timeout, NativePlan plan) {
  return collectives().Submit(
      plan.kind, plan.dtype, plan.count, timeout,
      [group = group_, traffic = plan.traffic,
       prepare = std::move(plan.prepare)](CollectiveContext& ctx) -> absl::Status {
        RETURN_IF_ERROR(group->broken());
        ASSIGN_OR_RETURN(NativeCall call, prepare(ctx));
        const std::string what =
            absl::StrCat("mpi ", CollectiveName(ctx.kind()), " #", ctx.sequence(), " in group '",
                         group->name(), "' on rank ", ctx.rank());
        if (group->engine()->direct_progress()) {
          RETURN_IF_ERROR(PostAndTest(*group, what, call.post, ctx.deadline()));
        } else {
          auto work = std::make_shared<Work>(std::string(CollectiveName(ctx.kind())), ctx.size());
          MpiEngine::Operation op;
          op.what = what;
          op.post = [comm = group->native(), post = std::move(call.post)](MPI_Request* request) {
            return post(comm, request);
          };
          op.on_failure = [group](const absl::Status& status) { group->Break(status); };
          op.deadline = ctx.deadline();
          op.owner = group.get();
          op.work = work;
          group->engine()->Start(std::move(op));
          RETURN_IF_ERROR(ctx.Wait(work));
        }
        if (call.after) call.after();
        ctx.CountBytes(traffic.sent, traffic.received);
        return absl::OkStatus();
      });
}

namespace {

std::optional<NativePlan> PlanAllReduce(const Collective& call, int /*rank*/, int size) {
  const Tensor& tensor = call.tensor();
  const AllReduceOptions options = call.all_reduce_options();

  if (!NativeReduction(tensor.dtype(), tensor.numel())) {
    return std::nullopt;
  }
  return NativePlan{
      CollectiveKind::kAllReduce, tensor.dtype(), tensor.numel(),
      nominal_traffic::AllReduce(tensor.nbytes(), size),
      [tensor, op = options.op, n = size](CollectiveContext&) -> absl::StatusOr<NativeCall> {
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
      }};
}

std::optional<NativePlan> PlanAllReduceCoalesced(const Collective& call, int /*rank*/, int size) {
  const absl::Span<const Tensor> tensors = call.outputs;
  const AllReduceCoalescedOptions options = call.coalesced_options();

  std::vector<Tensor> list(tensors.begin(), tensors.end());
  const int64_t bytes = TotalBytes(list);
  const int64_t count = bytes / static_cast<int64_t>(list[0].element_size());
  if (!NativeReduction(list[0].dtype(), count)) {
    return std::nullopt;
  }
  return NativePlan{CollectiveKind::kAllReduceCoalesced, list[0].dtype(), count,
                    nominal_traffic::AllReduce(bytes, size),
                    [list, bytes, count, op = options.op,
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
                    }};
}

std::optional<NativePlan> PlanReduce(const Collective& call, int rank, int size) {
  const Tensor& tensor = call.tensor();
  const ReduceOptions options = call.reduce_options();

  if (!NativeReduction(tensor.dtype(), tensor.numel())) {
    return std::nullopt;
  }
  const bool root = rank == options.root_rank;
  return NativePlan{
      CollectiveKind::kReduce, tensor.dtype(), tensor.numel(),
      nominal_traffic::Reduce(tensor.nbytes(), size, rank, options.root_rank),
      [tensor, options, root, n = size](CollectiveContext& ctx) -> absl::StatusOr<NativeCall> {
        const DType dtype = tensor.dtype();
        const int64_t count = tensor.numel();
        // Off the root the caller's tensor stays as it was: PREMUL_SUM scales a copy there.
        void* input = tensor.data();
        if (!root && options.op.kind == ReduceOpKind::kPremulSum) {
          uint8_t* scaled = ctx.Scratch(ScratchArena::kPacked, tensor.nbytes());
          if (tensor.nbytes() > 0) std::memcpy(scaled, tensor.data(), tensor.nbytes());
          input = scaled;
        }
        PreScale(input, count, dtype, options.op);
        NativeCall call;
        call.post = [tensor, input, root, options](MPI_Comm comm, MPI_Request* request) {
          return MPI_Ireduce(root ? MPI_IN_PLACE : input, root ? tensor.data() : nullptr,
                             static_cast<int>(tensor.numel()), ReductionType(tensor.dtype()),
                             ReductionOp(KernelOp(options.op.kind)), options.root_rank, comm,
                             request);
        };
        if (root) {
          call.after = [tensor, op = options.op, n] {
            PostScale(tensor.data(), tensor.numel(), tensor.dtype(), op, n);
          };
        }
        return call;
      }};
}

std::optional<NativePlan> PlanBroadcast(const Collective& call, int rank, int size) {
  const Tensor& tensor = call.tensor();
  const BroadcastOptions options = call.broadcast_options();

  if (!FitsInt(tensor.nbytes())) return std::nullopt;
  return NativePlan{
      CollectiveKind::kBroadcast, tensor.dtype(), tensor.numel(),
      nominal_traffic::Broadcast(tensor.nbytes(), size, rank, options.root_rank),
      [tensor, root = options.root_rank](CollectiveContext&) -> absl::StatusOr<NativeCall> {
        NativeCall call;
        call.post = [tensor, root](MPI_Comm comm, MPI_Request* request) {
          return MPI_Ibcast(tensor.data(), static_cast<int>(tensor.nbytes()), MPI_BYTE, root, comm,
                            request);
        };
        return call;
      }};
}

std::optional<NativePlan> PlanAllGatherIntoTensor(const Collective& call, int rank, int size) {
  const Tensor& output = call.output();
  const Tensor& input = call.input();

  if (!FitsInt(output.nbytes())) {
    return std::nullopt;
  }
  return NativePlan{
      CollectiveKind::kAllGather, input.dtype(), input.numel(),
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
      }};
}

std::optional<NativePlan> PlanAllGather(const Collective& call, int /*rank*/, int size) {
  const absl::Span<const Tensor> outputs = call.outputs;
  const Tensor& input = call.input();

  std::vector<Tensor> list(outputs.begin(), outputs.end());
  if (!FitsInt(TotalBytes(list))) return std::nullopt;
  return NativePlan{CollectiveKind::kAllGather, input.dtype(), input.numel(),
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
                    }};
}

std::optional<NativePlan> PlanGather(const Collective& call, int rank, int size) {
  const absl::Span<const Tensor> outputs = call.outputs;
  const Tensor& input = call.input();
  const GatherOptions options = call.gather_options();

  std::vector<Tensor> list(outputs.begin(), outputs.end());
  if (!FitsInt(static_cast<int64_t>(input.nbytes()) * size)) {
    return std::nullopt;
  }
  return NativePlan{CollectiveKind::kGather, input.dtype(), input.numel(),
                    nominal_traffic::Gather(input.nbytes(), size, rank, options.root_rank),
                    [list, input, root = options.root_rank](
                        CollectiveContext& ctx) -> absl::StatusOr<NativeCall> {
                      uint8_t* packed = list.empty()
                                            ? nullptr
                                            : ctx.Scratch(ScratchArena::kPacked, TotalBytes(list));
                      NativeCall call;
                      call.post = [packed, input, root](MPI_Comm comm, MPI_Request* request) {
                        const int bytes = static_cast<int>(input.nbytes());
                        return MPI_Igather(input.data(), bytes, MPI_BYTE, packed, bytes, MPI_BYTE,
                                           root, comm, request);
                      };
                      if (!list.empty())
                        call.after = [packed, list] { UnpackTensors(packed, list); };
                      return call;
                    }};
}

std::optional<NativePlan> PlanScatter(const Collective& call, int rank, int size) {
  const Tensor& output = call.output();
  const absl::Span<const Tensor> inputs = call.inputs;
  const ScatterOptions options = call.scatter_options();

  std::vector<Tensor> list(inputs.begin(), inputs.end());
  if (!FitsInt(static_cast<int64_t>(output.nbytes()) * size)) {
    return std::nullopt;
  }
  return NativePlan{CollectiveKind::kScatter, output.dtype(), output.numel(),
                    nominal_traffic::Scatter(output.nbytes(), size, rank, options.root_rank),
                    [list, output, root = options.root_rank](
                        CollectiveContext& ctx) -> absl::StatusOr<NativeCall> {
                      uint8_t* packed = nullptr;
                      if (!list.empty()) {
                        packed = ctx.Scratch(ScratchArena::kPacked, TotalBytes(list));
                        PackTensors(list, packed);
                      }
                      NativeCall call;
                      call.post = [packed, output, root](MPI_Comm comm, MPI_Request* request) {
                        const int bytes = static_cast<int>(output.nbytes());
                        return MPI_Iscatter(packed, bytes, MPI_BYTE, output.data(), bytes, MPI_BYTE,
                                            root, comm, request);
                      };
                      return call;
                    }};
}

std::optional<NativePlan> PlanReduceScatterTensor(const Collective& call, int /*rank*/, int size) {
  const Tensor& output = call.output();
  const Tensor& input = call.input();
  const ReduceScatterOptions options = call.reduce_scatter_options();

  if (!NativeReduction(output.dtype(), input.numel())) {
    return std::nullopt;
  }
  return NativePlan{CollectiveKind::kReduceScatter, output.dtype(), output.numel(),
                    nominal_traffic::ReduceScatter(output.nbytes(), size),
                    [output, input, op = options.op,
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
                    }};
}

std::optional<NativePlan> PlanReduceScatter(const Collective& call, int /*rank*/, int size) {
  const Tensor& output = call.output();
  const absl::Span<const Tensor> inputs = call.inputs;
  const ReduceScatterOptions options = call.reduce_scatter_options();

  std::vector<Tensor> list(inputs.begin(), inputs.end());
  if (!NativeReduction(output.dtype(), output.numel() * size)) {
    return std::nullopt;
  }
  return NativePlan{CollectiveKind::kReduceScatter, output.dtype(), output.numel(),
                    nominal_traffic::ReduceScatter(output.nbytes(), size),
                    [list, output, op = options.op,
                     n = size](CollectiveContext& ctx) -> absl::StatusOr<NativeCall> {
                      uint8_t* packed = ctx.Scratch(ScratchArena::kPacked, TotalBytes(list));
                      PackTensors(list, packed);
                      PreScale(packed, output.numel() * n, output.dtype(), op);
                      NativeCall call;
                      call.post = [packed, output, op](MPI_Comm comm, MPI_Request* request) {
                        return MPI_Ireduce_scatter_block(
                            packed, output.data(), static_cast<int>(output.numel()),
                            ReductionType(output.dtype()), ReductionOp(KernelOp(op.kind)), comm,
                            request);
                      };
                      call.after = [output, op, n] {
                        PostScale(output.data(), output.numel(), output.dtype(), op, n);
                      };
                      return call;
                    }};
}

std::optional<NativePlan> PlanAllToAllSingle(const Collective& call, int rank, int /*size*/) {
  const Tensor& output = call.output();
  const Tensor& input = call.input();
  const absl::Span<const int64_t> output_split_sizes = call.output_splits;
  const absl::Span<const int64_t> input_split_sizes = call.input_splits;

  const std::vector<int64_t> send = SplitBytes(input, input_split_sizes);
  const std::vector<int64_t> recv = SplitBytes(output, output_split_sizes);
  std::optional<Layout> send_layout = ByteLayout(send);
  std::optional<Layout> recv_layout = ByteLayout(recv);
  if (!send_layout || !recv_layout) {
    return std::nullopt;
  }
  return NativePlan{
      CollectiveKind::kAllToAll, input.dtype(), 0, nominal_traffic::AllToAll(send, recv, rank),
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
      }};
}

std::optional<NativePlan> PlanAllToAll(const Collective& call, int rank, int /*size*/) {
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
    return std::nullopt;
  }
  return NativePlan{
      CollectiveKind::kAllToAll, ins[0].dtype(), 0, nominal_traffic::AllToAll(send, recv, rank),
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
      }};
}

std::optional<NativePlan> PlanBarrier(const Collective& /*call*/, int /*rank*/, int /*size*/) {
  return NativePlan{CollectiveKind::kBarrier,
                    DType::kUInt8,
                    0,
                    {},
                    [](CollectiveContext&) -> absl::StatusOr<NativeCall> {
                      NativeCall call;
                      call.post = [](MPI_Comm comm, MPI_Request* request) {
                        return MPI_Ibarrier(comm, request);
                      };
                      return call;
                    }};
}

// The native plan for `call`, or nothing where it runs on algorithms/ (MPI lacks the dtype, a
// count exceeds int, point-to-point).
std::optional<NativePlan> PlanNative(const Collective& call, int rank, int size) {
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
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

namespace {

const BackendRegisterer kRegisterMpi(
    {kMpiBackendName, {DeviceType::kCpu}, &MpiBackend::Create, "mpi://"});

}  // namespace
WorkPtr MpiBackend::RunNatively(const Collective& call) {
  // Point-to-point runs over MpiTransport with its tags, as do kinds added since.
  std::optional<NativePlan> plan = PlanNative(call, rank(), size());
  if (!plan.has_value()) return nullptr;
  return SubmitNative(call.timeout, std::move(*plan));
}

}  // namespace plexus::mpi
