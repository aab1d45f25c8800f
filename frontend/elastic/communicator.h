// Communicator: a peer of the elastic (fault-tolerant) communicator, PCCL's semantics.
//
// A peer registers with the master (Connect) and is accepted when the peers already in call
// UpdateTopology; within its peer group it all-reduces with the others over direct data
// connections (the registered "tcp" transport, rebuilt for each epoch of the group) using the
// shared ring / recursive-doubling algorithms, so results are bit-identical on every peer.
//
// Every all-reduce is matched across peers by its tag and voted on by the master: it succeeds on
// every peer of its epoch or fails on every one. A failed all-reduce (a peer crashed, froze,
// left or disagreed) leaves the receive buffer exactly as it was before the call, so calling it
// again is a correct retry; AllReduceMultipleWithRetry does that itself and returns only when
// every operation succeeded over one and the same set of peers.
//
// What a caller reads between calls (GetAttribute, Ring) is its current epoch's view, as in PCCL:
// it changes only inside the caller's own elastic calls (connect, update_topology,
// are_peers_pending, sync_shared_state, optimize_topology, launching an all-reduce, and an
// all-reduce that failed because the peers changed), never under the caller's feet when the
// master announces a change.
//
// Thread-safe. Deadlines: connecting waits at most `accept_timeout` to be accepted; every
// other call at most `operation_timeout` (PLEXUS_ELASTIC_TIMEOUT, seconds, when not set in the
// options); the master answers a collective still waiting then with DeadlineExceeded naming the
// peers it waited for. Errors carry a Result payload (elastic_types.h).
#ifndef PLEXUS_FRONTEND_ELASTIC_COMMUNICATOR_H_
#define PLEXUS_FRONTEND_ELASTIC_COMMUNICATOR_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/auth/tls.h"
#include "base/work/work.h"
#include "frontend/elastic/arena_order.h"
#include "frontend/elastic/elastic_types.h"
#include "frontend/elastic/epoch_mesh.h"
#include "frontend/elastic/in_flight_ops.h"
#include "frontend/elastic/master_protocol.h"
#include "frontend/elastic/shared_state.h"
#include "frontend/elastic/topology_view.h"

namespace plexus {
class Store;
class TCPStore;
class Transport;
}  // namespace plexus

namespace plexus::elastic {

class BackupPool;
class MasterLink;
class OpRunner;

struct CommunicatorOptions {
  std::string master_address;  // "host:port" of the MasterNode.
  int64_t peer_group = 0;      // All-reduces and shared state stay within a peer group.
  // One operation (data movement and the master's decision), each update_topology,
  // sync_shared_state and optimize_topology. Unset: PLEXUS_ELASTIC_TIMEOUT (seconds), else 10 min.
  std::optional<absl::Duration> operation_timeout;
  // How long Connect() waits for the accepted peers to take this peer in. Unset: as above.
  std::optional<absl::Duration> accept_timeout;
  // Address peers reach this one's data port at; empty: the local end of the route to the master.
  std::string address;
  std::string transport = "tcp";  // A registered transport (base/transport).
  // Bytes sent each way between every pair of peers by OptimizeTopology.
  int64_t bandwidth_probe_bytes = 4 << 20;
  // Shared secret proven to the master, its store and every peer (base/auth); unset:
  // PLEXUS_SECRET / PLEXUS_SECRET_FILE; empty: none.
  std::optional<std::string> secret;
  // TLS to the master, its store and every peer (base/auth/tls.h); unset:
  // PLEXUS_TLS_CERT / PLEXUS_TLS_KEY / PLEXUS_TLS_CA; disabled: none.
  std::optional<auth::TlsFiles> tls;
};

class Communicator {
 public:
  // Checks the options; connects nothing.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(CommunicatorOptions options);
  // Leaves the master (a graceful goodbye) after in-flight operations end.
  ~Communicator();

  // Registers with the master and waits to be accepted (at once for the first peer, else when
  // the accepted peers next call UpdateTopology), by `timeout` or accept_timeout; a master that
  // refuses connections is retried for 5 s (MasterConnectionFailed then). After a loss
  // of the master or an expulsion, Connect() may be called again.
  absl::Status Connect(absl::Duration timeout = absl::InfiniteDuration());

  // Collective among the accepted peers (every group): accepts the pending peers, if any (else
  // returns at once). Returns without accepting anyone when another peer of the group needs
  // this one in a collective (master_state.h). kPendingAsyncOps while this peer has operations
  // in flight; DeadlineExceeded (kUpdateTopologyFailed) naming the absent peers after
  // operation_timeout.
  absl::Status UpdateTopology();
  // Whether a peer is pending now (so that UpdateTopology would wait to accept it).
  absl::StatusOr<bool> ArePeersPending();

  // An attribute of the caller's current epoch (see above).
  absl::StatusOr<int64_t> GetAttribute(Attribute attribute) const;
  // The same attribute as the master last announced it, which the caller's view adopts at its
  // next elastic call: for monitoring, and for tests of the view.
  absl::StatusOr<int64_t> AnnouncedAttribute(Attribute attribute) const;

  // Starts an all-reduce of `send` into `recv` (the same pointer for in place; otherwise they
  // must not overlap), both descriptor.count elements. The Work completes when the master has
  // decided; its stats hold the bytes moved and the group size. Invalid input completes it at
  // once with InvalidArgument. One operation per tag may be in flight.
  WorkPtr AllReduceAsync(const void* send, void* recv, const ReduceDescriptor& descriptor);
  absl::StatusOr<ReduceInfo> AllReduce(const void* send, void* recv,
                                       const ReduceDescriptor& descriptor);

  // Runs every operation (distinct tags), at most `max_in_flight` at a time, retrying failed
  // ones on the new set of peers until all succeeded within one epoch - so every result is the
  // reduction over the same peers - or a non-retryable error (buffers then restored). With one
  // peer left, the results are this peer's own inputs. Returns the summed traffic.
  absl::StatusOr<ReduceInfo> AllReduceMultipleWithRetry(absl::Span<const ReduceOpDescriptor> ops,
                                                        int max_in_flight);

  // Collective within the peer group: the master votes on every member's revision and tensor
  // hashes (rules in shared_state.h) and this peer sends or receives exactly the tensors the
  // plan names; afterwards every member holds the group's revision (state.revision is set) and
  // its popular content. A received tensor is written only once complete and matching the
  // popular hash, so a failure never leaves one half-written; when peers change mid-sync the
  // vote is retried on the new set, until operation_timeout. kPendingAsyncOps while
  // all-reduces are in flight. Returns the bytes this peer sent and received.
  absl::StatusOr<SyncInfo> SyncSharedState(SharedState& state, SyncStrategy strategy);

  // Collective within the peer group: every pair of peers measures the bandwidth between them
  // (each direction in turn, bandwidth_probe_bytes each way, pairs in disjoint rounds) and the
  // master picks the ring order that maximises the slowest directed link (ring_order.h), moving
  // the group to a new epoch if that is at least 10% faster than the current order. Retried when
  // the peers change; kPendingAsyncOps while all-reduces are in flight. Returns whether the ring
  // changed.
  absl::StatusOr<bool> OptimizeTopology();

  // The peer ids of this peer's group in ring order (empty before Connect).
  std::vector<int64_t> Ring() const;

  // This peer's id at the master (0 before Connect).
  int64_t peer_id() const;

  // Peers of the current epoch's connections that share this host and exchange data with this
  // one through shared-memory rings (the tcp transport links them unless PLEXUS_TRANSPORT=tcp).
  int SharedMemoryPeers();

 private:
  struct Op;         // communicator_op.h
  struct OpPart;     // One all-reduce of an Op.
  class RetryBatch;  // all_reduce_multiple_with_retry's operations across rounds.
  explicit Communicator(CommunicatorOptions options, std::string master_host, int master_port);

  // Starts one operation: one all-reduce, or (several parts: all_reduce_multiple_with_retry's
  // round) its parts as one operation that runs them back to back in consecutive shared-memory
  // turns. A part's `originals` (if set, bytes of recv's size) is where recv's contents before the
  // call are kept instead of an own backup, and hold all of them when the op ends; its
  // originals_kept: how much they hold already (all of it on a re-run). With `required_epoch`
  // >= 0 it fails at once (Unavailable) unless that epoch is current; `on_data_done` (if set)
  // runs once this peer's data movement ended, before the decision.
  WorkPtr Launch(std::vector<OpPart> parts, int64_t required_epoch,
                 std::function<void()> on_data_done);
  // Launch's steps: a part's checks (and its byte size); the op registered in flight at the
  // current epoch (refused when `required_epoch` is over or a tag is in flight); recv filled
  // from send with its contents kept where the op can put them back.
  static absl::Status CheckPart(OpPart& part);
  absl::Status Register(const std::shared_ptr<Op>& op,
                        const std::vector<ReduceDescriptor>& descriptors, int64_t required_epoch);
  void StageInputs(std::vector<OpPart>& parts);
  void Run(const std::shared_ptr<Op>& op);
  // Run's last steps: the master's decision on `op` (or the deadline's, or the lost link's),
  // then the caller's buffers put right, `op` out of flight and its Work completed.
  absl::Status AwaitDecision(const std::shared_ptr<Op>& op, absl::Time deadline);
  void Finish(const std::shared_ptr<Op>& op, const absl::Status& local, absl::Status outcome);
  // Whether `part` would take a shared-memory turn on a mesh with an arena (same on every
  // member: its size, quantization and the algorithm table decide).
  static bool SuitsArena(const OpPart& part);
  // Whether all_reduce_multiple_with_retry runs `parts` all-reduces that suit the arena as one
  // round in `epoch`: two or more, and the epoch's connections have an arena (or failed to
  // connect, which the round then reports to the master, as every member does).
  bool RunsAsRound(int64_t epoch, size_t parts);
  // This peer's data phase of one part of `op`. `turn` >= 0: in the shared-memory arena as that
  // turn (over the rings as TurnRingOperation(turn) once the arena failed in the epoch); -1:
  // over the rings as the op's own operation. A failure in `earlier` (the round's, or the
  // master's early decision) fails the turn instead, so members waiting in it stop too.
  absl::Status MoveData(const std::shared_ptr<Op>& op, OpPart& part, Transport& mesh,
                        absl::Time deadline, int64_t turn, absl::Status earlier);
  // Waits for the master's turn for `op` and for the turns before it, then moves its data.
  absl::Status MoveDataInTurn(const std::shared_ptr<Op>& op, Transport& mesh, absl::Time deadline);
  // With mu_ held: the transport operations `op`'s data moves as over the rings (to abort).
  static std::vector<uint64_t> RingOperations(const Op& op);
  // Measures what this peer receives at from every other member (bytes/s, ring order, 0 for
  // itself) in optimize number `number` of the epoch.
  absl::StatusOr<std::vector<int64_t>> MeasureLinks(int64_t epoch, int64_t number,
                                                    absl::Time deadline);
  int64_t CurrentEpoch() const;
  // Waits (at most 1 s) until the group has left `epoch` or the master is lost: a retry after the
  // peers changed runs in the new epoch.
  void AwaitEpochAfter(int64_t epoch);
  // Fails with kPendingAsyncOps if all-reduces are in flight (`what` names the call).
  absl::Status NoOpsInFlight(const char* what) const;
  // Moves the tensors of one planned sync (reply ints: revision, sync number, transfers);
  // updates `ballot`'s hashes for what it received.
  absl::Status RunSyncTransfers(SharedState& state, const std::vector<int64_t>& plan, int64_t epoch,
                                absl::Time deadline, SyncBallot& ballot, SyncInfo& info);
  // With mu_ held: what EpochMesh builds `epoch`'s connections from, if that epoch stands.
  absl::StatusOr<EpochMesh::Members> MeshMembers(int64_t epoch) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Connect's steps: the address this peer's data connections use (the options', else the
  // route to the master's); a fresh start (the old link, view and connections dropped), whose
  // generation the new link's reports are bound to.
  absl::StatusOr<std::string> DataAddress() const;
  uint64_t StartFresh();
  // Also: refused while connected or with the old connection's operations in flight; the link
  // to the master, bound to `generation`; the master's store.
  absl::Status CheckCanConnect() const;
  absl::StatusOr<std::shared_ptr<MasterLink>> LinkToMaster(uint64_t generation,
                                                           absl::Time deadline);
  absl::StatusOr<std::unique_ptr<TCPStore>> ConnectStore(int port, absl::Time deadline) const;
  // Reports of the master link of connection `generation` (stale ones are ignored).
  void OnTopology(uint64_t generation, const Topology& topology);
  void OnOutcome(uint64_t generation, const OpKey& key, const absl::Status& outcome);
  void OnTurn(uint64_t generation, const OpKey& key, int64_t turn);
  void OnLost(uint64_t generation, const absl::Status& status);
  absl::Status Usable() const;  // Connected, accepted and not lost.
  // The caller's view becomes the latest topology the master announced.
  void AdoptTopology();
  std::shared_ptr<MasterLink> link() const;

  const CommunicatorOptions options_;
  const absl::Duration operation_timeout_;  // Resolved from the options.
  const absl::Duration accept_timeout_;
  const std::string master_host_;
  const int master_port_;
  std::unique_ptr<OpRunner> runner_;
  std::unique_ptr<BackupPool> backups_;  // Receive-buffer backups, reused.
  ArenaOrder arena_order_;               // Shared-memory turns run here one at a time.

  mutable Mutex mu_;
  std::condition_variable changed_;
  std::shared_ptr<MasterLink> link_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // Connect() calls so far.
  absl::Status lost_ ABSL_GUARDED_BY(mu_);        // Why the link broke.
  // The latest topology the master announced (what operations run in) and the caller's view.
  TopologyView topology_;
  std::shared_ptr<Store> store_;
  std::string data_address_;
  InFlightOps<Op> in_flight_ ABSL_GUARDED_BY(mu_);
  EpochMesh mesh_;  // The epoch's data connections; its state is guarded by mu_ (its owner_mu_).
};

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_COMMUNICATOR_H_
