#include "algorithms/algorithm_catalog.h"

#include "algorithms/algorithms.h"

namespace plexus::algorithms {
namespace {

constexpr uint64_t kKiB = uint64_t{1} << 10;
constexpr uint64_t kMiB = uint64_t{1} << 20;

absl::Status Ring(const ScheduleCall& c) {
  return RingAllReduce(c.ctx, c.data, c.count, c.dtype, c.op);
}
absl::Status RecursiveDoubling(const ScheduleCall& c) {
  return RecursiveDoublingAllReduce(c.ctx, c.data, c.count, c.dtype, c.op);
}
absl::Status HalvingDoubling(const ScheduleCall& c) {
  return HalvingDoublingAllReduce(c.ctx, c.data, c.count, c.dtype, c.op);
}
absl::Status ArenaDirect(const ScheduleCall& c) {
  return SharedMemoryAllReduce(c.ctx, *c.arena, c.data, c.count, c.dtype, c.op);
}
absl::Status ArenaReduceScatter(const ScheduleCall& c) {
  return SharedMemoryReduceScatterAllReduce(c.ctx, *c.arena, c.data, c.count, c.dtype, c.op);
}
absl::Status Hierarchical(const ScheduleCall& c) {
  return HierarchicalAllReduce(c.ctx, c.table, c.data, c.count, c.dtype, c.op);
}
absl::Status Dissemination(const ScheduleCall& c) { return DisseminationBarrier(c.ctx); }
absl::Status ArenaBarrier(const ScheduleCall& c) { return SharedMemoryBarrier(c.ctx, *c.arena); }

constexpr const char* kRing = "ring reduce-scatter then ring all-gather, in 256 KiB segments";
constexpr const char* kRecursiveDoubling =
    "log2(p) exchanges of the whole buffer with partners at doubling distances";
constexpr const char* kHalvingDoubling =
    "recursive halving reduce-scatter then recursive doubling all-gather";

}  // namespace

const std::vector<Algorithm>& AlgorithmCatalog() {
  // Defaults: below 128 kKiB latency dominates (log2 p whole-buffer exchanges beat 2 log2 p
  // steps); up to 8 kMiB halving-doubling moves the ring's bytes in fewer steps; above, the
  // ring's smaller scratch wins (docs/benchmarks.md has the measurements). On one host the
  // arena takes over; over several hosts with neighbours the hierarchy pays off from 64 kKiB.
  static const auto* catalog = new std::vector<Algorithm>{
      {"all_reduce", "ring", kRing, Ring, false, 8 * kMiB, kNoSizeLimit},
      {"all_reduce", "rd", kRecursiveDoubling, RecursiveDoubling, false, 0, 128 * kKiB},
      {"all_reduce", "hd", kHalvingDoubling, HalvingDoubling, false, 128 * kKiB, 8 * kMiB},
      {"all_reduce_same_host", "shm_rs",
       "arena: each rank reduces its block of every input, then copies all blocks out",
       ArenaReduceScatter, true, 64 * kKiB, kNoSizeLimit, /*keeps_originals=*/true},
      {"all_reduce_same_host", "shm",
       "arena: every rank reduces all inputs itself, one synchronisation per piece (from 32 "
       "ranks and 256 KiB to read, group leaders first, in groups of about sqrt(p))",
       ArenaDirect, true, 0, 64 * kKiB},
      {"all_reduce_same_host", "ring", kRing, Ring, false, 0, 0},
      {"all_reduce_same_host", "rd", kRecursiveDoubling, RecursiveDoubling, false, 0, 0},
      {"all_reduce_same_host", "hd", kHalvingDoubling, HalvingDoubling, false, 0, 0},
      {"all_reduce_multi_host", "hier",
       "reduce within each host, all-reduce across hosts (one flow per rank slot), share back",
       Hierarchical, false, 64 * kKiB, kNoSizeLimit},
      {"all_reduce_multi_host", "ring", kRing, Ring, false, 0, 0},
      {"all_reduce_multi_host", "rd", kRecursiveDoubling, RecursiveDoubling, false, 0, 64 * kKiB},
      {"all_reduce_multi_host", "hd", kHalvingDoubling, HalvingDoubling, false, 0, 0},
      {"broadcast", "binomial", "binomial tree from the root, pipelined in 256 KiB segments",
       nullptr, false, 0, kNoSizeLimit},
      {"reduce", "binomial", "binomial tree towards the root, reducing at every hop", nullptr,
       false, 0, kNoSizeLimit},
      {"all_gather", "ring", "p - 1 ring steps, each forwarding the block received last", nullptr,
       false, 0, kNoSizeLimit},
      {"gather", "linear", "every rank sends to the root", nullptr, false, 0, kNoSizeLimit},
      {"scatter", "linear", "the root sends every rank its block", nullptr, false, 0, kNoSizeLimit},
      {"reduce_scatter", "ring", "p - 1 ring steps, reducing each segment as it lands", nullptr,
       false, 0, kNoSizeLimit},
      {"all_to_all", "pairwise", "p - 1 rounds, each rank exchanging with one partner", nullptr,
       false, 0, kNoSizeLimit},
      {"barrier", "dissemination", "ceil(log2 p) rounds of empty messages", Dissemination, false, 0,
       kNoSizeLimit},
      {"barrier_same_host", "shm",
       "arena: publish a step, wait on a futex until every rank has published it", ArenaBarrier,
       true, 0, kNoSizeLimit},
      {"barrier_same_host", "dissemination", "ceil(log2 p) rounds of empty messages", Dissemination,
       false, 0, 0},
  };
  return *catalog;
}

const Algorithm* FindAlgorithm(absl::string_view collective, absl::string_view name) {
  for (const Algorithm& row : AlgorithmCatalog()) {
    if (row.collective == collective && row.name == name) return &row;
  }
  return nullptr;
}

}  // namespace plexus::algorithms
