// Nominal traffic of a collective that a library (Gloo, MPI) runs itself and does not count:
// what one rank sends and receives under a bandwidth-optimal schedule - the per-rank factors
// nccl-tests uses for bus bandwidth. Work stats of native calls report these figures; the
// algorithms/ path counts the bytes it actually moves.
#ifndef PLEXUS_BACKENDS_COMMON_NOMINAL_TRAFFIC_H_
#define PLEXUS_BACKENDS_COMMON_NOMINAL_TRAFFIC_H_

#include <cstdint>
#include <vector>

namespace plexus::nominal_traffic {

struct Traffic {
  int64_t sent = 0;
  int64_t received = 0;
};

// `bytes` is the tensor (all_reduce, broadcast, reduce) or one rank's block (the others).
Traffic AllReduce(int64_t bytes, int size);
Traffic Broadcast(int64_t bytes, int size, int rank, int root);
Traffic Reduce(int64_t bytes, int size, int rank, int root);
Traffic AllGather(int64_t block_bytes, int size);
Traffic ReduceScatter(int64_t block_bytes, int size);
Traffic Gather(int64_t block_bytes, int size, int rank, int root);
Traffic Scatter(int64_t block_bytes, int size, int rank, int root);
// Exact: the bytes to and from the other ranks.
Traffic AllToAll(const std::vector<int64_t>& send_bytes, const std::vector<int64_t>& recv_bytes,
                 int rank);

}  // namespace plexus::nominal_traffic

#endif  // PLEXUS_BACKENDS_COMMON_NOMINAL_TRAFFIC_H_
