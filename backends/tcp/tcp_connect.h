// Connection setup for TcpTransport: listen, publish the address in the store, connect the full
// mesh and run the handshake (magic, version, group, rank) on every connection, after mutual
// authentication when a secret is configured, inside TLS when that is configured. A connection that
// fails either is logged with its address and dropped; the listener keeps waiting for the real
// peers.
#ifndef PLEXUS_BACKENDS_TCP_TCP_CONNECT_H_
#define PLEXUS_BACKENDS_TCP_TCP_CONNECT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/auth/tls.h"
#include "base/net/socket_util.h"
#include "base/store/store.h"

namespace plexus::tcp {

struct MeshOptions {
  Store* store;
  int rank;
  int size;
  std::string group_name;
  std::string address;
  absl::Duration timeout;
  // Polled while waiting for peers: true gives up with Aborted (the elastic communicator's
  // epoch moved on). May be empty.
  std::function<bool()> cancelled;
  // Shared secret every connection proves both ways first (base/auth); empty: none.
  std::string secret;
  // TLS on every connection (base/auth/tls.h); null: none.
  std::shared_ptr<const auth::TlsContext> tls;
};

// Returns one connected, handshaken, non-blocking socket per peer, with its cipher under TLS
// (index = peer rank; the entry for this rank is empty). Connects to higher ranks and accepts
// lower ones.
absl::StatusOr<std::vector<Connection>> ConnectMesh(const MeshOptions& options);

// Checks a peer's 24-byte hello against this group; the peer's rank, or Unauthenticated
// saying what was wrong.
absl::StatusOr<int> ParseHello(absl::string_view bytes, const MeshOptions& options);

}  // namespace plexus::tcp

#endif  // PLEXUS_BACKENDS_TCP_TCP_CONNECT_H_
