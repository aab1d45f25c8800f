#include "backends/gloo/gloo_backend.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "algorithms/reduce_kernels.h"
#include "backends/gloo/gloo_transport.h"
#include "backends/interface/backend_registry.h"
#include "base/core/environment.h"
#include "base/core/logging.h"
#include "base/core/status_macros.h"

namespace plexus::gloo_backend {

using algorithms::AlgorithmTable;
using algorithms::CollectiveContext;
using algorithms::CollectiveKind;
using algorithms::KernelOp;
using algorithms::PostScale;
using algorithms::PreScale;
using algorithms::ScratchArena;
using algorithms::UnpackTensors;
using executor::Collectives;

std::string GlooDeviceAddress(const BackendContext& context) {
  if (const char* env = ReadEnvironment("PLEXUS_GLOO_ADDR"); env != nullptr && *env != '\0') {
    return env;
  }
  return context.address;
}

absl::StatusOr<std::shared_ptr<Backend>> GlooBackend::Create(const BackendContext& context) {
  ASSIGN_OR_RETURN(AlgorithmTable table, AlgorithmTable::FromEnvironment());
  const std::string address = GlooDeviceAddress(context);
  if (LogEnabled(LogLevel::kDebug)) {
    Log(LogLevel::kDebug, absl::StrCat("gloo: group '", context.group_name, "' rank ", context.rank,
                                       " listens at ", address));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<GlooTransport> transport,
                   GlooTransport::Connect(context.store, context.rank, context.size, address,
                                          context.timeout, context.group_name));
  ASSIGN_OR_RETURN(const bool native, EnvironmentFlag("PLEXUS_GLOO_NATIVE"));
  auto collectives = std::make_unique<Collectives>(transport, std::move(table));
  return std::shared_ptr<Backend>(
      new GlooBackend(std::move(collectives), std::move(transport), native));
}

BackendCapabilities GlooBackend::capabilities() const {
  BackendCapabilities capabilities = CpuTransportCapabilities();
  capabilities.may_leave_after_failure = true;  // The first failure closes every connection.
  return capabilities;
}

WorkPtr GlooBackend::SubmitNative(
    CollectiveKind kind, DType dtype, int64_t count, absl::Duration timeout,
    nominal_traffic::Traffic traffic,
    std::function<void(const gloo_native::Call&, CollectiveContext&)> run) {
  return collectives().Submit(
      kind, dtype, count, timeout,
      [transport = transport_, traffic,
       run = std::move(run)](CollectiveContext& ctx) -> absl::Status {
        RETURN_IF_ERROR(transport->broken());
        const int64_t left_ms = absl::ToInt64Milliseconds(
            absl::Ceil(ctx.deadline() - absl::Now(), absl::Milliseconds(1)));
        if (left_ms <= 0) {
          return absl::DeadlineExceededError(absl::StrCat(
              CollectiveName(ctx.kind()), " #", ctx.sequence(), ": timed out before it started"));
        }
        gloo_native::Call call;
        call.context = transport->context();
        call.tag = static_cast<uint32_t>(ctx.signature() ^ (ctx.signature() >> 32));
        call.timeout = std::chrono::milliseconds(left_ms);
        try {
          run(call, ctx);
        } catch (const std::exception& error) {
          absl::Status status =
              GlooErrorToStatus(error, absl::StrCat("gloo ", CollectiveName(ctx.kind()), " #",
                                                    ctx.sequence(), " on rank ", ctx.rank()));
          // Gloo leaves its pairs unusable after a failed collective.
          transport->Abort(status);
          return status;
        }
        ctx.CountBytes(traffic.sent, traffic.received);
        return absl::OkStatus();
      });
}

WorkPtr GlooBackend::AllReduce(const Tensor& tensor, const AllReduceOptions& options) {
  if (!native_) return nullptr;
  return SubmitNative(CollectiveKind::kAllReduce, tensor.dtype(), tensor.numel(), options.timeout,
                      nominal_traffic::AllReduce(tensor.nbytes(), size()),
                      [tensor, op = options.op](const gloo_native::Call& call, CollectiveContext&) {
                        const int64_t count = tensor.numel();
                        PreScale(tensor.data(), count, tensor.dtype(), op);
                        gloo_native::AllReduce(call, tensor.data(), count, tensor.dtype(),
                                               KernelOp(op.kind));
                        PostScale(tensor.data(), count, tensor.dtype(), op, call.context->size);
                      });
}

WorkPtr GlooBackend::Reduce(const Tensor& tensor, const ReduceOptions& options) {
  if (!native_) return nullptr;
  return SubmitNative(CollectiveKind::kReduce, tensor.dtype(), tensor.numel(), options.timeout,
                      nominal_traffic::Reduce(tensor.nbytes(), size(), rank(), options.root_rank),
                      [tensor, options](const gloo_native::Call& call, CollectiveContext& ctx) {
                        const int64_t count = tensor.numel();
                        const DType dtype = tensor.dtype();
                        const ReduceOp& op = options.op;
                        // Off the root the caller's tensor must stay as it was: Gloo reduces into
                        // scratch there, and PREMUL_SUM scales a copy.
                        const bool root = call.context->rank == options.root_rank;
                        const void* input = tensor.data();
                        if (op.kind == ReduceOpKind::kPremulSum) {
                          uint8_t* scaled = ctx.Scratch(ScratchArena::kReduceIn, tensor.nbytes());
                          if (tensor.nbytes() > 0)
                            std::memcpy(scaled, tensor.data(), tensor.nbytes());
                          PreScale(scaled, count, dtype, op);
                          input = scaled;
                        }
                        void* output = root ? tensor.data()
                                            : ctx.Scratch(ScratchArena::kPacked, tensor.nbytes());
                        gloo_native::Reduce(call, input, output, count, dtype, KernelOp(op.kind),
                                            options.root_rank);
                        if (root) PostScale(tensor.data(), count, dtype, op, call.context->size);
                      });
}

WorkPtr GlooBackend::Broadcast(const Tensor& tensor, const BroadcastOptions& options) {
  if (!native_) return nullptr;
  return SubmitNative(
      CollectiveKind::kBroadcast, tensor.dtype(), tensor.numel(), options.timeout,
      nominal_traffic::Broadcast(tensor.nbytes(), size(), rank(), options.root_rank),
      [tensor, root = options.root_rank](const gloo_native::Call& call, CollectiveContext&) {
        gloo_native::Broadcast(call, tensor.data(), tensor.nbytes(), root);
      });
}

WorkPtr GlooBackend::AllGather(absl::Span<const Tensor> outputs, const Tensor& input,
                               const AllGatherOptions& options) {
  if (!native_) return nullptr;
  return SubmitNative(CollectiveKind::kAllGather, input.dtype(), input.numel(), options.timeout,
                      nominal_traffic::AllGather(input.nbytes(), size()),
                      [list = std::vector<Tensor>(outputs.begin(), outputs.end()), input](
                          const gloo_native::Call& call, CollectiveContext& ctx) {
                        // The outputs are separate tensors: gather into one block, then hand them
                        // out.
                        const size_t bytes = input.nbytes();
                        uint8_t* packed = ctx.Scratch(ScratchArena::kPacked, bytes * list.size());
                        gloo_native::AllGather(call, input.data(), packed, bytes);
                        UnpackTensors(packed, list);
                      });
}

WorkPtr GlooBackend::AllGatherIntoTensor(const Tensor& output, const Tensor& input,
                                         const AllGatherOptions& options) {
  if (!native_) return nullptr;
  return SubmitNative(CollectiveKind::kAllGather, input.dtype(), input.numel(), options.timeout,
                      nominal_traffic::AllGather(input.nbytes(), size()),
                      [output, input](const gloo_native::Call& call, CollectiveContext&) {
                        gloo_native::AllGather(call, input.data(), output.data(), input.nbytes());
                      });
}

WorkPtr GlooBackend::Gather(absl::Span<const Tensor> outputs, const Tensor& input,
                            const GatherOptions& options) {
  if (!native_) return nullptr;
  return SubmitNative(
      CollectiveKind::kGather, input.dtype(), input.numel(), options.timeout,
      nominal_traffic::Gather(input.nbytes(), size(), rank(), options.root_rank),
      [list = std::vector<Tensor>(outputs.begin(), outputs.end()), input, root = options.root_rank](
          const gloo_native::Call& call, CollectiveContext& ctx) {
        const size_t bytes = input.nbytes();
        uint8_t* packed =
            list.empty() ? nullptr : ctx.Scratch(ScratchArena::kPacked, bytes * list.size());
        gloo_native::Gather(call, input.data(), packed, bytes, root);
        if (packed != nullptr) UnpackTensors(packed, list);
      });
}

WorkPtr GlooBackend::Scatter(const Tensor& output, absl::Span<const Tensor> inputs,
                             const ScatterOptions& options) {
  if (!native_) return nullptr;
  std::vector<void*> pointers;
  for (const Tensor& input : inputs) pointers.push_back(input.data());
  return SubmitNative(CollectiveKind::kScatter, output.dtype(), output.numel(), options.timeout,
                      nominal_traffic::Scatter(output.nbytes(), size(), rank(), options.root_rank),
                      [pointers, output, root = options.root_rank](const gloo_native::Call& call,
                                                                   CollectiveContext&) {
                        gloo_native::Scatter(call, pointers, output.data(), output.nbytes(), root);
                      });
}

WorkPtr GlooBackend::AllToAllSingle(const Tensor& output, const Tensor& input,
                                    absl::Span<const int64_t> output_split_sizes,
                                    absl::Span<const int64_t> input_split_sizes,
                                    const AllToAllOptions& options) {
  if (!native_) {
    return nullptr;
  }

  std::vector<int64_t> send = SplitBytes(input, input_split_sizes);
  std::vector<int64_t> recv = SplitBytes(output, output_split_sizes);
  const nominal_traffic::Traffic traffic = nominal_traffic::AllToAll(send, recv, rank());
  return SubmitNative(CollectiveKind::kAllToAll, input.dtype(), 0, options.timeout, traffic,
                      [output, input, send = std::move(send), recv = std::move(recv)](
                          const gloo_native::Call& call, CollectiveContext&) {
                        gloo_native::AllToAll(call, input.data(), send, output.data(), recv);
                      });
}

WorkPtr GlooBackend::Barrier(const BarrierOptions& options) {
  if (!native_) return nullptr;
  return SubmitNative(
      CollectiveKind::kBarrier, DType::kUInt8, 0, options.timeout, {},
      [](const gloo_native::Call& call, CollectiveContext&) { gloo_native::Barrier(call); });
}

namespace {

const BackendRegisterer kRegisterGloo({kGlooBackendName, {DeviceType::kCpu}, &GlooBackend::Create});

}  // namespace
WorkPtr GlooBackend::RunNatively(const Collective& call) {
  if (!native_) return nullptr;
  switch (call.kind) {
    case CollectiveKind::kBroadcast:
      return Broadcast(call.tensor(), call.broadcast_options());
    case CollectiveKind::kReduce:
      return Reduce(call.tensor(), call.reduce_options());
    case CollectiveKind::kAllReduce:
      return AllReduce(call.tensor(), call.all_reduce_options());
    case CollectiveKind::kAllGather:
      return AllGather(call.outputs, call.input(), call.all_gather_options());
    case CollectiveKind::kAllGatherIntoTensor:
      return AllGatherIntoTensor(call.output(), call.input(), call.all_gather_options());
    case CollectiveKind::kGather:
      return Gather(call.outputs, call.input(), call.gather_options());
    case CollectiveKind::kScatter:
      return Scatter(call.output(), call.inputs, call.scatter_options());
    case CollectiveKind::kAllToAllSingle:
      return AllToAllSingle(call.output(), call.input(), call.output_splits, call.input_splits,
                            call.all_to_all_options());
    case CollectiveKind::kBarrier:
      return Barrier(call.barrier_options());
    // Gloo has no better schedule than algorithms/ for these.
    case CollectiveKind::kAllReduceCoalesced:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kReduceScatterTensor:
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kSend:
    case CollectiveKind::kRecv:
    case CollectiveKind::kRecvAnySource:
      return nullptr;
  }
  return nullptr;
}

}  // namespace plexus::gloo_backend
