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

namespace plexus {

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
  auto real_rank = [&fold](int v) { return fold.RealRank(v); };

  if (vrank >= 0) {
    const Partition blocks = BalancedPartition(count, p);
    // Element range of blocks [first, last).
    auto begin_of = [&](int first) { return blocks.offsets[first]; };
    auto end_of = [&](int last) {
      return last == p ? count : blocks.offsets[last];
    };
    const int64_t segment = std::max<int64_t>(1, kSegmentBytes / element);
    int levels = 0;
    while ((1 << levels) < p) ++levels;
    // The all-gather's receives go up first (its step d at mask 2^d fills the partner's m
    // aligned blocks), so a partner that is ahead lands its result in place, not in staging.
    // Safe by causality: those blocks' final values need this rank's halving sends of them.
    std::vector<WorkPtr> gather_recvs;
    for (int d = 0; d < levels; ++d) {
      const int mask = 1 << d;
      const int their_first = (vrank ^ mask) & ~(mask - 1);
      const int64_t theirs_begin = begin_of(their_first);
      const int64_t theirs_count = end_of(their_first + mask) - theirs_begin;
      gather_recvs.push_back(ctx.Recv(real_rank(vrank ^ mask), 1 + levels + d,
                                      bytes + theirs_begin * element,
                                      static_cast<size_t>(theirs_count) * element));
    }
    uint8_t* scratch = nullptr;
    uint32_t step = 1;
    int lo = 0;
    int hi = p;
    // Reduce-scatter by recursive halving.
    for (int mask = p / 2; mask >= 1; mask /= 2, ++step) {
      const int partner = real_rank(vrank ^ mask);
      const int mid = lo + (hi - lo) / 2;
      const bool keep_low = (vrank & mask) == 0;
      const int keep_first = keep_low ? lo : mid;
      const int keep_last = keep_low ? mid : hi;
      const int give_first = keep_low ? mid : lo;
      const int give_last = keep_low ? hi : mid;
      const int64_t keep_begin = begin_of(keep_first);
      const int64_t keep_count = end_of(keep_last) - keep_begin;
      const int64_t give_begin = begin_of(give_first);
      const int64_t give_count = end_of(give_last) - give_begin;
      if (scratch == nullptr) {
        scratch = ctx.Scratch(ScratchArena::kReduceIn,
                              static_cast<size_t>(std::max<int64_t>(keep_count, 1)) * element);
      }
      // Segments (at least one, possibly empty, so both sides count the same messages).
      auto segments = [segment](int64_t elements) {
        return std::max<int64_t>(1, (elements + segment - 1) / segment);
      };
      std::vector<WorkPtr> recvs;
      for (int64_t i = 0; i < segments(keep_count); ++i) {
        const int64_t elements = std::min(segment, keep_count - i * segment);
        recvs.push_back(ctx.Recv(partner, step, scratch + i * segment * element,
                                 static_cast<size_t>(elements) * element));
      }
      std::vector<WorkPtr> sends;
      for (int64_t i = 0; i < segments(give_count); ++i) {
        const int64_t elements = std::min(segment, give_count - i * segment);
        sends.push_back(ctx.Send(partner, step, bytes + (give_begin + i * segment) * element,
                                 static_cast<size_t>(elements) * element));
      }
      for (int64_t i = 0; i < static_cast<int64_t>(recvs.size()); ++i) {
        if (absl::Status status = ctx.Wait(recvs[i]); !status.ok()) return status;
        const int64_t elements = std::min(segment, keep_count - i * segment);
        if (elements > 0) {
          ReduceInto(bytes + (keep_begin + i * segment) * element,
                     scratch + i * segment * element, elements, dtype, op);
        }
      }
      if (absl::Status status = ctx.WaitAll(sends); !status.ok()) return status;
      lo = keep_first;
      hi = keep_last;
    }
    // All-gather by recursive doubling: the range held doubles each step.
    for (int d = 0; d < levels; ++d) {
      const int mask = 1 << d;
      const int mine_first = vrank & ~(mask - 1);
      const int64_t mine_begin = begin_of(mine_first);
      const int64_t mine_count = end_of(mine_first + mask) - mine_begin;
      WorkPtr send = ctx.Send(real_rank(vrank ^ mask), 1 + levels + d,
                              bytes + mine_begin * element,
                              static_cast<size_t>(mine_count) * element);
      if (absl::Status status = ctx.WaitAll({gather_recvs[d], send}); !status.ok()) {
        return status;
      }
    }
  }

  return fold.HandBack(ctx, bytes, total);
}

}  // namespace plexus
