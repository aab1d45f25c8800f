// hierarchical_all_reduce.cc: for groups spread over several hosts (ctx.host_of()). The ranks
// of each host reduce to their lowest rank (binomial tree, over shared memory where the
// transport links them), those leaders all-reduce among themselves with the flat algorithm the
// table picks for the size, and each leader broadcasts the result to its host. Only the
// leaders' traffic crosses hosts: one flow per host instead of one per rank.
#include <algorithm>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/subgroup_transport.h"

namespace plexus {
namespace {

enum Phase : uint32_t { kLocalReduce = 1, kAcrossHosts = 2, kLocalBroadcast = 3 };

}  // namespace

absl::Status HierarchicalAllReduce(CollectiveContext& ctx, const AlgorithmTable& table,
                                   void* data, int64_t count, DType dtype, ReduceOpKind op) {
  const absl::Span<const int> host_of = ctx.host_of();
  const int me = ctx.rank();
  std::vector<int> local;    // This host's ranks; local[0] is its leader.
  std::vector<int> leaders;  // One per host, in host order.
  for (int r = 0; r < ctx.size(); ++r) {
    if (host_of[r] == host_of[me]) local.push_back(r);
    if (static_cast<int>(leaders.size()) == host_of[r]) leaders.push_back(r);
  }
  const size_t bytes = static_cast<size_t>(count) * DTypeSize(dtype);
  if (local.size() > 1) {
    SubgroupTransport host(*ctx.transport(), local, kLocalReduce);
    CollectiveContext phase = ctx.Over(host);
    if (absl::Status status = BinomialReduce(phase, data, count, dtype, op, 0); !status.ok()) {
      return status;
    }
  }
  if (me == local[0] && leaders.size() > 1) {
    SubgroupTransport across(*ctx.transport(), leaders, kAcrossHosts);
    CollectiveContext phase = ctx.Over(across);
    if (absl::Status status = FlatAllReduce(phase, table, data, count, dtype, op); !status.ok()) {
      return status;
    }
  }
  if (local.size() > 1) {
    SubgroupTransport host(*ctx.transport(), local, kLocalBroadcast);
    CollectiveContext phase = ctx.Over(host);
    return BinomialBroadcast(phase, data, bytes, 0);
  }
  return absl::OkStatus();
}

}  // namespace plexus
