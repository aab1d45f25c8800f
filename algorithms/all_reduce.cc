// The all-reduce entry point shared by every user of the algorithms: picks the schedule as
// every collective does (run_schedule.cc), runs the catalog row's function, and wraps the
// kernel op with AVG / PREMUL_SUM scaling.
#include "algorithms/algorithm_catalog.h"
#include "algorithms/algorithm_table.h"
#include "algorithms/algorithms.h"
#include "algorithms/keep_originals.h"
#include "algorithms/reduce_kernels.h"

namespace plexus::algorithms {

absl::Status FlatAllReduce(CollectiveContext& ctx, const AlgorithmTable& table, void* data,
                           int64_t count, DType dtype, ReduceOpKind op) {
  const uint64_t bytes = static_cast<uint64_t>(count) * DTypeSize(dtype);
  return table.Select("all_reduce", bytes).run({ctx, table, nullptr, data, count, dtype, op});
}

absl::Status AllReduceInPlace(CollectiveContext& ctx, const AlgorithmTable& table, void* data,
                              int64_t count, DType dtype, const ReduceOp& op) {
  const uint64_t bytes = static_cast<uint64_t>(count) * DTypeSize(dtype);
  const auto [algorithm, arena] = SelectSchedule(ctx, table, "all_reduce", bytes);
  if (!algorithm.keeps_originals || op.kind == ReduceOpKind::kPremulSum) {
    KeepRemainingOriginals(ctx, data, bytes);
  }
  PreScale(data, count, dtype, op);
  absl::Status status;
  if (count > 0) {
    status = algorithm.run({ctx, table, arena, data, count, dtype, KernelOp(op.kind)});
  }
  // A schedule that keeps originals has kept every byte once it succeeded (it wrote them all),
  // so scaling the result overwrites nothing unkept.
  if (status.ok()) PostScale(data, count, dtype, op, ctx.size());
  return status;
}

}  // namespace plexus::algorithms
