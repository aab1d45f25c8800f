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

// The ring's two phases over one buffer, with its blocks and codes.
class QuantizedRing {
 public:
  QuantizedRing(CollectiveContext& ctx, uint8_t* bytes, int64_t count, DType dtype,
                const ReduceOp& op, const Quantization& q)
      : ctx_(ctx),
        n_(ctx.size()),
        r_(ctx.rank()),
        bytes_(bytes),
        dtype_(dtype),
        op_(op),
        kernel_(KernelOp(op.kind)),
        q_(q),
        blocks_(BalancedPartition(count, n_)),
        element_(DTypeSize(dtype)),
        layout_{std::max<int64_t>(1, kSegmentBytes / element_), q.type},
        right_((r_ + 1) % n_),
        left_((r_ + n_ - 1) % n_) {
    for (int64_t c : blocks_.counts) largest_ = std::max(largest_, c);
    largest_q_ = layout_.Bytes(largest_);
  }

  // Reduce-scatter. Codes sent at step s live in outgoing_[s] until the sends complete.
  absl::Status ReduceScatter() {
    outgoing_.resize(static_cast<size_t>(n_ - 1) * std::max<size_t>(largest_q_, 1));
    incoming_.resize(std::max<size_t>(largest_q_, 1));
    decoded_ = ctx_.Scratch(ScratchArena::kReduceIn,
                            static_cast<size_t>(std::min(largest_, layout_.segment)) * element_);
    SendBlock((r_ + n_ - 1) % n_, 0);
    for (int s = 0; s < n_ - 1; ++s) {
      if (absl::Status status = ReduceStep(s); !status.ok()) return status;
    }
    return ctx_.WaitAll(sends_);
  }

  // The owner finishes its block (AVG's division), quantizes it once and adopts the decoding;
  // the all-gather forwards the codes and every rank decodes the same bytes.
  absl::Status AllGatherCodes() {
    std::vector<uint8_t*> pointers(n_);
    std::vector<size_t> sizes(n_);
    size_t total = 0;
    for (int b = 0; b < n_; ++b) total += layout_.Bytes(blocks_.counts[b]);
    std::vector<uint8_t> gathered(std::max<size_t>(total, 1));
    size_t at = 0;
    for (int b = 0; b < n_; ++b) {
      pointers[b] = gathered.data() + at;
      sizes[b] = layout_.Bytes(blocks_.counts[b]);
      at += sizes[b];
    }
    PostScale(BlockData(r_, 0), blocks_.counts[r_], dtype_, op_, n_);
    for (int64_t off = 0; off < blocks_.counts[r_]; off += layout_.segment) {
      Quantize(BlockData(r_, off), SegmentLength(r_, off), dtype_, q_,
               pointers[r_] + layout_.Offset(off));
    }
    if (absl::Status status = RingAllGather(ctx_, pointers, sizes, /*step_base=*/n_ - 1);
        !status.ok()) {
      return status;
    }
    for (int b = 0; b < n_; ++b) {
      for (int64_t off = 0; off < blocks_.counts[b]; off += layout_.segment) {
        Dequantize(pointers[b] + layout_.Offset(off), SegmentLength(b, off), dtype_, q_,
                   BlockData(b, off));
      }
    }
    return absl::OkStatus();
  }

 private:
  uint8_t* BlockData(int b, int64_t off) const {
    return bytes_ + (blocks_.offsets[b] + off) * static_cast<int64_t>(element_);
  }
  int64_t SegmentLength(int block, int64_t off) const {
    return std::min(layout_.segment, blocks_.counts[block] - off);
  }

  void SendSegment(int block, int64_t off, int s) {
    const int64_t c = SegmentLength(block, off);
    uint8_t* codes = outgoing_.data() + static_cast<size_t>(s) * largest_q_ + layout_.Offset(off);
    Quantize(BlockData(block, off), c, dtype_, q_, codes);
    sends_.push_back(
        ctx_.Send(right_, static_cast<uint32_t>(s), codes, QuantizedBytes(c, q_.type)));
  }

  void SendBlock(int block, int s) {
    for (int64_t off = 0; off < blocks_.counts[block]; off += layout_.segment) {
      SendSegment(block, off, s);
    }
    if (blocks_.counts[block] == 0) {
      sends_.push_back(ctx_.Send(right_, static_cast<uint32_t>(s), bytes_, 0));
    }
  }

  // Step s: receive the left neighbour's codes for one block, fold them in, and forward each
  // segment as soon as it is folded.
  absl::Status ReduceStep(int s) {
    const int block = ((r_ - 2 - s) % n_ + 2 * n_) % n_;
    const int64_t length = blocks_.counts[block];
    std::vector<WorkPtr> recvs;
    for (int64_t off = 0; off < length; off += layout_.segment) {
      recvs.push_back(ctx_.Recv(left_, static_cast<uint32_t>(s),
                                incoming_.data() + layout_.Offset(off),
                                QuantizedBytes(SegmentLength(block, off), q_.type)));
    }
    if (length == 0) {
      recvs.push_back(ctx_.Recv(left_, static_cast<uint32_t>(s), incoming_.data(), 0));
      if (s < n_ - 2) sends_.push_back(ctx_.Send(right_, static_cast<uint32_t>(s + 1), bytes_, 0));
    }
    int64_t off = 0;
    for (const WorkPtr& recv : recvs) {
      if (absl::Status status = ctx_.Wait(recv); !status.ok()) return status;
      if (off >= length) break;
      DequantizeReduceInto(incoming_.data() + layout_.Offset(off), SegmentLength(block, off),
                           dtype_, q_, kernel_, BlockData(block, off), decoded_);
      if (s < n_ - 2) SendSegment(block, off, s + 1);
      off += layout_.segment;
    }
    return absl::OkStatus();
  }

  CollectiveContext& ctx_;
  const int n_;
  const int r_;
  uint8_t* const bytes_;
  const DType dtype_;
  const ReduceOp& op_;
  const ReduceOpKind kernel_;
  const Quantization& q_;
  const Partition blocks_;
  const size_t element_;
  const QuantizedBlock layout_;
  const int right_;
  const int left_;
  int64_t largest_ = 0;
  size_t largest_q_ = 0;
  std::vector<uint8_t> outgoing_;
  std::vector<uint8_t> incoming_;
  uint8_t* decoded_ = nullptr;
  std::vector<WorkPtr> sends_;
};

}  // namespace

absl::Status QuantizedRingAllReduce(CollectiveContext& ctx, void* data, int64_t count, DType dtype,
                                    const ReduceOp& op, const Quantization& q) {
  if (ctx.size() == 1) return absl::OkStatus();
  QuantizedRing ring(ctx, static_cast<uint8_t*>(data), count, dtype, op, q);
  if (absl::Status status = ring.ReduceScatter(); !status.ok()) return status;
  return ring.AllGatherCodes();
}

}  // namespace plexus::algorithms
