// Helpers for elastic tests: a master in a child process, peers with test timeouts, and joining
// a world of a given size.
#ifndef PLEXUS_TESTS_ELASTIC_ELASTIC_PEERS_H_
#define PLEXUS_TESTS_ELASTIC_ELASTIC_PEERS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "frontend/elastic/communicator.h"
#include "tests/testing/subprocess.h"

namespace plexus::elastic {

// A MasterNode in a child process, on `address` (port 0: any).
std::unique_ptr<testing::ChildServer> StartMaster(absl::Duration heartbeat = absl::Seconds(2),
                                                  const std::string& address = "127.0.0.1:0");

// A communicator for the master at `port`; operation timeout from $ELASTIC_OP_TIMEOUT (s, 60).
std::unique_ptr<Communicator> MakePeer(int port);

// Connects and calls update_topology until `world` peers are in (polling, bounded).
absl::Status JoinWorld(Communicator& comm, int world);
// The same for a connected peer.
absl::Status GrowWorld(Communicator& comm, int world);

// Forks `world` peers of the master at `port`; each joins the world (a failure fails it) and then
// runs body(peer, comm), whose return value is its exit code. As testing::RunInChildren.
absl::Status RunJoinedPeers(int port, int world,
                            const std::function<int(int, std::unique_ptr<Communicator>&)>& body,
                            absl::Duration timeout);

// Reads the file `dir`/<peer> each of `world` peers wrote and expects them non-empty and equal
// (results that must be the same bytes on every peer).
void ExpectSameOnEveryPeer(const std::string& dir, int world);

// Prints what failed on `peer` and returns 1 (an exit code for a child).
int Fail(int peer, const std::string& what, const absl::Status& status = absl::OkStatus());

}  // namespace plexus::elastic

#endif  // PLEXUS_TESTS_ELASTIC_ELASTIC_PEERS_H_
