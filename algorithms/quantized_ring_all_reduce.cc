// Quantized ring all-reduce: the ring's reduce-scatter and all-gather with every message carried
// as quantized codes (quantize_kernels.h), so the wire moves 1/2 to 1/8 of the bytes. In the
// reduce-scatter each rank quantizes the partial sums it forwards and adds decoded values to its
// own full-precision copy. Each block's owner then applies AVG's scaling, quantizes its finished
// block once, and decodes those same bytes into its own buffer; the all-gather forwards the
// codes unchanged, so every rank decodes identical bytes and the results are bit-identical.
#include <algorithm>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/reduce_kernels.h"

namespace plexus::algorithms {
namespace {

// A block quantized segment by segment: each segment is its own run with its own header.
struct QuantizedBlock {
  int64_t segment;
  QuantizedType type;

  size_t Bytes(int64_t count) const {
    size_t bytes = 0;
    for (int64_t off = 0; off < count; off += segment) {
      bytes += QuantizedBytes(std::min(segment, count - off), type);
    }
    return bytes;
  }
  // Offset of the segment that starts at element `off`.
  size_t Offset(int64_t off) const {
    return static_cast<size_t>(off / segment) * kQuantizedHeaderBytes +
           static_cast<size_t>(off) * static_cast<size_t>(type);
  }
};

}  // namespace

absl::Status QuantizedRingAllReduce(CollectiveContext& ctx, void* data, int64_t count, DType dtype,
                                    const ReduceOp& op, const Quantization& q) {
  const int n = ctx.size();
  const int r = ctx.rank();
  if (n == 1) return absl::OkStatus();
  auto* bytes = static_cast<uint8_t*>(data);
  const Partition blocks = BalancedPartition(count, n);
  const size_t element = DTypeSize(dtype);
  const QuantizedBlock layout{std::max<int64_t>(1, kSegmentBytes / element), q.type};
  const ReduceOpKind kernel = KernelOp(op.kind);
  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  int64_t largest = 0;
  for (int64_t c : blocks.counts) largest = std::max(largest, c);
  const size_t largest_q = layout.Bytes(largest);
  auto block_data = [&](int b, int64_t off) { return bytes + (blocks.offsets[b] + off) * element; };

  // Reduce-scatter. Codes sent at step s live in outgoing[s] until the sends complete.
  std::vector<uint8_t> outgoing(static_cast<size_t>(n - 1) * std::max<size_t>(largest_q, 1));
  std::vector<uint8_t> incoming(std::max<size_t>(largest_q, 1));
  uint8_t* decoded = ctx.Scratch(ScratchArena::kReduceIn,
                                 static_cast<size_t>(std::min(largest, layout.segment)) * element);
  std::vector<WorkPtr> sends;
  auto send_segment = [&](int block, int64_t off, int s) {
    const int64_t c = std::min(layout.segment, blocks.counts[block] - off);
    uint8_t* codes = outgoing.data() + static_cast<size_t>(s) * largest_q + layout.Offset(off);
    Quantize(block_data(block, off), c, dtype, q, codes);
    sends.push_back(ctx.Send(right, static_cast<uint32_t>(s), codes, QuantizedBytes(c, q.type)));
  };
  auto send_block = [&](int block, int s) {
    for (int64_t off = 0; off < blocks.counts[block]; off += layout.segment)
      send_segment(block, off, s);
    if (blocks.counts[block] == 0)
      sends.push_back(ctx.Send(right, static_cast<uint32_t>(s), bytes, 0));
  };
  send_block((r + n - 1) % n, 0);
  for (int s = 0; s < n - 1; ++s) {
    const int block = ((r - 2 - s) % n + 2 * n) % n;
    std::vector<WorkPtr> recvs;
    for (int64_t off = 0; off < blocks.counts[block]; off += layout.segment) {
      const int64_t c = std::min(layout.segment, blocks.counts[block] - off);
      recvs.push_back(ctx.Recv(left, static_cast<uint32_t>(s), incoming.data() + layout.Offset(off),
                               QuantizedBytes(c, q.type)));
    }
    if (blocks.counts[block] == 0) {
      recvs.push_back(ctx.Recv(left, static_cast<uint32_t>(s), incoming.data(), 0));
      if (s < n - 2) sends.push_back(ctx.Send(right, static_cast<uint32_t>(s + 1), bytes, 0));
    }
    int64_t off = 0;
    for (const WorkPtr& recv : recvs) {
      if (absl::Status status = ctx.Wait(recv); !status.ok()) return status;
      if (off >= blocks.counts[block]) break;
      const int64_t c = std::min(layout.segment, blocks.counts[block] - off);
      DequantizeReduceInto(incoming.data() + layout.Offset(off), c, dtype, q, kernel,
                           block_data(block, off), decoded);
      if (s < n - 2) send_segment(block, off, s + 1);
      off += layout.segment;
    }
  }
  if (absl::Status status = ctx.WaitAll(sends); !status.ok()) return status;

  // The owner finishes its block (AVG's division), quantizes it once and adopts the decoding.
  std::vector<uint8_t*> pointers(n);
  std::vector<size_t> sizes(n);
  std::vector<uint8_t> gathered;
  size_t total = 0;
  for (int b = 0; b < n; ++b) total += layout.Bytes(blocks.counts[b]);
  gathered.resize(std::max<size_t>(total, 1));
  size_t at = 0;
  for (int b = 0; b < n; ++b) {
    pointers[b] = gathered.data() + at;
    sizes[b] = layout.Bytes(blocks.counts[b]);
    at += sizes[b];
  }
  PostScale(block_data(r, 0), blocks.counts[r], dtype, op, n);
  for (int64_t off = 0; off < blocks.counts[r]; off += layout.segment) {
    const int64_t c = std::min(layout.segment, blocks.counts[r] - off);
    Quantize(block_data(r, off), c, dtype, q, pointers[r] + layout.Offset(off));
  }
  if (absl::Status status = RingAllGather(ctx, pointers, sizes, /*step_base=*/n - 1);
      !status.ok()) {
    return status;
  }
  for (int b = 0; b < n; ++b) {
    for (int64_t off = 0; off < blocks.counts[b]; off += layout.segment) {
      const int64_t c = std::min(layout.segment, blocks.counts[b] - off);
      Dequantize(pointers[b] + layout.Offset(off), c, dtype, q, block_data(b, off));
    }
  }
  return absl::OkStatus();
}

}  // namespace plexus::algorithms
