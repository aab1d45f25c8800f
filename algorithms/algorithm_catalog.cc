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
absl::Status BroadcastTree(const ScheduleCall& c) {
  return BinomialBroadcast(c.ctx, c.data, static_cast<size_t>(c.count), c.root);
}
absl::Status ReduceTree(const ScheduleCall& c) {
  return BinomialReduce(c.ctx, c.data, c.count, c.dtype, c.op, c.root);
}
absl::Status GatherRing(const ScheduleCall& c) {
  std::vector<uint8_t*> blocks;
  std::vector<size_t> bytes;
  for (const ByteBlock& block : c.blocks) {
    blocks.push_back(block.data);
    bytes.push_back(block.bytes);
  }
  return RingAllGather(c.ctx, blocks, bytes);
}
absl::Status GatherBruck(const ScheduleCall& c) { return BruckAllGather(c.ctx, c.blocks); }
absl::Status GatherArena(const ScheduleCall& c) {
  return SharedMemoryAllGather(c.ctx, *c.arena, c.blocks);
}
absl::Status GatherLinear(const ScheduleCall& c) {
  std::vector<void*> outputs;
  for (const ByteBlock& block : c.blocks) outputs.push_back(block.data);
  return LinearGather(c.ctx, c.own.data, c.own.bytes, outputs, c.root);
}
absl::Status ScatterLinear(const ScheduleCall& c) {
  std::vector<const void*> inputs;
  for (const ByteBlock& block : c.blocks) inputs.push_back(block.data);
  return LinearScatter(c.ctx, c.own.data, c.own.bytes, inputs, c.root);
}
absl::Status ReduceScatterRing(const ScheduleCall& c) {
  Partition blocks;
  for (int i = 0; i < c.ctx.size(); ++i) {
    blocks.counts.push_back(c.count);
    blocks.offsets.push_back(c.count * i);
  }
  return RingReduceScatter(c.ctx, static_cast<uint8_t*>(c.data), blocks, c.dtype, c.op);
}
absl::Status AllToAllPairwise(const ScheduleCall& c) {
  return PairwiseAllToAll(c.ctx, c.blocks, c.received);
}
absl::Status Dissemination(const ScheduleCall& c) { return DisseminationBarrier(c.ctx); }
absl::Status ArenaBarrier(const ScheduleCall& c) { return SharedMemoryBarrier(c.ctx, *c.arena); }

constexpr const char* kRing = "ring reduce-scatter then ring all-gather, in 256 KiB segments";
constexpr const char* kRecursiveDoubling =
    "log2(p) exchanges of the whole buffer with partners at doubling distances";
constexpr const char* kHalvingDoubling =
    "recursive halving reduce-scatter then recursive doubling all-gather";
constexpr const char* kRingGather = "p - 1 ring steps, each forwarding the block received last";
constexpr const char* kBruckGather =
    "ceil(log2 p) rounds, each passing every block held to the rank 2^k below, block by block";

}  // namespace

const std::vector<Algorithm>& AlgorithmCatalog() {
  // Defaults: below 128 kKiB latency dominates (log2 p whole-buffer exchanges beat 2 log2 p
  // steps); up to 8 kMiB halving-doubling moves the ring's bytes in fewer steps; above, the
  // ring's smaller scratch wins (docs/benchmarks.md has the measurements). On one host the
  // arena takes over; over several hosts with neighbours the hierarchy pays off from 64 kKiB.
  // all_gather (sizes: each rank's block): Bruck's log2 p rounds beat the ring's p - 1 steps up
  // to 16 kKiB (8 ranks: 1.2-3x), the ring wins from 128 kKiB; on one host the arena beats both
  // at every size (4 ranks: 1.5-5x), docs/benchmarks.md.
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
       BroadcastTree, false, 0, kNoSizeLimit},
      {"reduce", "binomial", "binomial tree towards the root, reducing at every hop", ReduceTree,
       false, 0, kNoSizeLimit},
      {"all_gather", "ring", kRingGather, GatherRing, false, 16 * kKiB, kNoSizeLimit},
      {"all_gather", "bruck", kBruckGather, GatherBruck, false, 0, 16 * kKiB},
      {"all_gather_same_host", "shm",
       "arena: every rank publishes its block piece by piece, every rank copies all blocks out",
       GatherArena, true, 0, kNoSizeLimit},
      {"all_gather_same_host", "ring", kRingGather, GatherRing, false, 0, 0},
      {"all_gather_same_host", "bruck", kBruckGather, GatherBruck, false, 0, 0},
      {"gather", "linear", "every rank sends to the root", GatherLinear, false, 0, kNoSizeLimit},
      {"scatter", "linear", "the root sends every rank its block", ScatterLinear, false, 0,
       kNoSizeLimit},
      {"reduce_scatter", "ring", "p - 1 ring steps, reducing each segment as it lands",
       ReduceScatterRing, false, 0, kNoSizeLimit},
      {"all_to_all", "pairwise", "p - 1 rounds, each rank exchanging with one partner",
       AllToAllPairwise, false, 0, kNoSizeLimit},
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
