// Finding the peers of a group that share this host and linking them through shared-memory
// rings, over the TCP connections the mesh already made (which stay open: they carry the
// rings' doorbells and tell at once when a peer's process is gone).
//
// PLEXUS_TRANSPORT chooses: "auto" (default) uses rings for every peer on the same host (same
// boot, network and PID namespaces, same user) where mapping works, TCP for the rest;
// "tcp" never uses rings; "shm" requires rings for every peer and fails creation, naming the
// peer and the reason, where that is impossible. PLEXUS_SHM_RING_BYTES sizes each ring.
// PLEXUS_HOST_ID, when set, is part of the host identity: ranks of one machine with different
// values count as different hosts (TCP between them, hierarchical algorithms across them).
// When every rank of the group is linked, their segments also hold a SharedArena
// (shm_arena.h) of PLEXUS_SHM_ARENA_BYTES per rank (0: none) for the shared-memory algorithms.
#ifndef PLEXUS_BACKENDS_TCP_SHM_LINK_H_
#define PLEXUS_BACKENDS_TCP_SHM_LINK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/tcp/shm_arena.h"
#include "backends/tcp/shm_ring.h"
#include "base/net/socket_util.h"

namespace plexus::tcp {

enum class ShmMode { kOff, kAuto, kRequired };

struct ShmConfig {
  ShmMode mode = ShmMode::kAuto;
  uint64_t ring_bytes = uint64_t{4} << 20;  // Per direction and peer; a power of two.
  // Per rank; 0 for no arena. Pages are used as touched: while the cores are free the
  // schedules use 4 MiB of it, and the rest only when other work crowds them.
  uint64_t arena_bytes = uint64_t{32} << 20;
  std::string host_id;  // PLEXUS_HOST_ID: part of the host identity when not empty.
};
// From PLEXUS_TRANSPORT, PLEXUS_SHM_RING_BYTES, PLEXUS_SHM_ARENA_BYTES and PLEXUS_HOST_ID;
// InvalidArgument names a bad value.
absl::StatusOr<ShmConfig> ShmConfigFromEnvironment();

// The rings of one rank: in[p] carries frames from peer p, out[p] frames to it; both null for
// a peer reached over TCP. Owns the mappings.
struct ShmLinks {
  ShmSegment own;                    // Slots the same-host peers write into.
  std::vector<ShmSegment> segments;  // Each linked peer's own segment.
  std::vector<std::unique_ptr<ShmRing>> in;
  std::vector<std::unique_ptr<ShmRing>> out;
  int linked = 0;
  std::unique_ptr<ShmArena> arena;  // When every rank of the group is linked.
  // Every rank's host (by host key), numbered in order of each host's lowest rank.
  std::vector<int> host_of;

  bool Linked(int peer) const { return in[peer] != nullptr; }
};

// Collective over the group's connected, non-blocking sockets (index = rank, this rank's
// entry invalid): every rank calls it right after the mesh is up.
absl::StatusOr<std::unique_ptr<ShmLinks>> LinkSameHostPeers(const std::vector<Connection>& sockets,
                                                            int rank, const ShmConfig& config,
                                                            absl::Time deadline);

// What identifies this host for the purpose of sharing memory (a hash), split by `host_id`.
uint64_t SharedMemoryHostKey(const std::string& host_id);

}  // namespace plexus::tcp

#endif  // PLEXUS_BACKENDS_TCP_SHM_LINK_H_
