// The all-reduce entry point shared by every user of the algorithms: picks the schedule from
// the algorithm table by message size (from the all_reduce_same_host ranges when the whole
// group shares a host and its shared-memory arena is usable) and wraps the kernel op with AVG /
// PREMUL_SUM scaling.
#include <string>

#include "algorithms/algorithm_table.h"
#include "algorithms/algorithms.h"
#include "algorithms/arena_slots.h"
#include "algorithms/reduce_kernels.h"

namespace plexus {

absl::Status AllReduceInPlace(CollectiveContext& ctx, const AlgorithmTable& table, void* data,
                              int64_t count, DType dtype, const ReduceOp& op) {
  PreScale(data, count, dtype, op);
  const uint64_t bytes = static_cast<uint64_t>(count) * DTypeSize(dtype);
  const ReduceOpKind kernel = KernelOp(op.kind);
  SharedArena* arena = ctx.shared_arena();
  if (arena != nullptr && !ArenaSlots::Usable(*arena)) arena = nullptr;
  const std::string algorithm =
      table.Choose(arena != nullptr ? "all_reduce_same_host" : "all_reduce", bytes);
  absl::Status status;
  if (count == 0) {
    status = absl::OkStatus();
  } else if (algorithm == "shm" && arena != nullptr) {
    status = SharedMemoryAllReduce(ctx, *arena, data, count, dtype, kernel);
  } else if (algorithm == "shm_rs" && arena != nullptr) {
    status = SharedMemoryReduceScatterAllReduce(ctx, *arena, data, count, dtype, kernel);
  } else if (algorithm == "rd") {
    status = RecursiveDoublingAllReduce(ctx, data, count, dtype, kernel);
  } else if (algorithm == "hd") {
    status = HalvingDoublingAllReduce(ctx, data, count, dtype, kernel);
  } else {
    status = RingAllReduce(ctx, data, count, dtype, kernel);
  }
  if (status.ok()) PostScale(data, count, dtype, op, ctx.size());
  return status;
}

}  // namespace plexus
