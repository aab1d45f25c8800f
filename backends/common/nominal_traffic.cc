#include "backends/common/nominal_traffic.h"

#include <cstddef>

namespace plexus::nominal_traffic {

Traffic AllReduce(int64_t bytes, int size) {
  // Reduce-scatter then all-gather: 2 (n - 1) / n of the buffer each way.
  const int64_t moved = size > 1 ? 2 * (size - 1) * bytes / size : 0;
  return {moved, moved};
}

Traffic Broadcast(int64_t bytes, int size, int rank, int root) {
  if (size == 1) return {};
  return rank == root ? Traffic{bytes, 0} : Traffic{0, bytes};
}

Traffic Reduce(int64_t bytes, int size, int rank, int root) {
  if (size == 1) return {};
  return rank == root ? Traffic{0, bytes} : Traffic{bytes, 0};
}

Traffic AllGather(int64_t block_bytes, int size) {
  return {(size - 1) * block_bytes, (size - 1) * block_bytes};
}

Traffic ReduceScatter(int64_t block_bytes, int size) { return AllGather(block_bytes, size); }

Traffic Gather(int64_t block_bytes, int size, int rank, int root) {
  return rank == root ? Traffic{0, (size - 1) * block_bytes} : Traffic{block_bytes, 0};
}

Traffic Scatter(int64_t block_bytes, int size, int rank, int root) {
  return rank == root ? Traffic{(size - 1) * block_bytes, 0} : Traffic{0, block_bytes};
}

Traffic AllToAll(const std::vector<int64_t>& send_bytes, const std::vector<int64_t>& recv_bytes,
                 int rank) {
  Traffic traffic;
  for (size_t peer = 0; peer < send_bytes.size(); ++peer) {
    if (static_cast<int>(peer) == rank) continue;
    traffic.sent += send_bytes[peer];
    traffic.received += recv_bytes[peer];
  }
  return traffic;
}

}  // namespace plexus::nominal_traffic
