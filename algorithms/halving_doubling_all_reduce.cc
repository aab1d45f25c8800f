// Halving-doubling all-reduce (Rabenseifner): with p the largest power of two <= size, the
// first 2 (size - p) ranks fold pairwise as in recursive doubling. The p remaining ranks then
// run a reduce-scatter by recursive halving - at distance p/2, p/4, ..., 1 each keeps half of
// its current range, sends the other half to its partner and folds in the partner's copy of
// the kept half, segment by segment as it arrives - after which rank v owns block v, reduced.
// An all-gather by recursive doubling (distances 1, 2, ..., p/2, doubling the range each time)
// brings every block everywhere; the folded-out ranks receive the result last. Each rank
// moves the same 2 (p - 1) / p of the buffer as the ring, in 2 log2(p) steps instead of
// 2 (size - 1), and every step is a pairwise exchange: the partners of one step run without
// waiting for the rest of the group, which suits oversubscribed hosts. One owner reduces each
// block, so all ranks hold identical bits.
#include <algorithm>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/reduce_kernels.h"

namespace plexus::algorithms {

absl::Status HalvingDoublingAllReduce(CollectiveContext& ctx, void* data, int64_t count,
                                      DType dtype, ReduceOpKind op) {
  const int n = ctx.size();
  const int r = ctx.rank();
  if (n == 1) return absl::OkStatus();
  auto* bytes = static_cast<uint8_t*>(data);
  const size_t element = DTypeSize(dtype);
  const size_t total = static_cast<size_t>(count) * element;
  // Halving takes steps 1..log2(p), doubling the next log2(p), between the fold's steps.
  const PowerOfTwoFold fold(n);
  const int p = fold.p;
  if (absl::Status status = fold.FoldIn(ctx, bytes, count, dtype, op); !status.ok()) {
    return status;
  }
  const int vrank = fold.VirtualRank(r);

  if (vrank >= 0) {
    const Partition blocks = BalancedPartition(count, p);
    // Element offset and count of the `width` blocks from `first` (aligned groups: at mask m
    // a rank holds the m blocks from vrank & ~(m - 1), its partner those from (vrank ^ m)).
    struct Range {
      int64_t begin;
      int64_t count;
    };
    auto blocks_from = [&](int first, int width) {
      const int64_t begin = blocks.offsets[first];
      const int64_t end = first + width == p ? count : blocks.offsets[first + width];
      return Range{begin, end - begin};
    };
    auto aligned = [](int v, int mask) { return v & ~(mask - 1); };
    const int64_t segment = std::max<int64_t>(1, kSegmentBytes / element);
    // Segments (at least one, possibly empty, so both sides count the same messages).
    auto segments = [segment](int64_t elements) {
      return std::max<int64_t>(1, (elements + segment - 1) / segment);
    };
    int levels = 0;
    while ((1 << levels) < p) ++levels;
    // The all-gather's receives go up first, so a partner that is ahead lands its result in
    // place, not in staging. Safe by causality: those blocks' final values need this rank's
    // halving sends of them.
    std::vector<WorkPtr> gather_recvs;
    for (int d = 0; d < levels; ++d) {
      const int mask = 1 << d;
      const Range theirs = blocks_from(aligned(vrank ^ mask, mask), mask);
      gather_recvs.push_back(ctx.Recv(fold.RealRank(vrank ^ mask), 1 + levels + d,
                                      bytes + theirs.begin * element,
                                      static_cast<size_t>(theirs.count) * element));
    }
    // Reduce-scatter by recursive halving: at mask m keep m blocks, give the partner m.
    uint8_t* scratch = ctx.Scratch(
        ScratchArena::kReduceIn,
        static_cast<size_t>(std::max<int64_t>(1, blocks_from(aligned(vrank, p / 2), p / 2).count)) *
            element);
    uint32_t step = 1;
    for (int mask = p / 2; mask >= 1; mask /= 2, ++step) {
      const int partner = fold.RealRank(vrank ^ mask);
      const Range keep = blocks_from(aligned(vrank, mask), mask);
      const Range give = blocks_from(aligned(vrank ^ mask, mask), mask);
      std::vector<WorkPtr> recvs;
      for (int64_t i = 0; i < segments(keep.count); ++i) {
        const int64_t elements = std::min(segment, keep.count - i * segment);
        recvs.push_back(ctx.Recv(partner, step, scratch + i * segment * element,
                                 static_cast<size_t>(elements) * element));
      }
      std::vector<WorkPtr> sends;
      for (int64_t i = 0; i < segments(give.count); ++i) {
        const int64_t elements = std::min(segment, give.count - i * segment);
        sends.push_back(ctx.Send(partner, step, bytes + (give.begin + i * segment) * element,
                                 static_cast<size_t>(elements) * element));
      }
      for (int64_t i = 0; i < static_cast<int64_t>(recvs.size()); ++i) {
        if (absl::Status status = ctx.Wait(recvs[i]); !status.ok()) return status;
        const int64_t elements = std::min(segment, keep.count - i * segment);
        if (elements > 0) {
          ReduceInto(bytes + (keep.begin + i * segment) * element, scratch + i * segment * element,
                     elements, dtype, op);
        }
      }
      if (absl::Status status = ctx.WaitAll(sends); !status.ok()) return status;
    }
    // All-gather by recursive doubling: the range held doubles each step.
    for (int d = 0; d < levels; ++d) {
      const int mask = 1 << d;
      const Range mine = blocks_from(aligned(vrank, mask), mask);
      WorkPtr send =
          ctx.Send(fold.RealRank(vrank ^ mask), 1 + levels + d, bytes + mine.begin * element,
                   static_cast<size_t>(mine.count) * element);
      if (absl::Status status = ctx.WaitAll({gather_recvs[d], send}); !status.ok()) {
        return status;
      }
    }
  }

  return fold.HandBack(ctx, bytes, total);
}

}  // namespace plexus::algorithms
