// hierarchical_all_reduce.cc: for groups spread over several hosts (ctx.host_of()).
//
// When every host runs the same number L of ranks: the ranks of each host reduce-scatter the
// buffer into L blocks (ring, over shared memory where the transport links them), the ranks
// holding block i on every host all-reduce it across hosts (L parallel flat all-reduces, each
// over 1/L of the bytes), and each host all-gathers the blocks. The bytes crossing hosts are
// those of one all-reduce among hosts, not among all ranks, carried by L flows at once.
//
// Otherwise: each host's ranks reduce to its lowest rank (binomial tree), those leaders
// all-reduce, and each leader broadcasts the result to its host.
#include <algorithm>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/subgroup_transport.h"

namespace plexus::algorithms {
namespace {

enum Phase : uint32_t { kLocalReduce = 1, kAcrossHosts = 2, kLocalBroadcast = 3 };

// Local reduce-scatter, block i all-reduced among the i-th ranks of every host, local
// all-gather. Every host has local.size() ranks.
absl::Status ParallelRings(CollectiveContext& ctx, const AlgorithmTable& table,
                           const std::vector<int>& local, void* data, int64_t count, DType dtype,
                           ReduceOpKind op) {
  const absl::Span<const int> host_of = ctx.host_of();
  const int n = static_cast<int>(local.size());
  const int mine =
      static_cast<int>(std::find(local.begin(), local.end(), ctx.rank()) - local.begin());
  std::vector<int> peers;  // The rank at local index `mine` on every host, in host order.
  std::vector<int> seen_on_host(*std::max_element(host_of.begin(), host_of.end()) + 1, 0);
  for (int r = 0; r < ctx.size(); ++r) {
    if (seen_on_host[host_of[r]]++ == mine) peers.push_back(r);
  }
  auto* bytes = static_cast<uint8_t*>(data);
  const size_t element = DTypeSize(dtype);
  const Partition blocks = BalancedPartition(count, n);
  std::vector<uint8_t*> pointers(n);
  std::vector<size_t> sizes(n);
  for (int i = 0; i < n; ++i) {
    pointers[i] = bytes + blocks.offsets[i] * element;
    sizes[i] = static_cast<size_t>(blocks.counts[i]) * element;
  }
  {
    SubgroupTransport host(*ctx.transport(), local, kLocalReduce);
    CollectiveContext phase = ctx.Over(host);
    if (absl::Status status = RingReduceScatter(phase, bytes, blocks, dtype, op); !status.ok()) {
      return status;
    }
  }
  if (peers.size() > 1 && blocks.counts[mine] > 0) {
    SubgroupTransport across(*ctx.transport(), peers, kAcrossHosts);
    CollectiveContext phase = ctx.Over(across);
    if (absl::Status status =
            FlatAllReduce(phase, table, pointers[mine], blocks.counts[mine], dtype, op);
        !status.ok()) {
      return status;
    }
  }
  SubgroupTransport host(*ctx.transport(), local, kLocalBroadcast);
  CollectiveContext phase = ctx.Over(host);
  return RingAllGather(phase, pointers, sizes);
}

}  // namespace

absl::Status HierarchicalAllReduce(CollectiveContext& ctx, const AlgorithmTable& table, void* data,
                                   int64_t count, DType dtype, ReduceOpKind op) {
  const absl::Span<const int> host_of = ctx.host_of();
  const int me = ctx.rank();
  std::vector<int> local;    // This host's ranks; local[0] is its leader.
  std::vector<int> leaders;  // One per host, in host order.
  for (int r = 0; r < ctx.size(); ++r) {
    if (host_of[r] == host_of[me]) local.push_back(r);
    if (static_cast<int>(leaders.size()) == host_of[r]) leaders.push_back(r);
  }
  const size_t bytes = static_cast<size_t>(count) * DTypeSize(dtype);
  bool even = true;
  for (int leader : leaders) {
    even &= std::count(host_of.begin(), host_of.end(), host_of[leader]) ==
            static_cast<int64_t>(local.size());
  }
  if (even && local.size() > 1) return ParallelRings(ctx, table, local, data, count, dtype, op);
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

}  // namespace plexus::algorithms
