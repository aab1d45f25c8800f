// The all-reduce entry point shared by every user of the algorithms: picks the schedule from
// the algorithm table by message size (from the all_reduce_same_host ranges when the whole
// group shares a host and its shared-memory arena is usable, from the all_reduce_multi_host
// ranges when it spans hosts with several ranks on some), runs the catalog row's function, and
// wraps the kernel op with AVG / PREMUL_SUM scaling.
#include <algorithm>
#include <string>

#include "algorithms/algorithm_catalog.h"
#include "algorithms/algorithm_table.h"
#include "algorithms/algorithms.h"
#include "algorithms/arena_slots.h"
#include "algorithms/keep_originals.h"
#include "algorithms/reduce_kernels.h"

namespace plexus::algorithms {

namespace {

// More than one host, and more than one rank on some host: a hierarchy saves something.
bool SpansHostsWithNeighbours(absl::Span<const int> host_of) {
  if (host_of.empty()) return false;
  const int hosts = *std::max_element(host_of.begin(), host_of.end()) + 1;
  return hosts > 1 && hosts < static_cast<int>(host_of.size());
}

}  // namespace

absl::Status FlatAllReduce(CollectiveContext& ctx, const AlgorithmTable& table, void* data,
                           int64_t count, DType dtype, ReduceOpKind op) {
  const uint64_t bytes = static_cast<uint64_t>(count) * DTypeSize(dtype);
  return table.Select("all_reduce", bytes).run({ctx, table, nullptr, data, count, dtype, op});
}

absl::Status AllReduceInPlace(CollectiveContext& ctx, const AlgorithmTable& table, void* data,
                              int64_t count, DType dtype, const ReduceOp& op) {
  const uint64_t bytes = static_cast<uint64_t>(count) * DTypeSize(dtype);
  SharedArena* arena = ArenaSlots::UsableArena(ctx);
  const char* ranges = "all_reduce";
  if (arena != nullptr) {
    ranges = "all_reduce_same_host";
  } else if (SpansHostsWithNeighbours(ctx.host_of())) {
    ranges = "all_reduce_multi_host";
  }
  const Algorithm& algorithm = table.Select(ranges, bytes);
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
