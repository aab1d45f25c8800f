// The pieces a one-rank PREMUL_SUM is issued in under NCCL before 2.29.7 (NVIDIA/nccl#1950),
// checked against a model of that NCCL's one-rank kernel: min(32, ceil(bytes / 16 KiB)) blocks,
// block b covering [b * share, (b + 1) * share) clipped to the count, where share is
// count / blocks rounded down, then up to a 16-byte multiple.
#include <algorithm>
#include <cstddef>

#include "backends/nccl/nccl_types.h"
#include "gtest/gtest.h"

namespace plexus::nccl {
namespace {

// How many of `count` elements the affected kernel writes.
size_t ElementsTheKernelWrites(size_t count, size_t element_size) {
  if (count == 0) return 0;
  const size_t blocks = std::min<size_t>(32, (count * element_size + (16 << 10) - 1) / (16 << 10));
  const size_t per_pack = 16 / element_size;
  const size_t share = (count / blocks + per_pack - 1) / per_pack * per_pack;
  return std::min(count, blocks * share);
}

TEST(OneRankPiecesTest, TheModelMissesTheTailTheGpuRunShowed) {
  // 70001 float32 on an H200 with NCCL 2.28: the last 17 elements were left unscaled.
  EXPECT_EQ(ElementsTheKernelWrites(70001, 4), 70001u - 17);
}

TEST(OneRankPiecesTest, EveryPieceIsWrittenWholeAndThePiecesTileTheCount) {
  for (size_t element_size : {2, 4, 8}) {
    size_t missed_by_one_call = 0;
    for (size_t count = 0; count <= (1 << 20) / element_size + 4096; ++count) {
      if (ElementsTheKernelWrites(count, element_size) < count) ++missed_by_one_call;
      size_t next = 0;
      for (const NcclPiece& piece : OneRankPieces(count, element_size)) {
        ASSERT_EQ(piece.offset, next) << "count " << count << " size " << element_size;
        ASSERT_EQ(ElementsTheKernelWrites(piece.count, element_size), piece.count)
            << "piece at " << piece.offset << " of " << piece.count << " (count " << count << ", "
            << element_size << "-byte elements)";
        next += piece.count;
      }
      ASSERT_EQ(next, count) << "count " << count << " size " << element_size;
      ASSERT_LE(OneRankPieces(count, element_size).size(), 32u);
    }
    EXPECT_GT(missed_by_one_call, 0u) << element_size << "-byte elements";
  }
}

TEST(OneRankPiecesTest, OnlyOneRankFloatingPremulAndAvgBeforeTheFix) {
  NcclReduction premul;
  premul.type = ncclFloat32;
  premul.premul = true;
  NcclReduction avg;
  avg.type = ncclBfloat16;
  avg.op = ncclAvg;
  NcclReduction sum;
  sum.type = ncclFloat32;
  sum.op = ncclSum;
  EXPECT_TRUE(NeedsOneRankPieces(premul, 1, 22809));
  EXPECT_TRUE(NeedsOneRankPieces(avg, 1, 22809));
  EXPECT_FALSE(NeedsOneRankPieces(sum, 1, 22809));
  EXPECT_FALSE(NeedsOneRankPieces(premul, 2, 22809));
  EXPECT_FALSE(NeedsOneRankPieces(premul, 1, kFirstNcclWithWholeOneRankReduce));
}

}  // namespace
}  // namespace plexus::nccl
