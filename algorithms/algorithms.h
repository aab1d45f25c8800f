// The collective schedules, written once over the Transport (through CollectiveContext). Each is
// a blocking function, implemented in its own file; see docs/algorithms.md for costs and when
// each is chosen. All buffers are contiguous; counts are elements of `dtype`.
#ifndef PLEXUS_ALGORITHMS_ALGORITHMS_H_
#define PLEXUS_ALGORITHMS_ALGORITHMS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "algorithms/algorithm_catalog.h"
#include "algorithms/collective_context.h"
#include "algorithms/quantize_kernels.h"
#include "base/core/dtype.h"
#include "base/core/reduce_op.h"

namespace plexus::algorithms {

class AlgorithmTable;

// run_schedule.cc: the catalog row `table` picks for `collective` and a message of `bytes` on
// this group (its "_same_host" or "_multi_host" ranges where the catalog has them and the group
// is one), and the arena the row may use (null unless the group shares a usable one).
struct SelectedSchedule {
  const Algorithm& row;
  SharedArena* arena;
};
SelectedSchedule SelectSchedule(CollectiveContext& ctx, const AlgorithmTable& table,
                                absl::string_view collective, uint64_t bytes);
// Runs that row on `call` (its arena set as selected): every collective's entry point.
absl::Status RunSchedule(absl::string_view collective, uint64_t bytes, ScheduleCall call);

// Messages larger than this are cut into segments so reduction and forwarding overlap transfer.
inline constexpr size_t kSegmentBytes = 256 * 1024;

// ring_reduce_scatter.cc. Block i of `data` (per `blocks`) ends fully reduced (with the
// primitive `op`) at rank i; other blocks are left partially reduced. Steps [step_base,
// step_base + size - 1) of the operation's tags.
absl::Status RingReduceScatter(CollectiveContext& ctx, uint8_t* data, const Partition& blocks,
                               DType dtype, ReduceOpKind op, uint32_t step_base = 0);

// bruck_all_gather.cc: ceil(log2 p) rounds; in round k each rank passes every block it holds
// (at most 2^k) to the rank 2^k below it, each block as its own message, straight into place.
// blocks[i] holds rank i's block at rank i on entry and at every rank on return. Fewer rounds
// than the ring's p - 1, the same bytes: it pays where a round's latency outweighs the bytes.
absl::Status BruckAllGather(CollectiveContext& ctx, const std::vector<ByteBlock>& blocks);

// ring_all_gather.cc. blocks[i] (bytes[i] long) holds rank i's block at rank i on entry and
// at every rank on return. `posted`: the receives, if already posted with
// PostRingAllGatherReceives (same arguments).
absl::Status RingAllGather(CollectiveContext& ctx, const std::vector<uint8_t*>& blocks,
                           const std::vector<size_t>& bytes, uint32_t step_base = 0,
                           std::vector<WorkPtr> posted = {});
std::vector<WorkPtr> PostRingAllGatherReceives(CollectiveContext& ctx,
                                               const std::vector<uint8_t*>& blocks,
                                               const std::vector<size_t>& bytes,
                                               uint32_t step_base);

// ring_all_reduce.cc: reduce-scatter then all-gather over balanced blocks, in place.
absl::Status RingAllReduce(CollectiveContext& ctx, void* data, int64_t count, DType dtype,
                           ReduceOpKind op);

// all_reduce.cc: the all-reduce `table` picks for this size, in place, with PREMUL_SUM's
// pre-scaling and AVG's post-scaling around the kernel op. What every caller runs. Groups on
// one host with a usable shared arena take the all_reduce_same_host ranges, groups over
// several hosts (with more than one rank on some host) the all_reduce_multi_host ranges.
absl::Status AllReduceInPlace(CollectiveContext& ctx, const AlgorithmTable& table, void* data,
                              int64_t count, DType dtype, const ReduceOp& op);
// The flat schedule (ring, rd or hd) the "all_reduce" ranges pick, with the kernel op only.
absl::Status FlatAllReduce(CollectiveContext& ctx, const AlgorithmTable& table, void* data,
                           int64_t count, DType dtype, ReduceOpKind op);

// hierarchical_all_reduce.cc ("hier"): for groups over several hosts (ctx.host_of()): reduce
// to each host's lowest rank, all-reduce among those leaders (FlatAllReduce), broadcast back.
absl::Status HierarchicalAllReduce(CollectiveContext& ctx, const AlgorithmTable& table, void* data,
                                   int64_t count, DType dtype, ReduceOpKind op);

// quantized_ring_all_reduce.cc: the ring all-reduce with quantized messages (wire bytes shrink
// by the code/element size ratio), in place, AVG included; results bit-identical on every rank.
// Error: each reduce-scatter hop and the final encoding add one quantization error of the run
// they encode (quantize_kernels.h).
absl::Status QuantizedRingAllReduce(CollectiveContext& ctx, void* data, int64_t count, DType dtype,
                                    const ReduceOp& op, const Quantization& q);

// power_of_two_fold.cc: reduces a group to its largest power of two p for the mask-paired
// schedules (recursive doubling, halving-doubling). Uses steps kFoldStep and kResultStep of
// the operation; the schedule in between may use steps 1 .. kResultStep - 1.
struct PowerOfTwoFold {
  static constexpr uint32_t kFoldStep = 0;
  static constexpr uint32_t kResultStep = 64;

  explicit PowerOfTwoFold(int size);
  // The rank among the p that run the schedule; -1 for a rank folded into its partner.
  int VirtualRank(int rank) const;
  int RealRank(int vrank) const;
  // The first 2 (size - p) ranks: even ones send `data`, odd ones combine it in (with `op`).
  absl::Status FoldIn(CollectiveContext& ctx, uint8_t* data, int64_t count, DType dtype,
                      ReduceOpKind op) const;
  // Odd ranks of the folded pairs send the result to their even partners.
  absl::Status HandBack(CollectiveContext& ctx, uint8_t* data, size_t bytes) const;

  int p;      // Ranks that run the schedule.
  int extra;  // size - p.
};

// recursive_doubling_all_reduce.cc: log2(size) exchanges of the whole buffer, in place; any
// size (the ranks beyond a power of two fold in first and are sent the result last).
absl::Status RecursiveDoublingAllReduce(CollectiveContext& ctx, void* data, int64_t count,
                                        DType dtype, ReduceOpKind op);

// halving_doubling_all_reduce.cc: reduce-scatter by recursive halving, all-gather by recursive
// doubling, in place; any size (folding like recursive doubling). Bandwidth of the ring in
// 2 log2(p) pairwise steps.
absl::Status HalvingDoublingAllReduce(CollectiveContext& ctx, void* data, int64_t count,
                                      DType dtype, ReduceOpKind op);

// shared_memory_all_reduce.cc ("shm"): for a group on one host; every rank reduces every
// rank's input from the shared arena into its own buffer, one synchronisation per piece.
absl::Status SharedMemoryAllReduce(CollectiveContext& ctx, SharedArena& arena, void* data,
                                   int64_t count, DType dtype, ReduceOpKind op);

// shared_memory_grouped_all_reduce.cc (what "shm" runs from kGroupedAllReduceFromRanks ranks
// where each rank would read kGroupedAllReduceFromBytesRead of inputs or more): ranks in groups
// of about sqrt(p); each group's first rank reduces the group's inputs, then every rank
// reduces those group results. It pays only where the waits it saves outweigh its extra step,
// hence the thresholds below (measurements: docs/benchmarks.md).
absl::Status SharedMemoryGroupedAllReduce(CollectiveContext& ctx, SharedArena& arena, void* data,
                                          int64_t count, DType dtype, ReduceOpKind op);
// The group size it uses for `ranks` ranks.
int GroupSizeForGroupedAllReduce(int ranks);
inline constexpr int kGroupedAllReduceFromRanks = 32;
inline constexpr size_t kGroupedAllReduceFromBytesRead = size_t{256} << 10;  // p * message

// shared_memory_reduce_scatter_all_reduce.cc ("shm_rs"): for a group on one host; rank i
// reduces block i from every rank's input in the arena, then every rank copies the blocks.
absl::Status SharedMemoryReduceScatterAllReduce(CollectiveContext& ctx, SharedArena& arena,
                                                void* data, int64_t count, DType dtype,
                                                ReduceOpKind op);

// shared_memory_all_gather.cc ("shm" for all_gather_same_host): for a group on one host; every
// rank publishes its block in the arena, piece by piece, and copies every peer's out. Same
// contract as RingAllGather.
absl::Status SharedMemoryAllGather(CollectiveContext& ctx, SharedArena& arena,
                                   const std::vector<ByteBlock>& blocks);

// binomial_broadcast.cc: the root's `bytes` reach every rank down a binomial tree, pipelined
// in segments.
absl::Status BinomialBroadcast(CollectiveContext& ctx, void* data, size_t bytes, int root);

// binomial_reduce.cc: the reduction lands in the root's `data`; other ranks' data is unchanged.
absl::Status BinomialReduce(CollectiveContext& ctx, void* data, int64_t count, DType dtype,
                            ReduceOpKind op, int root);

// linear_gather.cc: at the root, outputs[i] receives rank i's `bytes` of input.
absl::Status LinearGather(CollectiveContext& ctx, const void* input, size_t bytes,
                          const std::vector<void*>& outputs, int root);

// linear_scatter.cc: rank i's output receives the root's inputs[i].
absl::Status LinearScatter(CollectiveContext& ctx, void* output, size_t bytes,
                           const std::vector<const void*>& inputs, int root);

// pairwise_all_to_all.cc: send_blocks[i] goes to rank i, and recv_blocks[i] is filled from it;
// sizes may differ per peer (uneven splits).
absl::Status PairwiseAllToAll(CollectiveContext& ctx, const std::vector<ByteBlock>& send_blocks,
                              const std::vector<ByteBlock>& recv_blocks);

// dissemination_barrier.cc: ceil(log2(size)) rounds of empty messages.
absl::Status DisseminationBarrier(CollectiveContext& ctx);

// shared_memory_barrier.cc: one round in the shared-memory arena (group on one host).
absl::Status SharedMemoryBarrier(CollectiveContext& ctx, SharedArena& arena);

}  // namespace plexus::algorithms

#endif  // PLEXUS_ALGORITHMS_ALGORITHMS_H_
