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
namespace {

// Element offset and count of a run of blocks.
struct Range {
  int64_t begin;
  int64_t count;
};

// The p ranks left after the fold: block bookkeeping and the two phases.
class HalvingDoubling {
 public:
  HalvingDoubling(CollectiveContext& ctx, const PowerOfTwoFold& fold, uint8_t* bytes, int64_t count,
                  DType dtype, ReduceOpKind op)
      : ctx_(ctx),
        fold_(fold),
        bytes_(bytes),
        count_(count),
        dtype_(dtype),
        op_(op),
        element_(DTypeSize(dtype)),
        vrank_(fold.VirtualRank(ctx.rank())),
        blocks_(BalancedPartition(count, fold.p)),
        segment_(std::max<int64_t>(1, kSegmentBytes / element_)) {
    while ((1 << levels_) < fold_.p) ++levels_;
  }

  absl::Status Run() {
    // The all-gather's receives go up first, so a partner that is ahead lands its result in
    // place, not in staging. Safe by causality: those blocks' final values need this rank's
    // halving sends of them.
    std::vector<WorkPtr> gather_recvs;
    for (int d = 0; d < levels_; ++d) {
      const int mask = 1 << d;
      gather_recvs.push_back(Post(/*is_send=*/false, fold_.RealRank(vrank_ ^ mask), GatherTag(d),
                                  Held(vrank_ ^ mask, mask)));
    }
    const int p = fold_.p;
    scratch_ = ctx_.Scratch(
        ScratchArena::kReduceIn,
        static_cast<size_t>(std::max<int64_t>(1, Held(vrank_, p / 2).count)) * element_);
    uint32_t step = 1;
    for (int mask = p / 2; mask >= 1; mask /= 2, ++step) {
      if (absl::Status status = HalvingStep(mask, step); !status.ok()) return status;
    }
    // All-gather by recursive doubling: the range held doubles each step.
    for (int d = 0; d < levels_; ++d) {
      const int mask = 1 << d;
      WorkPtr send =
          Post(/*is_send=*/true, fold_.RealRank(vrank_ ^ mask), GatherTag(d), Held(vrank_, mask));
      if (absl::Status status = ctx_.WaitAll({gather_recvs[d], send}); !status.ok()) {
        return status;
      }
    }
    return absl::OkStatus();
  }

 private:
  // The `mask` blocks held at that level by virtual rank v: aligned groups, the m blocks from
  // v & ~(m - 1).
  Range Held(int v, int mask) const {
    const int first = v & ~(mask - 1);
    const int64_t begin = blocks_.offsets[first];
    const int64_t end = first + mask == fold_.p ? count_ : blocks_.offsets[first + mask];
    return Range{begin, end - begin};
  }

  uint32_t GatherTag(int d) const { return static_cast<uint32_t>(1 + levels_ + d); }

  WorkPtr Post(bool is_send, int peer, uint32_t tag, Range range) {
    uint8_t* at = bytes_ + range.begin * static_cast<int64_t>(element_);
    const size_t size = static_cast<size_t>(range.count) * element_;
    return is_send ? ctx_.Send(peer, tag, at, size) : ctx_.Recv(peer, tag, at, size);
  }

  // Segments (at least one, possibly empty, so both sides count the same messages).
  int64_t Segments(int64_t elements) const {
    return std::max<int64_t>(1, (elements + segment_ - 1) / segment_);
  }
  int64_t SegmentLength(const Range& range, int64_t i) const {
    return std::min(segment_, range.count - i * segment_);
  }

  // Reduce-scatter by recursive halving: at mask m keep m blocks, give the partner m, and fold
  // in the partner's copy of the kept half segment by segment as it arrives.
  absl::Status HalvingStep(int mask, uint32_t step) {
    const int partner = fold_.RealRank(vrank_ ^ mask);
    const Range keep = Held(vrank_, mask);
    const Range give = Held(vrank_ ^ mask, mask);
    std::vector<WorkPtr> recvs;
    for (int64_t i = 0; i < Segments(keep.count); ++i) {
      recvs.push_back(ctx_.Recv(partner, step, scratch_ + i * segment_ * element_,
                                static_cast<size_t>(SegmentLength(keep, i)) * element_));
    }
    std::vector<WorkPtr> sends;
    for (int64_t i = 0; i < Segments(give.count); ++i) {
      sends.push_back(Post(/*is_send=*/true, partner, step,
                           Range{give.begin + i * segment_, SegmentLength(give, i)}));
    }
    for (int64_t i = 0; i < static_cast<int64_t>(recvs.size()); ++i) {
      if (absl::Status status = ctx_.Wait(recvs[i]); !status.ok()) return status;
      const int64_t elements = SegmentLength(keep, i);
      if (elements > 0) {
        ReduceInto(bytes_ + (keep.begin + i * segment_) * element_,
                   scratch_ + i * segment_ * element_, elements, dtype_, op_);
      }
    }
    return ctx_.WaitAll(sends);
  }

  CollectiveContext& ctx_;
  const PowerOfTwoFold& fold_;
  uint8_t* const bytes_;
  const int64_t count_;
  const DType dtype_;
  const ReduceOpKind op_;
  const size_t element_;
  const int vrank_;
  const Partition blocks_;
  const int64_t segment_;
  int levels_ = 0;
  uint8_t* scratch_ = nullptr;
};

}  // namespace

absl::Status HalvingDoublingAllReduce(CollectiveContext& ctx, void* data, int64_t count,
                                      DType dtype, ReduceOpKind op) {
  if (ctx.size() == 1) return absl::OkStatus();
  auto* bytes = static_cast<uint8_t*>(data);
  // Halving takes steps 1..log2(p), doubling the next log2(p), between the fold's steps.
  const PowerOfTwoFold fold(ctx.size());
  if (absl::Status status = fold.FoldIn(ctx, bytes, count, dtype, op); !status.ok()) {
    return status;
  }
  if (fold.VirtualRank(ctx.rank()) >= 0) {
    HalvingDoubling run(ctx, fold, bytes, count, dtype, op);
    if (absl::Status status = run.Run(); !status.ok()) return status;
  }
  return fold.HandBack(ctx, bytes, static_cast<size_t>(count) * DTypeSize(dtype));
}

}  // namespace plexus::algorithms
