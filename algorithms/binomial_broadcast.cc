// Binomial-tree broadcast: with ranks renumbered so the root is 0, rank v receives from
// v - 2^k (its lowest set bit) and sends to v + 2^j for each smaller j. The message moves in
// segments and each is forwarded as soon as it lands, so a large broadcast pipelines down
// the tree instead of paying log2(size) full transfers.
#include <algorithm>
#include <vector>

#include "algorithms/algorithms.h"

namespace plexus::algorithms {

absl::Status BinomialBroadcast(CollectiveContext& ctx, void* data, size_t bytes, int root) {
  const int n = ctx.size();
  if (n == 1) return absl::OkStatus();
  const int v = (ctx.rank() - root + n) % n;
  auto real = [&](int vr) { return (vr + root) % n; };
  int parent = -1;
  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      parent = real(v - mask);
      break;
    }
    mask <<= 1;
  }
  std::vector<int> children;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < n) children.push_back(real(v + mask));
  }
  auto* base = static_cast<uint8_t*>(data);
  const size_t segments = std::max<size_t>(1, (bytes + kSegmentBytes - 1) / kSegmentBytes);
  std::vector<WorkPtr> recvs;
  if (parent >= 0) {
    for (size_t s = 0; s < segments; ++s) {
      const size_t off = s * kSegmentBytes;
      recvs.push_back(ctx.Recv(parent, 0, base + off, std::min(kSegmentBytes, bytes - off)));
    }
  }
  std::vector<WorkPtr> sends;
  for (size_t s = 0; s < segments; ++s) {
    const size_t off = s * kSegmentBytes;
    const size_t length = std::min(kSegmentBytes, bytes - std::min(off, bytes));
    if (parent >= 0) {
      if (absl::Status status = ctx.Wait(recvs[s]); !status.ok()) return status;
    }
    for (int child : children) sends.push_back(ctx.Send(child, 0, base + off, length));
  }
  return ctx.WaitAll(sends);
}

}  // namespace plexus::algorithms
