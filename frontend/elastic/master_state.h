// MasterState: the elastic master's decisions, without sockets. MasterNode feeds it the messages
// of connected peers and the losses it detects, and sends what it queues.
//
// Membership: a peer that says hello is pending until the accepted peers agree to take it in
// (an update-topology round that all of them reach); the first peer of an empty master is
// accepted at once. Each peer group has an epoch, bumped whenever its membership or ring order
// changes; a loss or leave bumps it at once.
//
// Update-topology rounds: every accepted peer counts its update_topology (and are_peers_pending)
// calls; round k is decided by the first peer to reach it - "update" if someone is pending then,
// else "skip" - and every peer sees that decision for its own k-th call, so peers never disagree
// about whether a round is a barrier. An update round completes when every accepted peer reached
// it; then the pending peers are accepted. A peer accepted in round k has taken part in it:
// its first call answers for round k ("no" / returns at once), so a newcomer that enters the
// usual loop (check the topology, sync the state, all-reduce) lines up with the peers that just
// accepted it and went on to sync.
//
// Operations: every all-reduce is voted on. Peers announce (OpStart) what they run under an
// OpKey and report (OpDone) how their part ended; the master decides once - success only when
// every member of the epoch reported success with the same signature, failure as soon as one
// reports failure, the signatures disagree, or the epoch ends - and tells each participant. So
// an operation either succeeded on every peer of its epoch or failed on every one.
#ifndef PLEXUS_FRONTEND_ELASTIC_MASTER_STATE_H_
#define PLEXUS_FRONTEND_ELASTIC_MASTER_STATE_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "frontend/elastic/master_protocol.h"

namespace plexus::elastic {

class MasterState {
 public:
  struct Outgoing {
    int64_t peer;
    Message message;
  };

  MasterState(int64_t store_port, absl::Duration heartbeat_timeout);

  // A connection said hello for `group`: returns its peer id and queues the welcome.
  int64_t Join(int64_t group, const std::string& address);
  // Any message after the hello. A protocol violation returns an error (drop the peer).
  absl::Status Handle(int64_t peer, const Message& message);
  // The peer is gone (connection lost, silent, or left); `reason` reaches the survivors.
  void Drop(int64_t peer, const std::string& reason);

  std::vector<Outgoing> TakeOutgoing();

  int64_t accepted_count() const;
  int64_t pending_count() const;
  std::string Describe(int64_t peer) const;

 private:
  struct Peer {
    int64_t group = 0;
    std::string address;
    bool accepted = false;
    int64_t round = 0;             // Index of its next update-topology call.
    int64_t waiting_request = -1;  // Its update_topology request parked at an update round.
    int64_t joined_in_round = -1;  // The update round that accepted it, until it calls for it.
  };
  struct OpVote {
    std::vector<int64_t> signature;
    int64_t first_peer = -1;
    std::string first_description;
    std::set<int64_t> started;
    std::set<int64_t> done;
    bool decided = false;
    absl::Status outcome;
  };
  // One sync_shared_state of a group: ballots until every member voted, then the plan is out
  // and the members report how their transfers went.
  struct SyncRound {
    int64_t epoch = -1;
    std::map<int64_t, std::pair<int64_t, SyncBallot>> ballots;  // Peer -> (request, ballot).
    bool planned = false;
    std::map<int64_t, int64_t> done;  // Peer -> its kSyncDone request (waiting for the end).
    absl::Status failure;             // The first failure reported after the plan.
  };
  // One optimize_topology of a group: every member arrives, then all measure their links and
  // report what they received at; the master then picks the ring.
  struct OptimizeRound {
    int64_t epoch = -1;
    std::map<int64_t, int64_t> started;  // Peer -> request.
    bool measuring = false;
    std::map<int64_t, std::pair<int64_t, std::vector<int64_t>>> reports;  // Peer -> (request, row).
    absl::Status failure;
  };
  struct Group {
    int64_t epoch = 0;
    std::vector<int64_t> ring;
    absl::flat_hash_map<OpKey, OpVote> ops;
    SyncRound sync;
    int64_t syncs = 0;  // Planned syncs so far: names the transfers of each on the wire.
    OptimizeRound optimize;
    int64_t optimizations = 0;
  };

  // The decision for round `round`, made now if nobody made it yet.
  bool RoundIsUpdate(int64_t round);
  void CompleteRoundIfReady();
  void AcceptPending();
  // Bumps the group's epoch; every undecided operation of the old one fails with `reason`, and
  // so do the group's shared-state sync and topology optimisation in progress. What that tells
  // peers is held back until FlushDeferredOutcomes (after the new topology is pushed).
  void NewEpoch(int64_t group, const absl::Status& reason);
  void FlushDeferredOutcomes();
  void PushTopologies();
  void Decide(const OpKey& key, OpVote& vote, absl::Status outcome);
  void SendOutcome(int64_t peer, const OpKey& key, const absl::Status& outcome);
  void Reply(int64_t peer, int64_t request, const absl::Status& status, int64_t value,
             const std::vector<int64_t>& extra = {});
  absl::Status HandleSyncState(int64_t peer, const Message& message);
  absl::Status HandleSyncDone(int64_t peer, const Message& message);
  void PlanGroupSync(int64_t group);
  absl::Status HandleOptimizeStart(int64_t peer, const Message& message);
  absl::Status HandleOptimizeReport(int64_t peer, const Message& message);
  void FinishOptimize(int64_t group);
  // The request's epoch check shared by sync and optimize: false (and the reply sent) when the
  // peer is not accepted or names an epoch that is over.
  bool RequestInCurrentEpoch(int64_t peer, int64_t request, int64_t epoch);
  // Fail every request waiting in the group's sync / optimisation with `reason`, start afresh.
  void AbandonSync(Group& group, const absl::Status& reason);
  void AbandonOptimize(Group& group, const absl::Status& reason);
  absl::Status HandleOpStart(int64_t peer, const Message& message);
  absl::Status HandleOpDone(int64_t peer, const Message& message);
  // The group's current epoch if `key` names it; else the status the op must fail with.
  absl::Status CheckEpoch(int64_t peer, const OpKey& key);
  // The vote of `key`, or null after telling the peer its epoch is over.
  OpVote* VoteFor(int64_t peer, const OpKey& key);

  const int64_t store_port_;
  const absl::Duration heartbeat_timeout_;
  int64_t next_peer_ = 1;
  std::map<int64_t, Peer> peers_;
  std::map<int64_t, Group> groups_;
  std::map<int64_t, bool> rounds_;  // Round -> is an update round.
  std::vector<Outgoing> outgoing_;
  // While NewEpoch runs, outcomes and replies go to deferred_ instead of outgoing_.
  bool deferring_ = false;
  std::vector<Outgoing> deferred_;
};

}  // namespace plexus::elastic

#endif  // PLEXUS_FRONTEND_ELASTIC_MASTER_STATE_H_
